"""Per-identity and per-namespace API rate limits at the edge
(`sluiceway.controls.ratelimits` keeps the buckets).

Runs after authentication, so the key is the authenticated identity (its
user name, never its token or key); with authentication off, or for webhook
intake (third parties, verified later by signature), the caller's address.
The worker protocol has its own, larger buckets. A refusal is 429 with
Retry-After, naming the bucket and never a credential."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from sluiceway.api.identities import Identity
from sluiceway.controls.ratelimits import Limiter, Refusal, Traffic
from sluiceway.observability import metrics

_NAMESPACED = re.compile(r"^/v1/ns/(?P<namespace>[^/]+)(?P<rest>/.*)?$")
# The worker protocol: poll, results and heartbeats, batched or one by one.
_WORKER = re.compile(r"^/tasks/(poll|results|heartbeats|[^/]+/result|[^/]+/heartbeat)$")


def traffic_of(path: str) -> tuple[Traffic, str | None]:
    """The traffic class of a `/v1` path, and its namespace (None outside one)."""
    found = _NAMESPACED.match(path)
    if found is None:
        return Traffic.API, None
    worker = _WORKER.match(found["rest"] or "") is not None
    return (Traffic.WORKER if worker else Traffic.API), found["namespace"]


def _caller(scope: Scope) -> str:
    state = scope.get("state") or {}
    identity = state.get("identity")
    if isinstance(identity, Identity):
        return identity.user
    client = scope.get("client")
    return f"address:{client[0]}" if client else "address:unknown"


def refused(refusal: Refusal) -> JSONResponse:
    what = f"{refusal.bucket} {refusal.key}"
    return JSONResponse(
        {
            "error": "RATE_LIMITED",
            "message": f"too many requests from {what}: retry after {refusal.retry_after_seconds} s",
            "control": "apiRateLimit",
            "bucket": refusal.bucket,
            "retryAfterSeconds": refusal.retry_after_seconds,
        },
        status_code=429,
        headers={"Retry-After": str(refusal.retry_after_seconds)},
    )


class RateLimitMiddleware:
    """Add it before the authentication middleware (which then runs first)."""

    def __init__(self, app: ASGIApp, limiter: Limiter, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.limiter = limiter
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/v1" or path.startswith("/v1/")):
            await self.app(scope, receive, send)
            return
        traffic, namespace = traffic_of(path)
        refusal = self.limiter.admit(traffic, _caller(scope), namespace, self.clock())
        if refusal is not None:
            metrics.API_RATE_LIMITED.labels(traffic.value, refusal.bucket).inc()
            await refused(refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)
