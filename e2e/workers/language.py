"""Handlers for the workflow-language end-to-end tests, run by `sluiceway worker`."""

from __future__ import annotations

from typing import Any

from sluiceway.worker import Task, Worker

worker = Worker()


@worker.task("fetch_page", concurrency=2)
async def fetch_page(task: Task) -> dict[str, Any]:
    page = int(task.input["page"])
    return {"page": page, "more": page < int(task.input["pages"])}
