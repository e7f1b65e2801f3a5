"""The long-polling worker of bench/latency.py: one SDK worker whose handlers
note when they start and end (epoch seconds, the host clock PostgreSQL also
reads), written to $BENCH_TRACE_DIR at exit."""

from __future__ import annotations

import atexit
import json
import os
import time

from sluiceway.worker import Task, Worker

TRACE_DIR = os.environ.get("BENCH_TRACE_DIR")
# Long polls of 5 s: a stop waits for the poll in flight, within the 10 s the bench grants.
CLASSIC = os.environ.get("BENCH_CLASSIC") == "1"  # the SDK before results leased the next tasks
worker = Worker(poll_timeout=5, result_batch=1, lease_with_results=not CLASSIC, reports_in_flight=1 if CLASSIC else 4)
trace: list[tuple[str, float, float]] = []


@atexit.register
def _write_trace() -> None:
    if TRACE_DIR:
        with open(os.path.join(TRACE_DIR, f"latency-{os.getpid()}.json"), "w") as out:
            json.dump(trace, out)


@worker.task("lat", concurrency=4)
async def lat(task: Task) -> None:
    started = time.time()
    trace.append((task.task_id, started, time.time()))
