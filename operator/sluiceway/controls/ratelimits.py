"""Per-caller API rate limits: token buckets per authenticated identity and
per namespace, so one runaway client cannot saturate the API for everyone.

Two classes of traffic keep separate buckets: the worker protocol (poll,
results, heartbeats), which a busy fleet calls often and which must never be
starved by UI or CLI calls, gets larger ones; everything else shares the API
buckets. A request takes a token from its identity's bucket and its
namespace's; when either is empty it is refused with the wait until both
have one. Buckets live in each replica's memory: N replicas behind a load
balancer admit up to N times the configured rate (documented). Pure: the
clock is a parameter."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field, ValidationError

from sluiceway.model.common import Spec

# Beyond this many buckets, full ones (which equal an absent bucket) are forgotten.
MAX_BUCKETS = 100_000


class Bucket(Spec):
    """`perSecond` tokens refill each second, up to `burst`; 0 turns the bucket off."""

    per_second: float = Field(ge=0, le=1_000_000)
    burst: float = Field(ge=1, le=10_000_000)


class RateLimits(Spec):
    """SLUICEWAY_API_RATE_LIMITS (JSON): the four bucket kinds of admitted
    traffic, and the bucket of failed authentications per client address."""

    identity: Bucket = Bucket(per_second=100, burst=200)
    namespace: Bucket = Bucket(per_second=500, burst=1000)
    worker_identity: Bucket = Bucket(per_second=1000, burst=2000)
    worker_namespace: Bucket = Bucket(per_second=5000, burst=10_000)
    # Each 401 takes a token: a flood of made-up tokens costs a TokenReview each until it is empty.
    failed_authentication: Bucket = Bucket(per_second=1, burst=20)

    @classmethod
    def off(cls) -> RateLimits:
        """No limit: local development without authentication, and tests."""
        none = Bucket(per_second=0, burst=1)
        return cls(
            identity=none, namespace=none, worker_identity=none, worker_namespace=none, failed_authentication=none
        )

    @classmethod
    def parse(cls, raw: str | None) -> RateLimits:
        if not raw:
            return cls()
        try:
            return cls.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as error:
            raise ValueError(f"SLUICEWAY_API_RATE_LIMITS: {error}") from error


class Traffic(StrEnum):
    API = "api"
    WORKER = "worker"


@dataclass
class _Level:
    tokens: float
    at: float


class TokenBuckets:
    """Buckets of one kind, by key."""

    def __init__(self, bucket: Bucket, max_buckets: int = MAX_BUCKETS) -> None:
        self.bucket = bucket
        self.max_buckets = max_buckets
        self._levels: dict[str, _Level] = {}

    @property
    def enabled(self) -> bool:
        return self.bucket.per_second > 0

    def _level(self, key: str, now: float) -> _Level:
        level = self._levels.get(key)
        if level is None:
            if len(self._levels) >= self.max_buckets:
                self._forget_full(now)
            level = self._levels[key] = _Level(self.bucket.burst, now)
        elapsed = max(0.0, now - level.at)
        level.tokens = min(self.bucket.burst, level.tokens + elapsed * self.bucket.per_second)
        level.at = now
        return level

    def _forget_full(self, now: float) -> None:
        rate, burst = self.bucket.per_second, self.bucket.burst
        for key in [k for k, v in self._levels.items() if v.tokens + (now - v.at) * rate >= burst]:
            del self._levels[key]
        if len(self._levels) >= self.max_buckets:  # all busy: forgetting one is cheaper than growing without end
            self._levels.clear()

    def wait(self, key: str, now: float) -> float:
        """Seconds until `key` has a token (0: now)."""
        if not self.enabled:
            return 0.0
        level = self._level(key, now)
        return 0.0 if level.tokens >= 1 else (1 - level.tokens) / self.bucket.per_second

    def take(self, key: str, now: float) -> None:
        if self.enabled:
            self._level(key, now).tokens -= 1


@dataclass(frozen=True)
class Refusal:
    bucket: str  # "identity" or "namespace", as configured
    key: str
    retry_after: float

    @property
    def retry_after_seconds(self) -> int:
        """What Retry-After says: whole seconds, at least 1."""
        return max(1, math.ceil(self.retry_after))


class Limiter:
    """Every bucket of the API: `admit` takes a token from the caller's
    identity and namespace buckets of its traffic class, or says how long to wait."""

    def __init__(self, limits: RateLimits) -> None:
        self.limits = limits
        self._buckets = {
            (Traffic.API, "identity"): TokenBuckets(limits.identity),
            (Traffic.API, "namespace"): TokenBuckets(limits.namespace),
            (Traffic.WORKER, "identity"): TokenBuckets(limits.worker_identity),
            (Traffic.WORKER, "namespace"): TokenBuckets(limits.worker_namespace),
        }

    def admit(self, traffic: Traffic, identity: str, namespace: str | None, now: float) -> Refusal | None:
        wanted = [("identity", identity)] + ([("namespace", namespace)] if namespace else [])
        refusals = [
            Refusal(kind, key, wait)
            for kind, key in wanted
            if (wait := self._buckets[(traffic, kind)].wait(key, now)) > 0
        ]
        if refusals:
            return max(refusals, key=lambda refusal: refusal.retry_after)
        for kind, key in wanted:
            self._buckets[(traffic, kind)].take(key, now)
        return None
