"""The TypeScript SDK's conformance program (sdk/typescript, built by
hack/build-sdk-typescript.sh) against the real API: its worker leases,
retries, fails terminally and shuts down gracefully as the Python SDK does,
and its client starts runs with start-and-wait. The language-neutral
conformance suite covers every scenario; this is the SDK's own smoke test."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.store import definitions
from sluiceway.worker.cli import load_worker
from tests.support.plane import Plane, Running, finished, get, post
from tests.support.store import NS, define_task, define_workflow
from tests.support.waiting import eventually_async

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / ".run/sdk/typescript/conformance"


@pytest.fixture(scope="module")
def conformance() -> Path:
    """The conformance program, built (or found up to date) once per module."""
    subprocess.run(["bash", str(ROOT / "hack/build-sdk-typescript.sh")], check=True, timeout=600)
    return PROGRAM


class TsWorker:
    """`conformance worker` as a process, its output in a file shown on failure."""

    def __init__(self, program: Path, plane: Plane, log: Path, grace: float) -> None:
        self.program, self.log, self.grace = program, log, grace
        self.env = {
            **os.environ,
            "SLUICEWAY_URL": plane.url,
            "SLUICEWAY_NAMESPACE": NS,
            "SLUICEWAY_WORKER_ID": f"ts-{log.stem}",
            "SLUICEWAY_SHUTDOWN_GRACE": str(grace),
        }
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> TsWorker:
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                str(self.program), "worker", env=self.env, stdout=out, stderr=out
            )
        return self

    async def terminate(self) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        # The poll on its way is answered (10 s at most), then the grace period runs.
        return await asyncio.wait_for(self.process.wait(), timeout=self.grace + 30)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture
async def ts_worker(conformance: Path, plane: Plane, tmp_path: Path) -> AsyncIterator[TsWorker]:
    worker = await TsWorker(conformance, plane, tmp_path / "worker.log", grace=1).start()
    try:
        yield worker
    finally:
        if worker.process is not None and worker.process.returncode is None:
            worker.process.kill()
            await worker.process.wait()


async def run_program(program: Path, plane: Plane, *args: str) -> tuple[int, dict[str, Any]]:
    child = await asyncio.create_subprocess_exec(
        str(program),
        *args,
        env={**os.environ, "SLUICEWAY_URL": plane.url, "SLUICEWAY_NAMESPACE": NS},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=60)
    assert child.returncode is not None
    lines = stdout.decode().strip().splitlines()
    assert len(lines) == 1, (stdout, stderr)
    return child.returncode, json.loads(lines[0])


async def test_echo_through_the_typescript_client_and_worker(
    conformance: Path, plane: Plane, ts_worker: TsWorker
) -> None:
    echo = {"name": "conformance_echo", "taskReferenceName": "e", "inputParameters": {"n": "${workflow.input.n}"}}
    await define_workflow(
        plane.pool,
        "ts-echo",
        [echo],
        outputParameters={"echo": "${e.output.echo}", "attempt": "${e.output.attempt}"},
    )
    code, line = await run_program(conformance, plane, "start", "ts-echo", '{"n": 7}', "20")
    assert code == 0, ts_worker.output()
    assert line["status"] == "COMPLETED", (line, ts_worker.output())
    assert line["output"] == {"echo": {"n": 7}, "attempt": 1}


async def test_the_client_reports_a_refused_start(conformance: Path, plane: Plane) -> None:
    code, line = await run_program(conformance, plane, "start", "no-such-workflow", "{}", "5")
    assert code == 1
    assert line["error"] == "404" and line["message"]


async def test_flaky_attempts_are_retried_until_one_succeeds(plane: Plane, ts_worker: TsWorker) -> None:
    await define_task(plane.pool, "conformance_flaky", retryCount=3, retryLogic="FIXED", retryDelaySeconds=0)
    flaky = {"name": "conformance_flaky", "taskReferenceName": "f", "inputParameters": {"succeedOnAttempt": 3}}
    await define_workflow(plane.pool, "ts-flaky", [flaky])
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "ts-flaky"})
    run = await finished(plane, started["id"])
    assert run["status"] == "COMPLETED", ts_worker.output()
    tasks = run["tasks"]
    assert [t["status"] for t in tasks] == ["FAILED", "FAILED", "COMPLETED"]
    assert tasks[0]["reason"] == "Error: flaky attempt 1"
    assert tasks[2]["output"] == {"attempt": 3}


async def test_a_terminal_error_is_never_retried(plane: Plane, ts_worker: TsWorker) -> None:
    await define_task(plane.pool, "conformance_terminal", retryCount=5, retryDelaySeconds=0)
    terminal = {"name": "conformance_terminal", "taskReferenceName": "t", "inputParameters": {"why": "no such account"}}
    await define_workflow(plane.pool, "ts-terminal", [terminal])
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "ts-terminal"})
    run = await finished(plane, started["id"])
    assert run["status"] == "FAILED", ts_worker.output()
    [task] = run["tasks"]
    assert task["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert task["reason"] == "TerminalError: INVALID_ARGUMENT: no such account"


async def test_shutdown_hands_the_task_back_interrupted_and_the_next_worker_finishes_it(
    conformance: Path, plane: Plane, ts_worker: TsWorker, tmp_path: Path
) -> None:
    """SIGTERM: the slow task gets the grace period (1 s), then goes back
    INTERRUPTED, its attempt spent; the process exits 0; a replacement leases
    attempt 2 and finishes it (8 s, far longer than the grace)."""
    await define_task(plane.pool, "conformance_slow", retryCount=2, retryDelaySeconds=0)
    await define_workflow(
        plane.pool,
        "ts-slow",
        [{"name": "conformance_slow", "taskReferenceName": "s", "inputParameters": {"seconds": 8}}],
        outputParameters={"attempt": "${s.output.attempt}"},
    )
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "ts-slow"})

    async def task_in(status: str) -> dict[str, Any] | None:
        _, run = await get(plane, f"/v1/ns/{NS}/executions/{started['id']}")
        return next((t for t in run.get("tasks", []) if t["status"] == status), None)

    await eventually_async(lambda: task_in("IN_PROGRESS"), what="the slow task to be leased", timeout=20)
    assert await ts_worker.terminate() == 0, ts_worker.output()
    handed_back = await task_in("SCHEDULED")
    assert handed_back is not None, ts_worker.output()
    assert (handed_back["attempt"], handed_back["interruptCount"]) == (2, 1)

    second = await TsWorker(conformance, plane, tmp_path / "second.log", grace=30).start()
    try:
        run = await finished(plane, started["id"])
    finally:
        assert await second.terminate() == 0, second.output()
    assert run["status"] == "COMPLETED", second.output()
    assert run["output"] == {"attempt": 2}


EXAMPLES = ROOT / "examples"
EXAMPLE_WORKER = ROOT / ".run/sdk/typescript/example-worker"


def _example(path: str, kind: str) -> dict[str, Any]:
    documents = [*yaml.safe_load_all((EXAMPLES / path).read_text())]
    found: dict[str, Any] = next(d for d in documents if d["kind"] == kind)
    return found


async def _outputs_by_task(plane: Plane, workflow: str, input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The run's status and each task's output, its run id written RUN (receipts and keys name it)."""
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": workflow, "input": input})
    run = await finished(plane, started["id"])
    text = json.dumps({t["referenceName"]: t.get("output") for t in run["tasks"]})
    return run["status"], json.loads(text.replace(run["id"], "RUN").replace(run["id"][:8], "RUN"))


