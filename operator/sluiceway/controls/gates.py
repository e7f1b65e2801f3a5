"""The gates, explained: which kinds of gate there are, how many tasks one
lease may take, which gates hold and with what numbers, and how many tasks
they ever let run at once.

A gate is one row of `GATES`, a `GateKind`: its wire name (the `control` that
API answers, `why` and the `sluiceway_gate_holds_total` label carry, which
clients and dashboards read, so it is never renamed), what follows a colon
on the wire (`semaphore:erp` names the Semaphore), its numbers, and its
sentence for `why`. The lease's holds, `why`, the metrics label and the web
UI's gates page all look their gate up here, and `parse_control` is the one
reader of a control's text: a kind it does not know is an error, never read
as another kind.

The table holds the gates that hold back work that could run: the dequeue
gates of a task type and the run's own `maxConcurrentTasks` and
`rateLimitConfig`. A start that a Quota or `maxConcurrentExecutions` refuses
and a call that a circuit breaker fails fast are refusals and failures, named
where they happen (store/admission.py, systemtasks/); `why` never explains
them, since no run or attempt waits on them.

The dequeue allowance is the minimum across `concurrentExecLimit` (in flight
against the cap), the rate-limit tokens left in the current fixed window, and
the free permits of every configured semaphore: the most restrictive gate
wins. Each gate that allows nothing says so, with its numbers.

The lease itself is enforced in SQL under locks (`sluiceway_gate_allowance`
and `sluiceway_window_start`, migration 0009), which says the same arithmetic
and returns numbers, never control strings; a property test runs both on
random states and checks that they agree."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sluiceway.controls.policy import Gates


class UnknownGate(ValueError):
    """A control's text names no gate of `GATES`, or names one in the wrong shape."""


def spoken_seconds(value: float) -> str:
    """A duration as `why` says it: whole seconds from ten up, tenths below."""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


@dataclass(frozen=True)
class Held:
    """Whom a closed gate holds back, for its sentence."""

    subject: str  # the task type, or the run's workflow (and its admission key)
    holders: Sequence[str] = ()  # who holds what it waits for: a semaphore's tasks, a key's admitted runs


@dataclass(frozen=True)
class GateKind:
    """One kind of gate: a row of `GATES`."""

    wire: str  # the control's name on the wire, in metrics labels and in docs: never renamed
    names: str | None  # what follows a colon on the wire; None: the control is `wire` alone
    numbers: Callable[[GateHold], str]  # a hold's numbers, as its `detail`
    sentence: Callable[[GateHold, Held], str]  # the hold as `why` says it

    def control(self, name: str = "") -> str:
        """The wire text of a hold of this gate on `name`: `semaphore:erp`, `rateLimit`."""
        if self.names is None:
            if name:
                raise UnknownGate(f"gate {self.wire} names nothing after a colon, not {name!r}")
            return self.wire
        if not name:
            raise UnknownGate(f"gate {self.wire} needs {self.names} after a colon")
        return f"{self.wire}:{name}"


@dataclass(frozen=True)
class GateHold:
    """One gate that allows nothing now, with its numbers."""

    gate: GateKind
    used: int  # in flight, tokens spent this window, permits held, tasks scheduled, runs admitted
    limit: int  # the cap, the tokens per window, the permits, maxConcurrentTasks, the key's limit
    retry_in: float | None = None  # seconds until this gate opens by itself, if known
    window_seconds: int = 0  # rateLimit: the window's size
    name: str = ""  # what follows the colon on the wire, for a gate that names something (a semaphore)

    def __post_init__(self) -> None:
        self.gate.control(self.name)  # a semaphore hold without its semaphore is a bug, found here

    @property
    def control(self) -> str:
        """The wire text: `concurrentExecLimit`, `rateLimit`, `semaphore:<name>`, ..."""
        return self.gate.control(self.name)

    @property
    def detail(self) -> str:
        return self.gate.numbers(self)

    def sentence(self, held: Held) -> str:
        return self.gate.sentence(self, held)


def _in_flight(hold: GateHold) -> str:
    return f"{hold.used}/{hold.limit} in flight"


