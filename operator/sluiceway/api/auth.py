"""Who is calling, and may they? Authentication and authorization for `/v1`.

With `SLUICEWAY_AUTH=kubernetes` every `/v1/...` request needs an identity:

- `Authorization: Bearer <token>`: a Kubernetes token (a worker's projected
  ServiceAccount token), checked with a TokenReview;
- `X-API-Key: <key>`: a key held in a Secret labelled `sluiceway.dev/api-key:
  "true"` in the operator's namespace, acting as the ServiceAccount its
  `sluiceway.dev/service-account: <namespace>/<name>` annotation names.

Each route then asks a SubjectAccessReview whether that identity may do the
route's verb on a `sluiceway.dev` resource in the path's namespace (see
`RULES`), so ordinary RBAC Roles decide who may work on what; a worker of
namespace `a` holds no right in namespace `b`.

Answers are cached (tokens 60 s, never past the token's own expiry; access
30 s, refusals too), so a poll in the steady state costs no Kubernetes round
trip. The pure parts (rules, caches, key matching) take their clock as an
argument; the Kubernetes calls are injected too. Tokens and keys are never
logged and never kept: caches are keyed by their SHA-256."""

from __future__ import annotations

import asyncio
import base64
import binascii
import enum
import hashlib
import hmac
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from sluiceway.api.errors import ApiError
from sluiceway.kubeapi import auth as kubeauth
from sluiceway.kubeapi.client import KubeClient
from sluiceway.model import GROUP
from sluiceway.store import leasing

if TYPE_CHECKING:
    from sluiceway.api.services import Services

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

TOKEN_TTL = 60.0
REJECTED_TOKEN_TTL = 10.0
ACCESS_TTL = 30.0
CACHE_ENTRIES = 10_000
KEY_REFRESH_SECONDS = 2.0
# Without a successful re-list for this long, keys are not trusted: a Secret
# deleted while the API server was unreachable must not keep working.
KEYS_STALE_AFTER = 60.0
MIN_KEY_LENGTH = 16
SA_PREFIX = "system:serviceaccount:"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


# -- What each route asks ------------------------------------------------------


class Names(enum.Enum):
    """Where a route's checks take resource names from."""

    NONE = "none"  # one check, no name: a namespace-wide right
    PATH = "path"  # the `{name}` path parameter
    TASK_TYPES = "task types"  # the task types the request names (poll)
    TASKS = "tasks"  # the task types of the tasks the request names (results, heartbeats)


@dataclass(frozen=True)
class Rule:
    verb: str
    resource: str
    names: Names = Names.NONE


RULES: dict[str, Rule] = {
    # the worker protocol
    "poll": Rule("poll", "taskdefinitions", Names.TASK_TYPES),
    "results": Rule("update", "taskdefinitions", Names.TASKS),
    "result": Rule("update", "taskdefinitions", Names.TASKS),
    "heartbeats": Rule("update", "taskdefinitions", Names.TASKS),
    "heartbeat": Rule("update", "taskdefinitions", Names.TASKS),
    # runs
    "start": Rule("create", "workflowruns"),
    "get_run": Rule("get", "workflowruns"),
    "why_run": Rule("get", "workflowruns"),
    "why_task": Rule("get", "workflowruns"),
    "decide": Rule("update", "workflowruns"),
    "terminate": Rule("update", "workflowruns"),
    # diagnostics
    "queues": Rule("list", "taskdefinitions"),
    "queue_workers": Rule("list", "taskdefinitions"),
    "queue_depth": Rule("list", "taskdefinitions"),
    "semaphores": Rule("get", "semaphores"),
    "semaphore": Rule("get", "semaphores", Names.PATH),
    "quotas": Rule("get", "quotas"),
    # definition reads (writes go to the Kubernetes API as the caller)
    "task_definitions": Rule("get", "taskdefinitions"),
    "task_definition": Rule("get", "taskdefinitions", Names.PATH),
}


@dataclass(frozen=True)
class Check:
    """One SubjectAccessReview's question: verb on group/resource[/name] in namespace."""

    verb: str
    resource: str
    namespace: str
    name: str | None = None
    group: str = GROUP

    def refusal(self, user: str) -> str:
        target = f"{self.resource}/{self.name}" if self.name else self.resource
        return f"{user} may not {self.verb} {target} in namespace {self.namespace}"


