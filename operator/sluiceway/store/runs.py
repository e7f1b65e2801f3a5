"""Reading runs: one run with its links, its tasks and their attempts, as
every edge shows them. Writes are elsewhere (starting and ending runs in
`executions`, acting on them in `operations`); these only read."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.model.execution import RunStatus


def shown_status(status: str, paused_at: datetime.datetime | None) -> RunStatus:
    """A run's status as the API shows it: a running run with a pause time is PAUSED."""
    if status == RunStatus.RUNNING.value and paused_at is not None:
        return RunStatus.PAUSED
    return RunStatus(status)


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
    request_id: str | None = None
    restarted_from: str | None = None
    paused_at: datetime.datetime | None = None
    pause_reason: str | None = None
    paused_seconds: float = 0.0
    timeout_at: datetime.datetime | None = None
    chain_deadline_at: datetime.datetime | None = None
    sla_seconds: int = 0
    sla_at: datetime.datetime | None = None
    retries: int = 0
    expires_at: datetime.datetime | None = None
    superseded: dict[str, int] | None = None
    parent_task_id: str | None = None
    schedule_name: str | None = None
    chain_id: str | None = None
    previous_run_id: str | None = None
    next_run_id: str | None = None
    priority: int = 3


@dataclass(frozen=True)
class TaskView:
    id: str
    ref: str
    type: str
    name: str
    status: str
    attempt: int
    epoch: int
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
    priority: int = 3


_GET_RUN = """
SELECT id, namespace, workflow_name, workflow_version, status, input, output, reason, correlation_id,
       awaiting_admission, resource_name, parent_execution_id, created_at, ended_at, sla_breached_at,
       quarantined_at, quarantine_reason, request_id, restarted_from, paused_at, pause_reason, paused_seconds,
       timeout_at, chain_deadline_at, sla_seconds, sla_at, retries, expires_at, superseded, parent_task_id,
       schedule_name, chain_id, previous_run_id, priority,
       (SELECT n.id FROM executions n WHERE n.previous_run_id = e.id LIMIT 1) AS next_run_id
  FROM executions e WHERE id = $1 AND namespace = $2
"""
_TASK_COLUMNS = """
SELECT id, ref, type, name, status, attempt, epoch, reason, input, output, worker_id, created_at, available_at,
       leased_at, ended_at, child_execution_id, loop_ref, iteration, snooze_count, interrupt_count, completed_by,
       priority
  FROM tasks"""
_GET_TASKS = _TASK_COLUMNS + " WHERE execution_id = $1 ORDER BY created_at, ref, attempt"
_GET_TASK_ATTEMPTS = _TASK_COLUMNS + " WHERE execution_id = $1 AND ref = $2 ORDER BY attempt"


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


async def get_run(conn: asyncpg.Connection, namespace: str, execution_id: str) -> RunView | None:
    try:
        key = uuid.UUID(str(execution_id))
    except ValueError:
        return None
    row = await conn.fetchrow(_GET_RUN, key, namespace)
    if row is None:
        return None
    values = dict(row)
    values["id"] = str(values["id"])
    values["status"] = shown_status(values["status"], values["paused_at"])
    ids = ("parent_execution_id", "restarted_from", "parent_task_id", "chain_id", "previous_run_id", "next_run_id")
    for column in ids:
        values[column] = _str_or_none(values[column])
    return RunView(**values)


def _task_view(row: asyncpg.Record) -> TaskView:
    values = dict(row)
    values["id"] = str(values["id"])
    values["child_execution_id"] = _str_or_none(values["child_execution_id"])
    return TaskView(**values)


async def get_tasks(conn: asyncpg.Connection, execution_id: str) -> list[TaskView]:
    """Every attempt of every task of a run, in the order they were made."""
    return [_task_view(row) for row in await conn.fetch(_GET_TASKS, uuid.UUID(str(execution_id)))]


async def task_attempts(conn: asyncpg.Connection, execution_id: str, ref: str) -> list[TaskView]:
    """One task reference's attempts, oldest first, with their payloads."""
    return [_task_view(row) for row in await conn.fetch(_GET_TASK_ATTEMPTS, uuid.UUID(str(execution_id)), ref)]


_TASK_COUNTS = """
SELECT status, count(*) AS n FROM (
    SELECT DISTINCT ON (ref) status FROM tasks WHERE execution_id = $1 ORDER BY ref, attempt DESC
) latest GROUP BY status
"""


async def task_counts(conn: asyncpg.Connection, execution_id: str) -> dict[str, int]:
    """Latest attempt of each task, counted by status."""
    return {row["status"]: int(row["n"]) for row in await conn.fetch(_TASK_COUNTS, uuid.UUID(str(execution_id)))}
