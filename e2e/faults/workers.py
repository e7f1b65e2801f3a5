"""The fault suite's workers, run by `sluiceway worker` as separate processes.

Every handler journals what it did, one JSON line per event, written with a
single `write` on an O_APPEND file: the kernel has it the moment the call
returns, so a SIGKILL a microsecond later loses nothing. `start` when the
handler begins, `done` just before it hands back its outcome. The suite joins
these lines with the database's transition history afterwards.

How long a task takes and whether it fails are drawn from the suite's seed and
the task attempt, never from this process, so a re-delivered task behaves the
same whichever worker runs it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import Any

import orjson

from e2e.faults.workload import DURATIONS, FLAKY_FAILURE, FLAKY_REASON
from sluiceway.worker import Task, Worker

SEED = os.environ.get("FAULT_SEED", "0")
JOURNAL = os.open(os.environ.get("FAULT_JOURNAL", os.devnull), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
WORKER_ID = os.environ.get("SLUICEWAY_WORKER_ID", "")
worker = Worker(poll_timeout=5.0)


class JournalWarnings(logging.Handler):
    """The SDK's warnings and errors go into the journal too: a warning is a
    retry, an error means the SDK gave something up (a result, a lease)."""

    def emit(self, record: logging.LogRecord) -> None:
        line = {"ev": "log", "level": record.levelname, "message": record.getMessage()[:500], "worker": WORKER_ID}
        os.write(JOURNAL, orjson.dumps({**line, "at": record.created}) + b"\n")


logging.getLogger("sluiceway.worker").addHandler(JournalWarnings(logging.WARNING))


def journal(event: str, task: Task, **fields: Any) -> None:
    record = {
        "ev": event,
        "task": task.task_id,
        "epoch": task.epoch,
        "attempt": task.attempt,
        "type": task.task_type,
        "run": task.execution_id,
        "worker": WORKER_ID,
        "at": time.time(),
        **fields,
    }
    os.write(JOURNAL, orjson.dumps(record) + b"\n")


async def work(task: Task) -> dict[str, Any]:
    draw = random.Random(f"{SEED}:{task.task_id}")
    shortest, longest = DURATIONS[task.task_type]
    journal("start", task)
    await asyncio.sleep(draw.uniform(shortest, longest))
    if task.task_type == "flaky" and draw.random() < FLAKY_FAILURE:
        journal("done", task, outcome="failed")
        raise ConnectionError(f"{FLAKY_REASON} on attempt {task.attempt}")
    journal("done", task, outcome="completed")
    # A real handler would pass this to its side effect: the same for every attempt of the task.
    return {"by": WORKER_ID, "idempotencyKey": task.idempotency_key}


for task_type in DURATIONS:
    worker.task(task_type, concurrency=4)(work)