def checks(route: str, namespace: str, names: Iterable[str] = ()) -> list[Check]:
    """The checks `route` needs in `namespace`. For routes naming resources,
    one per distinct name; none when there are no names (results and
    heartbeats for tasks that do not exist in the namespace: the store answers
    404 for those and changes nothing)."""
    rule = RULES[route]
    if rule.names is Names.NONE:
        return [Check(rule.verb, rule.resource, namespace)]
    return [Check(rule.verb, rule.resource, namespace, name) for name in sorted(set(names))]


# -- Caches --------------------------------------------------------------------


class Missing(enum.Enum):
    MISSING = 0


MISSING = Missing.MISSING


class TtlCache(Generic[K, V]):
    """A bounded cache whose entries expire. `clock` is monotonic seconds."""

    def __init__(
        self, ttl: float, max_entries: int = CACHE_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | Missing:
        entry = self._entries.get(key)
        if entry is None:
            return MISSING
        expires, value = entry
        if self.clock() >= expires:
            del self._entries[key]
            return MISSING
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, ttl: float | None = None) -> None:
        lifetime = self.ttl if ttl is None else min(ttl, self.ttl)
        if lifetime <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (self.clock() + lifetime, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)  # the least recently used

    def clear(self) -> None:
        self._entries.clear()


def digest(secret: str | bytes) -> bytes:
    return hashlib.sha256(secret.encode() if isinstance(secret, str) else secret).digest()


def token_expiry(token: str) -> float | None:
    """The `exp` claim (Unix seconds) of a JWT, read without verifying it: it
    only ever shortens how long a TokenReview's answer is trusted."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def token_ttl(token: str, now: float, ceiling: float = TOKEN_TTL) -> float:
    """How long to trust a TokenReview's yes: at most `ceiling`, never past
    the token's expiry (`now` is Unix seconds)."""
    expires = token_expiry(token)
    return ceiling if expires is None else max(0.0, min(ceiling, expires - now))


# -- Identities ----------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    user: str
    groups: tuple[str, ...]


