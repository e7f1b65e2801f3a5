"""The dequeue gates, explained: how many tasks one lease may take, which gates
hold and with what numbers, and how many tasks they ever let run at once.

The allowance is the minimum across `concurrentExecLimit` (in flight against
the cap), the rate-limit tokens left in the current fixed window, and the free
permits of every configured semaphore: the most restrictive gate wins. Each
gate that allows nothing says so, with its numbers.

This module is the one explainer of the gates: the lease's holds, "why is my
task not running?" and worker autoscaling all ask it. The lease itself is
enforced in SQL under locks (`sluiceway_gate_allowance` and
`sluiceway_window_start`, migration 0009), which says the same arithmetic; a
property test runs both on random states and checks that they agree."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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
class GateState:
    """What was counted for one queue at one instant (under the lease's locks,
    or by diagnostics): the numbers every gate decides by."""

    in_flight: int = 0
    window_used: int = 0  # tokens spent in the current rate-limit window
    seconds_to_next_window: float = 0.0
    semaphores: Sequence[SemaphoreState] = ()  # the configured ones among the gates' semaphores


@dataclass(frozen=True)
class GateHold:
    """One gate that allows nothing now, with its numbers."""

    control: str  # concurrentExecLimit, rateLimit, semaphore:<name>
    used: int  # in flight, tokens spent this window, permits held
    limit: int  # the cap, the tokens per window, the permits
    retry_in: float | None = None  # seconds until this gate opens by itself, if known
    window_seconds: int = 0  # rateLimit: the window's size

    @property
    def detail(self) -> str:
        if self.control == "rateLimit":
            return (
                f"{self.used}/{self.limit} this window of {self.window_seconds} s, "
                f"next window in {math.ceil(self.retry_in or 0)} s"
            )
        if self.control == "concurrentExecLimit":
            return f"{self.used}/{self.limit} in flight"
        return f"{self.used}/{self.limit} held"


def window_start(now: float, size: int) -> float:
    """The fixed bucket `floor(now / size)`, as its start in epoch seconds."""
    return math.floor(now / size) * size


def allowance(requested: int, gates: Gates, state: GateState) -> tuple[int, list[GateHold]]:
    """How many of `requested` tasks one lease may take, and every gate that holds."""
    allowed = requested
    holds: list[GateHold] = []
    if gates.concurrent_exec_limit:
        free = max(gates.concurrent_exec_limit - state.in_flight, 0)
        if free == 0:
            holds.append(GateHold("concurrentExecLimit", state.in_flight, gates.concurrent_exec_limit))
        allowed = min(allowed, free)
    if gates.rate_limit_per_frequency:
        tokens = max(gates.rate_limit_per_frequency - state.window_used, 0)
        if tokens == 0:
            wait = max(state.seconds_to_next_window, 0.0)
            holds.append(
                GateHold(
                    "rateLimit",
                    state.window_used,
                    gates.rate_limit_per_frequency,
                    retry_in=wait,
                    window_seconds=gates.rate_limit_frequency_seconds,
                )
            )
        allowed = min(allowed, tokens)
    for semaphore in state.semaphores:
        if semaphore.free == 0:
            holds.append(GateHold(f"semaphore:{semaphore.name}", semaphore.held, semaphore.permits))
        allowed = min(allowed, semaphore.free)
    return max(allowed, 0), holds


def closed(gates: Gates, state: GateState) -> list[GateHold]:
    """The gates that allow nothing now, in the order the allowance checks them."""
    return allowance(0, gates, state)[1]


def in_flight_ceiling(gates: Gates, semaphore_permits: Mapping[str, int]) -> int | None:
    """The most tasks of one type the gates ever let be in flight at once,
    whatever the demand: the cap, and the permits of its smallest configured
    semaphore (`semaphore_permits` by name; one nobody configured gates
    nothing, as at dequeue). None when no gate bounds it: a rate limit bounds
    a rate, not a count."""
    bounds: list[int] = []
    if gates.concurrent_exec_limit > 0:
        bounds.append(gates.concurrent_exec_limit)
    permits = [p for name, p in semaphore_permits.items() if name in gates.semaphores]
    if permits:
        bounds.append(max(0, min(permits)))
    return min(bounds) if bounds else None
