"""The FastAPI application."""

from __future__ import annotations

from fastapi import Depends, FastAPI, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sluiceway import __version__
from sluiceway.api import (
    definitions,
    diagnostics,
    errors,
    events,
    executions,
    guards,
    human,
    schedules,
    tasks,
    webhooks,
)
from sluiceway.api.payloads import RequestSizeLimit
from sluiceway.api.ratelimits import RateLimitMiddleware
from sluiceway.api.services import Services
from sluiceway.api.tracing import RequestSpans
from sluiceway.controls.ratelimits import Limiter
from sluiceway.observability import tracing
from sluiceway.store.database import ping

DESCRIPTION = """
Sluiceway's HTTP API: start and inspect runs, and the worker protocol.

**Workers** lease tasks with `POST /v1/ns/{namespace}/tasks/poll` (a long poll:
held open up to `pollTimeoutSeconds` until a task is ready), renew leases with
heartbeats, and report results, several per request. Every lease carries an
`epoch`; a result or heartbeat with a stale epoch is refused with 409 and
changes nothing. Every task may be delivered more than once: give side effects
an idempotency key made of `executionId` and `referenceName` (the same for every
attempt), not the task id (which names one attempt).

**Authentication** (when the operator runs with `SLUICEWAY_AUTH=kubernetes`):
every `/v1` request carries a Kubernetes token (`Authorization: Bearer ...`,
a worker's ServiceAccount token) or an API key (`X-API-Key`). 401 without a
valid one; 403 when RBAC does not grant the route's verb on the `sluiceway.dev`
resource in that namespace (workers: `poll` and `update` on `taskdefinitions`
named by task type).
"""


def create_app(services: Services) -> FastAPI:
    app = FastAPI(
        title="Sluiceway", version=__version__, description=DESCRIPTION, dependencies=[Depends(guards.enforce)]
    )
    app.state.services = services
    errors.install(app)
    if tracing.enabled():  # off by default: no middleware on the hot path
        app.add_middleware(RequestSpans)
    app.include_router(executions.router)
    app.include_router(tasks.router)
    app.include_router(human.router)
    app.include_router(webhooks.router)
    app.include_router(diagnostics.router)
    app.include_router(definitions.router)
    app.include_router(schedules.router)
    app.include_router(events.router)

    @app.get("/healthz", tags=["health"], summary="Liveness: the process serves requests")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["health"],
        summary="Readiness: PostgreSQL answers",
        responses={503: {"description": "PostgreSQL does not answer: `{status, reason}`"}},
    )
    async def readyz() -> JSONResponse:
        try:
            await ping(services.pool)
        except Exception as error:  # noqa: BLE001 - any failure means "not ready"
            # The cause's name: "ConnectionRefusedError" says more than "StoreUnavailable".
            cause = error.__cause__ or error
            return JSONResponse({"status": "unavailable", "reason": type(cause).__name__}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(RequestSizeLimit, limit=services.max_request_bytes)
    # Inside the authentication middleware (added by guards.install, after it): it keys on the identity.
    app.add_middleware(RateLimitMiddleware, limiter=Limiter(services.rate_limits))
    guards.install(app, services)  # last: it checks every /v1 route has a guard
    return app
