"""Checks on a workflow that a schema cannot express, made when it is applied:
the task graph, and every reference and expression parsed, so that a run
never meets a typo the definition could have shown. Each problem is a
sentence that starts with the field's path, `tasks[charge].inputParameters.amount:`,
reported in the Workflow's Ready condition (reason InvalidSpec)."""

from __future__ import annotations

import re
from typing import Any

from sluiceway.controls.durations import parse_duration, parse_instant
from sluiceway.controls.expressions import ExpressionError, check_cel, reference_problems, references
from sluiceway.model.common import ENGINE_NAME_PATTERN
from sluiceway.model.workflow import EvaluatorType, TaskType, WorkflowSpec, WorkflowTask, iter_tasks

_TERMINATION_STATUSES = ("COMPLETED", "FAILED", "TERMINATED")


def problems(spec: WorkflowSpec) -> list[str]:
    found: list[str] = []
    refs = {t.task_reference_name for t in iter_tasks(spec.tasks)}
    _check_sequence(spec.tasks, refs, found)
    for task in iter_tasks(spec.tasks):
        where = f"{_at(task)}.inputParameters"
        found.extend(reference_problems(task.input_parameters, where))
        # A dynamic fork's task specs may refer to the tasks they create, which no spec names.
        checked = {k: v for k, v in task.input_parameters.items() if k != "forkTasks"}
        if task.type is TaskType.FORK_JOIN_DYNAMIC and isinstance(task.input_parameters.get("forkTasks"), str):
            checked["forkTasks"] = task.input_parameters["forkTasks"]
        for name in sorted(references(checked) - refs - {"workflow"}):
            found.append(f"{where}: refers to unknown task {name!r}")
    found.extend(reference_problems(spec.output_parameters, "outputParameters"))
    for name in sorted(references(spec.output_parameters) - refs - {"workflow"}):
        found.append(f"outputParameters: refers to unknown task {name!r}")
    if spec.rate_limit_config is not None:
        key = spec.rate_limit_config.rate_limit_key
        found.extend(reference_problems(key, "rateLimitConfig.rateLimitKey"))
        for name in sorted(references(key) - {"workflow"}):
            found.append(f"rateLimitConfig.rateLimitKey: a run's key can only refer to workflow.input, not {name!r}")
    for attribute in spec.search_attributes:
        if attribute.source is None:
            continue
        where = f"searchAttributes[{attribute.name}].source"
        found.extend(reference_problems(attribute.source, where))
        for name in sorted(references(attribute.source) - {"workflow"}):
            found.append(f"{where}: a run's attributes are set at start and can only refer to workflow, not {name!r}")
    return found


def _at(task: WorkflowTask) -> str:
    return f"tasks[{task.task_reference_name}]"


def _check_sequence(tasks: list[WorkflowTask], refs: set[str], found: list[str]) -> None:
    previous: WorkflowTask | None = None
    for task in tasks:
        _check_task(task, previous, refs, found)
        for child in task.children():
            _check_sequence(child, refs, found)
        previous = task


