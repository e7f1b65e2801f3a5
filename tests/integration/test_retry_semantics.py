"""Seed 002's retry rules on a real PostgreSQL: retry kinds and time budgets,
deferrals (hints, signals, snoozes), deadlines checked by the lease itself,
interrupts, crash reclaim, and a start's per-task overrides."""

from __future__ import annotations

import asyncpg

from sluiceway.controls.backoff import delay_at, unit_of
from sluiceway.controls.policy import OperatorDefaults, RetryPolicy
from sluiceway.model.execution import DelaySource, ResultStatus, RunStatus, TaskOverride
from sluiceway.model.taskdefinition import RetryKind
from sluiceway.store import executions, results
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.policies import Policies
from sluiceway.store.sweeping import sweep
from tests.support.store import (
    NS,
    define_task,
    define_workflow,
    lease,
    report,
    run_status,
    settle,
    start,
)


async def _attempts(pool: asyncpg.Pool, run_id: str) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(
            "SELECT id, attempt, status, reason, snooze_count, interrupt_count, close_deadline, created_at,"
            " extract(epoch FROM available_at - now()) AS wait, start_to_close_timeout, epoch"
            " FROM tasks WHERE execution_id = $1::uuid ORDER BY attempt",
            run_id,
        )


async def _one_task_run(pool: asyncpg.Pool, name: str = "call", **definition: object) -> str:
    await define_task(pool, name, **definition)
    await define_workflow(pool, f"{name}_flow", [{"name": name, "taskReferenceName": "c"}])
    run_id = await start(pool, f"{name}_flow")
    await settle(pool)
    return run_id


async def test_an_indefinite_tasks_deadline_is_its_time_budget_computed_at_insert(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, retryKind="indefinite", timeBudgetSeconds=7200, retryCount=0)
    [row] = await _attempts(pool, run_id)
    budget = (row["close_deadline"] - row["created_at"]).total_seconds()
    assert 7199 <= budget <= 7201, "the deadline is the insert's now() plus the budget"


async def test_an_indefinite_task_retries_past_retry_count_until_its_deadline(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(
        pool, retryKind="indefinite", timeBudgetSeconds=3600, retryCount=1, retryDelaySeconds=1, jitter=0
    )
    for attempt in range(1, 5):  # retryCount 1 would stop at attempt 2
        async with pool.acquire() as conn:
            await conn.execute("UPDATE tasks SET available_at = now() WHERE execution_id = $1::uuid", run_id)
        [task] = await lease(pool, "call")
        assert task.attempt == attempt
        await report(pool, task, ResultStatus.FAILED, reason="429 Too Many Requests")
        await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.RUNNING
    # The deadline is near: the next retry would land past it.
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE tasks SET available_at = now(), close_deadline = now() + interval '0.5 seconds',"
            " schedule_to_close_at = now() + interval '0.5 seconds' WHERE execution_id = $1::uuid",
            run_id,
        )
    [task] = await lease(pool, "call")
    await report(pool, task, ResultStatus.FAILED, reason="429 again")
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.FAILED and "DeadlineExceeded" in view.reason


async def test_a_workers_indefinite_verdict_is_honoured_by_the_server(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, retryCount=0, retryDelaySeconds=1, jitter=0)
    [task] = await lease(pool, "call")
    await report(pool, task, ResultStatus.FAILED, reason="429", retry_kind=RetryKind.INDEFINITE)
    await settle(pool)
    rows = await _attempts(pool, run_id)
    assert [r["status"] for r in rows] == ["FAILED", "SCHEDULED"], "retryCount 0, yet retried: the verdict wins"
    async with pool.acquire() as conn:
        await conn.execute("UPDATE tasks SET available_at = now() WHERE execution_id = $1::uuid", run_id)
    [again] = await lease(pool, "call")
    await report(pool, again, ResultStatus.FAILED, reason="404", retry_kind=RetryKind.NON_RETRYABLE)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.FAILED


async def _delay_after(pool: asyncpg.Pool, run_id: str, **fields: object) -> float:
    [task] = await lease(pool, "call")
    await report(pool, task, ResultStatus.FAILED, reason="slow down", **fields)
    await settle(pool, DeciderConfig(policies=Policies(OperatorDefaults(max_retry_backoff_seconds=30))))
    return float((await _attempts(pool, run_id))[-1]["wait"])


async def test_a_hint_is_clamped_by_the_ceiling_a_signal_is_not_and_both_are_floored(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, retryCount=5, jitter=0.2)
    assert 29 <= await _delay_after(pool, run_id, retry_after_seconds=600) <= 30, "hint: clamped to the 30 s ceiling"
    async with pool.acquire() as conn:
        await conn.execute("UPDATE tasks SET available_at = now() WHERE execution_id = $1::uuid", run_id)
    signal = await _delay_after(pool, run_id, retry_after_seconds=600, retry_after_source=DelaySource.SIGNAL)
    assert 599 <= signal <= 600, "signal: exactly as asked, past the ceiling"
    async with pool.acquire() as conn:
        await conn.execute("UPDATE tasks SET available_at = now() WHERE execution_id = $1::uuid", run_id)
    assert 0.9 <= await _delay_after(pool, run_id, retry_after_seconds=0) <= 1.0, "floored at one second"


async def test_a_snooze_refunds_the_attempt_and_counts_itself(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool)
    for snoozes in (1, 2):
        async with pool.acquire() as conn:
            await conn.execute("UPDATE tasks SET available_at = now() WHERE execution_id = $1::uuid", run_id)
        [task] = await lease(pool, "call")
        assert task.attempt == 1
        assert (await report(pool, task, ResultStatus.IN_PROGRESS, callback_after_seconds=60)).applied
        [row] = await _attempts(pool, run_id)
        assert (row["status"], row["attempt"], row["snooze_count"]) == ("SCHEDULED", 1, snoozes)


