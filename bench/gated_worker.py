"""A Sluiceway worker process for bench/gated.py: handlers for every gated
task type, with enough concurrency that the gates, not the worker, bind.

Environment (set by gated.py): BENCH_CAPPED_TYPES (how many capped_N types),
BENCH_CAPPED_SLEEP and BENCH_SEMAPHORE_SLEEP (seconds each handler sleeps),
BENCH_CONCURRENCY (slots per type), BENCH_BATCH (results per report),
BENCH_CLASSIC=1 (no leases with results, one report in flight: the SDK before issue 15).
With BENCH_TRACE_DIR set, each handler's start and end (epoch seconds, the
host clock PostgreSQL also reads) are written there at exit, so gated.py can
split a lease's lifetime into delivery, handler and reporting."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import time

from sluiceway.worker import Task, Worker

CAPPED_TYPES = int(os.environ.get("BENCH_CAPPED_TYPES", "10"))
CAPPED_SLEEP = float(os.environ.get("BENCH_CAPPED_SLEEP", "0.1"))
SEMAPHORE_SLEEP = float(os.environ.get("BENCH_SEMAPHORE_SLEEP", "0.05"))
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "32"))

TRACE_DIR = os.environ.get("BENCH_TRACE_DIR")

# BENCH_CLASSIC=1: the SDK as it was before results leased the next tasks (one report in flight).
CLASSIC = os.environ.get("BENCH_CLASSIC") == "1"
worker = Worker(
    poll_timeout=5,
    result_batch=int(os.environ.get("BENCH_BATCH", "100")),
    lease_with_results=not CLASSIC,
    reports_in_flight=1 if CLASSIC else 4,
    # BENCH_LINGER: seconds every result waits for others to share its request (the SDK's own choice otherwise).
    result_linger=float(os.environ["BENCH_LINGER"]) if os.environ.get("BENCH_LINGER") else None,
)
trace: list[tuple[str, float, float]] = []


@atexit.register
def _write_trace() -> None:
    if TRACE_DIR:
        with open(os.path.join(TRACE_DIR, f"worker-{os.getpid()}.json"), "w") as out:
            json.dump(trace, out)


def _sleeper(seconds: float):  # type: ignore[no-untyped-def]
    async def handler(task: Task) -> None:
        started = time.time()
        await asyncio.sleep(seconds)
        trace.append((task.task_id, started, time.time()))

    return handler


for n in range(CAPPED_TYPES):
    worker.task(f"capped_{n}", concurrency=CONCURRENCY)(_sleeper(CAPPED_SLEEP))
for name in ("erp_a", "erp_b"):
    worker.task(name, concurrency=CONCURRENCY)(_sleeper(SEMAPHORE_SLEEP))


@worker.task("metered", concurrency=CONCURRENCY)
async def metered(task: Task) -> None:
    now = time.time()
    trace.append((task.task_id, now, now))
