"""HTTP and HTTP_POLL tasks, run by the operator.

Input (Conductor's shape):

    inputParameters:
      http_request: {uri, method: GET, headers: {}, body, connectionTimeOut: 10000, readTimeOut: 30000}
      terminationCondition: "response.body.state == 'done'"   # HTTP_POLL only, CEL over `response`
      pollingIntervalSeconds: 5                                  # HTTP_POLL only

Output: `{"response": {"statusCode", "headers", "body"}}`.

Failures are classified by status, not by class: other 4xx are terminal (the
request itself is wrong); 408, 429 and 5xx are retryable, with the server's
Retry-After honored exactly; timeouts and connection errors are retryable.
Calls go through the target host's circuit breaker, which counts only
server-side failures and, when open, fails the task non-terminally so the
retry policy still decides.

Every connection obeys the egress policy of the task's namespace
(`sluiceway.systemtasks.egress`): a destination it denies (loopback, the
cluster's ranges, the Kubernetes API, ...) fails the task terminally with a
reason naming the policy. Redirects (301, 302, 303, 307, 308) are followed,
at most MAX_REDIRECTS, each checked as the first call; credentials are not
sent on to another host.

With tracing on, each call carries the task attempt's W3C `traceparent` (the
configured OpenTelemetry propagator's headers), so a traced callee's spans
join the run's trace beneath the attempt; GRPC tasks send it as metadata.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
import orjson

from sluiceway.controls.breaker import Breakers, BreakerState
from sluiceway.controls.egress import EgressPolicy
from sluiceway.controls.expressions import ExpressionError, evaluate_cel
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.workflow import TaskType
from sluiceway.observability import metrics, tracing
from sluiceway.observability.logs import about
from sluiceway.plane import Plane
from sluiceway.plane.dispatch import Lease
from sluiceway.systemtasks.egress import Egress, EgressRefused, check_literal, refused_cause
from sluiceway.systemtasks.runner import SystemTaskRunner
from sluiceway.worker.classifiers import parse_retry_after

log = logging.getLogger(__name__)

_MAX_BODY_BYTES = 256 * 1024
MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Not sent on to another host by a redirect.
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})
_STATE_VALUE = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class TargetRefused(Exception):
    """The task may not call this target: a host off SLUICEWAY_HTTP_ALLOWED_HOSTS."""


@dataclass(frozen=True)
class HttpRequest:
    uri: str
    method: str
    headers: dict[str, str]
    body: Any
    connect_timeout: float
    read_timeout: float

    @classmethod
    def from_input(cls, inputs: dict[str, Any]) -> HttpRequest:
        raw = inputs.get("http_request")
        if not isinstance(raw, dict) or not isinstance(raw.get("uri"), str):
            raise ValueError("inputParameters.http_request.uri is required")
        parts = urlsplit(raw["uri"])
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"http_request.uri must be an http(s) URL, not {raw['uri']!r}")
        method = str(raw.get("method", "GET")).upper()
        if method not in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
            raise ValueError(f"http_request.method {method!r} is not an HTTP method")
        headers = raw.get("headers") or {}
        if not isinstance(headers, dict):
            raise ValueError("http_request.headers must be an object")
        return cls(
            raw["uri"],
            method,
            {str(k): str(v) for k, v in headers.items()},
            raw.get("body"),
            float(raw.get("connectionTimeOut", 10_000)) / 1000,
            float(raw.get("readTimeOut", 30_000)) / 1000,
        )

    @property
    def target(self) -> str:
        parts = urlsplit(self.uri)
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def check_target(request: HttpRequest, allowed_hosts: tuple[str, ...]) -> None:
    """Refuse hosts off the operator's allow-list when one is set. The egress
    policy (loopback, link-local, cluster ranges, ...) is checked on the
    resolved addresses as the connection is made."""
    check_host(urlsplit(request.uri).hostname or "", allowed_hosts)


def check_host(host: str, allowed_hosts: tuple[str, ...]) -> None:
    """check_target for a bare host name (gRPC targets too)."""
    if allowed_hosts and not any(fnmatch.fnmatch(host, pattern) for pattern in allowed_hosts):
        raise TargetRefused(f"host {host} is not in SLUICEWAY_HTTP_ALLOWED_HOSTS")


def _redirected(request: HttpRequest, status: int, location: str) -> HttpRequest:
    """The request a redirect asks for: 303 (and 301/302 after a POST) become a
    GET without a body, as browsers do; credentials stay with their host."""
    uri = urljoin(request.uri, location)
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"redirected to {location[:200]!r}, not an http(s) URL")
    method, body = request.method, request.body
    if status == 303 or (status in (301, 302) and method == "POST"):
        method, body = ("HEAD" if method == "HEAD" else "GET"), None
    headers = request.headers
    if parts.hostname != urlsplit(request.uri).hostname:
        headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIALS}
    return replace(request, uri=uri, method=method, body=body, headers=headers)


def with_trace_context(headers: dict[str, str], lease: Lease) -> dict[str, str]:
    """`headers` plus the task attempt's trace context (`traceparent`) when
    tracing is on, so the callee's spans join the run's trace. A header of
    that name the task sets itself is kept: it is the user's to choose."""
    own = {name.lower() for name in headers}
    context = tracing.propagation_headers(lease.execution_id, lease.task_id, lease.epoch)
    return headers | {name: value for name, value in context.items() if name.lower() not in own}


