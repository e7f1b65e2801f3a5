"""The worker runner: polls, runs handlers with bounded concurrency, beats,
reports in batches, and shuts down gracefully.

- One long poll per task type asks for as many tasks as it has free slots.
- Async handlers run on the event loop; sync handlers in threads.
- Heartbeats for every in-flight task go out in one request; a task the
  server reports gone (timed out, canceled, re-leased) is abandoned.
- Results queue up and leave in batches, so a busy worker pays one round trip
  per batch, not per task. No result is dropped while its lease may live:
  what is sent is clamped to the API's bounds; a result the server refuses as
  invalid (422) is reported again as FAILED with the server's reason; transport
  errors, 5xx and 429 are retried with exponential backoff and jitter until
  the server answers or the lease is surely gone. 404 and 409 mean the lease
  is gone: the result is dropped, as the task now belongs to someone else.
  413: the output was over the namespace's payload limit and the server
  failed the task with that reason; nothing is sent again.
- Logs name the run, the task and the epoch of every refusal and retry,
  never a payload or a credential.
- What a handler logs (the `logging` module, or `task.log(...)`) is captured
  for its task and shipped with its heartbeats and its result, so the server
  keeps it after the worker is gone (`sluiceway logs RUN`).
- SIGTERM: stop polling, let in-flight work finish within the grace period,
  then hand back what is left (INTERRUPTED: another worker leases it at once
  as the next attempt, the interrupted attempt spent and counted, so no
  attempt is ever shared between a dying process and its replacement; the
  epoch fences this process off). A task leased during shutdown and never
  started is handed back as a zero snooze, spending nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
import os
import random
import signal
import socket
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sluiceway.model.execution import MAX_BATCH, MAX_DELAY_SECONDS, MAX_REASON
from sluiceway.model.loglines import about
from sluiceway.worker import eventloop, tasklogs
from sluiceway.worker import logs as worker_logs
from sluiceway.worker.classifiers import Classifier, RetryOverride, compose_retry_classifiers
from sluiceway.worker.client import WorkerApiError, WorkerClient, credentials
from sluiceway.worker.errors import RetryAfter, Snooze, TerminalError

log = logging.getLogger(__name__)

Handler = Callable[["Task"], Any]


@dataclass
class Task:
    """One leased task, as a handler sees it."""

    task_id: str
    epoch: int
    task_type: str
    execution_id: str
    reference_name: str
    attempt: int
    input: dict[str, Any]
    heartbeat_timeout: int = 0
    response_timeout: int = 3600
    start_to_close_timeout: int = 0
    leased_at: float = field(default_factory=time.monotonic)
    last_beat: float = field(default_factory=time.monotonic)
    logs: tasklogs.LogBuffer = field(default_factory=tasklogs.LogBuffer, repr=False)
    search_attributes: dict[str, Any] = field(default_factory=dict)
    traceparent: str = ""  # the attempt's W3C trace context, when the operator exports traces

    def log(self, message: str, level: str = "INFO") -> None:
        """Keep a line in this task's log (the standard `logging` module works too)."""
        self.logs.add(str(message), level, now=time.monotonic())

    def upsert_search_attributes(self, **values: Any) -> None:
        """Set attributes the workflow declares on this task's run, with its
        result: `task.upsert_search_attributes(stage="charged", amount=12.5)`."""
        self.search_attributes.update(values)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Task:
        return cls(
            task_id=body["taskId"],
            epoch=body["epoch"],
            task_type=body["taskType"],
            execution_id=body["executionId"],
            reference_name=body["referenceName"],
            attempt=body["attempt"],
            input=body.get("input") or {},
            heartbeat_timeout=body.get("heartbeatTimeoutSeconds", 0),
            response_timeout=body.get("responseTimeoutSeconds", 3600),
            start_to_close_timeout=body.get("startToCloseTimeoutSeconds", 0),
            traceparent=body.get("traceparent") or "",
        )

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt and every delivery of this task in this run.

        Give it to side effects. Not the task id: that names one attempt, and
        when a worker is lost its retry is a new attempt with a new id, after the
        lost worker may already have done the work."""
        return f"{self.execution_id}/{self.reference_name}"

    def beat_interval(self) -> float:
        """A third of the tightest deadline a beat renews."""
        bounds = [b for b in (self.heartbeat_timeout, self.response_timeout) if b > 0]
        return max(0.2, min(bounds) / 3) if bounds else 60.0


@dataclass
class _Registration:
    task_type: str
    handler: Handler
    concurrency: int
    classifier: Classifier | None
    in_flight: int = 0
    # Slots of finished handlers whose results are on their way: the results'
    # request leases their next tasks (`next`), so the poll does not ask for them too.
    reserved: int = 0
    freed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def free(self) -> int:
        return self.concurrency - self.in_flight - self.reserved


TRUNCATED = " [truncated]"
RETRY_BASE_SECONDS = 0.2
RESULT_LINGER = 0.002  # seconds a result waits for others of its poll batch, finishing together
RETRY_CAP_SECONDS = 30.0


@dataclass
class _Report:
    """A result on its way to the server, with what the logs and retries need."""

    task: Task
    body: dict[str, Any]
    fallback: bool = False  # already the bare FAILED that replaces a refused result
    slot: _Registration | None = None  # the slot it holds until its request leased the next task

    def deadline(self) -> float:
        """When the lease is surely gone (monotonic): the server renews it for
        the tightest of its timeouts from the last heartbeat, at most."""
        bounds = [b for b in (self.task.heartbeat_timeout, self.task.response_timeout) if b > 0]
        return self.task.last_beat + (min(bounds) if bounds else 3600)


@contextlib.contextmanager
def _continued_trace(task: Task) -> Iterator[None]:
    """Run the handler in a span continuing the run's trace from the task's
    traceparent, so the handler's own spans join it. A no-op unless the
    worker process set up an OpenTelemetry SDK."""
    if not task.traceparent:
        yield
        return
    parent = TraceContextTextMapPropagator().extract({"traceparent": task.traceparent})
    with trace.get_tracer("sluiceway.worker").start_as_current_span(
        f"execute {task.task_type}",
        context=parent,
        attributes={"sluiceway.task_id": task.task_id, "sluiceway.run_id": task.execution_id},
    ):
        yield


def _about(task: Task) -> str:
    """How the logs name a task: never its input or output."""
    return f"run {task.execution_id} task {task.task_id} epoch {task.epoch}"


def _ids(task: Task) -> dict[str, Any]:
    """The fields of a line about a task: its ids and its trace's (the
    traceparent's when the task came with one; else the run's, which is the same)."""
    fields = about(run_id=task.execution_id, task_id=task.task_id, epoch=task.epoch, task_type=task.task_type)
    parts = task.traceparent.split("-")
    if len(parts) == 4 and len(parts[1]) == 32:
        fields["trace_id"] = parts[1]
    return fields


def _result(task: Task, status: str, **fields: Any) -> _Report:
    """A result the server will accept: delays and reason clamped to the API's
    bounds, and an output that cannot travel as JSON replaced by a failure
    saying so."""
    body: dict[str, Any] = {"taskId": task.task_id, "epoch": task.epoch, "status": status, **fields}
    logged = task.logs.drain()
    if logged:
        body["logs"] = logged
    if task.search_attributes:
        body["searchAttributes"] = dict(task.search_attributes)
    for key in ("retryAfterSeconds", "callbackAfterSeconds"):
        if key in body:
            body[key] = _bounded_delay(task, key, body[key])
    if "reason" in body:
        body["reason"] = _truncated(str(body["reason"]))
    try:
        orjson.dumps(body)
    except TypeError as error:  # orjson.JSONEncodeError: not JSON, or an integer past 64 bits
        log.warning("%s: output is not JSON (%s); reporting the task FAILED", _about(task), error, extra=_ids(task))
        body = {**_bare(body), "status": "FAILED", "reason": _truncated(f"the output is not JSON: {error}")}
    return _Report(task, body)


def _bounded_delay(task: Task, key: str, value: Any) -> float:
    delay = float(value)
    bounded = 0.0 if math.isnan(delay) else min(max(delay, 0.0), float(MAX_DELAY_SECONDS))
    if bounded != delay:
        log.info("%s: %s %s clamped to %s, the API's bound", _about(task), key, value, bounded, extra=_ids(task))
    return bounded


def _truncated(text: str) -> str:
    if len(text) <= MAX_REASON:
        return text
    return text[: MAX_REASON - len(TRUNCATED)] + TRUNCATED


def _bare(body: dict[str, Any]) -> dict[str, Any]:
    """The lease, and what the task logged: all a bare FAILED keeps."""
    bare = {"taskId": body["taskId"], "epoch": body["epoch"]}
    if body.get("logs"):
        bare["logs"] = body["logs"]
    return bare


def _reason(exc: BaseException) -> str:
    return _truncated(f"{type(exc).__name__}: {exc}")


def _backoff(attempt: int) -> float:
    """Exponential, capped, with equal jitter: retries of many workers spread out."""
    ceiling = min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2.0 ** min(attempt, 32))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


class Worker:
    def __init__(
        self,
        url: str | None = None,
        namespace: str | None = None,
        *,
        worker_id: str | None = None,
        token: str | None = None,
        token_file: str | None = None,
        api_key: str | None = None,
        poll_timeout: float = 10.0,
        classifier: Classifier | None = None,
        shutdown_grace: float = 30.0,
        result_batch: int = 100,
        capture_logs: bool = True,
        log_flush_seconds: float = 1.0,
        lease_with_results: bool = True,
        reports_in_flight: int = 4,
        result_linger: float | None = None,
    ) -> None:
        self.url = url
        self.namespace = namespace
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self._auth = (token, token_file, api_key)
        self.poll_timeout = poll_timeout
        self.classifier = classifier
        self.shutdown_grace = shutdown_grace
        self.result_batch = max(1, min(result_batch, MAX_BATCH))
        self.registrations: dict[str, _Registration] = {}
        self.in_flight: dict[str, tuple[Task, asyncio.Task[None]]] = {}
        self._results: asyncio.Queue[_Report | None] | None = None
        self._give_up_at: float | None = None  # set at shutdown: stop retrying results then
        self.completed = 0  # results accepted by the server, for tests and benchmarks
        self.capture_logs = capture_logs
        self.log_flush_seconds = log_flush_seconds
        self.lease_with_results = lease_with_results
        self.reports_in_flight = max(1, reports_in_flight)
        # Seconds a result waits for others to share its request; None: RESULT_LINGER, none for a slot's report.
        self.result_linger = result_linger

    # -- registration ----------------------------------------------------------

    def task(
        self, task_type: str, *, concurrency: int = 1, classifier: Classifier | None = None
    ) -> Callable[[Handler], Handler]:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")

        def register(handler: Handler) -> Handler:
            if task_type in self.registrations:
                raise ValueError(f"task type {task_type!r} already has a handler")
            self.registrations[task_type] = _Registration(task_type, handler, concurrency, classifier)
            return handler

        return register

    # -- running ---------------------------------------------------------------

    def run_forever(self) -> None:
        """Run until SIGTERM or SIGINT, then shut down gracefully, on uvloop
        unless SLUICEWAY_EVENT_LOOP=asyncio (see sluiceway.worker.eventloop)."""
        choice = eventloop.chosen(os.environ)  # a bad value is refused before anything starts

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await self.run(stop)

        eventloop.run(main(), choice)

    async def run(self, stop: asyncio.Event) -> None:
        if not self.url or not self.namespace:
            raise ValueError("a Worker needs the API url and a namespace (SLUICEWAY_URL, SLUICEWAY_NAMESPACE)")
        if not self.registrations:
            raise ValueError("no task handlers registered: decorate functions with @worker.task(...)")
        token, token_file, api_key = self._auth
        self._results = asyncio.Queue()
        capture = tasklogs.CaptureHandler(clock=time.monotonic) if self.capture_logs else None
        if capture is not None:
            logging.getLogger().addHandler(capture)
        try:
            await self._serve(stop, WorkerClient(self.url, self.namespace, credentials(token, token_file, api_key)))
        finally:
            if capture is not None:
                logging.getLogger().removeHandler(capture)

    async def _serve(self, stop: asyncio.Event, client: WorkerClient) -> None:
        assert self._results is not None
        async with client:
            flusher = asyncio.create_task(self._flush_results(client, stop))
            beater = asyncio.create_task(self._heartbeats(client, stop))
            pollers = [asyncio.create_task(self._poll(client, r, stop)) for r in self.registrations.values()]
            log.info("worker %s polling %s in namespace %s", self.worker_id, sorted(self.registrations), self.namespace)
            await stop.wait()
            log.info("worker %s stopping: finishing %d in-flight tasks", self.worker_id, len(self.in_flight))
            await asyncio.gather(*pollers, return_exceptions=True)
            await self._drain(client)
            self._give_up_at = time.monotonic() + self.shutdown_grace
            self._results.put_nowait(None)  # the flusher sends what is queued, then ends
            await flusher
            beater.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beater

    async def _poll(self, client: WorkerClient, reg: _Registration, stop: asyncio.Event) -> None:
        backoff = 0.5
        while not stop.is_set():
            free = reg.free
            if free <= 0:
                reg.freed.clear()
                await _first(reg.freed.wait(), stop.wait())
                continue
            try:
                leased = await client.poll([reg.task_type], self.worker_id, free, self.poll_timeout)
                backoff = 0.5
            except (TimeoutError, aiohttp.ClientError, WorkerApiError) as error:
                log.warning("poll for %s failed: %s; retrying in %.1f s", reg.task_type, error, backoff)
                await _first(asyncio.sleep(backoff), stop.wait())
                backoff = min(backoff * 2, 30.0)
                continue
            self._start(leased, stop)

    def _start(self, leased: list[dict[str, Any]], stop: asyncio.Event) -> None:
        for body in leased:
            task = Task.from_wire(body)
            reg = self.registrations.get(task.task_type)
            if stop.is_set() or reg is None:  # leased during shutdown: hand it straight back
                self._enqueue(_result(task, "IN_PROGRESS", callbackAfterSeconds=0))
                continue
            reg.in_flight += 1
            runner = asyncio.create_task(self._execute(reg, task))
            self.in_flight[task.task_id] = (task, runner)

    async def _execute(self, reg: _Registration, task: Task) -> None:
        tasklogs.current.set(task.logs)  # this asyncio task's context (and the thread a sync handler gets)
        worker_logs.current.set(_ids(task))
        result = None
        try:
            result = await self._outcome(reg, task)
        except asyncio.CancelledError:
            pass  # abandoned: the lease is gone or we are shutting down
        finally:
            reg.in_flight -= 1
            self.in_flight.pop(task.task_id, None)
            if result is not None and self.lease_with_results:
                reg.reserved += 1  # the result's request leases this slot's next task
                result.slot = reg
            else:
                reg.freed.set()
        if result is not None:
            self._enqueue(result)

    async def _call(self, reg: _Registration, task: Task) -> Any:
        if inspect.iscoroutinefunction(reg.handler):
            call: Awaitable[Any] = reg.handler(task)
        else:
            call = asyncio.to_thread(reg.handler, task)
        if task.start_to_close_timeout > 0:
            return await asyncio.wait_for(call, task.start_to_close_timeout)
        return await call

    async def _outcome(self, reg: _Registration, task: Task) -> _Report:
        try:
            with _continued_trace(task):
                output = await self._call(reg, task)
        except (KeyboardInterrupt, asyncio.CancelledError):
            raise
        except TerminalError as exc:
            return _result(task, "FAILED_WITH_TERMINAL_ERROR", reason=_reason(exc))
        except Snooze as exc:
            return _result(task, "IN_PROGRESS", callbackAfterSeconds=exc.seconds)
        except RetryAfter as exc:
            if not exc.consume_budget:
                return _result(task, "IN_PROGRESS", callbackAfterSeconds=exc.seconds)
            # The handler's own direction: only the task's deadline gates it, not the ceiling.
            return _result(
                task, "FAILED", reason=_reason(exc), retryAfterSeconds=exc.seconds, retryAfterSource="signal"
            )
        except BaseException as exc:  # noqa: BLE001 - any failure of user code is an outcome, never a crash
            log.debug("task %s failed:\n%s", task.task_id, traceback.format_exc(), extra=_ids(task))
            return self._classified(reg, task, exc)
        if output is None:
            output = {}
        if not isinstance(output, dict):
            output = {"result": output}
        return _result(task, "COMPLETED", output=output)

    def _classified(self, reg: _Registration, task: Task, exc: BaseException) -> _Report:
        chain = [c for c in (reg.classifier, self.classifier) if c is not None]
        verdict = compose_retry_classifiers(*chain)(exc, task.attempt) if chain else None
        reason = _reason(exc)
        if verdict is None or verdict.kind is None:
            fields: dict[str, Any] = {"reason": reason}
            if verdict is not None and verdict.delay is not None:
                fields["retryAfterSeconds"] = verdict.delay
            return _result(task, "FAILED", **fields)
        return self._apply(task, verdict, reason)

    def _apply(self, task: Task, verdict: RetryOverride, reason: str) -> _Report:
        if verdict.kind == "non_retryable":
            return _result(task, "FAILED_WITH_TERMINAL_ERROR", reason=reason)
        fields: dict[str, Any] = {"reason": reason}
        if verdict.kind == "indefinite":
            # The server retries it with no attempt ceiling, on the policy's curve
            # (or the hint), until the task's deadline: any worker language gets this.
            fields["retryKind"] = "indefinite"
        if verdict.delay is not None:
            fields["retryAfterSeconds"] = verdict.delay
        return _result(task, "FAILED", **fields)

    # -- results and heartbeats ------------------------------------------------

    def _enqueue(self, report: _Report) -> None:
        assert self._results is not None
        self._results.put_nowait(report)

    async def _flush_results(self, client: WorkerClient, stop: asyncio.Event) -> None:
        """Send results in batches until the None sentinel, after everything
        before it. A few requests go at once: a result that finishes while one
        is on its way does not wait for that round trip to end."""
        assert self._results is not None
        sending: set[asyncio.Task[None]] = set()
        room = asyncio.Semaphore(self.reports_in_flight)
        closing = False
        while not closing:
            first = await self._results.get()
            if first is None:
                break
            batch = [first]
            # Linger briefly: results of one poll batch finish together. Not for a
            # result whose request leases its slot's next task: that slot (of a
            # gated type, perhaps) stays idle until the request is answered, so it
            # goes after one turn of the loop, with whatever finished in the same turn.
            # Alone in its batch, a result would only wait for nothing.
            if self.result_batch > 1:
                await asyncio.sleep(self._linger(first))
            while len(batch) < self.result_batch and not self._results.empty():
                item = self._results.get_nowait()
                if item is None:
                    closing = True
                    break
                batch.append(item)
            await room.acquire()
            sender = asyncio.create_task(self._send_batch(client, batch, stop, room))
            sending.add(sender)
            sender.add_done_callback(sending.discard)
        if sending:
            await asyncio.gather(*sending)

    def _linger(self, first: _Report) -> float:
        if self.result_linger is not None:
            return self.result_linger
        return 0.0 if first.slot is not None else RESULT_LINGER

    async def _send_batch(
        self, client: WorkerClient, batch: list[_Report], stop: asyncio.Event, room: asyncio.Semaphore
    ) -> None:
        try:
            await self._send(client, batch, self._next_counts(batch, stop), stop)
        finally:
            self._unreserve(batch)
            room.release()

    def _next_counts(self, batch: list[_Report], stop: asyncio.Event) -> dict[str, int]:
        """Per task type, the slots this batch's results free: leased again with them."""
        counts: dict[str, int] = {}
        if stop.is_set():
            return counts
        for report in batch:
            if report.slot is not None:
                counts[report.slot.task_type] = counts.get(report.slot.task_type, 0) + 1
        return counts

    def _unreserve(self, batch: list[_Report]) -> None:
        """The slots the batch held go back to the polls (those `next` refilled are in flight again)."""
        for report in batch:
            if report.slot is not None:
                report.slot.reserved -= 1
                report.slot.freed.set()
                report.slot = None

    async def _send(
        self,
        client: WorkerClient,
        batch: list[_Report],
        next_counts: dict[str, int] | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Deliver every result of the batch, or learn that its lease is gone.
        The first request also leases `next_counts` (the slots the results
        free), and those tasks start at once."""
        pending, failures = batch, 0
        while pending := self._still_leased(pending):
            try:
                if next_counts and stop is not None:
                    asking, next_counts = next_counts, None  # asked once: a retry only delivers
                    try:
                        outcomes, leased = await client.results_and_lease(
                            [r.body for r in pending], self.worker_id, asking
                        )
                    finally:
                        self._unreserve(batch)
                    self._start(leased, stop)
                else:
                    outcomes = await client.results([r.body for r in pending])
            except WorkerApiError as error:
                if error.retryable():
                    failures = await self._pause(failures, pending, error)
                else:  # the whole request was refused: an older server judging the batch whole, say
                    pending = await self._send_one_by_one(client, pending, error)
                continue
            except (TimeoutError, aiohttp.ClientError) as error:
                failures = await self._pause(failures, pending, error)
                continue
            again = self._settle(pending, outcomes)
            if any(report in pending for report in again):  # the server had trouble with some: not too fast
                failures = await self._pause(failures, again, RuntimeError("some results were not applied"))
            pending = again

    async def _send_one_by_one(
        self, client: WorkerClient, pending: list[_Report], refusal: WorkerApiError
    ) -> list[_Report]:
        """Find the item a whole-request refusal was about: alone, its refusal
        is its own, handled as an invalid item."""
        if len(pending) > 1:
            log.warning("%d results refused together (%s); sending them one by one", len(pending), refusal)
            for report in pending:
                await self._send(client, [report])
            return []
        return self._settle(pending, [{"code": 422, "error": str(refusal)}])

    def _settle(self, sent: list[_Report], outcomes: list[dict[str, Any]]) -> list[_Report]:
        """What is left to send after the server's per-item answers."""
        again: list[_Report] = []
        for report, outcome in zip(sent, outcomes, strict=False):
            code = outcome.get("code")
            if code == 200:
                self.completed += 1
            elif code in (404, 409):
                log.info(
                    "%s: result not applied, the lease is gone: %s",
                    _about(report.task),
                    outcome.get("error"),
                    extra=_ids(report.task),
                )
            elif code == 413:  # the server failed the task: its output is over the payload limit
                log.error("%s: %s", _about(report.task), outcome.get("error"), extra=_ids(report.task))
            elif code == 422 and report.fallback:
                log.error(
                    "%s: even a bare FAILED was refused: %s; dropped",
                    _about(report.task),
                    outcome.get("error"),
                    extra=_ids(report.task),
                )
            elif code == 422:
                log.warning(
                    "%s: %s result refused as invalid (%s); reporting it FAILED with the reason",
                    _about(report.task),
                    report.body.get("status"),
                    outcome.get("error"),
                    extra=_ids(report.task),
                )
                reason = _truncated(f"the server refused the worker's result: {outcome.get('error')}")
                again.append(_Report(report.task, {**_bare(report.body), "status": "FAILED", "reason": reason}, True))
            else:
                again.append(report)  # anything else is the server's trouble: send it again
        return again + sent[len(outcomes) :]

    def _still_leased(self, pending: list[_Report]) -> list[_Report]:
        now = time.monotonic()
        live = []
        for report in pending:
            if now < report.deadline() and (self._give_up_at is None or now < self._give_up_at):
                live.append(report)
            else:
                log.error(
                    "%s: result could not be delivered before the lease ran out or shutdown ended; "
                    "the server will hand the task out again",
                    _about(report.task),
                    extra=_ids(report.task),
                )
        return live

    async def _pause(self, failures: int, pending: list[_Report], error: BaseException) -> int:
        delay = _backoff(failures)
        log.warning("reporting results failed (%s); retrying in %.1f s: %s", error, delay, _listed(pending))
        await asyncio.sleep(delay)
        return failures + 1

    async def _heartbeats(self, client: WorkerClient, stop: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(0.2)
            now = time.monotonic()
            due = [task for task, _ in self.in_flight.values() if self._beat_due(task, now)]
            if not due:
                continue
            shipped = {t.task_id: lines for t in due if (lines := t.logs.drain())}
            try:
                answer = await client.heartbeats([(t.task_id, t.epoch) for t in due], shipped)
            except (TimeoutError, aiohttp.ClientError, WorkerApiError) as error:
                log.warning("heartbeat failed (%s); retrying: %s", error, ", ".join(_about(t) for t in due[:10]))
                for task in due:
                    task.logs.put_back(shipped.get(task.task_id, []))
                continue
            for task in due:
                if task.task_id in answer.alive:
                    task.last_beat = now
            for refused in answer.errors:
                entry = self.in_flight.get(str(refused.get("taskId")))
                named = _about(entry[0]) if entry else f"task {refused.get('taskId')}"
                log.error(
                    "%s: heartbeat refused as invalid: %s",
                    named,
                    refused.get("error"),
                    extra=_ids(entry[0]) if entry else None,
                )
            for task_id in answer.gone:
                entry = self.in_flight.get(task_id)
                if entry is not None:
                    log.warning(
                        "task %s is no longer ours (timed out, canceled or re-leased); abandoning it",
                        task_id,
                        extra=_ids(entry[0]),
                    )
                    entry[1].cancel()

    def _beat_due(self, task: Task, now: float) -> bool:
        """A beat is due to renew the lease, or to ship lines waiting too long."""
        waiting = task.logs.waiting_since()
        return now - task.last_beat >= task.beat_interval() or (
            waiting is not None and now - waiting >= self.log_flush_seconds
        )

    async def _drain(self, client: WorkerClient) -> None:
        """Shutdown: wait for in-flight work, then hand back what is left."""
        if self.in_flight:
            await asyncio.wait([runner for _, runner in self.in_flight.values()], timeout=self.shutdown_grace)
        leftovers = list(self.in_flight.values())
        for task, runner in leftovers:
            runner.cancel()
            self._enqueue(_result(task, "INTERRUPTED"))
        if leftovers:
            log.info("handed back %d unfinished tasks", len(leftovers))


def _listed(reports: list[_Report]) -> str:
    shown = ", ".join(_about(r.task) for r in reports[:10])
    return shown if len(reports) <= 10 else f"{shown} and {len(reports) - 10} more"


async def _first(*awaitables: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
