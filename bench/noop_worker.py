"""A Sluiceway worker process that completes `noop` tasks as fast as it can."""

from __future__ import annotations

import os

from sluiceway.worker import Task, Worker

# BENCH_CLASSIC=1: the SDK as it was before results leased the next tasks (one report in flight).
CLASSIC = os.environ.get("BENCH_CLASSIC") == "1"
worker = Worker(
    poll_timeout=2,
    result_batch=int(os.environ.get("BENCH_BATCH", "50")),
    lease_with_results=not CLASSIC,
    reports_in_flight=1 if CLASSIC else 4,
)


@worker.task("noop", concurrency=int(os.environ.get("BENCH_BATCH", "50")))
async def noop(task: Task) -> None:
    return None
