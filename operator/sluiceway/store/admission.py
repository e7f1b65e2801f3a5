"""The gates a run passes at start, in the reference's order: namespace
quotas (QUOTA_EXCEEDED), `maxConcurrentExecutions` (LIMIT_EXCEEDED), then
per-key admission (`rateLimitConfig`: created RUNNING with
awaitingAdmission, admitted in order when a holder finishes). A refusal says
what refused and with which numbers; the edges map it to an HTTP status or a
WorkflowRun's status.

Each count and the insert it guards happen in one transaction under an
advisory lock on what is counted, so two concurrent starts can never both
take the last slot."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

import asyncpg

from sluiceway.controls.expressions import admission_key
from sluiceway.model.workflow import RateLimitConfig, WorkflowSpec
from sluiceway.store.sql import claim

# A concurrency refusal cannot know when a slot frees; this is a polite hint.
CONCURRENCY_RETRY_AFTER_SECONDS = 5

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
_QUOTAS = """
SELECT resource_name, max_concurrent_executions, max_executions_per_minute FROM quotas
 WHERE namespace = $1 AND (max_concurrent_executions IS NOT NULL OR max_executions_per_minute IS NOT NULL)
 ORDER BY resource_name
"""
_RUNNING_IN_NAMESPACE = "SELECT count(*) FROM executions WHERE namespace = $1 AND status = 'RUNNING'"
_STARTED_THIS_MINUTE = """
SELECT count(*), extract(epoch FROM date_trunc('minute', now()) + interval '1 minute' - now())
  FROM executions WHERE namespace = $1 AND created_at >= date_trunc('minute', now())
"""
_RUNNING_OF_WORKFLOW = (
    "SELECT count(*) FROM executions WHERE namespace = $1 AND workflow_name = $2 AND status = 'RUNNING'"
)
_ADMITTED_FOR_KEY = """
SELECT count(*) FROM executions
 WHERE namespace = $1 AND workflow_name = $2 AND admission_key = $3 AND status = 'RUNNING'
   AND NOT awaiting_admission
"""


@dataclass(frozen=True)
class QuotaExceeded:
    """A namespace Quota refused the start."""

    quota: str  # the Quota object
    field: str  # maxConcurrentExecutions or maxExecutionsPerMinute
    limit: int
    current: int
    retry_after_seconds: int

    code: ClassVar[str] = "QUOTA_EXCEEDED"

    @property
    def control(self) -> str:
        return f"quota:{self.quota}"

    @property
    def message(self) -> str:
        return (
            f"quota {self.quota}: {self.field} {self.limit} reached ({self.current} now); "
            f"retry in {self.retry_after_seconds} s"
        )

    def details(self) -> dict[str, Any]:
        """The refusal's facts, named as the reference names them."""
        return {
            "quota": self.quota,
            "field": self.field,
            "limit": self.limit,
            "current": self.current,
            "retryAfterSeconds": self.retry_after_seconds,
        }


@dataclass(frozen=True)
class LimitExceeded:
    """The workflow's maxConcurrentExecutions refused the start."""

    workflow: str
    limit: int
    current: int

    code: ClassVar[str] = "LIMIT_EXCEEDED"
    control: ClassVar[str] = "maxConcurrentExecutions"

    @property
    def message(self) -> str:
        return (
            f"LIMIT_EXCEEDED: workflow {self.workflow} already has {self.current} of maxConcurrentExecutions "
            f"{self.limit} runs"
        )

    def details(self) -> dict[str, Any]:
        return {"limit": self.limit, "current": self.current}


Refusal = QuotaExceeded | LimitExceeded


@dataclass(frozen=True)
class Admission:
    key: str | None
    awaiting: bool


