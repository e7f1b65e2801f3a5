"""HTTP and HTTP_POLL tasks run by the operator, classified by status, behind
a circuit breaker, against a real local HTTP server and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluiceway.controls.breaker import BreakerConfig, Breakers, BreakerState
from sluiceway.controls.egress import EgressPolicy
from sluiceway.observability import tracing
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.systemtasks.egress import Egress
from sluiceway.systemtasks.http import HttpTaskRunner
from tests.integration.test_metrics import added, scrape, value
from tests.support.plane import Plane, finished, post
from tests.support.store import NS, define_task, define_workflow


class Upstream:
    """A scripted HTTP server: each request gets the next planned answer."""

    def __init__(self) -> None:
        self.plan: list[tuple[int, Any, dict[str, str]]] = []
        self.calls: list[float] = []
        self.headers: list[dict[str, str]] = []  # each request's, lower-cased
        self.fallback: tuple[int, Any, dict[str, str]] = (200, {"ok": True}, {})
        self.delay = 0.0  # before each answer
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.calls.append(time.monotonic())
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        await asyncio.sleep(self.delay)
        status, body, headers = self.plan.pop(0) if self.plan else self.fallback
        return web.json_response(body, status=status, headers=headers)


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    server = Upstream()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}"
    yield server
    await runner.cleanup()


@pytest.fixture
async def http_runner(plane: Plane) -> AsyncIterator[Callable[[BreakerConfig], HttpTaskRunner]]:
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []

    def start(config: BreakerConfig = BreakerConfig()) -> HttpTaskRunner:
        # The test servers listen on loopback, which the egress policy denies by default.
        egress = Egress(EgressPolicy(allowed=("127.0.0.1",)))
        runner = HttpTaskRunner(ExecutionPlane(plane.pool), Breakers(config), concurrency=4, egress=egress)
        tasks.append(asyncio.create_task(runner.run(stop)))
        return runner

    yield start
    stop.set()
    await asyncio.wait(tasks, timeout=15)


def http_task(ref: str, uri: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "call_partner",
        "taskReferenceName": ref,
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": uri, "method": "POST", "body": {"order": 42}}, **extra},
    }


async def run(plane: Plane, workflow: str) -> dict[str, Any]:
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": workflow})
    return await finished(plane, started["id"])


async def test_a_2xx_completes_with_the_response(plane: Plane, upstream: Upstream, http_runner: Any) -> None:
    upstream.plan = [(201, {"id": "r-1"}, {})]
    await define_workflow(plane.pool, "call", [http_task("call", f"{upstream.url}/orders")])
    http_runner()
    result = await run(plane, "call")
    assert result["status"] == "COMPLETED"
    assert result["output"]["response"]["statusCode"] == 201 and result["output"]["response"]["body"] == {"id": "r-1"}


async def test_a_4xx_is_terminal_and_never_retried(plane: Plane, upstream: Upstream, http_runner: Any) -> None:
    upstream.plan = [(404, {"error": "no such order"}, {})]
    await define_task(plane.pool, "call_partner", retryCount=5)
    await define_workflow(plane.pool, "missing", [http_task("call", f"{upstream.url}/orders/9")])
    http_runner()
    result = await run(plane, "missing")
    assert result["status"] == "FAILED" and len(result["tasks"]) == 1 and len(upstream.calls) == 1
    assert result["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert "HTTP 404" in result["reasonForIncompletion"]


@pytest.mark.parametrize("status", [503, 429, 408])
async def test_retryable_statuses_are_retried_honoring_retry_after(
    plane: Plane, upstream: Upstream, http_runner: Any, status: int
) -> None:
    upstream.plan = [(status, {"busy": True}, {"Retry-After": "0.6"})]
    await define_task(plane.pool, "call_partner", retryCount=2, retryDelaySeconds=30)
    await define_workflow(plane.pool, "busy", [http_task("call", f"{upstream.url}/orders")])
    http_runner()
    result = await run(plane, "busy")
    assert result["status"] == "COMPLETED" and [t["status"] for t in result["tasks"]] == ["FAILED", "COMPLETED"]
    gap = upstream.calls[1] - upstream.calls[0]
    assert 0.6 <= gap < 0.6 + 1.5, f"Retry-After 0.6 s honored, not the policy's 30 s: {gap:.2f}"


async def test_connection_errors_are_retryable(plane: Plane, http_runner: Any) -> None:
    from sluiceway.devenv.processes import free_port

    await define_task(plane.pool, "call_partner", retryCount=1, retryDelaySeconds=0.1, jitter=0)
    await define_workflow(plane.pool, "nobody", [http_task("call", f"http://127.0.0.1:{free_port()}/")])
    http_runner()
    result = await run(plane, "nobody")
    assert result["status"] == "FAILED" and len(result["tasks"]) == 2
    assert "connection error" in result["tasks"][0]["reason"]


async def test_link_local_targets_are_refused(plane: Plane, http_runner: Any) -> None:
    await define_workflow(plane.pool, "metadata", [http_task("call", "http://169.254.169.254/latest/meta-data/")])
    http_runner()
    result = await run(plane, "metadata")
    assert result["status"] == "FAILED" and "link-local" in result["reasonForIncompletion"]


async def test_http_poll_snoozes_until_its_condition_holds(plane: Plane, upstream: Upstream, http_runner: Any) -> None:
    upstream.plan = [(200, {"state": "pending"}, {}), (200, {"state": "pending"}, {}), (200, {"state": "done"}, {})]
    await define_workflow(
        plane.pool,
        "polling",
        [
            {
                "name": "report_ready",
                "taskReferenceName": "poll",
                "type": "HTTP_POLL",
                "inputParameters": {
                    "http_request": {"uri": f"{upstream.url}/report"},
                    "pollingIntervalSeconds": 0.2,
                    "terminationCondition": "response.body.state == 'done'",
                },
            }
        ],
    )
    http_runner()
    result = await run(plane, "polling")
    assert result["status"] == "COMPLETED" and len(upstream.calls) == 3
    assert [t["attempt"] for t in result["tasks"]] == [1], "polling spends no attempts"
    assert result["output"]["response"]["body"] == {"state": "done"}


async def test_the_breaker_opens_fails_fast_non_terminally_and_closes_after_a_probe(
    plane: Plane, upstream: Upstream, http_runner: Any
) -> None:
    config = BreakerConfig(
        enabled=True, minimum_requests=3, failure_ratio=0.5, window_ms=30_000, open_ms=1_500, max_open_ms=10_000
    )
    upstream.fallback = (503, {"down": True}, {})
    await define_task(plane.pool, "call_partner", retryCount=0)
    await define_workflow(plane.pool, "fragile", [http_task("call", f"{upstream.url}/x")])
    runner = http_runner(config)
    for _ in range(3):  # three server failures open it
        assert (await run(plane, "fragile"))["status"] == "FAILED"
    target = f"127.0.0.1:{upstream.url.rsplit(':', 1)[1]}"
    assert runner.breakers(target).state is BreakerState.OPEN
    before = scrape()
    assert value(before, "sluiceway_circuit_breaker_state", target=target) == 2, "2: open"
    calls_before = len(upstream.calls)
    fast = await run(plane, "fragile")
    assert added(before, scrape(), "sluiceway_circuit_breaker_rejections_total", target=target) == 1
    assert len(upstream.calls) == calls_before, "an open breaker does not call the host"
    assert fast["tasks"][0]["status"] == "FAILED", "never terminally: the retry policy still decides"
    assert f"circuitBreaker:{target} open" in fast["reasonForIncompletion"]
    upstream.fallback = (200, {"back": True}, {})
    await asyncio.sleep(1.6)
    probe = await run(plane, "fragile")
    assert probe["status"] == "COMPLETED" and runner.breakers(target).state is BreakerState.CLOSED
    assert value(scrape(), "sluiceway_circuit_breaker_state", target=target) == 0, "0: closed"


async def test_a_system_task_attempt_is_a_span_of_its_run(plane: Plane, upstream: Upstream, http_runner: Any) -> None:
    """Tracing on (an in-memory exporter): the operator's own attempt of an HTTP task is a span of the run's trace."""
    spans = InMemorySpanExporter()
    tracing.install(spans, batch=False)
    try:
        await define_workflow(plane.pool, "notify", [http_task("call", f"{upstream.url}/orders")])
        http_runner()
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "notify"})
        result = await finished(plane, started["id"])
        assert result["status"] == "COMPLETED"
        await asyncio.sleep(0.2)  # the run's span follows the decider pass that ended it
    finally:
        tracing.uninstall()
    [run_span] = [s for s in spans.get_finished_spans() if s.name == "run notify"]
    [attempt] = [s for s in spans.get_finished_spans() if s.name == "task call_partner"]
    assert attempt.context.trace_id == uuid.UUID(started["id"]).int
    assert attempt.parent is not None and attempt.parent.span_id == run_span.context.span_id
    assert attempt.attributes is not None and attempt.attributes["sluiceway.task_id"] == result["tasks"][0]["taskId"]
    assert attempt.attributes["sluiceway.task.status"] == "COMPLETED"
    # The call carried the attempt's context: the callee's spans would join the run's trace beneath it.
    [headers] = upstream.headers
    traceparent = f"00-{attempt.context.trace_id:032x}-{attempt.context.span_id:016x}-01"
    assert headers["traceparent"] == traceparent


async def test_http_and_http_poll_calls_carry_traceparent_only_when_tracing_is_on(
    plane: Plane, upstream: Upstream, http_runner: Any
) -> None:
    """HTTP_POLL: each poll carries the context of its own attempt (each is
    leased anew), a span the operator writes. A traceparent the task sets
    itself is the user's, and is kept."""
    upstream.plan = [(200, {"state": "pending"}, {}), (200, {"state": "done"}, {}), (200, {}, {}), (200, {}, {})]
    poll = http_task(
        "poll", f"{upstream.url}/jobs/1", terminationCondition="response.body.state == 'done'", pollingIntervalSeconds=0
    )
    poll["type"] = "HTTP_POLL"
    own = http_task("own", f"{upstream.url}/own")
    theirs = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    own["inputParameters"]["http_request"]["headers"] = {"Traceparent": theirs}
    await define_workflow(plane.pool, "polled", [poll, own])
    await define_workflow(plane.pool, "untraced", [http_task("call", f"{upstream.url}/x")])
    http_runner()
    spans = InMemorySpanExporter()
    tracing.install(spans, batch=False)
    try:
        result = await run(plane, "polled")
        await asyncio.sleep(0.2)
    finally:
        tracing.uninstall()
    assert result["status"] == "COMPLETED", result
    attempts = {
        f"00-{s.context.trace_id:032x}-{s.context.span_id:016x}-01"
        for s in spans.get_finished_spans()
        if s.name == "task call_partner"
    }
    first, second, third = (h["traceparent"] for h in upstream.headers[:3])
    assert {first, second} <= attempts and first != second, "each poll: its attempt's span"
    assert all(t.startswith(f"00-{uuid.UUID(result['id']).hex}-") for t in (first, second)), "the run's trace"
    assert third == theirs, "the task's own header is kept"
    assert (await run(plane, "untraced"))["status"] == "COMPLETED"
    assert "traceparent" not in upstream.headers[3], "tracing off: no header"


