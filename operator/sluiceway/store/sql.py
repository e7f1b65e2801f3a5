"""SQL text built from what the model says, so that the model stays the one
place a fact about task types is written."""

from __future__ import annotations

from collections.abc import Callable

from sluiceway.model.workflow import TaskType


def types_where(predicate: Callable[[TaskType], bool]) -> str:
    """The task types for which `predicate` holds, as an SQL list: `('SIMPLE', 'WAIT')`.

    For the few facts the executor alone does not say (which types take a
    result, snooze, count in the retry budget). A constant of the code, never
    input: safe to format into a statement."""
    return "(" + ", ".join(f"'{t.value}'" for t in TaskType if predicate(t)) + ")"
