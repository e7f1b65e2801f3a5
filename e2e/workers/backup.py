"""Handlers for the backup and restore test (e2e/test_backup.py): `hold`
keeps its lease (heartbeating) for as long as BACKUP_HOLD is set, so a run is
in flight when the backup is taken; without it, it answers at once."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from sluiceway.worker import Task, Worker

worker = Worker()


@worker.task("quick")
async def quick(task: Task) -> dict[str, Any]:
    return {"doubled": task.input["count"] * 2}


@worker.task("hold", concurrency=4)
async def hold(task: Task) -> dict[str, Any]:
    if os.environ.get("BACKUP_HOLD"):
        await asyncio.sleep(3600)
    return {"count": task.input["count"], "attempt": task.attempt}
