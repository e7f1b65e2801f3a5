"""A real SDK worker against the HTTP API and PostgreSQL, logging as the
`sluiceway worker` command sets it up: JSON lines, and every line about a
task (its handler's, the SDK's own) names the run, the task, the epoch and
the run's trace."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.worker import Task, Worker
from sluiceway.worker import logs as worker_logs
from sluiceway.worker.cli import load_worker
from tests.support.plane import Plane, Running, finished, get, post
from tests.support.store import NS, define_task, define_workflow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def worker_stderr() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    worker_logs.configure("INFO", "json", stream)
    yield stream
    root.handlers[:], root.level = saved


async def test_every_line_about_a_task_names_its_run_task_and_trace(plane: Plane, worker_stderr: io.StringIO) -> None:
    await define_task(plane.pool, "receipt", retryCount=0)
    await define_workflow(
        plane.pool,
        "pay",
        [{"name": "charge", "taskReferenceName": "charge"}, {"name": "receipt", "taskReferenceName": "receipt"}],
    )
    seen: dict[str, Task] = {}
    worker = Worker(plane.url, NS, poll_timeout=2)

    @worker.task("charge")
    def charge(task: Task) -> dict[str, Any]:  # a sync handler: its thread carries the task's context
        seen["charge"] = task
        logging.getLogger("shop").info("charging the card")
        return {}

    @worker.task("receipt")
    async def receipt(task: Task) -> dict[str, Any]:
        seen["receipt"] = task
        return {"sent": {"a set is not JSON"}}  # the SDK logs a warning about this task, and fails it

    async with Running(worker):
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "pay"})
        run_id = started["id"]
        assert (await finished(plane, run_id))["status"] == "FAILED"
    lines = [json.loads(line) for line in worker_stderr.getvalue().splitlines()]
    charging = next(line for line in lines if line["message"] == "charging the card")
    not_json = next(line for line in lines if "output is not JSON" in line["message"])
    for line, ref in ((charging, "charge"), (not_json, "receipt")):
        task = seen[ref]
        assert line["run_id"] == run_id and line["task_id"] == task.task_id and line["epoch"] == task.epoch
        assert line["task_type"] == ref and line["trace_id"] == uuid.UUID(run_id).hex, "the run's trace"
    assert charging["logger"] == "shop" and not_json["logger"] == "sluiceway.worker.runner"
    polling = next(line for line in lines if line["message"].startswith("worker "))
    assert "run_id" not in polling, "a line about no task names none"


async def test_the_readme_s_album_run_logs_what_each_resize_did(plane: Plane, worker_stderr: io.StringIO) -> None:
    """The README's `sluiceway logs workflowrun/album-2026-11`: the example
    workers, run as `sluiceway worker examples/workers.py` runs them, on the
    thumbnails workflow and the album's input as the examples declare them."""
    documents = [*yaml.safe_load_all((EXAMPLES / "05-fan-out.yaml").read_text())]
    thumbnails = next(d for d in documents if d["kind"] == "Workflow")
    album = yaml.safe_load((EXAMPLES / "06-run.yaml").read_text())
    await define_workflow(plane.pool, "thumbnails", **thumbnails["spec"])
    worker = load_worker(str(EXAMPLES / "workers.py"))
    worker.url, worker.namespace, worker.poll_timeout = plane.url, NS, 2
    async with Running(worker):
        _, started = await post(
            plane, f"/v1/ns/{NS}/executions", {"name": "thumbnails", "input": album["spec"]["input"]}
        )
        assert (await finished(plane, started["id"]))["status"] == "COMPLETED"
    _, logged = await get(plane, f"/v1/ns/{NS}/executions/{started['id']}/logs")
    messages = [line["message"] for line in logged["lines"]]
    for image in album["spec"]["input"]["images"]:
        assert any(image["url"] in message for message in messages), (image, messages)