async def test_http_task_calls_are_counted_by_outcome_class(plane: Plane, upstream: Upstream, http_runner: Any) -> None:
    """One call of each class, each task failing at once (no retries): what the
    host answered, a connection nobody accepts, a read that times out, and a
    target the egress policy refuses."""
    from sluiceway.devenv.processes import free_port

    await define_task(plane.pool, "call_partner", retryCount=0)
    upstream.plan = [(201, {}, {}), (404, {}, {}), (503, {}, {})]
    await define_workflow(plane.pool, "answered", [http_task("call", f"{upstream.url}/orders")])
    await define_workflow(plane.pool, "nobody", [http_task("call", f"http://127.0.0.1:{free_port()}/")])
    slow = http_task("call", f"{upstream.url}/slow")
    slow["inputParameters"]["http_request"]["readTimeOut"] = 200
    await define_workflow(plane.pool, "slow", [slow])
    await define_workflow(plane.pool, "metadata", [http_task("call", "http://169.254.169.254/latest/meta-data/")])
    http_runner()
    before = scrape()
    statuses = [(await run(plane, "answered"))["status"] for _ in range(3)]
    assert statuses == ["COMPLETED", "FAILED", "FAILED"]
    assert (await run(plane, "nobody"))["status"] == "FAILED"
    assert (await run(plane, "metadata"))["status"] == "FAILED"
    upstream.delay = 1.0
    assert "timeout" in (await run(plane, "slow"))["reasonForIncompletion"]
    after = scrape()
    counted = {
        outcome: added(before, after, "sluiceway_http_task_calls_total", outcome=outcome)
        for outcome in ("ok", "client_error", "server_error", "connection", "timeout", "refused")
    }
    assert counted == {"ok": 1, "client_error": 1, "server_error": 1, "connection": 1, "timeout": 1, "refused": 1}
