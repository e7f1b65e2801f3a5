"""Checks on a workflow's task graph that a schema cannot express. Each
problem is a sentence naming the task, reported in the Workflow's Ready
condition."""

from __future__ import annotations

from sluiceway.controls.expressions import ExpressionError, check_cel, references
from sluiceway.model.workflow import EvaluatorType, TaskType, WorkflowSpec, WorkflowTask, iter_tasks


def problems(spec: WorkflowSpec) -> list[str]:
    found: list[str] = []
    refs = {t.task_reference_name for t in iter_tasks(spec.tasks)}
    _check_sequence(spec.tasks, refs, found)
    for task in iter_tasks(spec.tasks):
        for name in sorted(references(task.input_parameters) - refs - {"workflow"}):
            found.append(f"{task.task_reference_name}: inputParameters refer to unknown task {name!r}")
    for name in sorted(references(spec.output_parameters) - refs - {"workflow"}):
        found.append(f"outputParameters refer to unknown task {name!r}")
    return found


def _check_sequence(tasks: list[WorkflowTask], refs: set[str], found: list[str]) -> None:
    previous: WorkflowTask | None = None
    for task in tasks:
        _check_task(task, previous, refs, found)
        for child in task.children():
            _check_sequence(child, refs, found)
        previous = task


def _check_task(task: WorkflowTask, previous: WorkflowTask | None, refs: set[str], found: list[str]) -> None:
    ref = task.task_reference_name
    if task.type is TaskType.JOIN:
        for name in task.join_on or []:
            if name not in refs:
                found.append(f"{ref}: joinOn names unknown task {name!r}")
        if not task.join_on and (
            previous is None or previous.type not in (TaskType.FORK_JOIN, TaskType.FORK_JOIN_DYNAMIC)
        ):
            found.append(f"{ref}: a JOIN without joinOn must directly follow a FORK_JOIN or FORK_JOIN_DYNAMIC")
    if task.type is TaskType.SWITCH and task.evaluator_type is EvaluatorType.CEL:
        _check_cel(ref, task.expression or "", found)
    if task.type is TaskType.INLINE:
        _check_cel(ref, str(task.input_parameters.get("expression", "")), found)
    if task.type is TaskType.FORK_JOIN_DYNAMIC:
        for key in ("forkTaskName", "forkTaskInputs"):
            if key not in task.input_parameters:
                found.append(f"{ref}: FORK_JOIN_DYNAMIC needs inputParameters.{key}")


def _check_cel(ref: str, expression: str, found: list[str]) -> None:
    try:
        check_cel(expression)
    except ExpressionError as error:
        found.append(f"{ref}: {error}")
