"""Pages of runs and tasks, newest first, by keyset.

A page continues after the (created_at, id) of the last row of the previous
one, so rows inserted meanwhile never shift it (newer rows land before the
first page) and no page counts or skips rows. Each filter maps to a condition
an index serves in page order (migration 0010), and a list never reads a
run's input or output: only the narrow columns. Nothing here counts rows.

The WHERE clause is assembled from fixed fragments, one per filter given,
rather than one statement full of `$n IS NULL OR ...`: PostgreSQL plans each
shape for the indexes it can use, which a catch-all statement defeats.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from sluiceway.controls.attributes import Op, TypedFilter
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.store.attributes import COLUMNS
from sluiceway.store.attributes import of_runs as attributes_of_runs
from sluiceway.store.runs import shown_status


@dataclass(frozen=True)
class Position:
    """Where a page ends: the (created_at, id) of its last row."""

    created_at: datetime.datetime
    id: uuid.UUID


@dataclass(frozen=True)
class RunFilter:
    workflow: str | None = None
    version: int | None = None
    statuses: tuple[RunStatus, ...] = ()
    started_after: datetime.datetime | None = None
    started_before: datetime.datetime | None = None
    ended_after: datetime.datetime | None = None
    ended_before: datetime.datetime | None = None
    correlation_id: str | None = None
    parent: uuid.UUID | None = None
    workflow_run: str | None = None
    restarted_from: uuid.UUID | None = None
    awaiting_admission: bool | None = None
    sla_breached: bool | None = None
    attributes: tuple[TypedFilter, ...] = ()


@dataclass(frozen=True)
class RunRow:
    id: str
    workflow_name: str
    workflow_version: int
    status: RunStatus
    awaiting_admission: bool
    reason: str
    correlation_id: str | None
    parent_execution_id: str | None
    resource_name: str | None
    created_at: datetime.datetime
    ended_at: datetime.datetime | None
    paused_at: datetime.datetime | None
    sla_breached_at: datetime.datetime | None
    quarantined: bool
    attributes: dict[str, Any] = field(default_factory=dict)
    priority: int = 3


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    next: Position | None  # None: this was the last page


class _Where:
    """Conditions and their parameters, numbered as they are added."""

    def __init__(self, *args: Any) -> None:
        self.args: list[Any] = list(args)
        self.conditions: list[str] = []

    def param(self, value: Any) -> str:
        self.args.append(value)
        return f"${len(self.args)}"

    def add(self, condition: str) -> None:
        self.conditions.append(condition)

    def sql(self) -> str:
        return " AND ".join(self.conditions)


_OPS = {Op.EQ: "=", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}
_PG_TYPES = {
    "keyword": "text",
    "int_value": "bigint",
    "double_value": "float8",
    "bool_value": "bool",
    "time_value": "timestamptz",
}


def _attribute_condition(where: _Where, alias: str, condition: TypedFilter) -> str:
    column = COLUMNS[condition.type]
    name = where.param(condition.name)
    if condition.op is Op.IN:
        values = where.param(list(condition.values))
        test = f"{alias}.{column} = ANY({values}::{_PG_TYPES[column]}[])"
    else:
        test = f"{alias}.{column} {_OPS[condition.op]} {where.param(condition.values[0])}"
    return f"{alias}.namespace = $1 AND {alias}.name = {name} AND {test}"


def _status_condition(where: _Where, statuses: tuple[RunStatus, ...]) -> str:
    parts = []
    stored = [s.value for s in statuses if s not in (RunStatus.RUNNING, RunStatus.PAUSED)]
    if len(stored) == 1:  # one value: an equality, which the status index serves in page order
        parts.append(f"e.status = {where.param(stored[0])}")
    elif stored:
        parts.append(f"e.status = ANY({where.param(stored)}::text[])")
    if RunStatus.RUNNING in statuses and RunStatus.PAUSED in statuses:
        parts.append("e.status = 'RUNNING'")
    elif RunStatus.RUNNING in statuses:
        parts.append("(e.status = 'RUNNING' AND e.paused_at IS NULL)")
    elif RunStatus.PAUSED in statuses:
        parts.append("(e.status = 'RUNNING' AND e.paused_at IS NOT NULL)")
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def _run_conditions(where: _Where, f: RunFilter) -> None:
    simple = (
        (f.workflow, "e.workflow_name = {}"),
        (f.version, "e.workflow_version = {}"),
        (f.started_after, "e.created_at >= {}"),
        (f.started_before, "e.created_at < {}"),
        (f.ended_after, "e.ended_at >= {}"),
        (f.ended_before, "e.ended_at < {}"),
        (f.correlation_id, "e.correlation_id = {}"),
        (f.parent, "e.parent_execution_id = {}"),
        (f.workflow_run, "e.resource_name = {}"),
        (f.restarted_from, "e.restarted_from = {}"),
    )
    for value, template in simple:
        if value is not None:
            where.add(template.format(where.param(value)))
    if f.statuses:
        where.add(_status_condition(where, f.statuses))
    if f.awaiting_admission is not None:
        where.add("e.awaiting_admission" if f.awaiting_admission else "NOT e.awaiting_admission")
    if f.sla_breached is not None:
        where.add(f"e.sla_breached_at IS {'NOT ' if f.sla_breached else ''}NULL")


_RUN_COLUMNS = """e.id, e.workflow_name, e.workflow_version, e.status, e.awaiting_admission,
       left(e.reason, 512) AS reason, e.correlation_id, e.parent_execution_id, e.resource_name,
       e.created_at, e.ended_at, e.paused_at, e.sla_breached_at, e.quarantined_at IS NOT NULL AS quarantined,
       e.priority"""


def runs_query(
    namespace: str, f: RunFilter, after: Position | None, limit: int, ascending: bool = False
) -> tuple[str, list[Any]]:
    """The statement and parameters of one page of runs (exposed for EXPLAIN in tests and the benchmark)."""
    where = _Where(namespace)
    where.add("e.namespace = $1")
    _run_conditions(where, f)
    # An equality on an attribute drives the page from that attribute's index,
    # in page order; the other attribute filters are checked per run.
    driver = next((c for c in f.attributes if c.op is Op.EQ), None)
    order = "ASC" if ascending else "DESC"
    compare = ">" if ascending else "<"
    if driver is not None:
        source = "run_attributes d JOIN executions e ON e.id = d.run_id"
        where.add(_attribute_condition(where, "d", driver))
        keys = ("d.created_at", "d.run_id")
    else:
        source = "executions e"
        keys = ("e.created_at", "e.id")
    for condition in f.attributes:
        if condition is not driver:
            where.add(
                f"EXISTS (SELECT 1 FROM run_attributes a WHERE a.run_id = e.id AND "
                f"{_attribute_condition(where, 'a', condition)})"
            )
    if after is not None:
        where.add(f"({keys[0]}, {keys[1]}) {compare} ({where.param(after.created_at)}, {where.param(after.id)})")
    sql = (
        f"SELECT {_RUN_COLUMNS}\n  FROM {source}\n WHERE {where.sql()}\n"
        f" ORDER BY {keys[0]} {order}, {keys[1]} {order}\n LIMIT {where.param(limit + 1)}"
    )
    return sql, where.args


async def runs(
    conn: asyncpg.Connection,
    namespace: str,
    f: RunFilter,
    *,
    after: Position | None = None,
    limit: int = 50,
    ascending: bool = False,
) -> Page:
    sql, args = runs_query(namespace, f, after, limit, ascending)
    rows = await conn.fetch(sql, *args)
    more = len(rows) > limit
    rows = rows[:limit]
    found = await attributes_of_runs(conn, namespace, [r["id"] for r in rows])
    page = [
        RunRow(
            id=str(r["id"]),
            workflow_name=r["workflow_name"],
            workflow_version=r["workflow_version"],
            status=shown_status(r["status"], r["paused_at"]),
            awaiting_admission=r["awaiting_admission"],
            reason=r["reason"],
            correlation_id=r["correlation_id"],
            parent_execution_id=None if r["parent_execution_id"] is None else str(r["parent_execution_id"]),
            resource_name=r["resource_name"],
            created_at=r["created_at"],
            ended_at=r["ended_at"],
            paused_at=r["paused_at"],
            sla_breached_at=r["sla_breached_at"],
            quarantined=r["quarantined"],
            attributes=found[r["id"]],
            priority=r["priority"],
        )
        for r in rows
    ]
    last = rows[-1] if rows and more else None
    return Page(page, Position(last["created_at"], last["id"]) if last is not None else None)


# -- tasks -------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskFilter:
    statuses: tuple[TaskStatus, ...] = ()
    task_type: str | None = None
    worker_id: str | None = None
    execution_id: uuid.UUID | None = None
    reference_name: str | None = None
    type: str | None = None  # the engine's type: HUMAN, SIMPLE, HTTP, ...
    workflow: str | None = None  # the workflow of the task's run


@dataclass(frozen=True)
class TaskRow:
    id: str
    execution_id: str
    ref: str
    name: str
    type: str
    status: str
    attempt: int
    worker_id: str | None
    created_at: datetime.datetime
    leased_at: datetime.datetime | None
    ended_at: datetime.datetime | None
    reason: str
    workflow_name: str | None = None
    input: dict[str, Any] | None = None
    completed_by: str | None = None
    priority: int = 3


def tasks_query(
    namespace: str, f: TaskFilter, after: Position | None, limit: int, ascending: bool = False
) -> tuple[str, list[Any]]:
    where = _Where(namespace)
    where.add("t.namespace = $1")
    for value, template in (
        (f.task_type, "t.name = {}"),
        (f.worker_id, "t.worker_id = {}"),
        (f.execution_id, "t.execution_id = {}"),
        (f.reference_name, "t.ref = {}"),
        (f.type, "t.type = {}"),
        (f.workflow, "e.workflow_name = {}"),
    ):
        if value is not None:
            where.add(template.format(where.param(value)))
    if f.statuses:
        # Literals, not a parameter (the values are TaskStatus members): the pool plans generically
        # (store.database.open_pool), and only values it can see let it pick the failed tasks' index.
        listed = ",".join(sorted(s.value for s in f.statuses))
        where.add(f"t.status = ANY('{{{listed}}}'::text[])")
    order, compare = ("ASC", ">") if ascending else ("DESC", "<")
    if after is not None:
        where.add(f"(t.created_at, t.id) {compare} ({where.param(after.created_at)}, {where.param(after.id)})")
    sql = (
        "SELECT t.id, t.execution_id, t.ref, t.name, t.type, t.status, t.attempt, t.worker_id, t.created_at,\n"
        "       t.leased_at, t.ended_at, left(t.reason, 512) AS reason, e.workflow_name, t.input, t.completed_by,\n"
        "       t.priority\n"
        "  FROM tasks t LEFT JOIN executions e ON e.id = t.execution_id\n"
        f" WHERE {where.sql()}\n ORDER BY t.created_at {order}, t.id {order}\n"
        f" LIMIT {where.param(limit + 1)}"
    )
    return sql, where.args


async def tasks(
    conn: asyncpg.Connection,
    namespace: str,
    f: TaskFilter,
    *,
    after: Position | None = None,
    limit: int = 50,
    ascending: bool = False,
) -> Page:
    sql, args = tasks_query(namespace, f, after, limit, ascending)
    rows = await conn.fetch(sql, *args)
    more = len(rows) > limit
    rows = rows[:limit]
    page = [
        TaskRow(
            id=str(r["id"]),
            execution_id=str(r["execution_id"]),
            ref=r["ref"],
            name=r["name"],
            type=r["type"],
            status=r["status"],
            attempt=r["attempt"],
            worker_id=r["worker_id"],
            created_at=r["created_at"],
            leased_at=r["leased_at"],
            ended_at=r["ended_at"],
            reason=r["reason"],
            workflow_name=r["workflow_name"],
            input=r["input"],
            completed_by=r["completed_by"],
            priority=r["priority"],
        )
        for r in rows
    ]
    last = rows[-1] if rows and more else None
    return Page(page, Position(last["created_at"], last["id"]) if last is not None else None)
