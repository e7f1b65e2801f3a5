"""The decider is total: a reference or expression that cannot be evaluated
fails its task terminally, naming the field, wherever it is evaluated, and the
run follows its policy; a stored row the decider cannot read yields one
Quarantine command. decide() never raises."""

from __future__ import annotations

import datetime
from random import Random
from typing import Any

import pytest

from sluiceway.engine.commands import Quarantine, ScheduleTask
from sluiceway.engine.decider import Event, decide
from sluiceway.engine.snapshot import RunSnapshot, TaskRow
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import TaskType
from tests.unit.engine.simulation import T0, Simulation

BAD = "${workflow.input..amount}"
BAD_AT = "cannot parse reference ${workflow.input..amount} at position 14"


def simple(ref: str, **extra: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def task(ref: str, type_: str, **extra: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": type_, **extra}


def dynamic(params: dict[str, Any]) -> dict[str, Any]:
    return task("fan", "FORK_JOIN_DYNAMIC", inputParameters=params)


# (where the bad value sits, the task that must fail, the start of its reason)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "a worker task's inputParameters",
        simple("charge", inputParameters={"amount": BAD}),
        "charge",
        f"tasks[charge].inputParameters.amount: {BAD_AT}",
    ),
    (
        "a reference embedded in text, deep in a list",
        simple("charge", inputParameters={"lines": [{"memo": f"pay {BAD}"}]}),
        "charge",
        f"tasks[charge].inputParameters.lines[0].memo: {BAD_AT}",
    ),
    (
        "an HTTP task's inputParameters",
        task("call", "HTTP", inputParameters={"http_request": {"uri": f"http://x/{BAD}"}}),
        "call",
        "tasks[call].inputParameters.http_request.uri: cannot parse reference",
    ),
    (
        "a SWITCH's inputParameters",
        task(
            "route",
            "SWITCH",
            evaluatorType="value-param",
            expression="tier",
            inputParameters={"tier": BAD},
            defaultCase=[simple("b")],
        ),
        "route",
        f"tasks[route].inputParameters.tier: {BAD_AT}",
    ),
    (
        "a SWITCH's CEL expression that fails at run time",
        task("route", "SWITCH", evaluatorType="cel", expression="input.missing > 1", defaultCase=[simple("b")]),
        "route",
        "tasks[route].expression: CEL expression 'input.missing > 1' failed",
    ),
    (
        "a SWITCH's CEL expression that does not parse",
        task("route", "SWITCH", evaluatorType="cel", expression="1 +", defaultCase=[simple("b")]),
        "route",
        "tasks[route].expression: invalid CEL expression '1 +'",
    ),
    (
        "an INLINE's CEL expression that does not parse",
        task("calc", "INLINE", inputParameters={"expression": "size(input"}),
        "calc",
        "tasks[calc].inputParameters.expression: invalid CEL expression",
    ),
    (
        "an INLINE's CEL expression that fails at run time",
        task("calc", "INLINE", inputParameters={"expression": "1 / input.zero", "zero": 0}),
        "calc",
        "tasks[calc].inputParameters.expression: CEL expression '1 / input.zero' failed",
    ),
    (
        "an INLINE whose value JSON cannot hold",
        task("calc", "INLINE", inputParameters={"expression": 'b"raw"'}),
        "calc",
        "tasks[calc].inputParameters.expression: CEL expression 'b\"raw\"' gave a bytes",
    ),
    (
        "an INLINE whose value PostgreSQL cannot hold",
        task("calc", "INLINE", inputParameters={"expression": '"a\\x00b"'}),
        "calc",
        "tasks[calc].inputParameters.expression: CEL expression '\"a\\\\x00b\"' gave a string with a NUL",
    ),
    (
        "an INLINE's reference",
        task("calc", "INLINE", inputParameters={"expression": "input.n", "n": BAD}),
        "calc",
        f"tasks[calc].inputParameters.n: {BAD_AT}",
    ),
    (
        "a TERMINATE's reference",
        task("stop", "TERMINATE", inputParameters={"terminationStatus": BAD}),
        "stop",
        f"tasks[stop].inputParameters.terminationStatus: {BAD_AT}",
    ),
    (
        "a TERMINATE's status",
        task("stop", "TERMINATE", inputParameters={"terminationStatus": "${workflow.input.status}"}),
        "stop",
        "tasks[stop].inputParameters.terminationStatus must be COMPLETED, FAILED or TERMINATED, not 'SOMETIMES'",
    ),
    (
        "a WAIT's reference",
        task("pause", "WAIT", inputParameters={"duration": BAD}),
        "pause",
        f"tasks[pause].inputParameters.duration: {BAD_AT}",
    ),
    (
        "a WAIT's unreadable duration",
        task("pause", "WAIT", inputParameters={"duration": "${workflow.input.pause}"}),
        "pause",
        "tasks[pause].inputParameters.duration: cannot read duration 'a while'",
    ),
    (
        "a WAIT's duration past the calendar",
        task("pause", "WAIT", inputParameters={"duration": "${workflow.input.forever}"}),
        "pause",
        "tasks[pause].inputParameters.duration:",
    ),
    (
        "a WAIT's unreadable instant",
        task("pause", "WAIT", inputParameters={"until": "${workflow.input.pause}"}),
        "pause",
        "tasks[pause].inputParameters.until: cannot read instant 'a while'",
    ),
    (
        "a SUB_WORKFLOW's inputParameters",
        task("child", "SUB_WORKFLOW", subWorkflowParam={"name": "other"}, inputParameters={"x": BAD}),
        "child",
        f"tasks[child].inputParameters.x: {BAD_AT}",
    ),
    (
        "a FORK_JOIN_DYNAMIC's inputParameters",
        dynamic({"forkTaskName": "work", "forkTaskInputs": BAD}),
        "fan",
        f"tasks[fan].inputParameters.forkTaskInputs: {BAD_AT}",
    ),
    (
        "a FORK_JOIN_DYNAMIC's task name",
        dynamic({"forkTaskName": "${workflow.input.pause}", "forkTaskInputs": []}),
        "fan",
        "tasks[fan].inputParameters.forkTaskName must resolve to a task type name, got the string 'a while'",
    ),
    (
        "a FORK_JOIN_DYNAMIC's inputs",
        dynamic({"forkTaskName": "work", "forkTaskInputs": "${workflow.input.pause}"}),
        "fan",
        "tasks[fan].inputParameters.forkTaskInputs must resolve to a list, got the string 'a while'",
    ),
]
INPUT = {"status": "sometimes", "pause": "a while", "forever": 10**15}


