"""Traces of a real run: an SDK worker runs a two-task workflow against the
HTTP API and a real PostgreSQL, with the operator's spans going to an
in-memory exporter and the worker's (its own OpenTelemetry SDK, as a worker
process would set up) to another. One trace, the run's, holds them all.
Then the OTLP/HTTP exporter against a local collector endpoint."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp.web
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluiceway.observability import tracing
from sluiceway.worker import Task, Worker
from tests.support.plane import Plane, Running, finished, post
from tests.support.store import NS, define_workflow

_WORKER_SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def worker_sdk() -> None:
    """What a worker process does to export its spans: a global SDK provider (set once per process)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_WORKER_SPANS))
    trace.set_tracer_provider(provider)


@pytest.fixture
def operator_spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.install(exporter, batch=False)
    _WORKER_SPANS.clear()
    yield exporter
    tracing.uninstall()


@pytest.fixture
async def traced(operator_spans: InMemorySpanExporter, plane: Plane) -> AsyncIterator[Plane]:
    yield plane  # the plane's app is created after tracing is installed: its requests get spans


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_a_run_is_one_trace_from_start_to_the_workers_own_spans(
    traced: Plane, operator_spans: InMemorySpanExporter
) -> None:
    await define_workflow(
        traced.pool,
        "pay",
        [{"name": "reserve", "taskReferenceName": "reserve"}, {"name": "charge", "taskReferenceName": "charge"}],
    )
    seen: dict[str, Task] = {}
    worker = Worker(traced.url, NS, poll_timeout=2)

    @worker.task("reserve")
    async def reserve(task: Task) -> dict[str, Any]:
        seen["reserve"] = task
        return {}

    @worker.task("charge")
    def charge(task: Task) -> dict[str, Any]:  # a sync handler: in a thread, the trace still follows
        seen["charge"] = task
        with trace.get_tracer("shop").start_as_current_span("call the bank"):
            return {"charged": True}

    async with Running(worker):
        status, started = await post(traced, f"/v1/ns/{NS}/executions", {"name": "pay"})
        assert status == 201
        run_id = started["id"]
        assert (await finished(traced, run_id))["status"] == "COMPLETED"
    await asyncio.sleep(0.2)  # the decider's pass that ended the run writes its span just after
    spans = operator_spans.get_finished_spans()
    run_trace = uuid.UUID(run_id).int

    [run] = named(spans, "run pay")
    assert run.context.trace_id == run_trace and run.parent is None
    assert run.context.span_id == tracing.run_span_id(run_id)
    assert run.attributes is not None and run.attributes["sluiceway.run.status"] == "COMPLETED"

    for ref in ("reserve", "charge"):
        task = seen[ref]
        assert task.traceparent == tracing.traceparent(run_id, task.task_id, task.epoch), "leased with its context"
        [attempt] = named(spans, f"task {ref}")
        assert attempt.context.trace_id == run_trace
        assert attempt.parent is not None and attempt.parent.span_id == run.context.span_id
        assert attempt.context.span_id == tracing.attempt_span_id(task.task_id, task.epoch)
        assert attempt.start_time is not None and attempt.end_time is not None
        assert run.start_time is not None and run.start_time <= attempt.start_time < attempt.end_time
        [executed] = named(_WORKER_SPANS.get_finished_spans(), f"execute {ref}")
        assert executed.context.trace_id == run_trace, "the worker continued the run's trace"
        assert executed.parent is not None and executed.parent.span_id == attempt.context.span_id

    [bank] = named(_WORKER_SPANS.get_finished_spans(), "call the bank")
    [charged] = named(_WORKER_SPANS.get_finished_spans(), "execute charge")
    assert bank.parent is not None and bank.parent.span_id == charged.context.span_id, "the handler's own span"

    [start] = named(spans, "POST /v1/ns/{namespace}/executions")
    assert start.attributes is not None and start.attributes["http.response.status_code"] == 201
    assert named(spans, "POST /v1/ns/{namespace}/tasks/poll"), "a span per request, named by route, never by id"
    passes = named(spans, "decider pass")
    assert any(link.context.trace_id == run_trace for p in passes for link in p.links), "passes link to the run"
    assert not any(run_id in s.name for s in spans), "ids stay out of span names"


async def test_no_traceparent_and_no_spans_unless_configured(plane: Plane) -> None:
    assert not tracing.enabled()
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    leased: list[dict[str, Any]] = []
    while not leased:
        poll = {"taskTypes": ["job"], "workerId": "w", "count": 1, "pollTimeoutSeconds": 5}
        _, body = await post(plane, f"/v1/ns/{NS}/tasks/poll", poll)
        leased = body["tasks"]
    assert "traceparent" not in leased[0]


def test_tracing_is_configured_by_the_standard_variables_only() -> None:
    assert not tracing.configured({})
    assert tracing.configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert tracing.configured({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing.configured({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert not tracing.configured({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})


async def test_the_otlp_exporter_delivers_spans_to_a_collector_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTLP over HTTP/protobuf, configured only by OTEL_* variables, to a local endpoint that decodes what it gets."""
    received: list[ExportTraceServiceRequest] = []

    async def collect(request: aiohttp.web.Request) -> aiohttp.web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        received.append(message)
        return aiohttp.web.Response(body=b"", content_type="application/x-protobuf")

    app = aiohttp.web.Application()
    app.router.add_post("/v1/traces", collect)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sluiceway-test")
    try:
        assert tracing.configure()
        run_id = str(uuid.uuid4())
        now = datetime.datetime.now(datetime.UTC)
        tracing.record_run(run_id, NS, "nightly", "FAILED", now - datetime.timedelta(seconds=3), now)
        assert await asyncio.to_thread(tracing.flush), "the collector took the batch"
    finally:
        tracing.uninstall()
        await runner.cleanup()
    spans = [
        (resource.resource, span)
        for message in received
        for resource in message.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    [(resource, span)] = spans
    assert span.name == "run nightly" and span.trace_id == uuid.UUID(run_id).bytes
    assert span.status.code == 2, "ERROR: the run failed"
    service = {a.key: a.value.string_value for a in resource.attributes}["service.name"]
    assert service == "sluiceway-test"