async def test_a_snooze_past_the_deadline_fails_with_deadline_exceeded(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, scheduleToCloseTimeout=60)
    [task] = await lease(pool, "call")
    assert (await report(pool, task, ResultStatus.IN_PROGRESS, callback_after_seconds=120)).applied
    await settle(pool)
    [row] = await _attempts(pool, run_id)
    assert row["status"] == "FAILED_WITH_TERMINAL_ERROR" and row["reason"].startswith("DeadlineExceeded")
    assert (await run_status(pool, run_id)).status is RunStatus.FAILED


async def test_a_task_past_its_deadline_is_never_leased_even_before_the_sweeper_runs(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, scheduleToCloseTimeout=60)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE tasks SET close_deadline = now() - interval '1 second' WHERE execution_id = $1::uuid", run_id
        )
    assert await lease(pool, "call") == [], "the lease statement itself refuses a task past its deadline"
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE tasks SET schedule_to_close_at = close_deadline WHERE execution_id = $1::uuid", run_id
        )
    fired = await sweep(pool)
    assert [e.reason for e in fired.expired][0].startswith("DeadlineExceeded")


async def test_a_graceful_hand_back_spends_the_attempt_and_counts_the_interrupt(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, retryCount=0)
    [dying] = await lease(pool, "call", worker="shutting-down")
    assert (await report(pool, dying, ResultStatus.INTERRUPTED)).applied
    [row] = await _attempts(pool, run_id)
    assert (row["status"], row["attempt"], row["interrupt_count"], row["snooze_count"]) == ("SCHEDULED", 2, 1, 0)
    [replacement] = await lease(pool, "call", worker="replacement")
    assert replacement.attempt == 2 and replacement.epoch == dying.epoch + 1, "no attempt or epoch is shared"
    late = await report(pool, dying, output={"late": True})
    assert late.verdict is results.Verdict.NOT_LEASED, "the dying worker is fenced off"
    # The interrupted attempt was spent: with retryCount 0, a failure now is final.
    await report(pool, replacement, ResultStatus.FAILED, reason="boom")
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.FAILED and "retryCount 0" in view.reason


async def test_crash_reclaim_jitter_is_derived_from_task_and_attempt(pool: asyncpg.Pool) -> None:
    run_id = await _one_task_run(pool, heartbeatTimeout=30, retryCount=3, retryDelaySeconds=100, jitter=0.5)
    [task] = await lease(pool, "call")
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE tasks SET heartbeat_at = now() - interval '1 second' WHERE id = $1::uuid", task.task_id
        )
    await sweep(pool)
    await settle(pool)
    lost, retry = await _attempts(pool, run_id)
    assert lost["reason"].startswith("WorkerLost")
    async with pool.acquire() as conn:
        waited = await conn.fetchval(
            "SELECT extract(epoch FROM r.available_at - l.ended_at) FROM tasks r, tasks l"
            " WHERE r.id = $1 AND l.id = $2",
            retry["id"],
            lost["id"],
        )
    expected = delay_at(RetryPolicy(retry_delay_seconds=100, jitter=0.5), 1, unit_of(f"{task.task_id}:1"))
    assert abs(float(waited) - expected) < 0.5, (waited, expected)


async def test_per_start_overrides_take_precedence_and_are_validated(pool: asyncpg.Pool) -> None:
    await define_task(pool, "call", retryCount=3, startToCloseTimeout=30)
    await define_workflow(pool, "o", [{"name": "call", "taskReferenceName": "c", "retryCount": 2}])
    async with pool.acquire() as conn, conn.transaction():
        refused = await executions.start_run(conn, NS, "o", None, {}, task_overrides={"nope": TaskOverride()})
        outcome = await executions.start_run(
            conn, NS, "o", None, {}, task_overrides={"c": TaskOverride(retry_count=0, start_to_close_timeout=7)}
        )
    assert isinstance(refused, executions.InvalidOverrides) and refused.field == "taskOverrides.nope"
    assert isinstance(outcome, executions.Started)
    await settle(pool)
    [row] = await _attempts(pool, outcome.id)
    assert row["start_to_close_timeout"] == 7, "the start's timeout, over the definition's 30"
    [task] = await lease(pool, "call")
    await report(pool, task, ResultStatus.FAILED, reason="boom")
    await settle(pool)
    view = await run_status(pool, outcome.id)
    assert view.status is RunStatus.FAILED and "retryCount 0" in view.reason, "the start's retryCount, over 2 and 3"


async def test_dynamic_fork_children_start_on_their_definitions_policy_in_the_forks_pass(pool: asyncpg.Pool) -> None:
    """Regression: children scheduled in the same pass as their fork were stored
    with the operator's default timeouts (0) instead of their TaskDefinition's."""
    await define_task(pool, "resize", startToCloseTimeout=77)
    await define_workflow(
        pool,
        "album",
        [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {"forkTaskName": "resize", "forkTaskInputs": [{"i": 1}, {"i": 2}]},
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        ],
    )
    run_id = await start(pool, "album")
    await settle(pool)
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT ref, start_to_close_timeout FROM tasks WHERE execution_id = $1::uuid AND type = 'SIMPLE'"
            " ORDER BY ref",
            run_id,
        )
    assert [(r["ref"], r["start_to_close_timeout"]) for r in rows] == [("fan__0", 77), ("fan__1", 77)]