@pytest.mark.parametrize(("place", "bad_task", "ref", "reason"), CASES, ids=[c[0] for c in CASES])
def test_an_evaluation_failure_fails_that_task_terminally_and_the_run(
    place: str, bad_task: dict[str, Any], ref: str, reason: str
) -> None:
    sim = Simulation({"tasks": [bad_task, simple("after")], "failureWorkflow": "cleanup"}, input=INPUT)
    decision = sim.step(Event.STARTED)
    assert decision.quarantine() is None
    row = sim.rows[ref]
    assert row.status is TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert row.reason.startswith(reason), row.reason
    assert sim.status is RunStatus.FAILED and sim.finished is not None
    assert sim.finished.reason.startswith(f"task {ref} ") and reason in sim.finished.reason
    assert sim.failure_workflow() == "cleanup"
    assert "after" not in sim.rows


@pytest.mark.parametrize(("place", "bad_task", "ref", "reason"), CASES, ids=[c[0] for c in CASES])
def test_an_optional_task_that_cannot_be_evaluated_is_absorbed(
    place: str, bad_task: dict[str, Any], ref: str, reason: str
) -> None:
    sim = Simulation({"tasks": [{**bad_task, "optional": True}, simple("after")]}, input=INPUT)
    sim.step(Event.STARTED)
    assert sim.rows[ref].status is TaskStatus.COMPLETED_WITH_ERRORS
    assert sim.rows[ref].reason.startswith(reason)
    assert sim.status is RunStatus.RUNNING and sim.active() == ["after"]
    sim.worker("after")
    sim.step()
    assert sim.status is RunStatus.COMPLETED


def test_the_failing_task_is_the_child_not_the_fork_or_switch_around_it() -> None:
    sim = Simulation(
        {
            "tasks": [
                task(
                    "fork",
                    "FORK_JOIN",
                    forkTasks=[
                        [simple("fine")],
                        [
                            task(
                                "route",
                                "SWITCH",
                                evaluatorType="value-param",
                                expression="x",
                                inputParameters={"x": "a"},
                                decisionCases={"a": [simple("deep", inputParameters={"v": BAD})]},
                            )
                        ],
                    ],
                ),
                task("join", "JOIN"),
            ]
        }
    )
    sim.step(Event.STARTED)
    assert sim.rows["fork"].status is TaskStatus.COMPLETED
    assert sim.rows["route"].status is TaskStatus.COMPLETED
    assert sim.rows["deep"].status is TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert sim.status is RunStatus.FAILED and sim.finished is not None
    assert sim.finished.reason.startswith("task deep (deep) FAILED")


def test_a_reference_into_a_later_task_output_is_evaluated_when_that_task_starts() -> None:
    sim = Simulation({"tasks": [simple("a"), simple("b", inputParameters={"v": "${a.output.list[}"})]})
    sim.step(Event.STARTED)
    assert sim.active() == ["a"], "the bad reference does not matter until b starts"
    sim.worker("a", output={"list": [1]})
    sim.step()
    assert sim.rows["b"].status is TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert sim.rows["b"].reason == "tasks[b].inputParameters.v: cannot parse reference ${a.output.list[} at position 13"