def _check_task(task: WorkflowTask, previous: WorkflowTask | None, refs: set[str], found: list[str]) -> None:
    at = _at(task)
    params = task.input_parameters
    if task.type is TaskType.JOIN:
        for name in task.join_on or []:
            if name not in refs:
                found.append(f"{at}.joinOn: names unknown task {name!r}")
        if not task.join_on and (
            previous is None or previous.type not in (TaskType.FORK_JOIN, TaskType.FORK_JOIN_DYNAMIC)
        ):
            found.append(f"{at}: a JOIN without joinOn must directly follow a FORK_JOIN or FORK_JOIN_DYNAMIC")
    if task.type is TaskType.SWITCH and task.evaluator_type is EvaluatorType.CEL:
        _check_cel(f"{at}.expression", task.expression or "", found)
    if task.type is TaskType.INLINE:
        _check_cel(f"{at}.inputParameters.expression", str(params.get("expression", "")), found)
    if task.type is TaskType.FORK_JOIN_DYNAMIC and "forkTasks" in params:
        if "forkTaskName" in params:
            found.append(f"{at}: FORK_JOIN_DYNAMIC takes forkTasks or forkTaskName, not both")
        if _literal(params["forkTasks"]) and not isinstance(params["forkTasks"], list):
            found.append(f"{at}.inputParameters.forkTasks: must be a list of task specs (or a reference to one)")
    elif task.type is TaskType.FORK_JOIN_DYNAMIC:
        for key in ("forkTaskName", "forkTaskInputs"):
            if key not in params:
                found.append(f"{at}: FORK_JOIN_DYNAMIC needs inputParameters.forkTasks, or {key}")
        fork_name = params.get("forkTaskName")
        named = isinstance(fork_name, str) and re.fullmatch(ENGINE_NAME_PATTERN, fork_name)
        if "forkTaskName" in params and _literal(fork_name) and not named:
            found.append(f"{at}.inputParameters.forkTaskName: {fork_name!r} is not a task type name")
    if task.type is TaskType.TERMINATE:
        status = params.get("terminationStatus", "COMPLETED")
        if _literal(status) and str(status).upper() not in _TERMINATION_STATUSES:
            found.append(f"{at}.inputParameters.terminationStatus: must be COMPLETED, FAILED or TERMINATED")
    if task.type is TaskType.DO_WHILE:
        _check_loop(task, found)
    if task.type is TaskType.WAIT_FOR_WEBHOOK:
        matches = params.get("matches")
        if isinstance(matches, str) and _literal(matches):
            _check_cel(f"{at}.inputParameters.matches", matches, found)
        elif matches is not None and _literal(matches) and not isinstance(matches, dict):
            found.append(f"{at}.inputParameters.matches: must be an object (key equality) or a CEL string")
    if task.type is TaskType.WEBHOOK:
        url = params.get("url")
        if url is None:
            found.append(f"{at}: a WEBHOOK needs inputParameters.url")
        elif _literal(url) and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
            found.append(f"{at}.inputParameters.url: must be an http(s) URL")
    if task.type is TaskType.CONTINUE_AS_NEW:
        new_input = params.get("input", {})
        if _literal(new_input) and not isinstance(new_input, dict):
            found.append(f"{at}.inputParameters.input: must be an object (the next run's input)")
    if task.type is TaskType.WAIT:
        for key, parse in (("duration", parse_duration), ("until", parse_instant)):
            value = params.get(key)
            if value is not None and _literal(value):
                try:
                    parse(value)
                except ValueError as error:
                    found.append(f"{at}.inputParameters.{key}: {error}")


def _check_loop(task: WorkflowTask, found: list[str]) -> None:
    at = _at(task)
    if not task.loop_condition and "items" not in task.input_parameters:
        found.append(f"{at}: a DO_WHILE needs a loopCondition, inputParameters.items, or both")
    if task.loop_condition:
        _check_cel(f"{at}.loopCondition", task.loop_condition, found)
    items = task.input_parameters.get("items")
    if "items" in task.input_parameters and _literal(items) and not isinstance(items, list):
        found.append(f"{at}.inputParameters.items: must be a list (or a reference to one)")
    for inner in iter_tasks(list(task.loop_over or [])):
        if inner.type is TaskType.DO_WHILE:
            found.append(f"{_at(inner)}: a DO_WHILE inside a DO_WHILE is not supported; use a SUB_WORKFLOW")


def _literal(value: Any) -> bool:
    """A value written in the spec itself, not resolved from a reference at run time."""
    return not (isinstance(value, str) and "${" in value)


def _check_cel(where: str, expression: str, found: list[str]) -> None:
    try:
        check_cel(expression)
    except ExpressionError as error:
        found.append(f"{where}: {error}")
