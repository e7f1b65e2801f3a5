"""OpenTelemetry traces, off unless the standard OTEL_* variables configure an
exporter (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
OTEL_TRACES_EXPORTER; OTEL_SDK_DISABLED=true turns them off).

A run's trace id is its run id (both are 128 bits), and the ids of its spans
are derived from what they describe: the run span's from the run id, a task
attempt's from the task id and its epoch. So a replica that never saw the
lease can still write the attempt's span when its result arrives, a worker
continues the trace from the `traceparent` of its leased task, and no id is
stored anywhere. Spans whose work spans requests (a run, a task attempt) are
written when that work ends, with its real start time."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

SERVICE_NAME = "sluiceway-operator"

_provider: TracerProvider | None = None
_forced_trace_id: ContextVar[int | None] = ContextVar("sluiceway_trace_id", default=None)
_forced_span_id: ContextVar[int | None] = ContextVar("sluiceway_span_id", default=None)


class _DerivedIds(RandomIdGenerator):
    """Random ids, except for the spans whose ids are derived from what they describe."""

    def generate_span_id(self) -> int:
        return _forced_span_id.get() or super().generate_span_id()

    def generate_trace_id(self) -> int:
        return _forced_trace_id.get() or super().generate_trace_id()


def configured(env: Mapping[str, str]) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER")
    if exporter is not None:
        return exporter.strip().lower() not in ("", "none")
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def _exporter(env: Mapping[str, str]) -> SpanExporter:
    kind = (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if kind != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER: {kind!r} is not supported; use otlp, console or none")
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = protocol or "http/protobuf"  # the specification's default
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported; use http/protobuf or grpc")


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Start exporting spans if OTEL_* says so; True when it did. The exporter
    reads its endpoint, headers and timeouts from the same variables."""
    env = os.environ if env is None else env
    if not configured(env):
        return False
    install(_exporter(env))
    return True


def install(exporter: SpanExporter, *, batch: bool = True) -> TracerProvider:
    """Send this process's spans to `exporter` (tests pass an in-memory one, unbatched)."""
    global _provider
    uninstall()
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    provider = TracerProvider(resource=resource, id_generator=_DerivedIds())
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    _provider = provider
    return provider


def uninstall() -> None:
    global _provider
    if _provider is not None:
        _provider.shutdown()
    _provider = None


def flush(timeout_ms: int = 10_000) -> bool:
    """Export what is batched now; True when done in time (or nothing to do)."""
    return _provider is None or _provider.force_flush(timeout_ms)


def enabled() -> bool:
    return _provider is not None


def tracer() -> trace.Tracer:
    return (_provider or trace.NoOpTracerProvider()).get_tracer("sluiceway")


# --- ids derived from what a span describes ----------------------------------


def _id64(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "big") or 1


def trace_id(run_id: str) -> int:
    return uuid.UUID(str(run_id)).int or 1


def run_span_id(run_id: str) -> int:
    return _id64("run", run_id)


def attempt_span_id(task_id: str, epoch: int) -> int:
    return _id64("attempt", task_id, epoch)


def run_context(run_id: str) -> Context:
    """A context whose parent is the run's span, wherever that span is written."""
    sampled = TraceFlags(TraceFlags.SAMPLED)
    parent = SpanContext(trace_id(run_id), run_span_id(run_id), is_remote=True, trace_flags=sampled)
    return trace.set_span_in_context(NonRecordingSpan(parent))


def attempt_context(run_id: str, task_id: str, epoch: int) -> Context:
    """A context whose current span is the attempt's (written when it ends):
    what the attempt calls continues the run's trace beneath it."""
    sampled = TraceFlags(TraceFlags.SAMPLED)
    attempt = SpanContext(trace_id(run_id), attempt_span_id(task_id, epoch), is_remote=False, trace_flags=sampled)
    return trace.set_span_in_context(NonRecordingSpan(attempt))


def propagation_headers(run_id: str, task_id: str, epoch: int) -> dict[str, str]:
    """The headers (W3C `traceparent`, by default) that carry the attempt's
    context on a call the operator makes for the task, injected by the
    configured OpenTelemetry propagator (OTEL_PROPAGATORS); none when tracing is off."""
    if _provider is None:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=attempt_context(run_id, task_id, epoch))
    return carrier


def traceparent(run_id: str, task_id: str, epoch: int) -> str:
    """The W3C traceparent a worker continues: its spans are children of this attempt's."""
    return f"00-{trace_id(run_id):032x}-{attempt_span_id(task_id, epoch):016x}-01"


@contextlib.contextmanager
def _ids(trace: int | None, span: int) -> Iterator[None]:
    trace_token, span_token = _forced_trace_id.set(trace), _forced_span_id.set(span)
    try:
        yield
    finally:
        _forced_trace_id.reset(trace_token)
        _forced_span_id.reset(span_token)


def _ns(moment: datetime.datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1e9)


def record_run(
    run_id: str,
    namespace: str,
    workflow: str,
    status: str,
    started: datetime.datetime,
    ended: datetime.datetime | None = None,
) -> None:
    """The run's span, the root of its trace, written when the run ends."""
    if _provider is None:
        return
    with _ids(trace_id(run_id), run_span_id(run_id)):
        span = tracer().start_span(
            f"run {workflow}",
            context=Context(),  # a root: the trace is the run's
            kind=SpanKind.INTERNAL,
            start_time=_ns(started),
            attributes={
                "sluiceway.namespace": namespace,
                "sluiceway.workflow": workflow,
                "sluiceway.run_id": run_id,
                "sluiceway.run.status": status,
            },
        )
    if status != "COMPLETED":
        span.set_status(Status(StatusCode.ERROR, status))
    span.end(end_time=_ns(ended))


def record_attempt(
    run_id: str,
    task_id: str,
    epoch: int,
    namespace: str,
    task_type: str,
    status: str,
    leased_at: datetime.datetime | None,
) -> None:
    """A task attempt's span, from its lease to its result, a child of the run's."""
    if _provider is None:
        return
    with _ids(None, attempt_span_id(task_id, epoch)):
        span = tracer().start_span(
            f"task {task_type}",
            context=run_context(run_id),
            kind=SpanKind.CONSUMER,
            start_time=_ns(leased_at),
            attributes={
                "sluiceway.namespace": namespace,
                "sluiceway.task_type": task_type,
                "sluiceway.run_id": run_id,
                "sluiceway.task_id": task_id,
                "sluiceway.epoch": epoch,
                "sluiceway.task.status": status,
            },
        )
    if status.startswith("FAILED") or status == "TIMED_OUT":
        span.set_status(Status(StatusCode.ERROR, status))
    span.end()


def record_decider_pass(started_ns: int, run_ids: Sequence[str]) -> None:
    """One decider pass that decided runs, linked to each run's trace (the first 32)."""
    if _provider is None or not run_ids:
        return
    links = [Link(trace.get_current_span(run_context(r)).get_span_context()) for r in run_ids[:32]]
    span = tracer().start_span(
        "decider pass",
        context=Context(),
        start_time=started_ns,
        links=links,
        attributes={"sluiceway.runs_decided": len(run_ids)},
    )
    span.end()