def service_account_principal(namespace: str, name: str) -> Principal:
    return Principal(
        f"{SA_PREFIX}{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@dataclass(frozen=True)
class Identity:
    """`request.state.identity`. `token`: the caller's bearer token, for writes
    made with the caller's authority; `impersonate`: (user, groups) to act as
    for writes, set only for API keys when keys may write."""

    user: str
    groups: tuple[str, ...]
    via: Literal["token", "api-key"]
    token: str | None = field(default=None, repr=False)
    impersonate: tuple[str, list[str]] | None = None
    key: str | None = None  # the API key's Secret

    @property
    def principal(self) -> Principal:
        return Principal(self.user, self.groups)


# -- API keys ------------------------------------------------------------------


@dataclass(frozen=True)
class ApiKey:
    secret: str  # the Secret's name
    digest: bytes  # SHA-256 of the key; the key itself is not kept
    namespace: str  # of the ServiceAccount it acts as
    service_account: str

    @property
    def principal(self) -> Principal:
        return service_account_principal(self.namespace, self.service_account)


def parse_key_secret(secret: kubeauth.KeySecret) -> ApiKey | str:
    """The key a Secret holds, or why it holds none (a message naming no key)."""
    if secret.key is None:
        return f"Secret {secret.name} has no data key `key`"
    key = secret.key.strip()
    if len(key) < MIN_KEY_LENGTH:
        return f"Secret {secret.name}: the key is shorter than {MIN_KEY_LENGTH} bytes"
    sa_namespace, _, sa_name = (secret.service_account or "").strip().partition("/")
    if not _DNS_LABEL.match(sa_namespace) or not _DNS_SUBDOMAIN.match(sa_name):
        return (
            f"Secret {secret.name}: annotation {kubeauth.SERVICE_ACCOUNT_ANNOTATION} must be "
            f"<namespace>/<serviceaccount>"
        )
    return ApiKey(secret.name, digest(key), sa_namespace, sa_name)


class ApiKeys:
    """The keys in memory, replaced wholesale by each re-list."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, stale_after: float = KEYS_STALE_AFTER) -> None:
        self.clock = clock
        self.stale_after = stale_after
        self._keys: tuple[ApiKey, ...] = ()
        self._refreshed: float | None = None
        self._problems: frozenset[str] = frozenset()

    @property
    def loaded(self) -> bool:
        return self._refreshed is not None

    @property
    def fresh(self) -> bool:
        return self._refreshed is not None and self.clock() - self._refreshed < self.stale_after

    def __len__(self) -> int:
        return len(self._keys)

    def replace(self, secrets: Iterable[kubeauth.KeySecret]) -> None:
        keys, problems = [], set()
        for secret in secrets:
            parsed = parse_key_secret(secret)
            if isinstance(parsed, str):
                problems.add(parsed)
            else:
                keys.append(parsed)
        for problem in sorted(problems - self._problems):
            log.warning("API key ignored: %s", problem)
        self._problems = frozenset(problems)
        self._keys = tuple(keys)
        self._refreshed = self.clock()

    def lookup(self, presented: str) -> ApiKey | None:
        """The key matching `presented`. Every key is compared, in constant
        time, on digests: neither timing nor length tells a near miss."""
        wanted = digest(presented.strip())
        found = None
        for key in self._keys:
            if hmac.compare_digest(key.digest, wanted):
                found = key
        return found


# -- The authenticator ---------------------------------------------------------

ReviewToken = Callable[[KubeClient, str], Awaitable[kubeauth.ReviewedToken]]
ReviewAccess = Callable[..., Awaitable[bool]]
ListKeys = Callable[[KubeClient, str], Awaitable[list[kubeauth.KeySecret]]]


def unauthenticated(message: str) -> ApiError:
    return ApiError(401, "UNAUTHENTICATED", message)


class Authenticator:
    """Identities from requests, and access decisions, with their caches."""

    def __init__(
        self,
        kube: KubeClient,
        *,
        keys_namespace: str | None = None,
        allow_writes: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        token_ttl: float = TOKEN_TTL,
        access_ttl: float = ACCESS_TTL,
        max_entries: int = CACHE_ENTRIES,
        key_refresh: float = KEY_REFRESH_SECONDS,
        keys_stale_after: float = KEYS_STALE_AFTER,
        review_token: ReviewToken = kubeauth.review_token,
        review_access: ReviewAccess = kubeauth.review_access,
        list_keys: ListKeys = kubeauth.list_key_secrets,
    ) -> None:
        self.kube = kube
        self.keys_namespace = keys_namespace if keys_namespace is not None else kubeauth.own_namespace()
        self.allow_writes = allow_writes
        self.wall = wall
        self.token_ceiling = token_ttl
        self.key_refresh = key_refresh
        self.tokens: TtlCache[bytes, Principal | None] = TtlCache(token_ttl, max_entries, clock)
        self.access: TtlCache[tuple[str, tuple[str, ...], str, str, str, str, str], bool] = TtlCache(
            access_ttl, max_entries, clock
        )
        self.keys = ApiKeys(clock, keys_stale_after)
        self._review_token = review_token
        self._review_access = review_access
        self._list_keys = list_keys
        self._inflight: dict[object, asyncio.Future[Any]] = {}

    async def _once(self, key: object, make: Callable[[], Awaitable[V]]) -> V:
        """One call in flight per key: a burst of polls with a new token makes
        one TokenReview, not one each."""
        pending = self._inflight.get(key)
        if pending is None:
            pending = asyncio.ensure_future(make())
            self._inflight[key] = pending

            def done(future: asyncio.Future[Any]) -> None:
                self._inflight.pop(key, None)
                if not future.cancelled():
                    future.exception()  # retrieved: awaiters may all have gone

            pending.add_done_callback(done)
        result: V = await asyncio.shield(pending)
        return result

    # identities

    async def identify(self, headers: Mapping[str, str]) -> Identity:
        """The caller of a request with these (lower-case) headers; ApiError 401
        or 503 otherwise."""
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise unauthenticated("the Authorization header must be `Bearer <token>`")
            principal = await self.principal_of_token(token)
            if principal is None:
                raise unauthenticated("the bearer token was not accepted")
            return Identity(principal.user, principal.groups, "token", token=token)
        presented = headers.get("x-api-key")
        if presented is not None:
            key = await self.key_of(presented)
            principal = key.principal
            impersonate = (principal.user, list(principal.groups)) if self.allow_writes else None
            return Identity(principal.user, principal.groups, "api-key", impersonate=impersonate, key=key.secret)
        raise unauthenticated("send a Kubernetes token (Authorization: Bearer <token>) or an API key (X-API-Key)")

    async def principal_of_token(self, token: str) -> Principal | None:
        key = digest(token)
        cached = self.tokens.get(key)
        if cached is not MISSING:
            return cached
        return await self._once(("token", key), lambda: self._review(key, token))

    async def _review(self, key: bytes, token: str) -> Principal | None:
        try:
            review = await self._review_token(self.kube, token)
        except Exception as error:  # noqa: BLE001 - no verdict: refuse for now, cache nothing
            log.warning("TokenReview failed: %s", type(error).__name__)
            raise ApiError(503, "AUTH_UNAVAILABLE", "the Kubernetes API could not review the token") from error
        if not review.authenticated:
            self.tokens.put(key, None, REJECTED_TOKEN_TTL)
            return None
        principal = Principal(review.user, review.groups)
        self.tokens.put(key, principal, token_ttl(token, self.wall(), self.token_ceiling))
        return principal

    async def key_of(self, presented: str) -> ApiKey:
        if self.keys_namespace is None:
            raise unauthenticated("API keys are not configured (SLUICEWAY_API_KEYS_NAMESPACE)")
        if not self.keys.loaded:  # the first request before the first re-list
            try:
                await self.refresh_keys()
            except Exception as error:  # noqa: BLE001 - answered below as unavailable
                log.warning("listing API-key Secrets failed: %s", type(error).__name__)
        if not self.keys.fresh:
            raise ApiError(503, "AUTH_UNAVAILABLE", "API keys could not be read from the Kubernetes API lately")
        found = self.keys.lookup(presented)
        if found is None:
            raise unauthenticated("the API key was not accepted")
        return found

    async def refresh_keys(self) -> None:
        namespace = self.keys_namespace
        if namespace is None:
            return

        async def relist() -> None:
            self.keys.replace(await self._list_keys(self.kube, namespace))

        await self._once("keys", relist)

    async def run(self, stop: asyncio.Event) -> None:
        """Re-list the API-key Secrets every few seconds, so a deleted Secret
        stops working within seconds, until `stop`."""
        if self.keys_namespace is None:
            log.info("API keys are off: no SLUICEWAY_API_KEYS_NAMESPACE and not running in a pod")
            await stop.wait()
            return
        log.info("API keys: Secrets labelled %s=true in namespace %s", kubeauth.API_KEY_LABEL, self.keys_namespace)
        failing = False
        while not stop.is_set():
            try:
                await self.refresh_keys()
                if failing:
                    log.info("API keys are read again (%d)", len(self.keys))
                failing = False
            except Exception as error:  # noqa: BLE001 - keep trying; stale keys stop working on their own
                if not failing:
                    log.warning("listing API-key Secrets failed: %s", error)
                failing = True
            try:
                await asyncio.wait_for(stop.wait(), self.key_refresh)
            except TimeoutError:
                pass

    # authorization

    async def allowed(self, principal: Principal, check: Check) -> bool:
        key = (
            principal.user,
            principal.groups,
            check.verb,
            check.group,
            check.resource,
            check.namespace,
            check.name or "",
        )
        cached = self.access.get(key)
        if cached is not MISSING:
            return cached

        async def review() -> bool:
            try:
                verdict = await self._review_access(
                    self.kube,
                    principal.user,
                    principal.groups,
                    group=check.group,
                    resource=check.resource,
                    verb=check.verb,
                    namespace=check.namespace,
                    name=check.name,
                )
            except Exception as error:  # noqa: BLE001 - no verdict: refuse for now, cache nothing
                log.warning("SubjectAccessReview failed: %s", type(error).__name__)
                raise ApiError(503, "AUTH_UNAVAILABLE", "the Kubernetes API could not review the access") from error
            self.access.put(key, verdict)
            return verdict

        return await self._once(("access", key), review)

    async def authorize(self, identity: Identity, wanted: Sequence[Check]) -> None:
        """ApiError 403 naming the first check refused."""
        if not wanted:
            return
        verdicts = await asyncio.gather(*(self.allowed(identity.principal, c) for c in wanted))
        for check, verdict in zip(wanted, verdicts, strict=False):
            if not verdict:
                raise ApiError(403, "FORBIDDEN", check.refusal(identity.user))


# -- In the application --------------------------------------------------------


def _services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


def identity_of(request: Request) -> Identity:
    identity = getattr(request.state, "identity", None)
    if not isinstance(identity, Identity):
        raise unauthenticated("no identity")  # the middleware did not run: refuse rather than guess
    return identity


def _authenticator(svc: Services) -> Authenticator:
    if svc.authenticator is None:
        raise ApiError(503, "AUTH_UNAVAILABLE", "authentication is on but this process has no Kubernetes API")
    return svc.authenticator


async def authorize(request: Request, svc: Services, route: str, namespace: str, names: Iterable[str] = ()) -> None:
    """Refuse (403) unless the caller may do what `route` does in `namespace`
    (on the resources `names`). Nothing to do when authentication is off."""
    if not svc.authenticate:
        return
    await _authenticator(svc).authorize(identity_of(request), checks(route, namespace, names))


async def authorize_tasks(request: Request, svc: Services, route: str, namespace: str, task_ids: Iterable[str]) -> None:
    """`authorize` on the task types of these tasks of `namespace`, found with
    one query. Tasks that are not in the namespace need no right: the store
    refuses them (404) and changes nothing."""
    if not svc.authenticate:
        return
    async with svc.pool.acquire() as conn:
        types = await leasing.task_types_of(conn, namespace, list(task_ids))
    await authorize(request, svc, route, namespace, types.values())


def require(route: str) -> Callable[[Request], Awaitable[None]]:
    """A route dependency for rules whose names come from the path, or none."""
    rule = RULES[route]

    async def dependency(request: Request) -> None:
        params = request.path_params
        names = [str(params["name"])] if rule.names is Names.PATH else []
        await authorize(request, _services(request), route, str(params.get("namespace", "")), names)

    dependency.sluiceway_guard = route  # type: ignore[attr-defined]
    return dependency


async def definition_write(request: Request) -> None:
    """A route dependency for definition writes: those go to the Kubernetes API
    as the caller, which authorizes them; API keys may only write when
    SLUICEWAY_API_KEYS_ALLOW_WRITES is on (they then impersonate their
    ServiceAccount)."""
    svc = _services(request)
    if not svc.authenticate:
        return
    identity = identity_of(request)
    if identity.via == "api-key" and identity.impersonate is None:
        raise ApiError(
            403,
            "FORBIDDEN",
            "API keys may not write definitions: use a Kubernetes token (or set SLUICEWAY_API_KEYS_ALLOW_WRITES)",
        )


definition_write.sluiceway_guard = "definition_write"  # type: ignore[attr-defined]


def checked(route: str) -> Callable[[F], F]:
    """Marks an endpoint that calls `authorize` itself (its names come from the body)."""
    RULES[route]  # noqa: B018 - a typo fails at import

    def mark(endpoint: F) -> F:
        endpoint.sluiceway_guard = route  # type: ignore[attr-defined]
        return endpoint

    return mark


def guarded(route: APIRoute) -> bool:
    return bool(getattr(route.endpoint, "sluiceway_guard", None)) or any(
        getattr(d.dependency, "sluiceway_guard", None) for d in route.dependencies
    )


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
    Health, metrics and the OpenAPI document stay open."""

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.services.authenticate or _public(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            identity = await _authenticator(self.services).identify(headers)
        except ApiError as error:
            extra = {"www-authenticate": "Bearer"} if error.status == 401 else None
            await JSONResponse(error.body, status_code=error.status, headers=extra)(scope, receive, send)
            return
        scope.setdefault("state", {})["identity"] = identity
        await self.app(scope, receive, send)


async def enforce(request: Request) -> None:
    """An application-wide dependency, run before every route's own: with
    authentication on, a `/v1` route that carries no authorization rule
    refuses (403) rather than serve anyone holding a valid token."""
    if not _services(request).authenticate or _public(request.url.path):
        return
    route = request.scope.get("route")
    if not (isinstance(route, APIRoute) and guarded(route)):
        raise ApiError(403, "FORBIDDEN", "no authorization rule covers this route")


def install(app: FastAPI, services: Services) -> None:
    """The middleware (create the app with `dependencies=[Depends(enforce)]`
    too), and a loud log line for each `/v1` route that has no rule."""
    app.add_middleware(AuthMiddleware, services=services)
    if not services.authenticate:
        return
    for route in api_routes(app.routes):
        if not _public(route.path) and not guarded(route):
            log.error(
                "route %s %s has no authorization rule: it refuses every caller",
                ",".join(sorted(route.methods or ())),
                route.path,
            )