def _window(hold: GateHold) -> str:
    return (
        f"{hold.used}/{hold.limit} this window of {hold.window_seconds} s, "
        f"next window in {math.ceil(hold.retry_in or 0)} s"
    )


def _permits(hold: GateHold) -> str:
    return f"{hold.used}/{hold.limit} held"


def _scheduled(hold: GateHold) -> str:
    return f"{hold.used}/{hold.limit} tasks of this run are scheduled"


def _admitted(hold: GateHold) -> str:
    return f"{hold.used}/{hold.limit} runs admitted"


def _first(holders: Sequence[str], shown: int = 5) -> str:
    return ", ".join(holders[:shown]) + (" ..." if len(holders) > shown else "")


CONCURRENT_EXEC_LIMIT = GateKind(
    "concurrentExecLimit",
    None,
    _in_flight,
    lambda hold, held: f"concurrentExecLimit {held.subject}: {_in_flight(hold)}",
)
RATE_LIMIT = GateKind(
    "rateLimit",
    None,
    _window,
    lambda hold, held: (
        f"rate limit {held.subject}: {hold.used}/{hold.limit} this window, "
        f"next window in {spoken_seconds(hold.retry_in or 0.0)}"
    ),
)
SEMAPHORE = GateKind(
    "semaphore",
    "the Semaphore's name",
    _permits,
    lambda hold, held: (
        f"semaphore {hold.name}: {hold.used}/{hold.limit}"
        + (f" held by {_first(held.holders)}" if held.holders else "")
    ),
)
MAX_CONCURRENT_TASKS = GateKind(
    "maxConcurrentTasks",
    None,
    _scheduled,
    lambda hold, held: f"maxConcurrentTasks {held.subject}: {_scheduled(hold)}; more wait their turn",
)
RATE_LIMIT_CONFIG = GateKind(
    "rateLimitConfig",
    None,
    _admitted,
    lambda hold, held: (
        f"rateLimitConfig {held.subject}: {_admitted(hold)}; this run waits its turn"
        + (f"; admitted: {', '.join(held.holders[:5])}" if held.holders else "")
    ),
)

# Every gate, dequeue gates first in the order the allowance checks them.
GATES: tuple[GateKind, ...] = (CONCURRENT_EXEC_LIMIT, RATE_LIMIT, SEMAPHORE, MAX_CONCURRENT_TASKS, RATE_LIMIT_CONFIG)
_BY_WIRE: Mapping[str, GateKind] = {gate.wire: gate for gate in GATES}


def parse_control(control: str) -> tuple[GateKind, str]:
    """A control's wire text as (its gate, what follows the colon); UnknownGate
    when the kind before the colon is none of `GATES`, or has the wrong shape."""
    wire, colon, name = control.partition(":")
    gate = _BY_WIRE.get(wire)
    if gate is None:
        known = ", ".join(g.wire for g in GATES)
        raise UnknownGate(f"unknown gate kind {wire!r} in control {control!r}; the gates are {known}")
    if colon and gate.names is None:
        raise UnknownGate(f"gate {wire} names nothing after a colon, not {name!r} (control {control!r})")
    gate.control(name)
    return gate, name


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
            holds.append(GateHold(CONCURRENT_EXEC_LIMIT, state.in_flight, gates.concurrent_exec_limit))
        allowed = min(allowed, free)
    if gates.rate_limit_per_frequency:
        tokens = max(gates.rate_limit_per_frequency - state.window_used, 0)
        if tokens == 0:
            wait = max(state.seconds_to_next_window, 0.0)
            holds.append(
                GateHold(
                    RATE_LIMIT,
                    state.window_used,
                    gates.rate_limit_per_frequency,
                    retry_in=wait,
                    window_seconds=gates.rate_limit_frequency_seconds,
                )
            )
        allowed = min(allowed, tokens)
    for semaphore in state.semaphores:
        if semaphore.free == 0:
            holds.append(GateHold(SEMAPHORE, semaphore.held, semaphore.permits, name=semaphore.name))
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