def test_output_parameters_that_cannot_be_evaluated_fail_the_run_naming_the_field() -> None:
    sim = Simulation({"tasks": [simple("a")], "outputParameters": {"total": BAD}, "failureWorkflow": "cleanup"})
    sim.step(Event.STARTED)
    sim.worker("a")
    decision = sim.step()
    assert decision.quarantine() is None
    assert sim.status is RunStatus.FAILED and sim.finished is not None
    assert sim.finished.reason == f"the run's output cannot be evaluated: outputParameters.total: {BAD_AT}"
    assert sim.failure_workflow() == "cleanup"


def test_a_sub_workflow_retry_starts_on_its_first_input_without_evaluating_again() -> None:
    sim = Simulation(
        {"tasks": [task("child", "SUB_WORKFLOW", subWorkflowParam={"name": "other"}, inputParameters={"n": 1})]},
        definitions={"child": {"retryCount": 1, "retryDelaySeconds": 0}},
    )
    sim.step(Event.STARTED)
    sim.worker("child", TaskStatus.FAILED, reason="child failed")
    sim.step()
    assert [c.input for c in sim.children] == [{"n": 1}, {"n": 1}]
    assert sim.rows["child"].attempt == 2


# -- stored state the decider cannot read: quarantined, never raised --------------


def snapshot(rows: dict[str, TaskRow], **extra: Any) -> RunSnapshot:
    sim = Simulation(
        {
            "tasks": [
                task("fan", "FORK_JOIN_DYNAMIC", inputParameters={"forkTaskName": "w", "forkTaskInputs": []}),
                task("join", "JOIN"),
                simple("a", inputParameters={"x": "${fan.output.x}"}),
            ]
        }
    )
    base = sim.snapshot()
    return RunSnapshot(**{**base.__dict__, "tasks": rows, **extra})


def row(ref: str, type_: TaskType, status: TaskStatus, **extra: Any) -> TaskRow:
    return TaskRow(**{"id": "t1", "ref": ref, "type": type_, "name": ref, "status": status, "attempt": 1, **extra})


GARBAGE: list[tuple[str, RunSnapshot]] = [
    (
        "a fork row whose forkedTasks is not a list",
        snapshot({"fan": row("fan", TaskType.FORK_JOIN_DYNAMIC, TaskStatus.COMPLETED, output={"forkedTasks": 5})}),
    ),
    (
        "a fork row whose forkTaskName is not a task type",
        snapshot(
            {
                "fan": row(
                    "fan",
                    TaskType.FORK_JOIN_DYNAMIC,
                    TaskStatus.COMPLETED,
                    output={"forkedTasks": ["fan__0"], "forkTaskName": "no such name!"},
                )
            }
        ),
    ),
    (
        "a task row whose input is not an object",
        snapshot({"fan": row("fan", TaskType.FORK_JOIN_DYNAMIC, TaskStatus.COMPLETED, input=[1, 2, 3])}),
    ),
    (
        "a failed row with attempt 0",
        snapshot(
            {
                "fan": row(
                    "fan",
                    TaskType.FORK_JOIN_DYNAMIC,
                    TaskStatus.COMPLETED,
                    output={"forkedTasks": ["fan__0"], "forkTaskName": "w"},
                ),
                "fan__0": row("fan__0", TaskType.SIMPLE, TaskStatus.FAILED, attempt=0),
            }
        ),
    ),
    ("a run input that is not an object", snapshot({}, input="not an object")),
]


@pytest.mark.parametrize(("what", "snap"), GARBAGE, ids=[g[0] for g in GARBAGE])
def test_stored_state_it_cannot_read_quarantines_the_run_and_nothing_else(what: str, snap: RunSnapshot) -> None:
    decision = decide(snap, Event.TASK_UPDATED, T0, Random(1))
    assert len(decision.commands) == 1 and isinstance(decision.commands[0], Quarantine), decision.commands
    assert decision.commands[0].reason.startswith("the decider cannot evaluate this run: ")


def test_a_retry_after_that_is_not_a_number_falls_back_to_the_backoff() -> None:
    sim = Simulation({"tasks": [simple("a")]}, definitions={"a": {"retryCount": 2, "retryDelaySeconds": 3}})
    sim.step(Event.STARTED)
    for bad in (float("nan"), float("inf")):
        sim.worker("a", TaskStatus.FAILED, reason="busy", retry_after=bad)
        decision = sim.step()
        assert decision.quarantine() is None
        retry = next(c for c in decision.commands if isinstance(c, ScheduleTask))
        assert retry.available_at > sim.now and retry.available_at - sim.now < datetime.timedelta(seconds=60)