async def check_quotas(conn: asyncpg.Connection, namespace: str) -> QuotaExceeded | None:
    quotas = await conn.fetch(_QUOTAS, namespace)
    if not quotas:
        return None  # an absent quota is unlimited
    await conn.execute(_LOCK, f"quota:{namespace}")
    running: int | None = None
    for quota in quotas:
        name = quota["resource_name"]
        if quota["max_concurrent_executions"] is not None:
            if running is None:
                running = int(await conn.fetchval(_RUNNING_IN_NAMESPACE, namespace))
            limit = quota["max_concurrent_executions"]
            if running >= limit:
                return QuotaExceeded(name, "maxConcurrentExecutions", limit, running, CONCURRENCY_RETRY_AFTER_SECONDS)
        if quota["max_executions_per_minute"] is not None:
            started, until_next = await conn.fetchrow(_STARTED_THIS_MINUTE, namespace)
            limit = quota["max_executions_per_minute"]
            if started >= limit:
                return QuotaExceeded(
                    name, "maxExecutionsPerMinute", limit, int(started), max(1, math.ceil(float(until_next)))
                )
    return None


async def check_max_concurrent(
    conn: asyncpg.Connection, namespace: str, workflow: str, spec: WorkflowSpec
) -> LimitExceeded | None:
    cap = spec.max_concurrent_executions
    if not cap:
        return None
    await conn.execute(_LOCK, f"workflow:{namespace}/{workflow}")
    running = int(await conn.fetchval(_RUNNING_OF_WORKFLOW, namespace, workflow))
    return LimitExceeded(workflow, cap, running) if running >= cap else None


async def admit(
    conn: asyncpg.Connection, namespace: str, workflow: str, spec: WorkflowSpec, run_input: dict[str, Any]
) -> Admission:
    config = spec.rate_limit_config
    if config is None:
        return Admission(None, False)
    key = admission_key(config.rate_limit_key, run_input)
    await conn.execute(_LOCK, f"admission:{namespace}/{workflow}/{key}")
    admitted = int(await conn.fetchval(_ADMITTED_FOR_KEY, namespace, workflow, key))
    return Admission(key, admitted >= config.concurrent_exec_limit)


_NEXT_WAITING = claim(
    "id",
    "executions",
    """namespace = $1 AND workflow_name = $2 AND admission_key = $3 AND status = 'RUNNING'
   AND awaiting_admission""",
    order_by="created_at, id",
    limit="$4",
)
_ADMIT_NEXT = f"""
UPDATE executions SET awaiting_admission = false, mirror_seq = mirror_seq + 1
 WHERE id IN ({_NEXT_WAITING})
RETURNING id
"""
_WAITING_KEYS = """
SELECT DISTINCT e.namespace, e.workflow_name, e.admission_key, v.spec->'rateLimitConfig' AS config
  FROM executions e
  JOIN workflows w ON w.namespace = e.namespace AND w.name = e.workflow_name
  JOIN workflow_versions v ON v.namespace = w.namespace AND v.name = w.name AND v.version = w.latest_version
 WHERE e.status = 'RUNNING' AND e.awaiting_admission
 LIMIT $1
"""


async def admit_waiting(
    conn: asyncpg.Connection, namespace: str, workflow: str, key: str, limit: int
) -> list[uuid.UUID]:
    """Admit the oldest waiting runs of one key while slots are free (in the
    caller's transaction); return their ids, to be decided."""
    await conn.execute(_LOCK, f"admission:{namespace}/{workflow}/{key}")
    admitted = int(await conn.fetchval(_ADMITTED_FOR_KEY, namespace, workflow, key))
    if admitted >= limit:
        return []
    return [r["id"] for r in await conn.fetch(_ADMIT_NEXT, namespace, workflow, key, limit - admitted)]


NO_LIMIT = 1_000_000  # the largest concurrentExecLimit a Workflow may set


async def rebalance(conn: asyncpg.Connection, batch: int = 100) -> list[uuid.UUID]:
    """Admit waiting runs wherever the latest limit leaves room: catches a
    raised limit, and a run that was being decided when a slot freed."""
    admitted: list[uuid.UUID] = []
    for row in await conn.fetch(_WAITING_KEYS, batch):
        # The workflow dropped its rateLimitConfig (or it no longer reads): admit everyone.
        limit = RateLimitConfig.limit_in(row["config"]) or NO_LIMIT
        admitted += await admit_waiting(conn, row["namespace"], row["workflow_name"], row["admission_key"], limit)
    return admitted
