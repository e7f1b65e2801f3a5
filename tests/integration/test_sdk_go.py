"""The Go SDK's conformance program against a real plane (HTTP API on a
free port, real PostgreSQL): its worker runs the echo, flaky, terminal, log
and slow handlers to the outcomes sdk/conformance/README.md names, hands a
task back INTERRUPTED on SIGTERM, and its `start` subcommand starts and waits
through the Go client; the Go example worker runs examples/15-orders.yaml.
(The language-neutral suite is test_sdk_conformance.py;
this one proves the Go programs themselves.)"""

from __future__ import annotations

import asyncio
import contextlib
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
from tests.support.plane import Plane, finished, get, post
from tests.support.store import NS, define_task, define_workflow
from tests.support.waiting import eventually_async

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / ".run/sdk/go/conformance"


@pytest.fixture(scope="module")
def conformance() -> Path:
    """The conformance program, built (idempotently) as `make test` builds it."""
    subprocess.run(["bash", str(ROOT / "hack/build-sdk-go.sh")], check=True, timeout=900)
    return PROGRAM


def _env(plane: Plane, worker_id: str, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLUICEWAY_")}
    return {**env, "SLUICEWAY_URL": plane.url, "SLUICEWAY_NAMESPACE": NS, "SLUICEWAY_WORKER_ID": worker_id, **extra}


@contextlib.asynccontextmanager
async def _worker(
    program: Path, plane: Plane, worker_id: str, **extra: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(str(program), "worker", env=_env(plane, worker_id, **extra))
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _run(plane: Plane, workflow: str, input: dict[str, Any]) -> dict[str, Any]:
    status, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": workflow, "input": input})
    assert status == 201, started
    return await finished(plane, started["id"])


async def test_go_worker_runs_echo_flaky_terminal_and_log(plane: Plane, conformance: Path) -> None:
    for name in ("conformance_echo", "conformance_log"):
        await define_task(plane.pool, name)
    await define_task(plane.pool, "conformance_flaky", retryCount=3, retryDelaySeconds=0)
    await define_task(plane.pool, "conformance_terminal", retryCount=5, retryDelaySeconds=0)
    await define_workflow(
        plane.pool,
        "echo",
        [
            {
                "name": "conformance_echo",
                "taskReferenceName": "e",
                "inputParameters": {"big": "${workflow.input.big}", "word": "${workflow.input.word}"},
            }
        ],
    )
    await define_workflow(
        plane.pool,
        "flaky",
        [{"name": "conformance_flaky", "taskReferenceName": "f", "inputParameters": {"succeedOnAttempt": 3}}],
    )
    await define_workflow(
        plane.pool,
        "terminal",
        [{"name": "conformance_terminal", "taskReferenceName": "t", "inputParameters": {"why": "no such tenant"}}],
    )
    await define_workflow(
        plane.pool,
        "logging",
        [{"name": "conformance_log", "taskReferenceName": "l", "inputParameters": {"tag": "t-7"}}],
    )
    async with _worker(conformance, plane, "go-1"):
        echo = await _run(plane, "echo", {"big": 9007199254740993, "word": "hi"})
        flaky = await _run(plane, "flaky", {})
        terminal = await _run(plane, "terminal", {})
        logged = await _run(plane, "logging", {})
    # An integer past 2^53 comes back exact: the SDK keeps numbers as json.Number.
    assert echo["status"] == "COMPLETED", echo
    assert echo["output"] == {"echo": {"big": 9007199254740993, "word": "hi"}, "attempt": 1}
    assert flaky["status"] == "COMPLETED" and flaky["output"] == {"attempt": 3}, flaky
    assert [t["status"] for t in flaky["tasks"]] == ["FAILED", "FAILED", "COMPLETED"]
    assert flaky["tasks"][0]["reason"] == "flaky attempt 1"
    assert terminal["status"] == "FAILED" and len(terminal["tasks"]) == 1, terminal
    assert terminal["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert terminal["tasks"][0]["reason"] == "INVALID_ARGUMENT: no such tenant"
    assert logged["status"] == "COMPLETED", logged
    _, page = await get(plane, f"/v1/ns/{NS}/executions/{logged['id']}/logs")
    messages = [line["message"] for line in page["lines"]]
    assert messages == ["first line", "second line t-7"], messages


async def test_go_worker_hands_a_task_back_interrupted_on_sigterm(plane: Plane, conformance: Path) -> None:
    await define_task(plane.pool, "conformance_slow", retryCount=2, retryDelaySeconds=0)
    await define_workflow(
        plane.pool, "slow", [{"name": "conformance_slow", "taskReferenceName": "s", "inputParameters": {"seconds": 3}}]
    )
    status, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "slow", "input": {}})
    assert status == 201, started
    run_id = started["id"]

    async def leased() -> bool | None:
        _, run = await get(plane, f"/v1/ns/{NS}/executions/{run_id}")
        return True if run["tasks"] and run["tasks"][0]["status"] == "IN_PROGRESS" else None

    async with _worker(conformance, plane, "go-dying", SLUICEWAY_SHUTDOWN_GRACE="0.5") as dying:
        await eventually_async(leased, timeout=20, what="the slow task to be leased")
        dying.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(dying.wait(), timeout=30) == 0
    _, run = await get(plane, f"/v1/ns/{NS}/executions/{run_id}")
    # Handed back: leasable again at once as the next attempt, the interrupted one spent and counted.
    assert run["tasks"][0]["interruptCount"] == 1 and run["tasks"][0]["status"] == "SCHEDULED", run["tasks"]
    async with _worker(conformance, plane, "go-next"):
        run = await finished(plane, run_id)
    assert run["status"] == "COMPLETED" and run["output"] == {"attempt": 2}, run


async def test_go_client_starts_and_waits(plane: Plane, conformance: Path) -> None:
    await define_task(plane.pool, "conformance_echo")
    await define_workflow(
        plane.pool,
        "echo",
        [{"name": "conformance_echo", "taskReferenceName": "e", "inputParameters": {"n": "${workflow.input.n}"}}],
    )

    async def start(*args: str) -> tuple[int, dict[str, Any]]:
        process = await asyncio.create_subprocess_exec(
            str(conformance), "start", *args, env=_env(plane, "go-client"), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
        return process.returncode or 0, json.loads(out)

    code, still = await start("echo", '{"n": 1}', "0.2")  # no worker yet: the run cannot end
    assert code == 0 and still["status"] == "RUNNING" and still["id"], still
    async with _worker(conformance, plane, "go-2"):
        code, done = await start("echo", '{"n": 2}', "20")
    assert code == 0 and done["status"] == "COMPLETED" and done["output"] == {"echo": {"n": 2}, "attempt": 1}, done
    code, refused = await start("no_such_workflow", "{}", "5")
    assert code == 1 and refused["error"] == "404", refused


async def test_go_worker_signals_limits_traces_and_attributes(plane: Plane, conformance: Path) -> None:
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "tenant", 1, None, None, None, None, max_payload_bytes=4096)
    await define_task(plane.pool, "conformance_retry_after", retryCount=1, retryDelaySeconds=3600)
    await define_task(plane.pool, "conformance_big", retryCount=0)
    for name in ("conformance_snooze", "conformance_trace", "conformance_attributes", "conformance_heartbeat"):
        await define_task(plane.pool, name, **({"heartbeatTimeoutSeconds": 1} if name.endswith("heartbeat") else {}))
    one = {
        "retry": ("conformance_retry_after", {"seconds": 0.5}),
        "big": ("conformance_big", {"bytes": 10000}),
        "snooze": ("conformance_snooze", {"seconds": 0.5}),
        "trace": ("conformance_trace", {}),
        "beat": ("conformance_heartbeat", {"seconds": 3}),
    }
    for workflow, (task, input) in one.items():
        await define_workflow(
            plane.pool, workflow, [{"name": task, "taskReferenceName": "x", "inputParameters": input}]
        )
    await define_workflow(
        plane.pool,
        "staged",
        [{"name": "conformance_attributes", "taskReferenceName": "x", "inputParameters": {"stage": "paid"}}],
        searchAttributes=[{"name": "stage", "type": "keyword"}],
    )
    async with _worker(conformance, plane, "go-3"):
        runs = {workflow: await _run(plane, workflow, {}) for workflow in [*one, "staged"]}
    # RetryAfter is the handler's own signal: the policy's hour is not waited.
    retry = runs["retry"]
    assert retry["status"] == "COMPLETED" and retry["output"] == {"attempt": 2}, retry
    # Over the payload limit: the server failed the task with its reason; the worker went on.
    big = runs["big"]
    assert big["status"] == "FAILED" and "4096" in big["tasks"][0]["reason"], big
    snooze = runs["snooze"]
    assert snooze["status"] == "COMPLETED" and snooze["output"] == {"snoozed": True}, snooze
    assert len(snooze["tasks"]) == 1 and snooze["tasks"][0]["attempt"] == 1, snooze["tasks"]
    assert runs["trace"]["status"] == "COMPLETED" and "traceparent" in runs["trace"]["output"], runs["trace"]
    # Slept 3 s with a 1 s heartbeatTimeout: the SDK's beats kept the lease.
    beat = runs["beat"]
    assert beat["status"] == "COMPLETED" and beat["output"] == {"slept": 3}, beat
    assert len(beat["tasks"]) == 1, beat["tasks"]
    staged = runs["staged"]
    assert staged["status"] == "COMPLETED" and staged["searchAttributes"]["stage"] == "paid", staged


async def test_go_example_worker_runs_the_orders_example(plane: Plane, conformance: Path) -> None:
    """examples/15-orders.yaml's workflow on examples/go: the outputs, logs
    and search attributes of examples/workers.py."""
    spec = yaml.safe_load_all((ROOT / "examples/15-orders.yaml").read_text())
    workflow = next(doc for doc in spec if doc["kind"] == "Workflow")["spec"]
    await define_workflow(
        plane.pool,
        "orders",
        workflow["tasks"],
        searchAttributes=workflow["searchAttributes"],
        outputParameters=workflow["outputParameters"],
    )
    program = ROOT / ".run/sdk/go/example-worker"
    input = {"tenant": "acme", "amount": 12.5, "items": ["a", "b"], "shippingSeconds": 0}
    async with _worker(program, plane, "go-example"):
        run = await _run(plane, "orders", input)
        declined = await _run(plane, "orders", {**input, "card": "declined"})
    assert run["status"] == "COMPLETED", run
    assert run["output"] == {"receipt": f"r-{run['id'][:8]}", "parcel": "p-1"}
    assert run["searchAttributes"]["stage"] == "shipped", run["searchAttributes"]
    _, page = await get(plane, f"/v1/ns/{NS}/executions/{run['id']}/logs")
    messages = [line["message"] for line in page["lines"]]
    assert messages == [
        "reserving 2 items",
        "charging 12.5 to visa",
        "parcel with 2 items handed to the carrier",
    ], messages
    assert declined["status"] == "FAILED", declined
    assert declined["tasks"][1]["reason"] == "DECLINED: the bank refused the card"
