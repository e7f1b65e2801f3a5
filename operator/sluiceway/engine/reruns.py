"""Which tasks a retry or a rerun starts afresh. Pure: the store passes the
run's spec and the latest attempt of each task, and records the answer as the
run's superseded attempts, which the decider then treats as history.

- **Retry** takes up a run that ended without completing from where it
  failed: every task whose latest attempt failed, timed out or was canceled
  when the run ended starts again, with a fresh retryCount; what completed
  keeps its output.
- **Rerun** from a task starts that task afresh, with everything below it (a
  fork's branches, a switch's case, a dynamic fork's children) and everything
  after it in its sequence and in the sequences that enclose it. Sibling
  branches of a fork keep their outputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sluiceway.model.execution import TaskStatus
from sluiceway.model.workflow import TaskType, WorkflowSpec, WorkflowTask

_RETRIED = frozenset(
    {TaskStatus.FAILED, TaskStatus.FAILED_WITH_TERMINAL_ERROR, TaskStatus.TIMED_OUT, TaskStatus.CANCELED}
)


@dataclass(frozen=True)
class Latest:
    """The latest visible attempt of one task reference."""

    status: TaskStatus
    attempt: int


def retry_scope(latest: Mapping[str, Latest]) -> dict[str, int]:
    """Ref -> the attempt to supersede, for every task a retry starts again."""
    return {ref: row.attempt for ref, row in latest.items() if row.status in _RETRIED}


class RerunError(ValueError):
    """The task cannot be rerun from; the message says why."""


def rerun_scope(spec: WorkflowSpec, ref: str, latest: Mapping[str, Latest]) -> dict[str, int]:
    """Ref -> the attempt to supersede, for `ref` and everything after it."""
    if ref not in latest:
        raise RerunError(f"task {ref} never ran in this run: rerun from a task that did")
    scope: set[str] = set()
    fork, dynamic = _dynamic_parent(ref)
    if dynamic:  # a child of a dynamic fork: it, then what follows its fork
        scope.add(ref)
        path = _path(spec.tasks, fork)
    else:
        path = _path(spec.tasks, ref)
    if path is None:
        raise RerunError(f"task {ref} is not in the run's workflow version")
    for position, (sequence, index) in enumerate(path):
        innermost = position == len(path) - 1
        start = index if innermost and not dynamic else index + 1
        for task in sequence[start:]:
            scope |= _subtree(task, latest)
    return {name: latest[name].attempt for name in sorted(scope) if name in latest}


def _dynamic_parent(ref: str) -> tuple[str, bool]:
    matched = re.fullmatch(r"(.+)__\d+", ref)
    return (matched.group(1), True) if matched else (ref, False)


def _path(tasks: list[WorkflowTask], ref: str) -> list[tuple[list[WorkflowTask], int]] | None:
    """The sequences from the top down to `ref`, each with the index of the
    task that leads there."""
    for index, task in enumerate(tasks):
        if task.task_reference_name == ref:
            return [(tasks, index)]
        for child in task.children():
            found = _path(child, ref)
            if found is not None:
                return [(tasks, index), *found]
    return None


def _subtree(task: WorkflowTask, latest: Mapping[str, Latest]) -> set[str]:
    found = {task.task_reference_name}
    if task.type is TaskType.FORK_JOIN_DYNAMIC:
        prefix = f"{task.task_reference_name}__"
        found |= {ref for ref in latest if ref.startswith(prefix) and ref[len(prefix) :].isdigit()}
    for child in task.children():
        for nested in child:
            found |= _subtree(nested, latest)
    return found
