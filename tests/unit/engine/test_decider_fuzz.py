"""Property tests of the decider's totality: random workflows with random
(often malformed) references, expressions and values, driven through random
worker outcomes, and random stored rows. Derandomized, so a failure
reproduces; hypothesis prints the falsifying example."""

from __future__ import annotations

import datetime
from random import Random
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sluiceway.engine.commands import FinishRun, Quarantine, RecordTask, ScheduleTask, StartChild
from sluiceway.engine.decider import Event, decide
from sluiceway.engine.graph import problems
from sluiceway.engine.snapshot import RunSnapshot, TaskRow
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import TaskType, WorkflowSpec
from tests.unit.engine.simulation import T0, Simulation

FUZZ = settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)

REFERENCES = [
    "${workflow.input.x}",
    "${workflow.input.items[0]}",
    "${workflow.workflowId}",
    "${t0.output.v}",
    "${t1.output.list[1].id}",
    "${t2.input.x}",
    "${nowhere.output}",
    "${workflow.input..x}",
    "${[0]}",
    "${t0.output[}",
    "${ }",
    "${t0..output}",
    "total ${t0.output.v} and ${workflow.input.x..y}",
]
TEXTS = ["", "5s", "1h 30m", "a while", "-3", "2026-11-29T12:00:05Z", "tomorrow", "COMPLETED", "FAILED", "oops", "w"]
EDGES = [0, -1, 10**15, 2**63 - 1, "99999999999 days", "0001-01-01T00:00:00+14:00", [], {}]
CEL = [
    "input.x > 1",
    "1 / 0",
    "size(input",
    'b"raw"',
    '"nul \\x00"',
    "input.missing",
    "true",
    "[1, 2].map(x, x * 2)",
    "{1: 2}",
    'timestamp("2026-01-01T00:00:00Z")',
]

scalars = st.one_of(
    st.sampled_from(REFERENCES),
    st.sampled_from(TEXTS),
    st.sampled_from(EDGES),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "v", "id", "list"]), inner),
    max_leaves=6,
)
params = st.dictionaries(
    st.sampled_from(
        ["x", "v", "duration", "until", "terminationStatus", "forkTaskName", "forkTaskInputs", "workflowOutput"]
    ),
    values,
    max_size=4,
)


@st.composite
def task_lists(draw: st.DrawFn, depth: int = 2) -> list[dict[str, Any]]:
    kinds = ["SIMPLE", "HTTP", "INLINE", "TERMINATE", "WAIT", "SUB_WORKFLOW", "FORK_JOIN_DYNAMIC", "JOIN"]
    if depth > 0:
        kinds += ["FORK_JOIN", "SWITCH"]
    tasks = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(kinds))
        spec: dict[str, Any] = {"name": "w", "taskReferenceName": "?", "type": kind, "inputParameters": draw(params)}
        spec["optional"] = draw(st.booleans())
        if kind == "FORK_JOIN":
            spec["forkTasks"] = [draw(task_lists(depth - 1)) for _ in range(draw(st.integers(1, 2)))]
        elif kind == "SWITCH":
            spec["evaluatorType"] = draw(st.sampled_from(["cel", "value-param"]))
            spec["expression"] = draw(st.sampled_from([*CEL, "x", "v"]))
            spec["decisionCases"] = {"true": draw(task_lists(depth - 1)), "1": draw(task_lists(depth - 1))}
            spec["defaultCase"] = draw(task_lists(depth - 1))
        elif kind == "WAIT":
            key = draw(st.sampled_from(["duration", "until"]))
            spec["inputParameters"][key] = draw(st.sampled_from(EDGES + TEXTS + REFERENCES))
        elif kind == "TERMINATE":
            spec["inputParameters"]["terminationStatus"] = draw(st.sampled_from(TEXTS + REFERENCES))
        elif kind == "FORK_JOIN_DYNAMIC":
            spec["inputParameters"]["forkTaskName"] = draw(st.sampled_from(TEXTS + REFERENCES + EDGES))
            spec["inputParameters"]["forkTaskInputs"] = draw(values)
        elif kind == "INLINE":
            spec["inputParameters"]["expression"] = draw(st.sampled_from([*CEL, "input.x + ${workflow.input.x}"]))
        elif kind == "SUB_WORKFLOW":
            spec["subWorkflowParam"] = {"name": "child"}
        elif kind == "JOIN" and draw(st.booleans()):
            spec["joinOn"] = draw(st.lists(st.sampled_from(["t0", "t1", "t3"]), max_size=2))
        tasks.append(spec)
    return tasks


