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
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from sluiceway.controls.breaker import Breakers, BreakerState
from sluiceway.controls.expressions import ExpressionError, evaluate_cel
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.workflow import TaskType
from sluiceway.observability import metrics
from sluiceway.observability.logs import about
from sluiceway.store import leasing
from sluiceway.store.database import Pool
from sluiceway.store.notifications import Notifications
from sluiceway.store.policies import Policies
from sluiceway.systemtasks.runner import SystemTaskRunner
from sluiceway.worker.classifiers import parse_retry_after

log = logging.getLogger(__name__)

_MAX_BODY_BYTES = 256 * 1024
_STATE_VALUE = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class TargetRefused(Exception):
    """The task may not call this target (a link-local address, or a host off the allow-list)."""


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


async def check_target(request: HttpRequest, allowed_hosts: tuple[str, ...]) -> None:
    """Refuse link-local targets (cloud metadata endpoints) always, and hosts
    off the allow-list when one is set: a workflow author must not be able to
    make the operator read what only the operator can reach."""
    await check_host(urlsplit(request.uri).hostname or "", allowed_hosts)


async def check_host(host: str, allowed_hosts: tuple[str, ...]) -> None:
    """check_target for a bare host name (gRPC targets too)."""
    if allowed_hosts and not any(fnmatch.fnmatch(host, pattern) for pattern in allowed_hosts):
        raise TargetRefused(f"host {host} is not in SLUICEWAY_HTTP_ALLOWED_HOSTS")
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if address.is_link_local:
            raise TargetRefused(f"host {host} resolves to link-local {address}")


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

    def __init__(self, breakers: Breakers, allowed_hosts: tuple[str, ...] = ()) -> None:
        self.breakers = breakers
        self.allowed_hosts = allowed_hosts
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=True)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    def _result(self, lease: leasing.Lease, status: ResultStatus, **fields: Any) -> TaskResult:
        return TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=status, **fields)

    async def request_of(self, lease: leasing.Lease) -> HttpRequest:
        """The request a leased task asks for; ValueError naming the field when it is malformed."""
        return HttpRequest.from_input(lease.input)

    async def call(self, lease: leasing.Lease) -> TaskResult:
        """One HTTP call for one leased task, classified into a result."""
        try:
            request = await self.request_of(lease)
            await check_target(request, self.allowed_hosts)
        except (ValueError, TargetRefused) as error:
            metrics.HTTP_TASK_CALLS.labels("refused").inc()
            return self._result(lease, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason=str(error))
        except OSError as error:  # DNS failure: a server-side problem, retryable
            return self._result(lease, ResultStatus.FAILED, reason=f"cannot resolve {request.target}: {error}")
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
        result, server_failure = await self._request(lease, request)
        breaker.record(time.monotonic() * 1000, server_failure, probe=verdict.probe)
        self._observe(request.target)
        return result

    def _observe(self, target: str) -> None:
        metrics.BREAKER_STATE.labels(target).set(_STATE_VALUE[self.breakers(target).state])

    async def _request(self, lease: leasing.Lease, request: HttpRequest) -> tuple[TaskResult, bool]:
        assert self._session is not None
        timeout = aiohttp.ClientTimeout(connect=request.connect_timeout, sock_read=request.read_timeout)
        body = (
            None
            if request.body is None
            else (request.body if isinstance(request.body, str) else orjson.dumps(request.body))
        )
        headers = dict(request.headers)
        if request.body is not None and not isinstance(request.body, str):
            headers.setdefault("Content-Type", "application/json")
        try:
            async with self._session.request(
                request.method, request.uri, data=body, headers=headers, timeout=timeout, allow_redirects=False
            ) as response:
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
            metrics.HTTP_TASK_CALLS.labels("connection").inc()
            return self._result(
                lease, ResultStatus.FAILED, reason=f"connection error calling {request.target}: {error}"
            ), True
        return self._classify(lease, request, answer, retry_after)

    def _classify(
        self, lease: leasing.Lease, request: HttpRequest, answer: dict[str, Any], retry_after: float | None
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

    def _done(self, lease: leasing.Lease, answer: dict[str, Any]) -> bool:
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
        pool: Pool,
        breakers: Breakers,
        *,
        notifications: Notifications | None = None,
        policies: Policies | None = None,
        concurrency: int = 32,
        allowed_hosts: tuple[str, ...] = (),
        worker_id: str = "operator/http",
    ) -> None:
        self.http = HttpTasks(breakers, allowed_hosts)
        super().__init__(
            pool,
            [self.http],
            notifications=notifications,
            policies=policies,
            concurrency=concurrency,
            worker_id=worker_id,
        )

    @property
    def breakers(self) -> Breakers:
        return self.http.breakers
