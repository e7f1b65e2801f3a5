"""A Sluiceway worker process that completes `noop` tasks as fast as it can."""

from __future__ import annotations

import os

from sluiceway.worker import Task, Worker

worker = Worker(poll_timeout=2, result_batch=int(os.environ.get("BENCH_BATCH", "50")))


@worker.task("noop", concurrency=int(os.environ.get("BENCH_BATCH", "50")))
async def noop(task: Task) -> None:
    return None
