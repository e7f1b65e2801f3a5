"""Pause, retry and rerun in the pure decider: what each starts again, what
it keeps, and which clocks move."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sluiceway.controls.pausing import RunClocks, effective_sla_seconds, resumed, timed_out
from sluiceway.engine.commands import FinishRun, RecordTask, ScheduleTask
from sluiceway.engine.reruns import Latest, RerunError, rerun_scope, retry_scope
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import WorkflowSpec
from tests.unit.engine.simulation import T0, Simulation


def simple(ref: str, **extra: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": "SIMPLE", **extra}


CHAIN = {"tasks": [simple("fetch"), simple("charge", inputParameters={"amount": "${fetch.output.total}"})]}
ONE_RETRY = {"charge": {"retryCount": 1, "retryDelaySeconds": 0}}


def failed_at_charge() -> Simulation:
    sim = Simulation(CHAIN, definitions=ONE_RETRY)
    sim.step()
    sim.worker("fetch", output={"total": 7})
    sim.step()
    sim.worker("charge", TaskStatus.FAILED, reason="bank down")
    sim.step()
    sim.worker("charge", TaskStatus.FAILED, reason="bank down")
    sim.step()
    assert sim.status is RunStatus.FAILED
    return sim


def test_retry_starts_the_failed_task_again_and_keeps_what_completed() -> None:
    sim = failed_at_charge()
    fetch = sim.rows["fetch"]
    assert sim.retry() == {"charge": 2}
    sim.step()
    assert sim.active() == ["charge"]
    again = sim.rows["charge"]
    assert again.attempt == 3 and again.input == {"amount": 7}, "numbered after the superseded attempts"
    assert sim.rows["fetch"] is fetch, "the completed task is not run again"
    sim.worker("charge", output={"ok": True})
    sim.step()
    assert sim.status is RunStatus.COMPLETED


def test_a_retried_task_gets_a_fresh_retry_count() -> None:
    sim = failed_at_charge()
    sim.retry()
    sim.step()
    sim.worker("charge", TaskStatus.FAILED, reason="still down")
    sim.step()
    assert sim.status is RunStatus.RUNNING and sim.rows["charge"].attempt == 4, "retryCount 1 applies afresh"
    sim.worker("charge", TaskStatus.FAILED, reason="still down")
    sim.step()
    assert sim.status is RunStatus.FAILED


def test_retry_rearms_the_run_timeout_from_the_retry() -> None:
    sim = Simulation({**CHAIN, "timeoutSeconds": 60})
    sim.step()
    sim.advance(61)
    sim.step()
    assert sim.status is RunStatus.TIMED_OUT
    assert sim.retry() == {"fetch": 1}, "a task canceled when the run ended is taken up again"
    sim.step()
    assert sim.timeout_at == sim.now + datetime.timedelta(seconds=60)
    assert sim.active() == ["fetch"] and sim.rows["fetch"].attempt == 2


FORKED = {
    "tasks": [
        {
            "name": "fork",
            "taskReferenceName": "fork",
            "type": "FORK_JOIN",
            "forkTasks": [[simple("a1"), simple("a2")], [simple("b1")]],
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        simple("after"),
    ]
}


def latest(**rows: int) -> dict[str, Latest]:
    return {ref: Latest(TaskStatus.COMPLETED, attempt) for ref, attempt in rows.items()}


def test_rerun_from_a_branch_task_keeps_the_sibling_branch() -> None:
    spec = WorkflowSpec.model_validate(FORKED)
    scope = rerun_scope(spec, "a1", latest(fork=1, a1=1, a2=1, b1=1, join=1, after=2))
    assert scope == {"a1": 1, "a2": 1, "join": 1, "after": 2}


def test_rerun_from_a_fork_reruns_its_branches() -> None:
    spec = WorkflowSpec.model_validate(FORKED)
    assert set(rerun_scope(spec, "fork", latest(fork=1, a1=1, a2=1, b1=1, join=1))) == {
        "fork",
        "a1",
        "a2",
        "b1",
        "join",
    }


DYNAMIC = {
    "tasks": [
        {
            "name": "fan",
            "taskReferenceName": "fan",
            "type": "FORK_JOIN_DYNAMIC",
            "inputParameters": {"forkTaskName": "work", "forkTaskInputs": "${workflow.input.items}"},
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        simple("report"),
    ]
}


def test_rerun_of_one_dynamic_child_reruns_it_and_what_follows_its_fork() -> None:
    spec = WorkflowSpec.model_validate(DYNAMIC)
    rows = latest(fan=1, fan__0=1, fan__1=3, join=1, report=1)
    assert rerun_scope(spec, "fan__1", rows) == {"fan__1": 3, "join": 1, "report": 1}
    assert set(rerun_scope(spec, "fan", rows)) == {"fan", "fan__0", "fan__1", "join", "report"}


def test_rerun_refuses_a_task_that_never_ran() -> None:
    spec = WorkflowSpec.model_validate(CHAIN)
    with pytest.raises(RerunError, match="never ran"):
        rerun_scope(spec, "charge", latest(fetch=1))


def test_rerun_with_new_input_merges_it_over_the_resolved_input() -> None:
    sim = Simulation(CHAIN)
    sim.step()
    sim.worker("fetch", output={"total": 7})
    sim.step()
    sim.worker("charge", output={"receipt": "r1"})
    sim.step()
    assert sim.status is RunStatus.COMPLETED
    assert sim.rerun("charge", {"currency": "EUR"}) == {"charge": 1}
    sim.step()
    assert sim.rows["charge"].input == {"amount": 7, "currency": "EUR"} and sim.rows["charge"].attempt == 2


def test_retry_of_a_dynamic_fork_child_starts_only_that_child() -> None:
    sim = Simulation(DYNAMIC, input={"items": [1, 2]})
    sim.step()
    sim.worker("fan__0", output={"n": 1})
    sim.worker("fan__1", TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason="bad item")
    sim.step()
    assert sim.status is RunStatus.FAILED
    assert sim.retry() == {"fan__1": 1}
    sim.step()
    assert sim.active() == ["fan__1"] and sim.rows["fan__1"].attempt == 2
    assert sim.rows["fan__1"].input == {"item": 2}


def test_retry_scope_takes_failures_and_cancellations_only() -> None:
    rows = {
        "ok": Latest(TaskStatus.COMPLETED, 1),
        "absorbed": Latest(TaskStatus.COMPLETED_WITH_ERRORS, 3),
        "failed": Latest(TaskStatus.FAILED, 2),
        "terminal": Latest(TaskStatus.FAILED_WITH_TERMINAL_ERROR, 1),
        "slow": Latest(TaskStatus.TIMED_OUT, 1),
        "stopped": Latest(TaskStatus.CANCELED, 1),
    }
    assert retry_scope(rows) == {"failed": 2, "terminal": 1, "slow": 1, "stopped": 1}


# -- pause -------------------------------------------------------------------------


def test_a_paused_run_records_results_but_starts_nothing() -> None:
    sim = Simulation(CHAIN)
    sim.step()
    sim.paused = True
    sim.worker("fetch", output={"total": 7})
    decision = sim.step()
    assert decision.commands == [] and [h.control for h in decision.holds] == ["paused"]
    assert sim.rows["fetch"].status is TaskStatus.COMPLETED
    sim.paused = False
    sim.step()
    assert sim.active() == ["charge"]


def test_a_paused_run_does_not_time_out_but_can_be_terminated() -> None:
    sim = Simulation({**CHAIN, "timeoutSeconds": 10})
    sim.step()
    sim.paused = True
    sim.advance(3600)
    assert sim.step().commands == [], "its clocks are stopped"
    sim.terminate_requested = "operator"
    decision = sim.step()
    finish = next(c for c in decision.commands if isinstance(c, FinishRun))
    assert finish.status is RunStatus.TERMINATED


def test_the_chain_deadline_ends_the_run_once_it_runs_again() -> None:
    sim = Simulation(CHAIN)
    sim.step()
    sim.chain_deadline_at = T0 + datetime.timedelta(seconds=30)
    sim.paused = True
    sim.advance(60)
    assert sim.step().commands == []
    sim.paused = False
    decision = sim.step()
    finish = next(c for c in decision.commands if isinstance(c, FinishRun))
    assert finish.status is RunStatus.TIMED_OUT and "chain" in finish.reason


def test_resume_moves_the_run_deadline_and_sla_but_not_the_chain_deadline() -> None:
    paused_at, now = T0, T0 + datetime.timedelta(hours=2)
    clocks = RunClocks(
        timeout_at=T0 + datetime.timedelta(minutes=30),
        sla_at=T0 + datetime.timedelta(minutes=10),
        chain_deadline_at=T0 + datetime.timedelta(hours=1),
    )
    after = resumed(clocks, paused_at, now)
    assert after.timeout_at == T0 + datetime.timedelta(hours=2, minutes=30)
    assert after.sla_at == T0 + datetime.timedelta(hours=2, minutes=10)
    assert after.chain_deadline_at == clocks.chain_deadline_at
    assert timed_out(after, now) == "chain", "paused past its chain deadline: it times out on resume"
    assert timed_out(resumed(RunClocks(timeout_at=clocks.timeout_at), paused_at, now), now) is None


def test_a_breached_sla_stays_where_it_was() -> None:
    clocks = RunClocks(sla_at=T0, sla_breached=True)
    assert resumed(clocks, T0, T0 + datetime.timedelta(hours=1)).sla_at == T0


def test_a_clock_that_went_backwards_moves_nothing() -> None:
    clocks = RunClocks(timeout_at=T0)
    assert resumed(clocks, T0, T0 - datetime.timedelta(seconds=5)).timeout_at == T0


@pytest.mark.parametrize(
    ("workflow", "requested", "timeout", "expected"),
    [
        (0, None, 0, 0),
        (600, None, 0, 600),
        (600, 60, 0, 60),
        (600, 0, 0, 0),
        (600, 7200, 3600, 3600),
        (0, 120, 60, 60),
    ],
)
def test_a_run_sla_is_the_override_or_the_workflows_clamped_to_the_timeout(
    workflow: int, requested: int | None, timeout: int, expected: int
) -> None:
    assert effective_sla_seconds(workflow, requested, timeout) == expected


def test_rerun_starts_operators_again_with_numbered_attempts() -> None:
    sim = Simulation(
        {
            "tasks": [
                simple("fetch"),
                {
                    "name": "double",
                    "taskReferenceName": "double",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "cel", "expression": "input.n * 2", "n": "${fetch.output.n}"},
                },
            ]
        }
    )
    sim.step()
    sim.worker("fetch", output={"n": 2})
    sim.step()
    assert sim.status is RunStatus.COMPLETED
    sim.rerun("fetch")
    decision = sim.step()
    assert [c.attempt for c in decision.commands if isinstance(c, ScheduleTask)] == [2]
    sim.worker("fetch", output={"n": 5})
    decision = sim.step()
    recorded = [c for c in decision.commands if isinstance(c, RecordTask)]
    assert [(c.ref, c.attempt, c.output) for c in recorded] == [("double", 2, {"result": 10})]
    assert sim.status is RunStatus.COMPLETED
