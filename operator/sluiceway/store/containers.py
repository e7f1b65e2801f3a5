"""What CONTAINER tasks ask of the database besides leasing and results:
whether a pod's attempt is still the task's lease, the claim that lets one
replica adopt a pod nobody watches, and the WorkflowRun a run belongs to."""

from __future__ import annotations

import uuid

import asyncpg

from sluiceway.store.sql import STILL_LEASED

_CURRENT = f"""
SELECT t.epoch = $3 AND t.status = {STILL_LEASED} AS current,
       t.last_heartbeat_at < now() - make_interval(secs => $4) AS orphaned
  FROM tasks t
 WHERE t.namespace = $1 AND t.id = $2
"""

# The claim is the heartbeat itself, taken only when nobody has sent one for
# `stale` seconds: two replicas that both find the pod orphaned cannot both win.
_CLAIM = f"""
UPDATE tasks t
   SET last_heartbeat_at = now(),
       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0 THEN now() + make_interval(secs => t.heartbeat_timeout) END,
       lease_expires_at = now() + make_interval(secs => t.response_timeout)
 WHERE t.namespace = $1 AND t.id = $2 AND t.epoch = $3 AND t.status = {STILL_LEASED}
   AND t.last_heartbeat_at < now() - make_interval(secs => $4)
RETURNING t.id
"""

_RESOURCE = "SELECT resource_name FROM executions WHERE namespace = $1 AND id = $2"


async def lease_state(conn: asyncpg.Connection, namespace: str, task_id: str, epoch: int, stale_seconds: float) -> str:
    """'gone': the task is no longer leased under this epoch (the pod is
    fenced); 'orphaned': it is, and nobody has renewed it for `stale_seconds`;
    'watched': it is, and renewed recently; 'unknown': no such task here (the
    pod of another installation's database, or of a run already purged)."""
    try:
        key = uuid.UUID(task_id)
    except ValueError:
        return "unknown"
    row = await conn.fetchrow(_CURRENT, namespace, key, epoch, stale_seconds)
    if row is None:
        return "unknown"
    if not row["current"]:
        return "gone"
    return "orphaned" if row["orphaned"] else "watched"


async def claim(conn: asyncpg.Connection, namespace: str, task_id: str, epoch: int, stale_seconds: float) -> bool:
    """Take over an orphaned lease (renewing it); False when another replica
    did first, or it is no longer current."""
    return await conn.fetchval(_CLAIM, namespace, uuid.UUID(task_id), epoch, stale_seconds) is not None


async def run_resource(conn: asyncpg.Connection, namespace: str, run_id: str) -> str | None:
    """The name of the WorkflowRun that started this run, if one did."""
    try:
        key = uuid.UUID(run_id)
    except ValueError:
        return None
    value = await conn.fetchval(_RESOURCE, namespace, key)
    return None if value is None else str(value)
