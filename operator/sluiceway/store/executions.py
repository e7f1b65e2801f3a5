"""Runs: starting them, reading them, asking for termination, waking the
decider."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.model.execution import RunStatus, TaskOverride
from sluiceway.model.workflow import iter_tasks
from sluiceway.store import admission, workflows

DECIDE_CHANNEL = "sluiceway_decide"
READY_CHANNEL = "sluiceway_ready"


SLOT_FREED = "#slot"  # a payload suffix: one slot freed, so wake one waiter, not all of them


def released(rows: str) -> str:
    """A CTE body that wakes the pollers of gated queues whose tasks in `rows`
    (namespace, name, holds) just left IN_PROGRESS: their queue, and every
    semaphore they held, one notification per freed slot. Ungated leases have
    NULL holds and wake nobody."""
    # Numbered: PostgreSQL folds identical payloads of one transaction into one notification.
    return f"""
    SELECT pg_notify('{READY_CHANNEL}', key || '{SLOT_FREED}' || row_number() OVER ()) FROM (
        SELECT namespace || '/' || name AS key FROM {rows} WHERE holds IS NOT NULL
        UNION ALL
        SELECT namespace || '/@sem:' || semaphore FROM {rows}, unnest(holds) AS semaphore
    ) keys"""


@dataclass(frozen=True)
class Started:
    id: str
    status: RunStatus
    awaiting_admission: bool = False
    created: bool = True  # False when the id already existed (an idempotent retry)


# A start a gate refused, saying which and with what numbers.
Refused = admission.Refusal


@dataclass(frozen=True)
class WorkflowNotFound:
    name: str
    version: int | None

    @property
    def message(self) -> str:
        pinned = f" version {self.version}" if self.version is not None else ""
        return f"workflow {self.name}{pinned} not found"


@dataclass(frozen=True)
class InvalidOverrides:
    """A start's taskOverrides name a reference its workflow version does not have."""

    field: str
    message: str


StartOutcome = Started | Refused | WorkflowNotFound | InvalidOverrides


@dataclass(frozen=True)
class ChainLink:
    """Where a continued run sits in its chain: the chain (its first run's id),
    the run it continues, and the chain's deadline, carried verbatim."""

    chain_id: uuid.UUID
    previous_run_id: uuid.UUID
    deadline_at: datetime.datetime | None


# A run that continues none starts a chain of its own: chain_id is its id.
_INSERT_RUN = """
INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, input, correlation_id,
                        resource_name, parent_execution_id, parent_task_id, sla_at, admission_key,
                        awaiting_admission, schedule_name, chain_id, previous_run_id, chain_deadline_at,
                        task_overrides)
VALUES ($1, $2, $3, $4, 'RUNNING', $5, $6, $7, $8, $9,
        CASE WHEN $10::int > 0 THEN now() + make_interval(secs => $10::int) END, $11, $12,
        $13, coalesce($14::uuid, $1::uuid), $15, $16, $17)
ON CONFLICT (id) DO NOTHING
RETURNING id
"""
_EXISTING = "SELECT status, awaiting_admission FROM executions WHERE id = $1"
_ENQUEUE = "INSERT INTO decide_queue (execution_id, event) VALUES ($1, $2)"
_ENQUEUE_MANY = "INSERT INTO decide_queue (execution_id, event) SELECT unnest($1::uuid[]), $2"
_NOTIFY_DECIDER = f"SELECT pg_notify('{DECIDE_CHANNEL}', '')"


async def enqueue_decide(conn: asyncpg.Connection, execution_id: str | uuid.UUID, event: str) -> None:
    await conn.execute(_ENQUEUE, _uuid(execution_id), event)
    await conn.execute(_NOTIFY_DECIDER)


async def enqueue_decides(conn: asyncpg.Connection, execution_ids: list[uuid.UUID], event: str) -> None:
    if execution_ids:
        await conn.execute(_ENQUEUE_MANY, execution_ids, event)
        await conn.execute(_NOTIFY_DECIDER)


def _uuid(value: str | uuid.UUID) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


