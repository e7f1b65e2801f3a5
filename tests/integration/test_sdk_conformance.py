"""The SDK conformance suite: every scenario of sdk/conformance/scenarios.yaml
for every SDK of sdk/conformance/sdks.yaml, against the real API on a real
PostgreSQL, each in a namespace of its own.

An SDK takes part through its conformance program (sdk/conformance/README.md),
run as a process the way a user runs a worker. Nothing is skipped: an SDK
whose build is missing or fails, or whose program lacks a handler, fails the
scenario, because its run never ends the way the scenario says within the
bounded wait; the failure names the SDK and the scenario."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluiceway.devenv.processes import Child
from sluiceway.observability import tracing
from sluiceway.store.database import Pool
from tests.support.plane import Plane, execution_plane, get, post
from tests.support.sdks import ROOT, Builds, Sdk, define, load_scenarios, load_sdks, object_name
from tests.support.waiting import eventually_async

SDKS = load_sdks()
SCENARIOS = load_scenarios()
DEFAULT_WAIT = 60.0
SHUTDOWN_GRACE = "1"  # SLUICEWAY_SHUTDOWN_GRACE: how long a stopping worker lets a task run before handing it back


@pytest.fixture(scope="session")
def builds() -> Builds:
    return Builds()


class Case:
    """One scenario for one SDK: its namespace, its plane, its worker processes."""

    def __init__(self, sdk: Sdk, scenario: dict[str, Any], plane: Plane, logs: Path) -> None:
        self.sdk, self.scenario, self.plane, self.logs = sdk, scenario, plane, logs
        self.namespace = f"{sdk.name}-{scenario['name']}"[:63].rstrip("-")
        self.workers: list[Child] = []

    @property
    def named(self) -> str:
        return f"the {self.sdk.name} SDK, scenario {self.scenario['name']}"

    def env(self, worker_id: str) -> dict[str, str]:
        return {
            **os.environ,
            "SLUICEWAY_URL": self.plane.url,
            "SLUICEWAY_NAMESPACE": self.namespace,
            "SLUICEWAY_WORKER_ID": worker_id,
            "SLUICEWAY_SHUTDOWN_GRACE": SHUTDOWN_GRACE,
        }

    def argv(self, *args: str) -> list[str]:
        return [*self.sdk.argv(self.sdk.conformance, self.plane.url, self.namespace), *args]

    def start_worker(self) -> Child:
        name = f"{self.namespace}-worker-{len(self.workers) + 1}"
        worker = Child(name, self.argv("worker"), self.logs, env=self.env(name), cwd=ROOT)
        self.workers.append(worker)
        return worker

    @property
    def worker(self) -> Child:
        return self.workers[-1]

    async def register(self) -> None:
        for body in self.scenario.get("taskDefinitions", []):
            await define(self.plane.pool, self.namespace, "TaskDefinition", object_name(body["name"]), body)
        workflow = self.scenario["workflow"]
        await define(self.plane.pool, self.namespace, "Workflow", object_name(workflow["name"]), workflow)
        if "quota" in self.scenario:
            await define(self.plane.pool, self.namespace, "Quota", "conformance", self.scenario["quota"])

    async def run(self, path: str) -> dict[str, Any]:
        status, body = await get(self.plane, f"/v1/ns/{self.namespace}/executions{path}")
        assert status == 200, f"{self.named}: GET {path}: {status} {body}"
        return dict(body)

    async def stop_workers(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(w.stop, 30) for w in self.workers))


@contextlib.contextmanager
def traces(on: bool) -> Iterator[None]:
    """The plane exports traces (to memory): its leases carry trace context."""
    if not on:
        yield
        return
    tracing.install(InMemorySpanExporter(), batch=False)
    try:
        yield
    finally:
        tracing.uninstall()


@contextlib.asynccontextmanager
async def case_for(
    sdk: Sdk, scenario: dict[str, Any], pool: Pool, database_url: str, logs: Path
) -> AsyncIterator[Case]:
    with traces(bool(scenario.get("plane", {}).get("traces"))):
        async with execution_plane(pool, database_url) as plane:
            case = Case(sdk, scenario, plane, logs)
            try:
                yield case
            finally:
                await case.stop_workers()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
@pytest.mark.parametrize("sdk", SDKS, ids=[s.name for s in SDKS])
async def test_sdk_conformance(
    sdk: Sdk, scenario: dict[str, Any], builds: Builds, pool: Pool, database_url: str, tmp_path: Path
) -> None:
    builds.require(sdk)
    async with case_for(sdk, scenario, pool, database_url, tmp_path) as case:
        await case.register()
        case.start_worker()
        run_id = await start_run(case)
        if run_id is None:
            return  # refused, as the scenario expected: there is no run to look at
        action = scenario.get("action") or {}
        if "terminateWorker" in action:
            await terminate_worker(case, run_id, action["terminateWorker"]["task"])
        run = await ended(case, run_id)
        await check(case, run)


async def start_run(case: Case) -> str | None:
    """Start the scenario's run (over HTTP, or through the SDK's client): its id."""
    scenario = case.scenario
    start = scenario.get("start")
    if start is None:
        status, body = await post(
            case.plane,
            f"/v1/ns/{case.namespace}/executions",
            {"name": scenario["workflow"]["name"], "input": scenario.get("input", {})},
        )
        assert status == 201, f"{case.named}: the start was refused: {status} {body}"
        return str(body["id"])
    line, code = await sdk_start(case, start)
    for key, value in start["line"].items():
        assert line.get(key) == value, f"{case.named}: `start` printed {line}, expected {key}={value!r}"
    if "error" in start["line"]:
        assert code == 1, f"{case.named}: `start` exited {code} after a refusal, not 1"
        assert isinstance(line.get("message"), str), f"{case.named}: `start` printed no message: {line}"
        return None
    assert code == 0, f"{case.named}: `start` exited {code}: {line}"
    if line.get("id"):
        return str(line["id"])
    # An SDK whose start-and-wait does not give the id: the namespace holds this one run.
    listed = await case.run("")
    [only] = listed["items"]
    return str(only["id"])


async def sdk_start(case: Case, start: dict[str, Any]) -> tuple[dict[str, Any], int]:
    workflow = start.get("workflow", case.scenario["workflow"]["name"])
    wait = start["waitSeconds"]
    argv = case.argv("start", workflow, json.dumps(case.scenario.get("input", {})), str(wait))
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        env=case.env(f"{case.namespace}-client"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), wait + DEFAULT_WAIT)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail(f"{case.named}: `start` did not end within {wait + DEFAULT_WAIT} s", pytrace=False)
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        line = json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail(
            f"{case.named}: `start` exited {process.returncode} printing no JSON line:\n{out.decode()}\n{err.decode()}",
            pytrace=False,
        )
    assert isinstance(line, dict), f"{case.named}: `start` printed {line}"
    assert process.returncode is not None
    return line, process.returncode


async def terminate_worker(case: Case, run_id: str, ref: str) -> None:
    """Once `ref` is leased, SIGTERM the worker: it must exit 0; then a fresh worker takes over."""

    async def leased() -> bool:
        run = await case.run(f"/{run_id}")
        return any(t["referenceName"] == ref and t["status"] == "IN_PROGRESS" for t in run["tasks"])

    await eventually_async(
        leased, timeout=DEFAULT_WAIT, what=f"{case.named}: task {ref} to be leased", child=case.worker
    )
    first = case.worker
    await asyncio.to_thread(first.stop, 60)
    assert first.process.returncode == 0, (
        f"{case.named}: the worker exited {first.process.returncode} on SIGTERM, not 0:\n{first.tail()}"
    )
    case.start_worker()


async def ended(case: Case, run_id: str) -> dict[str, Any]:
    """The run once it ends as the scenario expects, within its bounded wait."""
    expected = case.scenario["expect"]["status"]
    wait = float(case.scenario.get("waitSeconds", DEFAULT_WAIT))
    last: dict[str, Any] = {}

    async def probe() -> dict[str, Any] | None:
        nonlocal last
        last = await case.run(f"/{run_id}")
        return last if last["status"] != "RUNNING" else None

    try:
        run = await eventually_async(probe, timeout=wait, what=f"{case.named}: run {run_id} to end {expected}")
    except AssertionError as error:
        tasks = [(t["referenceName"], t["attempt"], t["status"], t.get("reason")) for t in last.get("tasks", [])]
        worker = case.worker
        pytest.fail(
            f"{case.named}: the run did not end {expected} within {wait:g} s (tasks: {tasks}): {error}\n"
            f"worker {'running' if worker.alive() else f'exited {worker.process.returncode}'}; its log:\n"
            f"{worker.tail()}",
            pytrace=False,
        )
    assert run["status"] == expected, (
        f"{case.named}: the run ended {run['status']} ({run.get('reasonForIncompletion')}), not {expected}; "
        f"tasks: {[(t['referenceName'], t['status'], t.get('reason')) for t in run['tasks']]}"
    )
    return run


async def check(case: Case, run: dict[str, Any]) -> None:
    expect, named = case.scenario["expect"], case.named
    if "output" in expect:
        assert run["output"] == expect["output"], f"{named}: output {run['output']}, not {expect['output']}"
    if "reason" in expect:
        assert expect["reason"] in (run.get("reasonForIncompletion") or ""), f"{named}: reason of {run}"
    attempts = attempts_by_ref(run)
    for ref, wanted in expect.get("tasks", {}).items():
        check_task(named, ref, attempts.get(ref, []), wanted)
    for task_type, wanted in expect.get("taskTypes", {}).items():
        of_type = [t for t in run["tasks"] if t["taskType"] == task_type]
        assert len(of_type) == wanted["count"], f"{named}: {len(of_type)} {task_type} tasks, not {wanted['count']}"
        assert {t["status"] for t in of_type} == {wanted["status"]}, f"{named}: {task_type} tasks {of_type}"
    for ref, lines in expect.get("logs", {}).items():
        await check_logs(case, run["id"], ref, lines)
    for key, value in expect.get("searchAttributes", {}).items():
        found = (run.get("searchAttributes") or {}).get(key)
        assert found == value, f"{named}: search attribute {key} is {found!r}, not {value!r}"
    if "retryGap" in expect:
        check_gap(named, attempts[expect["retryGap"]["task"]], expect["retryGap"])
    if "traceparent" in expect:
        check_trace(case, run, attempts[expect["traceparent"]["task"]][-1])
    if expect.get("workerRunning"):
        assert case.worker.alive(), f"{named}: the worker exited:\n{case.worker.tail()}"


def attempts_by_ref(run: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for task in sorted(run["tasks"], key=lambda t: t["attempt"]):
        found.setdefault(task["referenceName"], []).append(task)
    return found


def check_task(named: str, ref: str, attempts: list[dict[str, Any]], wanted: dict[str, Any]) -> None:
    statuses = [t["status"] for t in attempts]
    if "attempts" in wanted:
        assert statuses == wanted["attempts"], f"{named}: task {ref} attempts {statuses}, not {wanted['attempts']}"
    for attempt, reason in zip(attempts, wanted.get("reasons", []), strict=False):
        if reason is not None:
            assert reason in (attempt.get("reason") or ""), f"{named}: task {ref} reason {attempt.get('reason')!r}"
    if "output" in wanted:
        assert attempts[-1]["output"] == wanted["output"], f"{named}: task {ref} output {attempts[-1]['output']}"
    for key in ("attempt", "snoozeCount", "interruptCount"):
        if key in wanted:
            found = attempts[-1].get(key)
            assert found == wanted[key], f"{named}: task {ref} {key} is {found}, not {wanted[key]}"


async def check_logs(case: Case, run_id: str, ref: str, lines: list[str]) -> None:
    """The lines the server keeps for `ref` (shipped with the result or the heartbeats just before it)."""

    async def kept() -> list[str] | None:
        page = await case.run(f"/{run_id}/logs?task={ref}")
        messages = [line["message"] for line in page["lines"]]
        return messages if messages == lines else None

    await eventually_async(kept, timeout=10, what=f"{case.named}: the server to keep {lines} for task {ref}")


def check_gap(named: str, attempts: list[dict[str, Any]], gap: dict[str, Any]) -> None:
    ended_at = datetime.datetime.fromisoformat(attempts[0]["endedAt"])
    started_at = datetime.datetime.fromisoformat(attempts[1]["startedAt"])
    seconds = (started_at - ended_at).total_seconds()
    assert gap["atLeast"] <= seconds < gap["below"], (
        f"{named}: attempt 2 started {seconds:.2f} s after attempt 1 ended, not in [{gap['atLeast']}, {gap['below']})"
    )


def check_trace(case: Case, run: dict[str, Any], task: dict[str, Any]) -> None:
    seen = task["output"].get("traceparent")
    if not case.scenario.get("plane", {}).get("traces"):
        assert seen == "", f"{case.named}: no trace context was sent, yet the handler saw {seen!r}"
        return
    # The context names the run's trace and this attempt's span (an epoch of its lease).
    sent = {tracing.traceparent(run["id"], task["taskId"], epoch) for epoch in range(1, 100)}
    assert seen in sent, f"{case.named}: the handler saw {seen!r}, not the context the server leased it with"