def _number(tasks: list[dict[str, Any]], counter: list[int]) -> None:
    """Give every task a unique reference name, depth first: t0, t1, ..."""
    for spec in tasks:
        spec["taskReferenceName"] = f"t{counter[0]}"
        counter[0] += 1
        for branch in spec.get("forkTasks", []):
            _number(branch, counter)
        for case in spec.get("decisionCases", {}).values():
            _number(case, counter)
        _number(spec.get("defaultCase", []), counter)


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    tasks = draw(task_lists())
    _number(tasks, [0])
    workflow: dict[str, Any] = {"tasks": tasks, "failureWorkflow": "cleanup"}
    if draw(st.booleans()):
        workflow["outputParameters"] = draw(params)
    if draw(st.booleans()):
        workflow["maxConcurrentTasks"] = draw(st.integers(1, 3))
    return workflow


OUTCOMES = [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.FAILED_WITH_TERMINAL_ERROR, TaskStatus.TIMED_OUT]


def _json_safe(decision_commands: list[Any]) -> None:
    """What the store writes to jsonb must encode, and hold no NUL (jsonb refuses \\u0000)."""
    for command in decision_commands:
        documents = []
        if isinstance(command, (ScheduleTask, RecordTask, StartChild)):
            documents.append(command.input)
        if isinstance(command, (RecordTask, FinishRun)):
            documents.append(command.output)
        for document in documents:
            assert b"\\u0000" not in orjson.dumps(document), document


@FUZZ
@given(
    workflow=workflows(),
    run_input=st.dictionaries(st.sampled_from(["x", "items", "pause"]), values, max_size=3),
    script=st.lists(st.tuples(st.integers(0, 50), st.sampled_from(OUTCOMES), values, st.floats(0, 120)), max_size=12),
)
def test_any_workflow_with_any_values_is_decided_without_raising_or_quarantine(
    workflow: dict[str, Any], run_input: dict[str, Any], script: list[tuple[int, TaskStatus, Any, float]]
) -> None:
    try:
        sim = Simulation(workflow, input=run_input, definitions={"w": {"retryCount": 1, "retryDelaySeconds": 1}})
    except ValidationError:
        return  # the model refuses it at kubectl apply; the decider never sees it
    clean = problems(sim.workflow) == []
    sim.step(Event.STARTED)
    for pick, outcome, output, seconds in script:
        active = sim.active()
        if sim.status.is_terminal() or not active:
            break
        ref = active[pick % len(active)]
        sim.worker(ref, outcome, output=output if isinstance(output, dict) else {"v": output}, reason="fuzz")
        sim.advance(seconds)
        sim.step()
    for decision in sim.decisions:
        assert decision.quarantine() is None, decision.quarantine()
        _json_safe(decision.commands)
    if clean:  # what the Workflow's apply-time checks passed never fails to parse at run time
        reasons = [r.reason for r in sim.history] + [sim.finished.reason if sim.finished else ""]
        assert not any("cannot parse reference" in r or "invalid CEL" in r for r in reasons), reasons


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
stored_rows = st.builds(
    TaskRow,
    id=st.sampled_from(["", "t-1", "not-a-uuid"]),
    ref=st.sampled_from(["t0", "t1", "t2", "t0__0", "t0__1", "ghost"]),
    type=st.sampled_from(list(TaskType)),
    name=st.sampled_from(["w", "", "no such name!"]),
    status=st.sampled_from(list(TaskStatus)),
    attempt=st.integers(-2, 200),
    input=json_values,
    output=json_values
    | st.fixed_dictionaries({"forkedTasks": json_values, "forkTaskName": json_values, "selectedCase": json_values}),
    reason=st.text(max_size=20),
    retry_after_seconds=st.none() | st.floats(),
    schedule_to_close_at=st.none() | st.just(T0 - datetime.timedelta(seconds=1)),
    first_scheduled_at=st.none() | st.just(T0),
)


@FUZZ
@given(
    workflow=workflows(),
    rows=st.lists(stored_rows, max_size=6),
    run_input=json_values,
    terminate=st.none() | st.just("stop"),
    awaiting=st.booleans(),
)
def test_any_stored_state_is_decided_or_quarantined_never_raised(
    workflow: dict[str, Any], rows: list[TaskRow], run_input: Any, terminate: str | None, awaiting: bool
) -> None:
    try:
        spec = WorkflowSpec.model_validate(workflow)
    except ValidationError:
        return
    snapshot = RunSnapshot(
        id="run-1",
        namespace="ns",
        workflow_name="wf",
        version=1,
        workflow=spec,
        status=RunStatus.RUNNING,
        input=run_input,
        tasks={row.ref: row for row in rows},
        terminate_requested=terminate,
        awaiting_admission=awaiting,
        evaluated=True,
    )
    decision = decide(snapshot, Event.TASK_UPDATED, T0, Random(7))
    quarantine = decision.quarantine()
    if quarantine is not None:
        assert decision.commands == [quarantine] and isinstance(quarantine, Quarantine)
    if terminate is not None:
        finish = decision.finish()
        assert finish is not None and finish.status is RunStatus.TERMINATED, "terminate works on any stored state"
