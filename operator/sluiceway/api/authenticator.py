"""Identities from requests and access decisions, asked of Kubernetes
(TokenReview, SubjectAccessReview, the API-key Secrets) and cached.

Answers are cached (tokens 60 s, never past the token's own expiry; access
30 s, refusals too), so a poll in the steady state costs no Kubernetes round
trip. The clocks and the Kubernetes calls are injected, so the caches are
tested without a cluster. Caches are keyed by the SHA-256 of a token."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from sluiceway.api.access import Check
from sluiceway.api.errors import ApiError
from sluiceway.api.identities import (
    KEYS_STALE_AFTER,
    TOKEN_TTL,
    ApiKey,
    ApiKeys,
    Identity,
    Principal,
    digest,
    token_ttl,
)
from sluiceway.kubeapi import auth as kubeauth
from sluiceway.kubeapi.client import KubeClient

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

REJECTED_TOKEN_TTL = 10.0
ACCESS_TTL = 30.0
CACHE_ENTRIES = 10_000
KEY_REFRESH_SECONDS = 2.0


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


ReviewToken = Callable[[KubeClient, str], Awaitable[kubeauth.ReviewedToken]]
ReviewAccess = Callable[..., Awaitable[bool]]
ListKeys = Callable[[KubeClient, str], Awaitable[list[kubeauth.KeySecret]]]


def unauthenticated(message: str) -> ApiError:
    return ApiError(401, "UNAUTHENTICATED", message)


class NotReviewed(Exception):
    """A token this process has not reviewed, asked of `identify(review=False)`."""


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

    async def identify(self, headers: Mapping[str, str], *, review: bool = True) -> Identity:
        """The caller of a request with these (lower-case) headers; ApiError 401
        or 503 otherwise. With `review=False` only what costs no Kubernetes
        call is trusted (a token reviewed lately, an API key): NotReviewed
        for any other token."""
        authorization = headers.get("authorization")
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise unauthenticated("the Authorization header must be `Bearer <token>`")
            principal = await self.principal_of_token(token, review=review)
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

    async def principal_of_token(self, token: str, *, review: bool = True) -> Principal | None:
        key = digest(token)
        cached = self.tokens.get(key)
        if cached is not MISSING:
            return cached
        if not review:
            raise NotReviewed()
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
