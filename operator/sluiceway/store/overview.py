"""What the web UI reads that the API has no query for: the namespaces there
are, runs counted by status, a run's attempts without their payloads (a
fan-out has thousands), one task's attempts with theirs, rate windows and
admission keys in use, and a workflow's versions."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

from sluiceway.store.runs import shown_status

_NAMESPACES = """
SELECT namespace FROM workflows UNION SELECT namespace FROM task_definitions
 UNION SELECT namespace FROM semaphores UNION SELECT namespace FROM quotas ORDER BY 1
"""
# Counted over the newest rows only, so the count of a namespace with
# millions of runs costs a bounded index scan; `capped` says when it stopped.
_STATUS_COUNTS = """
SELECT status, paused, count(*)::int AS n FROM (
    SELECT status, paused_at IS NOT NULL AS paused FROM executions
     WHERE namespace = $1 AND ($2::text IS NULL OR workflow_name = $2)
     ORDER BY created_at DESC LIMIT $3
) newest GROUP BY 1, 2
"""
_ATTEMPTS = """
SELECT ref, type, name, status, attempt, created_at, available_at, leased_at, ended_at
  FROM tasks WHERE execution_id = $1 ORDER BY created_at, ref, attempt
"""
_RATE_WINDOWS = """
SELECT DISTINCT ON (name) name, window_start, used FROM rate_windows
 WHERE namespace = $1 ORDER BY name, window_start DESC
"""
_ADMISSION_KEYS = """
SELECT workflow_name, admission_key,
       count(*) FILTER (WHERE awaiting_admission)::int AS waiting,
       count(*) FILTER (WHERE NOT awaiting_admission)::int AS admitted
  FROM executions WHERE namespace = $1 AND status = 'RUNNING' AND admission_key IS NOT NULL
 GROUP BY 1, 2 ORDER BY waiting DESC, admitted DESC, 1, 2 LIMIT $2
"""
_VERSIONS = """
SELECT version, created_at, spec FROM workflow_versions WHERE namespace = $1 AND name = $2
 ORDER BY version DESC LIMIT $3
"""
COUNT_LIMIT = 100_000
_PAUSED = datetime.datetime.min


@dataclass(frozen=True)
class StatusCounts:
    counts: dict[str, int]
    capped: bool  # counted over the newest COUNT_LIMIT runs only


@dataclass(frozen=True)
class AttemptRow:
    ref: str
    type: str
    name: str
    status: str
    attempt: int
    created_at: datetime.datetime
    available_at: datetime.datetime
    leased_at: datetime.datetime | None
    ended_at: datetime.datetime | None


@dataclass(frozen=True)
class RateWindow:
    name: str
    window_start: datetime.datetime
    used: int


@dataclass(frozen=True)
class AdmissionKey:
    workflow: str
    key: str
    waiting: int
    admitted: int


@dataclass(frozen=True)
class Version:
    version: int
    created_at: datetime.datetime
    spec: dict[str, Any]


async def namespaces(conn: asyncpg.Connection) -> list[str]:
    """Every namespace that defines something."""
    return [r["namespace"] for r in await conn.fetch(_NAMESPACES)]


async def status_counts(
    conn: asyncpg.Connection, namespace: str, workflow: str | None = None, limit: int = COUNT_LIMIT
) -> StatusCounts:
    counts: dict[str, int] = {}
    for row in await conn.fetch(_STATUS_COUNTS, namespace, workflow, limit):
        # shown_status needs only to know whether there is a pause time
        status = shown_status(row["status"], _PAUSED if row["paused"] else None).value
        counts[status] = counts.get(status, 0) + row["n"]
    return StatusCounts(counts, sum(counts.values()) >= limit)


async def attempts(conn: asyncpg.Connection, execution_id: str) -> list[AttemptRow]:
    """Every attempt of every task of a run, without input or output."""
    return [AttemptRow(**dict(r)) for r in await conn.fetch(_ATTEMPTS, uuid.UUID(execution_id))]


async def rate_windows(conn: asyncpg.Connection, namespace: str) -> dict[str, RateWindow]:
    """The latest window of each rate-limited task type."""
    return {
        r["name"]: RateWindow(r["name"], r["window_start"], r["used"])
        for r in await conn.fetch(_RATE_WINDOWS, namespace)
    }


async def admission_keys(conn: asyncpg.Connection, namespace: str, limit: int = 50) -> list[AdmissionKey]:
    """Admission keys of running runs, the ones with the most runs waiting first."""
    return [
        AdmissionKey(r["workflow_name"], r["admission_key"], r["waiting"], r["admitted"])
        for r in await conn.fetch(_ADMISSION_KEYS, namespace, limit)
    ]


async def versions(conn: asyncpg.Connection, namespace: str, name: str, limit: int = 20) -> list[Version]:
    return [
        Version(r["version"], r["created_at"], r["spec"]) for r in await conn.fetch(_VERSIONS, namespace, name, limit)
    ]
