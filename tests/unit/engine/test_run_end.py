"""What follows from a run's end is the decider's to say, as commands: the
parent learns how its child ended, the next run waiting on the admission key
goes, and a failure starts the failure workflow. The store only applies them."""

from __future__ import annotations

from random import Random

import pytest

from sluiceway.engine.commands import AdmitNext, FinishRun, NotifyParent, StartFailureWorkflow
from sluiceway.engine.decider import Event, consequences, decide
from sluiceway.engine.snapshot import RunLinks, RunSnapshot
from sluiceway.model.execution import RunStatus, TaskStatus
from tests.unit.engine.simulation import T0, Simulation

CHILD = RunLinks("child-1", "charge", parent_run_id="parent-1", parent_task_id="task-9")


def test_a_child_that_completes_completes_its_parents_task_with_its_output() -> None:
    [notify] = consequences(CHILD, FinishRun(RunStatus.COMPLETED, output={"paid": True}))
    assert notify == NotifyParent("parent-1", "task-9", TaskStatus.COMPLETED, {"paid": True}, "")


@pytest.mark.parametrize("status", [RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.TERMINATED])
def test_a_child_that_does_not_complete_fails_its_parents_task_saying_why(status: RunStatus) -> None:
    [notify] = consequences(CHILD, FinishRun(status, "card declined"))
    assert isinstance(notify, NotifyParent) and notify.status is TaskStatus.FAILED
    assert notify.reason == f"sub-workflow child-1 {status.value}: card declined"


def test_a_run_holding_an_admission_slot_admits_the_next_of_its_key() -> None:
    holder = RunLinks("r1", "tenant_sync", admission_key="acme", admission_limit=2)
    assert consequences(holder, FinishRun(RunStatus.TERMINATED)) == [AdmitNext("tenant_sync", "acme", 2)]
    waiting = RunLinks("r2", "tenant_sync", admission_key="acme", awaiting_admission=True, admission_limit=2)
    assert consequences(waiting, FinishRun(RunStatus.TERMINATED)) == [], "a run still waiting held no slot"
    unknown = RunLinks("r3", "tenant_sync", admission_key="acme")
    assert consequences(unknown, FinishRun(RunStatus.COMPLETED)) == [], "no limit known: the sweeper rebalances"


@pytest.mark.parametrize("status", [RunStatus.FAILED, RunStatus.TIMED_OUT])
def test_a_failure_starts_the_failure_workflow_with_the_failed_run(status: RunStatus) -> None:
    run = RunLinks("r1", "order", failure_workflow="notify_oncall")
    [start] = consequences(run, FinishRun(status, "boom", failed_task_id="t7"))
    assert start == StartFailureWorkflow(
        "notify_oncall",
        {
            "workflowId": "r1",
            "workflowName": "order",
            "reason": "boom",
            "failureStatus": status.value,
            "failureTaskId": "t7",
        },
    )


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.TERMINATED])
def test_no_failure_workflow_unless_the_run_failed(status: RunStatus) -> None:
    assert consequences(RunLinks("r1", "order", failure_workflow="notify_oncall"), FinishRun(status)) == []


def test_the_decider_emits_them_after_its_finish_from_the_runs_links() -> None:
    sim = Simulation(
        {
            "tasks": [{"name": "t", "taskReferenceName": "t", "retryCount": 0}],
            "failureWorkflow": "cleanup",
            "rateLimitConfig": {"rateLimitKey": "${workflow.input.tenant}", "concurrentExecLimit": 3},
        }
    )
    sim.step(Event.STARTED)
    sim.worker("t", TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason="bad")
    linked = RunSnapshot(
        **{**sim.snapshot().__dict__, "parent_run_id": "p", "parent_task_id": "pt", "admission_key": "acme"}
    )
    commands = decide(linked, Event.TASK_UPDATED, T0, Random(1)).commands
    finish_at = next(i for i, c in enumerate(commands) if isinstance(c, FinishRun))
    assert [type(c) for c in commands[finish_at:]] == [FinishRun, NotifyParent, AdmitNext, StartFailureWorkflow]
