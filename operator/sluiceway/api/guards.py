"""Access in the application: who is calling (a middleware), and what each
route asks of RBAC (a guard declared with the route).

With `SLUICEWAY_AUTH=kubernetes` every `/v1/...` request needs an identity:

- `Authorization: Bearer <token>`: a Kubernetes token (a worker's projected
  ServiceAccount token), checked with a TokenReview;
- `X-API-Key: <key>`: a key held in a Secret labelled `sluiceway.dev/api-key:
  "true"` in the operator's namespace, acting as the ServiceAccount its
  `sluiceway.dev/service-account: <namespace>/<name>` annotation names.

Each route then asks a SubjectAccessReview whether that identity may do the
route's verb on a `sluiceway.dev` resource in the path's namespace, so
ordinary RBAC Roles decide who may work on what; a worker of namespace `a`
holds no right in namespace `b`. A route states its rule where it is declared:

    @router.get("/queues", dependencies=[requires("list", "taskdefinitions")])

or, when the names come from the request body, takes the guard as a parameter
and calls it with them:

    async def poll(..., authorize: Annotated[Authorize, requires("poll", "taskdefinitions", Names.REQUEST)]):
        await authorize(request.task_types)

A `/v1` route without a guard refuses every caller and is named in the log at
start."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from sluiceway.api.access import Names, Rule
from sluiceway.api.authenticator import Authenticator, NotReviewed, unauthenticated
from sluiceway.api.errors import ApiError
from sluiceway.api.identities import Identity
from sluiceway.api.ratelimits import refused
from sluiceway.api.services import Services, services_of
from sluiceway.controls.ratelimits import Refusal, TokenBuckets, Traffic
from sluiceway.observability import metrics

log = logging.getLogger(__name__)

# The attribute naming what guards a dependency: its Rule, WRITES_AS_CALLER or SIGNED.
GUARD = "sluiceway_guard"
# Definition writes are authorized by the Kubernetes API itself, as the caller.
WRITES_AS_CALLER = "writes as the caller"
# Webhook intake is called by third parties without Kubernetes credentials:
# exempt from the bearer-token middleware, it verifies each call's own
# signature against the Webhook's secret instead.
SIGNED = "verified by its own signature"


def identity_of(request: Request) -> Identity:
    identity = getattr(request.state, "identity", None)
    if not isinstance(identity, Identity):
        raise unauthenticated("no identity")  # the middleware did not run: refuse rather than guess
    return identity


def _authenticator(svc: Services) -> Authenticator:
    if svc.authenticator is None:
        raise ApiError(503, "AUTH_UNAVAILABLE", "authentication is on but this process has no Kubernetes API")
    return svc.authenticator


class Authorize:
    """A route's rule bound to one request: `await authorize(names)` refuses
    (403) unless the caller may do the rule's verb on those names in the
    path's namespace. Does nothing when authentication is off."""

    def __init__(self, rule: Rule, request: Request) -> None:
        self.rule = rule
        self._request = request
        self._services = services_of(request)

    @property
    def enforced(self) -> bool:
        """False when authentication is off: callers may skip work done only to name resources."""
        return self._services.authenticate

    async def __call__(self, names: Iterable[str] = ()) -> None:
        if not self.enforced:
            return
        namespace = str(self._request.path_params.get("namespace", ""))
        await _authenticator(self._services).authorize(identity_of(self._request), self.rule.checks(namespace, names))


def requires(verb: str, resource: str, names: Names = Names.NONE) -> Any:
    """A route's guard, as a FastAPI dependency. For `Names.NONE` and
    `Names.PATH` it checks before the route runs: list it in the route's
    `dependencies`. For `Names.REQUEST` the route takes it as a parameter
    (`Annotated[Authorize, requires(...)]`) and calls it with the names the
    request gives, before it does anything."""
    rule = Rule(verb, resource, names)

    async def guard(request: Request) -> Authorize:
        authorize = Authorize(rule, request)
        if rule.names is Names.NONE:
            await authorize()
        elif rule.names is Names.PATH:
            await authorize([str(request.path_params["name"])])
        return authorize

    setattr(guard, GUARD, rule)
    return Depends(guard)


async def _writes_as_caller(request: Request) -> None:
    """Definition writes go to the Kubernetes API as the caller, which
    authorizes them; API keys may only write when
    SLUICEWAY_API_KEYS_ALLOW_WRITES is on (they then impersonate their
    ServiceAccount)."""
    if not services_of(request).authenticate:
        return
    identity = identity_of(request)
    if identity.via == "api-key" and identity.impersonate is None:
        raise ApiError(
            403,
            "FORBIDDEN",
            "API keys may not write definitions: use a Kubernetes token (or set SLUICEWAY_API_KEYS_ALLOW_WRITES)",
        )