async def test_the_example_worker_gives_the_python_examples_outputs(
    conformance: Path, plane: Plane, tmp_path: Path
) -> None:
    """examples/workers.py and sdk/typescript/examples/worker.ts on the README's
    orders (paid, and declined) and thumbnails workflows: the same task outputs,
    the same search attribute, the same log lines kept by the server."""
    orders, payment = _example("15-orders.yaml", "Workflow"), _example("15-orders.yaml", "TaskDefinition")
    await define_task(plane.pool, payment["spec"]["name"], **{k: v for k, v in payment["spec"].items() if k != "name"})
    await define_workflow(plane.pool, "orders", **orders["spec"])
    await define_workflow(plane.pool, "thumbnails", **_example("05-fan-out.yaml", "Workflow")["spec"])
    order = yaml.safe_load((EXAMPLES / "16-order-run.yaml").read_text())["spec"]["input"]
    album = yaml.safe_load((EXAMPLES / "06-run.yaml").read_text())["spec"]["input"]
    cases = [("orders", order), ("orders", {**order, "card": "declined"}), ("thumbnails", album)]

    python = load_worker(str(EXAMPLES / "workers.py"))
    python.url, python.namespace, python.poll_timeout = plane.url, NS, 2
    async with Running(python):
        expected = [await _outputs_by_task(plane, workflow, input) for workflow, input in cases]

    env = {**os.environ, "SLUICEWAY_URL": plane.url, "SLUICEWAY_NAMESPACE": NS, "SLUICEWAY_WORKER_ID": "ts-examples"}
    log = tmp_path / "example-worker.log"
    with log.open("wb") as out:
        child = await asyncio.create_subprocess_exec(str(EXAMPLE_WORKER), env=env, stdout=out, stderr=out)
    try:
        seen = [await _outputs_by_task(plane, workflow, input) for workflow, input in cases]
        _, page = await get(plane, f"/v1/ns/{NS}/executions?workflow=orders&searchAttribute=stage%3Dshipped")
    finally:
        child.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(child.wait(), 40) == 0, log.read_text()[-3000:]
    assert seen == expected, log.read_text()[-3000:]
    assert [status for status, _ in seen] == ["COMPLETED", "FAILED", "COMPLETED"]
    assert len(page["items"]) == 2, "both paid orders (Python's and TypeScript's) reached stage=shipped"
    ts_run = page["items"][0]["id"]
    _, logged = await get(plane, f"/v1/ns/{NS}/executions/{ts_run}/logs")
    messages = [line["message"] for line in logged["lines"]]
    assert {"reserving 2 items", "charging 120 to visa", "parcel with 2 items handed to the carrier"} <= set(messages)