async def start_run(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    version: int | None,
    input: dict[str, Any],
    *,
    correlation_id: str | None = None,
    run_id: str | None = None,
    resource_name: str | None = None,
    parent: tuple[uuid.UUID, uuid.UUID] | None = None,
    schedule: str | None = None,
    chain: ChainLink | None = None,
    task_overrides: Mapping[str, TaskOverride] | None = None,
) -> StartOutcome:
    """Create a run and wake the decider, in the caller's transaction.

    `run_id` makes the start idempotent (a WorkflowRun passes its uid, a
    schedule one derived from the fire): a second start with the same id
    returns the existing run. `schedule` names the Schedule that started it;
    `chain` links a continue-as-new run to the run it continues.
    `task_overrides` must name references of the version the run starts on."""
    found = await workflows.find_version(conn, namespace, name, version)
    if found is None:
        return WorkflowNotFound(name, version)
    overrides = dict(task_overrides or {})
    if overrides and found.spec is not None:
        known = {t.task_reference_name for t in iter_tasks(found.spec.tasks)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            return InvalidOverrides(
                f"taskOverrides.{unknown[0]}",
                f"workflow {name} version {found.version} has no task {unknown[0]!r}",
            )
    execution_id = _uuid(run_id) if run_id else uuid.uuid4()
    existing = await conn.fetchrow(_EXISTING, execution_id)
    if existing is not None:
        return Started(str(execution_id), RunStatus(existing["status"]), existing["awaiting_admission"], False)
    spec = found.spec  # None when it no longer parses: the run starts, and the decider quarantines it
    refusal: Refused | None = await admission.check_quotas(conn, namespace)
    if refusal is None and spec is not None:
        refusal = await admission.check_max_concurrent(conn, namespace, name, spec)
    if refusal is not None:
        return refusal
    admitted = await admission.admit(conn, namespace, name, spec, input) if spec else admission.Admission(None, False)
    sla = spec.sla_seconds if spec else 0
    parent_run, parent_task = parent if parent else (None, None)
    inserted = await conn.fetchval(
        _INSERT_RUN,
        execution_id,
        namespace,
        name,
        found.version,
        input,
        correlation_id,
        resource_name,
        parent_run,
        parent_task,
        sla,
        admitted.key,
        admitted.awaiting,
        schedule,
        chain.chain_id if chain else None,
        chain.previous_run_id if chain else None,
        chain.deadline_at if chain else None,
        {ref: o.model_dump(mode="json", by_alias=True, exclude_none=True) for ref, o in overrides.items()},
    )
    if inserted is None:  # raced with an identical start
        row = await conn.fetchrow(_EXISTING, execution_id)
        return Started(str(execution_id), RunStatus(row["status"]), row["awaiting_admission"], False)
    await enqueue_decide(conn, execution_id, "started")
    return Started(str(execution_id), RunStatus.RUNNING, admitted.awaiting)


@dataclass(frozen=True)
class RunView:
    id: str
    namespace: str
    workflow_name: str
    workflow_version: int
    status: RunStatus
    input: dict[str, Any]
    output: dict[str, Any]
    reason: str
    correlation_id: str | None
    awaiting_admission: bool
    resource_name: str | None
    parent_execution_id: str | None
    created_at: datetime.datetime
    ended_at: datetime.datetime | None
    sla_breached_at: datetime.datetime | None
    quarantined_at: datetime.datetime | None = None
    quarantine_reason: str | None = None
    schedule_name: str | None = None
    chain_id: str | None = None
    previous_run_id: str | None = None
    next_run_id: str | None = None
    chain_deadline_at: datetime.datetime | None = None


@dataclass(frozen=True)
class TaskView:
    id: str
    ref: str
    type: str
    name: str
    status: str
    attempt: int
    reason: str
    input: dict[str, Any]
    output: dict[str, Any]
    worker_id: str | None
    created_at: datetime.datetime
    available_at: datetime.datetime
    leased_at: datetime.datetime | None
    ended_at: datetime.datetime | None
    child_execution_id: str | None
    loop_ref: str | None = None
    iteration: int | None = None
    snooze_count: int = 0
    interrupt_count: int = 0
    completed_by: str | None = None


_GET_RUN = """
SELECT id, namespace, workflow_name, workflow_version, status, input, output, reason, correlation_id,
       awaiting_admission, resource_name, parent_execution_id, created_at, ended_at, sla_breached_at,
       quarantined_at, quarantine_reason, schedule_name, chain_id, previous_run_id, chain_deadline_at,
       (SELECT n.id FROM executions n WHERE n.previous_run_id = e.id LIMIT 1) AS next_run_id
  FROM executions e WHERE id = $1 AND namespace = $2
"""
_GET_TASKS = """
SELECT id, ref, type, name, status, attempt, reason, input, output, worker_id, created_at, available_at,
       leased_at, ended_at, child_execution_id, loop_ref, iteration, snooze_count, interrupt_count, completed_by
  FROM tasks WHERE execution_id = $1 ORDER BY created_at, ref, attempt
"""


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


async def get_run(conn: asyncpg.Connection, namespace: str, execution_id: str) -> RunView | None:
    try:
        key = _uuid(execution_id)
    except ValueError:
        return None
    row = await conn.fetchrow(_GET_RUN, key, namespace)
    if row is None:
        return None
    values = dict(row)
    values["id"] = str(values["id"])
    values["status"] = RunStatus(values["status"])
    for column in ("parent_execution_id", "chain_id", "previous_run_id", "next_run_id"):
        values[column] = _str_or_none(values[column])
    return RunView(**values)


async def get_tasks(conn: asyncpg.Connection, execution_id: str) -> list[TaskView]:
    rows = await conn.fetch(_GET_TASKS, _uuid(execution_id))
    views = []
    for row in rows:
        values = dict(row)
        values["id"] = str(values["id"])
        values["child_execution_id"] = _str_or_none(values["child_execution_id"])
        views.append(TaskView(**values))
    return views


_REQUEST_TERMINATION = """
UPDATE executions SET terminate_requested = $3
 WHERE id = $1 AND namespace = $2 AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""


async def request_termination(conn: asyncpg.Connection, namespace: str, execution_id: str, reason: str) -> bool:
    """Ask the decider to end a running run; False if it is not running."""
    key = _uuid(execution_id)
    found = await conn.fetchval(_REQUEST_TERMINATION, key, namespace, reason)
    if found is None:
        return False
    await enqueue_decide(conn, key, "terminate")
    return True


_RELEASE = """
UPDATE executions SET quarantined_at = NULL, quarantine_reason = NULL, mirror_seq = mirror_seq + 1
 WHERE id = $1 AND namespace = $2 AND quarantined_at IS NOT NULL
RETURNING id
"""


async def release_quarantine(conn: asyncpg.Connection, namespace: str, execution_id: str) -> bool:
    """Let the decider take a quarantined run again (once its cause is fixed);
    False if it was not quarantined. The caller wakes the decider."""
    return await conn.fetchval(_RELEASE, _uuid(execution_id), namespace) is not None


_TASK_COUNTS = """
SELECT status, count(*) AS n FROM (
    SELECT DISTINCT ON (ref) status FROM tasks WHERE execution_id = $1 ORDER BY ref, attempt DESC
) latest GROUP BY status
"""


async def task_counts(conn: asyncpg.Connection, execution_id: str) -> dict[str, int]:
    """Latest attempt of each task, counted by status."""
    return {row["status"]: int(row["n"]) for row in await conn.fetch(_TASK_COUNTS, _uuid(execution_id))}


_TERMINATE_ALL = """
UPDATE executions SET terminate_requested = $3
 WHERE namespace = $1 AND workflow_name = $2 AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""


async def terminate_all(conn: asyncpg.Connection, namespace: str, workflow_name: str, reason: str) -> int:
    """Ask the decider to end every running run of a workflow."""
    ids = [r["id"] for r in await conn.fetch(_TERMINATE_ALL, namespace, workflow_name, reason)]
    await enqueue_decides(conn, ids, "terminate")
    return len(ids)
