"""Gate arithmetic at dequeue: how many tasks one poll may lease.

The allowance is the minimum across `concurrentExecLimit` (in flight against
the cap), the rate-limit tokens left in the current fixed window, and the free
permits of every configured semaphore: the most restrictive gate wins. Each
gate that allows nothing says so, with its numbers, for "why is my task not
running?"."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sluiceway.controls.policy import Gates


@dataclass(frozen=True)
class SemaphoreState:
    name: str
    permits: int
    held: int

    @property
    def free(self) -> int:
        return max(self.permits - self.held, 0)


@dataclass(frozen=True)
class Window:
    """One fixed rate-limit window: [start, start + size)."""

    start: float  # epoch seconds
    size: int
    used: int

    def remaining_seconds(self, now: float) -> float:
        return max(self.start + self.size - now, 0.0)


@dataclass(frozen=True)
class GateHold:
    control: str  # concurrentExecLimit, rateLimit, semaphore:<name>
    detail: str
    retry_in: float | None = None  # seconds until this gate opens by itself, if known


def window_start(now: float, size: int) -> float:
    """The fixed bucket `floor(now / size)`, as its start in epoch seconds."""
    return math.floor(now / size) * size


def allowance(
    requested: int, gates: Gates, in_flight: int, window: Window | None, semaphores: list[SemaphoreState], now: float
) -> tuple[int, list[GateHold]]:
    allowed = requested
    holds: list[GateHold] = []
    if gates.concurrent_exec_limit:
        free = max(gates.concurrent_exec_limit - in_flight, 0)
        if free == 0:
            holds.append(GateHold("concurrentExecLimit", f"{in_flight}/{gates.concurrent_exec_limit} in flight"))
        allowed = min(allowed, free)
    if gates.rate_limit_per_frequency and window is not None:
        tokens = max(gates.rate_limit_per_frequency - window.used, 0)
        if tokens == 0:
            wait = window.remaining_seconds(now)
            holds.append(
                GateHold(
                    "rateLimit",
                    f"{window.used}/{gates.rate_limit_per_frequency} this window of {window.size} s, "
                    f"next window in {math.ceil(wait)} s",
                    retry_in=wait,
                )
            )
        allowed = min(allowed, tokens)
    for semaphore in semaphores:
        if semaphore.free == 0:
            holds.append(GateHold(f"semaphore:{semaphore.name}", f"{semaphore.held}/{semaphore.permits} held"))
        allowed = min(allowed, semaphore.free)
    return max(allowed, 0), holds