def _body(data: bytes, content_type: str) -> Any:
    if "json" in content_type:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return data[:_MAX_BODY_BYTES].decode(errors="replace")


class HttpTasks:
    """The HTTP and HTTP_POLL system tasks: one call per leased task, through
    the target's circuit breaker."""

    types = frozenset({TaskType.HTTP, TaskType.HTTP_POLL})
    holds_slot = True

    def __init__(self, breakers: Breakers, allowed_hosts: tuple[str, ...] = (), egress: Egress | None = None) -> None:
        self.breakers = breakers
        self.allowed_hosts = allowed_hosts
        self.egress = egress or Egress()

    async def start(self) -> None:
        """Sessions are opened on first use, one per egress policy."""

    async def stop(self) -> None:
        await self.egress.close()

    def _result(self, lease: Lease, status: ResultStatus, **fields: Any) -> TaskResult:
        return TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=status, **fields)

    async def request_of(self, lease: Lease) -> HttpRequest:
        """The request a leased task asks for; ValueError naming the field when it is malformed."""
        return HttpRequest.from_input(lease.input)

    async def call(self, lease: Lease) -> TaskResult:
        """One HTTP call for one leased task, classified into a result."""
        try:
            request = await self.request_of(lease)
            check_target(request, self.allowed_hosts)
        except (ValueError, TargetRefused) as error:
            return self._refused(lease, error)
        breaker = self.breakers(request.target)
        verdict = breaker.allow(time.monotonic() * 1000)
        self._observe(request.target)
        if not verdict.allowed:
            metrics.BREAKER_REJECTIONS.labels(request.target).inc()
            return self._result(
                lease,
                ResultStatus.FAILED,
                reason=f"circuitBreaker:{request.target} open: failing fast, next probe in "
                f"{verdict.retry_in_ms / 1000:.1f} s",
            )
        try:
            result, server_failure = await self._request(lease, request, await self.egress.policy(lease.namespace))
        except (ValueError, TargetRefused, EgressRefused) as error:
            return self._refused(lease, error)
        breaker.record(time.monotonic() * 1000, server_failure, probe=verdict.probe)
        self._observe(request.target)
        return result

    def _refused(self, lease: Lease, error: Exception) -> TaskResult:
        metrics.HTTP_TASK_CALLS.labels("refused").inc()
        return self._result(lease, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason=str(error))

    def _observe(self, target: str) -> None:
        metrics.BREAKER_STATE.labels(target).set(_STATE_VALUE[self.breakers(target).state])

    async def _request(self, lease: Lease, request: HttpRequest, policy: EgressPolicy) -> tuple[TaskResult, bool]:
        """The call, following redirects; each hop's destination is checked
        against `policy` (EgressRefused, TargetRefused or ValueError when one
        may not be called)."""
        for _ in range(MAX_REDIRECTS + 1):
            check_target(request, self.allowed_hosts)
            check_literal(policy, urlsplit(request.uri).hostname or "")
            outcome = await self._once(lease, request, policy)
            if isinstance(outcome, tuple):
                return outcome
            request = outcome
        raise ValueError(f"more than {MAX_REDIRECTS} redirects, the last to {request.uri[:200]}")

    async def _once(
        self, lease: Lease, request: HttpRequest, policy: EgressPolicy
    ) -> tuple[TaskResult, bool] | HttpRequest:
        """One hop: its classified result, or the request a redirect asks for."""
        session = self.egress.session(policy)
        timeout = aiohttp.ClientTimeout(connect=request.connect_timeout, sock_read=request.read_timeout)
        body = (
            None
            if request.body is None
            else (request.body if isinstance(request.body, str) else orjson.dumps(request.body))
        )
        headers = dict(request.headers)
        if request.body is not None and not isinstance(request.body, str):
            headers.setdefault("Content-Type", "application/json")
        headers = with_trace_context(headers, lease)
        try:
            async with session.request(
                request.method, request.uri, data=body, headers=headers, timeout=timeout, allow_redirects=False
            ) as response:
                location = response.headers.get("Location")
                if response.status in _REDIRECTS and location:
                    return _redirected(request, response.status, location)
                data = await response.content.read(_MAX_BODY_BYTES)
                answer = {
                    "statusCode": response.status,
                    "headers": {str(k): v for k, v in response.headers.items()},
                    "body": _body(data, response.headers.get("Content-Type", "")),
                }
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
        except (TimeoutError, aiohttp.ServerTimeoutError) as error:
            metrics.HTTP_TASK_CALLS.labels("timeout").inc()
            return self._result(
                lease, ResultStatus.FAILED, reason=f"timeout calling {request.target}: {type(error).__name__}"
            ), True
        except aiohttp.ClientError as error:
            refused = refused_cause(error)
            if refused is not None:
                raise refused from None
            metrics.HTTP_TASK_CALLS.labels("connection").inc()
            return self._result(
                lease, ResultStatus.FAILED, reason=f"connection error calling {request.target}: {error}"
            ), True
        return self._classify(lease, request, answer, retry_after)

    def _classify(
        self, lease: Lease, request: HttpRequest, answer: dict[str, Any], retry_after: float | None
    ) -> tuple[TaskResult, bool]:
        status = int(answer["statusCode"])
        reason = f"HTTP {status} from {request.method} {request.target}"
        if 200 <= status < 400:
            metrics.HTTP_TASK_CALLS.labels("ok").inc()
            if TaskType(lease.kind).polls() and not self._done(lease, answer):
                interval = float(lease.input.get("pollingIntervalSeconds", 5))
                return self._result(
                    lease,
                    ResultStatus.IN_PROGRESS,
                    output={"response": answer},
                    callback_after_seconds=max(interval, 0.0),
                ), False
            return self._result(lease, ResultStatus.COMPLETED, output={"response": answer}), False
        if status in (408, 429) or status >= 500:
            metrics.HTTP_TASK_CALLS.labels("server_error").inc()
            return self._result(
                lease, ResultStatus.FAILED, reason=reason, output={"response": answer}, retry_after_seconds=retry_after
            ), True
        metrics.HTTP_TASK_CALLS.labels("client_error").inc()
        return self._result(
            lease, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason=reason, output={"response": answer}
        ), False

    def _done(self, lease: Lease, answer: dict[str, Any]) -> bool:
        condition = lease.input.get("terminationCondition")
        if not condition:
            return True
        try:
            return bool(evaluate_cel(str(condition), {"response": answer}))
        except ExpressionError as error:
            log.warning(
                "HTTP_POLL task %s: %s", lease.task_id, error, extra=about(task_id=lease.task_id, epoch=lease.epoch)
            )
            return False


class HttpTaskRunner(SystemTaskRunner):
    """The system-task runner with the HTTP tasks: what the operator runs today."""

    def __init__(
        self,
        plane: Plane,
        breakers: Breakers,
        *,
        concurrency: int = 32,
        allowed_hosts: tuple[str, ...] = (),
        egress: Egress | None = None,
        worker_id: str = "operator/http",
    ) -> None:
        self.http = HttpTasks(breakers, allowed_hosts, egress)
        super().__init__(plane, [self.http], concurrency=concurrency, worker_id=worker_id)

    @property
    def breakers(self) -> Breakers:
        return self.http.breakers
