"""The ranked reasons of "why is my task not running?"."""

from __future__ import annotations

from dataclasses import replace

from sluiceway.controls.gates import SemaphoreState
from sluiceway.controls.policy import Gates
from sluiceway.controls.why import RunFacts, TaskFacts, estimate, explain, explain_task


def ready_task(**facts: object) -> TaskFacts:
    base: dict[str, object] = dict(
        task_id="t1",
        ref="export",
        type="SIMPLE",
        name="export_report",
        status="SCHEDULED",
        attempt=1,
        seconds_until_available=-1,
        recent_pollers=2,
        queue_ready=3,
    )
    base.update(facts)
    return TaskFacts(**base)  # type: ignore[arg-type]


def test_a_full_semaphore_names_itself_its_numbers_and_holders() -> None:
    task = ready_task(
        gates=Gates(semaphores=("legacy_erp",)),
        semaphores=[SemaphoreState("legacy_erp", 4, 4)],
        semaphore_holders={"legacy_erp": ["sync_inventory t9 (run r1)"]},
    )
    [reason] = explain_task(task)
    assert reason.control == "semaphore:legacy_erp" and reason.blocking
    assert reason.message == "semaphore legacy_erp: 4/4 held by sync_inventory t9 (run r1)"


def test_a_spent_rate_window_says_when_the_next_opens() -> None:
    task = ready_task(
        name="partner_api",
        gates=Gates(rate_limit_per_frequency=100, rate_limit_frequency_seconds=60),
        window_used=100,
        seconds_to_next_window=23.2,
    )
    [reason] = explain_task(task)
    assert reason.control == "rateLimit"
    assert reason.message == "rate limit partner_api: 100/100 this window, next window in 23 s"


def test_every_closed_gate_is_listed() -> None:
    task = ready_task(
        gates=Gates(concurrent_exec_limit=2, semaphores=("s",)),
        in_flight=2,
        semaphores=[SemaphoreState("s", 1, 1)],
        recent_pollers=0,
    )
    assert [r.control for r in explain_task(task)] == ["concurrentExecLimit", "semaphore:s", "noWorkers"]


def test_nobody_polling_is_a_fleet_problem() -> None:
    [reason] = explain_task(ready_task(recent_pollers=0, seconds_since_last_poll=None))
    assert reason.control == "noWorkers" and "never polled" in reason.message


def test_backoff_and_running_tasks() -> None:
    [backoff] = explain_task(ready_task(attempt=3, seconds_until_available=12.4))
    assert backoff.control == "retryBackoff" and "leasable in 12 s" in backoff.message
    [running] = explain_task(
        ready_task(status="IN_PROGRESS", worker_id="w-1", seconds_leased=3.0, seconds_since_heartbeat=1.0)
    )
    assert running.control == "running" and not running.blocking and "w-1" in running.message


def test_awaiting_admission_names_the_key_and_the_holders() -> None:
    run = RunFacts(
        "r2",
        "tenant_sync",
        "RUNNING",
        awaiting_admission=True,
        admission_key="acme",
        admission_limit=1,
        admission_holders=["r1"],
    )
    [reason] = explain(run)
    assert reason.control == "rateLimitConfig" and "key 'acme': 1/1" in reason.message and "r1" in reason.message


def test_blocking_reasons_come_first_and_max_concurrent_tasks_is_named() -> None:
    run = RunFacts(
        "r",
        "fan",
        "RUNNING",
        max_concurrent_tasks=2,
        active_worker_tasks=2,
        tasks=[
            ready_task(status="IN_PROGRESS", worker_id="w", seconds_leased=1.0),
            ready_task(status="IN_PROGRESS", worker_id="w", seconds_leased=1.0),
        ],
    )
    reasons = explain(run)
    assert reasons[0].control == "maxConcurrentTasks" and reasons[0].message.startswith("maxConcurrentTasks fan: 2/2")
    assert [r.blocking for r in reasons] == [True, False, False]


def test_a_finished_run_blocks_nothing() -> None:
    [reason] = explain(RunFacts("r", "wf", "FAILED", reason="task x failed"))
    assert reason.control == "finished" and not reason.blocking and "FAILED: task x failed" in reason.message


def test_a_quarantined_run_says_so_and_how_to_clear_it_before_anything_else() -> None:
    facts = RunFacts(
        "r",
        "wf",
        "RUNNING",
        quarantine_reason="workflow wf version 2 cannot be read: ValidationError: tasks: Input should be a valid list",
        tasks=[TaskFacts("t", "a", "SIMPLE", "a", "SCHEDULED", 1, 0.0)],
    )
    [reason] = explain(facts)
    assert reason.control == "quarantine" and reason.blocking
    assert reason.message.startswith("run r is quarantined: the decider cannot evaluate it (workflow wf version 2")
    assert "POST .../terminate" in reason.message and "POST .../executions/r/decide" in reason.message


def test_a_quarantined_run_that_ended_is_only_finished() -> None:
    [reason] = explain(RunFacts("r", "wf", "TERMINATED", reason="cleaning up", quarantine_reason="x"))
    assert reason.control == "finished"


def test_a_rate_window_estimates_a_lease_exactly_from_the_position() -> None:
    gated = ready_task(gates=Gates(rate_limit_per_frequency=3, rate_limit_frequency_seconds=10), ahead=7)
    # 3 tokens spent in this window, next in 4 s: positions 0-2 then, 3-5 at 14 s, 6-8 (ours) at 24 s.
    said = estimate(replace(gated, window_used=3, seconds_to_next_window=4.0))
    assert said == "estimated lease in about 24 s, 7 ahead of it, bound by rateLimit 3 per 10 s", said
    assert estimate(replace(gated, ahead=1, window_used=1)).startswith("estimated lease now")


def test_a_cap_estimates_from_how_long_a_task_holds_a_slot_and_the_slowest_gate_binds() -> None:
    capped = ready_task(gates=Gates(concurrent_exec_limit=2), in_flight=2, ahead=4, mean_hold_seconds=5.0)
    assert "in about 15 s" in estimate(capped) and "concurrentExecLimit 2 at 5 s a task" in estimate(capped)
    both = replace(
        capped, gates=Gates(concurrent_exec_limit=2, rate_limit_per_frequency=1, rate_limit_frequency_seconds=60)
    )
    assert "bound by rateLimit 1 per 60 s" in estimate(replace(both, seconds_to_next_window=30.0))


def test_without_a_rate_to_go_by_the_estimate_says_unknown_rather_than_guess() -> None:
    unknown = "lease time unknown: no task of export_report was leased in the last minute"
    assert estimate(ready_task(ahead=3)).startswith(unknown)
    assert estimate(ready_task(ahead=3, recent_pollers=0)) == "lease time unknown: nobody polls its queue"
    capped = ready_task(gates=Gates(concurrent_exec_limit=2), ahead=3)
    assert "no task of export_report finished lately" in estimate(capped)
    assert estimate(ready_task(ahead=3, recent_lease_rate=0.5)).startswith("estimated lease in about 6.0 s")


def test_a_ready_task_s_reasons_end_with_its_estimate_which_blocks_nothing() -> None:
    *_, last = explain_task(ready_task(ahead=0, recent_lease_rate=2.0))
    assert last.control == "estimate" and not last.blocking and "estimated lease now" in last.message