setattr(_writes_as_caller, GUARD, WRITES_AS_CALLER)
# The guard of definition writes: list it in the route's `dependencies`.
writes_as_caller: Any = Depends(_writes_as_caller)


async def _verified_by_signature() -> None:
    """Nothing to check here: the route verifies the call's signature itself,
    before it reads or changes anything."""


setattr(_verified_by_signature, GUARD, SIGNED)
# The guard of routes that authenticate each call by its own signature.
verified_by_signature: Any = Depends(_verified_by_signature)


# -- Every /v1 route carries a guard ---------------------------------------------


def _guards(dependant: Dependant) -> Iterator[Rule | str]:
    for dependency in dependant.dependencies:
        found = getattr(dependency.call, GUARD, None)
        if found is not None:
            yield found
        yield from _guards(dependency)


def guard_of(route: APIRoute) -> Rule | str | None:
    """What guards `route`: its Rule, WRITES_AS_CALLER, or None."""
    return next(_guards(route.dependant), None)


def api_routes(routes: Iterable[BaseRoute]) -> Iterator[APIRoute]:
    """Every APIRoute, including those of included routers."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        nested = getattr(route, "original_router", None) or getattr(route, "router", None)
        if nested is not None and nested is not route:
            yield from api_routes(getattr(nested, "routes", ()))


def _public(path: str) -> bool:
    return not (path == "/v1" or path.startswith("/v1/"))


class AuthMiddleware:
    """Sets `request.state.identity` for `/v1/...` requests; 401 without one.
    Health, metrics and the OpenAPI document stay open, and so are the routes
    guarded by SIGNED (webhook intake), which verify each call themselves.

    Each 401 takes a token from the client address's bucket of failed
    authentications; while it is empty, that address is answered 429 with
    Retry-After for anything but a token reviewed lately or an API key, so
    a flood of made-up tokens stops costing a TokenReview each, and a
    refused request takes no token."""

    def __init__(
        self,
        app: ASGIApp,
        services: Services,
        signed: tuple[APIRoute, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.services = services
        self.signed = signed
        self.clock = clock
        self.failures = TokenBuckets(services.rate_limits.failed_authentication)

    def _self_verified(self, scope: Scope) -> bool:
        return any(
            scope.get("method") in (route.methods or ()) and route.path_regex.match(scope["path"])
            for route in self.signed
        )

    @staticmethod
    def _limited(address: str, wait: float) -> JSONResponse:
        metrics.API_RATE_LIMITED.labels(Traffic.API.value, "failedAuthentication").inc()
        return refused(Refusal("failedAuthentication", address, wait))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self.services.authenticate
            or _public(scope["path"])
            or self._self_verified(scope)
        ):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client")
        address = f"address:{client[0]}" if client else "address:unknown"
        wait = self.failures.wait(address, self.clock())
        try:
            identity = await _authenticator(self.services).identify(headers, review=wait <= 0)
        except NotReviewed:  # only while the address may fail no more
            await self._limited(address, wait)(scope, receive, send)
            return
        except ApiError as error:
            extra = None
            if error.status == 401:
                if wait > 0:
                    await self._limited(address, wait)(scope, receive, send)
                    return
                self.failures.take(address, self.clock())
                extra = {"www-authenticate": "Bearer"}
            await JSONResponse(error.body, status_code=error.status, headers=extra)(scope, receive, send)
            return
        scope.setdefault("state", {})["identity"] = identity
        await self.app(scope, receive, send)


async def enforce(request: Request) -> None:
    """An application-wide dependency, run before every route's own: with
    authentication on, a `/v1` route that carries no guard refuses (403)
    rather than serve anyone holding a valid token."""
    if not services_of(request).authenticate or _public(request.url.path):
        return
    route = request.scope.get("route")
    if not (isinstance(route, APIRoute) and guard_of(route) is not None):
        raise ApiError(403, "FORBIDDEN", "no authorization rule covers this route")


def install(app: FastAPI, services: Services) -> None:
    """The middleware (create the app with `dependencies=[Depends(enforce)]`
    too), and a loud log line for each `/v1` route that has no guard."""
    signed = tuple(route for route in api_routes(app.routes) if guard_of(route) == SIGNED)
    app.add_middleware(AuthMiddleware, services=services, signed=signed)
    for route in api_routes(app.routes):
        rule = guard_of(route)
        if isinstance(rule, Rule) and rule.names is Names.PATH and "{name}" not in route.path:
            raise ValueError(f"route {route.path} checks its {{name}} but has none")  # a mistake in our code
        if services.authenticate and not _public(route.path) and rule is None:
            log.error(
                "route %s %s has no authorization rule: it refuses every caller",
                ",".join(sorted(route.methods or ())),
                route.path,
            )
