"""SQL text built once for the statements that share it: from what the model
says (so that the model stays the one place a fact about task types is
written), the claim of rows no other transaction holds, and bulk statements
over rows written as dataclasses (one field per column, in one order)."""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from sluiceway.model.workflow import TaskType


def types_where(predicate: Callable[[TaskType], bool]) -> str:
    """The task types for which `predicate` holds, as an SQL list: `('SIMPLE', 'WAIT')`.

    For the few facts the executor alone does not say (which types take a
    result, snooze, count in the retry budget). A constant of the code, never
    input: safe to format into a statement."""
    return "(" + ", ".join(f"'{t.value}'" for t in TaskType if predicate(t)) + ")"


# "The task is still leased", for statements that find a batch of tasks by id.
# Written plainly (status = 'IN_PROGRESS'), it lets the planner prove the
# predicate of the partial index tasks_leased and scan that index for the
# whole namespace, then hash-join the batch: cheap by the statistics, which
# see few leased tasks, but every entry of a task leased and finished since
# the last vacuum is still in that index, and while any transaction is open
# (there always is one under load) none can be skipped. The scan then grows
# with everything leased lately. Compared through a subquery, the status is a
# value the planner cannot see, so each task is looked up by its primary key:
# a batch costs the same however many tasks came before it.
STILL_LEASED = "(SELECT 'IN_PROGRESS')"


def claim(columns: str, rows: str, where: str, *, order_by: str = "", limit: str = "", of: str = "") -> str:
    """`SELECT columns FROM rows WHERE where [ORDER BY] [LIMIT] FOR UPDATE [OF of] SKIP LOCKED`.

    How every replica's loops share work: each takes the rows it can lock,
    passing over those another transaction holds (another replica's pass, an
    operation on a run), so no row is handled twice and no pass waits for
    another. A row passed over stays due: whoever needs it handled soon must
    look again once it is let go (the decider does: store.deciding).
    `of` names the table to lock when `rows` joins several."""
    clauses = [f"SELECT {columns}", f"  FROM {rows}", f" WHERE {where}"]
    if order_by:
        clauses.append(f" ORDER BY {order_by}")
    if limit:
        clauses.append(f" LIMIT {limit}")
    clauses.append(f"   FOR UPDATE OF {of} SKIP LOCKED" if of else "   FOR UPDATE SKIP LOCKED")
    return "\n".join(clauses)


# -- rows written in bulk --------------------------------------------------------------
#
# A row of a bulk statement is a frozen dataclass whose fields carry their SQL
# type (`id: sql.Uuid`, `ended_at: sql.Instant | None`). `unnest` writes the
# statement's `unnest($1::uuid[], ...) AS alias(id, ...)` from the fields and
# `arrays` turns the rows into its parameters, both in field order: a column
# is added as one field, and once in the statement that reads it.

Uuid = Annotated[uuid.UUID, "uuid"]
Text = Annotated[str, "text"]
Int = Annotated[int, "int"]
Bool = Annotated[bool, "boolean"]
Json = Annotated[dict[str, Any], "jsonb"]
Instant = Annotated[datetime.datetime, "timestamptz"]


def _sql_type(hint: Any) -> str:
    """The SQL type a field declares: its Annotated metadata, also inside `X | None`."""
    for candidate in (hint, *typing.get_args(hint)):
        if typing.get_origin(candidate) is Annotated:
            sql_type: str = candidate.__metadata__[0]
            return sql_type
    raise TypeError(f"{hint!r} says no SQL type: declare the field as sql.Uuid, sql.Text, ...")


def fields_of(row: type[Any]) -> list[tuple[str, str]]:
    """(name, SQL type) of each field of a row dataclass, in order."""
    hints = typing.get_type_hints(row, include_extras=True)
    return [(f.name, _sql_type(hints[f.name])) for f in dataclasses.fields(row)]


def unnest(row: type[Any], alias: str, first: int = 1) -> str:
    """`unnest($first::type[], ...) AS alias(field, ...)`: the rows `arrays` gives, as a table."""
    fields = fields_of(row)
    arrays_ = ", ".join(f"${first + i}::{sql_type}[]" for i, (_, sql_type) in enumerate(fields))
    return f"unnest({arrays_}) AS {alias}({', '.join(name for name, _ in fields)})"


def arrays(rows: Sequence[Any], row: type[Any]) -> list[list[Any]]:
    """`rows` (instances of the dataclass `row`) as one array per field, in field order: `unnest`'s parameters."""
    names = [f.name for f in dataclasses.fields(row)]
    return [[getattr(r, name) for r in rows] for name in names]


def parameters(item: Any) -> tuple[Any, ...]:
    """One row dataclass as a statement's parameters ($1, $2, ...), in field order (for executemany)."""
    return tuple(getattr(item, f.name) for f in dataclasses.fields(item))