async def test_snooze_retry_after_heartbeats_logs_payload_limits_traces_and_attributes(
    plane: Plane, ts_worker: TsWorker
) -> None:
    """The rest of the conformance handlers, one run each, at once on one worker."""
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "tenant", 1, None, None, None, None, max_payload_bytes=4096)
    # A policy delay of a minute: only the handler's RetryAfter(1) brings attempt 2 in time.
    await define_task(plane.pool, "conformance_retry_after", retryCount=1, retryDelaySeconds=60)
    await define_task(plane.pool, "conformance_heartbeat", heartbeatTimeout=2, retryCount=0)
    cases: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "conformance_snooze": ({"seconds": 1}, {}),
        "conformance_retry_after": ({"seconds": 1}, {}),
        "conformance_heartbeat": ({"seconds": 5}, {}),
        "conformance_log": ({"tag": "t-1"}, {}),
        "conformance_big": ({"bytes": 10_000}, {}),
        "conformance_trace": ({}, {}),
        "conformance_attributes": ({"stage": "packed"}, {"searchAttributes": [{"name": "stage", "type": "keyword"}]}),
    }
    started = {}
    for task_type, (input, spec) in cases.items():
        task = {"name": task_type, "taskReferenceName": "t", "inputParameters": input}
        await define_workflow(plane.pool, task_type.replace("_", "-"), [task], **spec)
        _, started[task_type] = await post(plane, f"/v1/ns/{NS}/executions", {"name": task_type.replace("_", "-")})
    runs = {task_type: await finished(plane, run["id"]) for task_type, run in started.items()}

    def last(task_type: str) -> dict[str, Any]:
        task: dict[str, Any] = runs[task_type]["tasks"][-1]
        return task

    assert last("conformance_snooze")["output"] == {"snoozed": True}, ts_worker.output()
    assert (last("conformance_snooze")["attempt"], last("conformance_snooze")["snoozeCount"]) == (1, 1)
    assert last("conformance_retry_after")["output"] == {"attempt": 2}, ts_worker.output()
    assert last("conformance_heartbeat")["output"] == {"slept": 5}, ts_worker.output()
    big = last("conformance_big")
    assert (runs["conformance_big"]["status"], big["status"]) == ("FAILED", "FAILED_WITH_TERMINAL_ERROR")
    assert "over the limit of 4096 bytes" in big["reason"], big
    assert set(last("conformance_trace")["output"]) == {"traceparent"}
    assert runs["conformance_attributes"]["status"] == "COMPLETED"
    _, page = await get(plane, f"/v1/ns/{NS}/executions?searchAttribute=stage%3Dpacked")
    assert [r["id"] for r in page["items"]] == [runs["conformance_attributes"]["id"]]
    _, logged = await get(plane, f"/v1/ns/{NS}/executions/{runs['conformance_log']['id']}/logs")
    assert [line["message"] for line in logged["lines"]] == ["first line", "second line t-1"]
    # The worker kept running after the refused output: the later runs completed on it.
    assert ts_worker.process is not None and ts_worker.process.returncode is None


async def test_a_task_reported_gone_is_aborted_through_its_signal(plane: Plane, ts_worker: TsWorker) -> None:
    """Terminating the run ends the lease: the next heartbeat hears `gone`, the
    handler's AbortSignal fires, and its slot is free for the next task."""
    await define_task(plane.pool, "conformance_slow", heartbeatTimeout=2, retryCount=0)
    slow = {
        "name": "conformance_slow",
        "taskReferenceName": "s",
        "inputParameters": {"seconds": "${workflow.input.seconds}"},
    }
    await define_workflow(plane.pool, "ts-gone", [slow], outputParameters={"attempt": "${s.output.attempt}"})
    runs = []
    for _ in range(4):  # every slot of the type (concurrency 4) holds a two-minute task
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "ts-gone", "input": {"seconds": 120}})
        runs.append(started["id"])

    async def all_leased() -> bool:
        views = [(await get(plane, f"/v1/ns/{NS}/executions/{run}"))[1] for run in runs]
        return all(view["tasks"] and view["tasks"][0]["status"] == "IN_PROGRESS" for view in views)

    await eventually_async(all_leased, what="four slow tasks leased", timeout=20)
    status, _ = await post(plane, f"/v1/ns/{NS}/executions/{runs[0]}/terminate", {"reason": "test"})
    assert status in (200, 202)
    await eventually_async(
        lambda: asyncio.sleep(0, "aborting it" in ts_worker.output()), what="the worker to abort the gone task"
    )
    # The freed slot takes a new task, while the other three still sleep.
    _, quick = await post(plane, f"/v1/ns/{NS}/executions", {"name": "ts-gone", "input": {"seconds": 0.1}})
    run = await finished(plane, quick["id"])
    assert run["status"] == "COMPLETED" and run["output"] == {"attempt": 1}, ts_worker.output()
