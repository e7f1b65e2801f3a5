"""The Python SDK's conformance program (sdk/conformance/README.md): the
handlers every SDK registers, on `sluiceway.worker.Worker`, and start-and-wait
through `sluiceway.worker.Client`.

    python sdk/conformance/python_conformance.py worker
    python sdk/conformance/python_conformance.py start <workflow> <input-json> <wait-seconds>

Configured by SLUICEWAY_URL, SLUICEWAY_NAMESPACE, SLUICEWAY_TOKEN,
SLUICEWAY_WORKER_ID and SLUICEWAY_SHUTDOWN_GRACE only."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

from sluiceway.worker import Client, RetryAfter, RunFailed, Snooze, StillRunning, Task, TerminalError, Worker
from sluiceway.worker.client import WorkerApiError

CONCURRENCY = 4


def conformance_worker(env: dict[str, str]) -> Worker:
    worker = Worker(
        env["SLUICEWAY_URL"],
        env["SLUICEWAY_NAMESPACE"],
        worker_id=env.get("SLUICEWAY_WORKER_ID") or None,
        token=env.get("SLUICEWAY_TOKEN") or None,
        shutdown_grace=float(env.get("SLUICEWAY_SHUTDOWN_GRACE") or 30),
        poll_timeout=5,
    )
    snoozed: set[str] = set()  # task ids this process has snoozed once

    @worker.task("conformance_echo", concurrency=CONCURRENCY)
    async def echo(task: Task) -> dict[str, Any]:
        return {"echo": task.input, "attempt": task.attempt}

    @worker.task("conformance_flaky", concurrency=CONCURRENCY)
    async def flaky(task: Task) -> dict[str, Any]:
        if task.attempt < int(task.input.get("succeedOnAttempt", 1)):
            raise RuntimeError(f"flaky attempt {task.attempt}")
        return {"attempt": task.attempt}

    @worker.task("conformance_terminal", concurrency=CONCURRENCY)
    async def terminal(task: Task) -> None:
        raise TerminalError(f"INVALID_ARGUMENT: {task.input.get('why', '')}")

    @worker.task("conformance_retry_after", concurrency=CONCURRENCY)
    async def retry_after(task: Task) -> dict[str, Any]:
        if task.attempt == 1:
            raise RetryAfter(float(task.input.get("seconds", 1)))
        return {"attempt": task.attempt}

    @worker.task("conformance_snooze", concurrency=CONCURRENCY)
    async def snooze(task: Task) -> dict[str, Any]:
        if task.task_id not in snoozed:
            snoozed.add(task.task_id)
            raise Snooze(float(task.input.get("seconds", 1)))
        return {"snoozed": True}

    @worker.task("conformance_heartbeat", concurrency=CONCURRENCY)
    async def heartbeat(task: Task) -> dict[str, Any]:
        seconds = task.input.get("seconds", 1)
        await asyncio.sleep(float(seconds))  # the Worker beats for every task in flight
        return {"slept": seconds}

    @worker.task("conformance_log", concurrency=CONCURRENCY)
    async def log(task: Task) -> dict[str, Any]:
        task.log("first line")
        task.log(f"second line {task.input.get('tag', '')}")
        return {}

    @worker.task("conformance_slow", concurrency=CONCURRENCY)
    async def slow(task: Task) -> dict[str, Any]:
        # Shutdown cancels this sleep after the grace period; the Worker then hands the task back INTERRUPTED.
        await asyncio.sleep(float(task.input.get("seconds", 1)))
        return {"attempt": task.attempt}

    @worker.task("conformance_big", concurrency=CONCURRENCY)
    async def big(task: Task) -> dict[str, Any]:
        size = int(task.input.get("bytes", 0))
        return {"blob": "x" * max(0, size - len('{"blob":""}'))}

    @worker.task("conformance_trace", concurrency=CONCURRENCY)
    async def traced(task: Task) -> dict[str, Any]:
        return {"traceparent": task.traceparent}

    @worker.task("conformance_attributes", concurrency=CONCURRENCY)
    async def attributes(task: Task) -> dict[str, Any]:
        task.upsert_search_attributes(stage=task.input.get("stage"))
        return {}

    return worker


async def start(env: dict[str, str], workflow: str, input: dict[str, Any], wait: float) -> tuple[int, dict[str, Any]]:
    """Start and wait: the line to print and the exit code."""
    async with Client(env["SLUICEWAY_URL"], env["SLUICEWAY_NAMESPACE"], token=env.get("SLUICEWAY_TOKEN") or None) as c:
        request_id = str(uuid.uuid4())
        try:
            output = await c.execute(workflow, input, timeout=wait, request_id=request_id)
        except StillRunning as still:
            return 0, {"id": still.run_id, "status": "RUNNING"}
        except RunFailed as failed:
            return 0, {"id": failed.run_id, "status": failed.status, "output": failed.output}
        except WorkerApiError as refused:
            return 1, {"error": str(refused.status), "message": str(refused)}
        # execute gives the output only; the same request id finds the same run, to name it.
        run = await c.start(workflow, input, request_id=request_id)
    return 0, {"id": run["id"], "status": "COMPLETED", "output": output}


def main(argv: list[str]) -> int:
    env = dict(os.environ)
    if argv[:1] == ["worker"] and len(argv) == 1:
        conformance_worker(env).run_forever()
        return 0
    if argv[:1] == ["start"] and len(argv) == 4:
        code, line = asyncio.run(start(env, argv[1], json.loads(argv[2]), float(argv[3])))
        print(json.dumps(line), flush=True)
        return code
    print(f"usage: {sys.argv[0]} worker | start <workflow> <input-json> <wait-seconds>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
