"""The use cases of CONTAINER tasks beyond leasing and reporting (plane.dispatch):
is a pod's attempt still current, adopt an orphaned one, whose WorkflowRun."""

from __future__ import annotations

from sluiceway.plane.core import Plane
from sluiceway.store import containers


async def lease_state(plane: Plane, namespace: str, task_id: str, epoch: int, stale_seconds: float) -> str:
    """'gone', 'orphaned', 'watched' or 'unknown' (store.containers.lease_state)."""
    async with plane.pool.acquire() as conn:
        return await containers.lease_state(conn, namespace, task_id, epoch, stale_seconds)


async def claim(plane: Plane, namespace: str, task_id: str, epoch: int, stale_seconds: float) -> bool:
    async with plane.pool.acquire() as conn:
        return await containers.claim(conn, namespace, task_id, epoch, stale_seconds)


async def run_resource(plane: Plane, namespace: str, run_id: str) -> str | None:
    async with plane.pool.acquire() as conn:
        return await containers.run_resource(conn, namespace, run_id)
