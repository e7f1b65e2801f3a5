"""Circuit breakers for the system tasks that leave the process.

Per process and keyed by target (a host): a shared breaker would need shared
state, a second dependency, to protect against a dependency being down. Only
server-side failures count (timeouts, connection errors, 5xx, 429): a 404 says
nothing about the dependency's health. An open breaker fails the task, never
terminally, so the retry policy still decides. Half-open admits exactly one
probe; a failed probe doubles the open time, up to `maxOpenMs`.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field, ValidationError

from sluiceway.model.common import Spec


class BreakerConfig(Spec):
    """SLUICEWAY_CIRCUIT_BREAKER; off by default."""

    enabled: bool = False
    failure_ratio: float = Field(0.5, gt=0, le=1)
    minimum_requests: int = Field(10, ge=1)
    window_ms: int = Field(30_000, ge=1)
    open_ms: int = Field(5_000, ge=1)
    max_open_ms: int = Field(60_000, ge=1)

    @classmethod
    def parse(cls, raw: str | None) -> BreakerConfig:
        if not raw:
            return cls()
        try:
            config = cls.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as error:
            raise ValueError(f"SLUICEWAY_CIRCUIT_BREAKER: {error}") from error
        if config.max_open_ms < config.open_ms:
            raise ValueError("SLUICEWAY_CIRCUIT_BREAKER: maxOpenMs must be at least openMs")
        return config


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    probe: bool = False  # this request is the half-open probe
    retry_in_ms: float = 0.0  # when refused: until the breaker admits a probe


class CircuitBreaker:
    """One target's breaker. Time (milliseconds, monotonic) is always passed in."""

    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        self.state = BreakerState.CLOSED
        self.outcomes: deque[tuple[float, bool]] = deque()  # (time, failed)
        self.opened_at = 0.0
        self.open_ms = float(config.open_ms)
        self.probing = False

    def _forget_old(self, now: float) -> None:
        while self.outcomes and self.outcomes[0][0] <= now - self.config.window_ms:
            self.outcomes.popleft()

    def allow(self, now: float) -> Verdict:
        if not self.config.enabled:
            return Verdict(True)
        if self.state is BreakerState.OPEN:
            if now - self.opened_at < self.open_ms:
                return Verdict(False, retry_in_ms=self.opened_at + self.open_ms - now)
            self.state = BreakerState.HALF_OPEN
            self.probing = False
        if self.state is BreakerState.HALF_OPEN:
            if self.probing:  # exactly one probe at a time
                return Verdict(False, retry_in_ms=self.open_ms)
            self.probing = True
            return Verdict(True, probe=True)
        return Verdict(True)

    def record(self, now: float, server_failure: bool, probe: bool = False) -> None:
        """`server_failure`: a timeout, connection error, 5xx or 429. Client
        errors are recorded as successes: the dependency answered."""
        if not self.config.enabled:
            return
        if probe or self.state is BreakerState.HALF_OPEN:
            self.probing = False
            if server_failure:
                self.open_ms = min(self.open_ms * 2, float(self.config.max_open_ms))
                self._open(now)
            else:
                self.state = BreakerState.CLOSED
                self.open_ms = float(self.config.open_ms)
                self.outcomes.clear()
            return
        self.outcomes.append((now, server_failure))
        self._forget_old(now)
        total = len(self.outcomes)
        failures = sum(1 for _, failed in self.outcomes if failed)
        if total >= self.config.minimum_requests and failures / total >= self.config.failure_ratio:
            self._open(now)

    def _open(self, now: float) -> None:
        self.state = BreakerState.OPEN
        self.opened_at = now
        self.outcomes.clear()


class Breakers:
    """The breakers of one process, by target."""

    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        self.by_target: dict[str, CircuitBreaker] = {}

    def __call__(self, target: str) -> CircuitBreaker:
        breaker = self.by_target.get(target)
        if breaker is None:
            breaker = self.by_target[target] = CircuitBreaker(self.config)
        return breaker
