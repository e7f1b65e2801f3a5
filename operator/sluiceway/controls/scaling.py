"""Worker autoscaling: how many worker pods a task type should run.

The policy (stated for users in docs/worker-pods.md):

1. demand = ceil((ready + in_flight) / target_tasks_per_replica). Delayed
   tasks (waiting out a retry backoff) do not count until they are ready.
2. gate ceiling = the fewest replicas that can keep every task the gates admit
   busy: ceil(concurrentExecLimit / concurrency) when a cap is set, and
   ceil(permits / concurrency) for the smallest configured semaphore. Rate
   limits give no ceiling: what a rate admits in flight depends on how long a
   task runs, which the operator does not know ahead of time.
3. recommendation = clamp(min(demand, ceiling), min_replicas, max_replicas);
   at least 1 while any task is ready or in flight (when max_replicas >= 1 and
   the gates admit anything at all).
4. scale-down is stabilized: the result is the largest recommendation over the
   last `window` evaluations, so a queue that drains for a moment does not kill
   pods it needs again seconds later. Scale-up is immediate. A lowered bound
   (maxReplicas, a gate) applies immediately too: the result never exceeds
   today's max(min_replicas, min(max_replicas, ceiling)).

Pure: no IO, no clock. The caller keeps the history between evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sluiceway.controls.gates import in_flight_ceiling
from sluiceway.controls.policy import Gates

# How long a higher recommendation holds off a scale-down (the HPA's default).
STABILIZATION_SECONDS = 300.0


@dataclass(frozen=True)
class Scale:
    replicas: int
    """What to run now."""
    recommendation: int
    """This evaluation's own answer, before stabilization."""
    demand: int
    ceiling: int | None
    """The gate ceiling; None when no gate bounds the replicas."""
    history: tuple[int, ...]
    """The recommendations to pass to the next evaluation (most recent last)."""


def window_for(interval_seconds: float, stabilization_seconds: float = STABILIZATION_SECONDS) -> int:
    """Evaluations in the stabilization window: 5 min / 5 s = 60."""
    if interval_seconds <= 0:
        raise ValueError("the evaluation interval must be positive")
    return max(1, math.ceil(stabilization_seconds / interval_seconds))


def gate_ceiling(gates: Gates, concurrency: int, semaphore_permits: Mapping[str, int] | None = None) -> int | None:
    """The most replicas the gates can keep busy, or None when nothing bounds them.

    `semaphore_permits` holds the permits of the configured semaphores among
    `gates.semaphores`; an unconfigured semaphore gates nothing, as at dequeue."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    tasks = in_flight_ceiling(gates, semaphore_permits or {})
    return None if tasks is None else math.ceil(tasks / concurrency)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def desired_replicas(
    *,
    ready: int,
    in_flight: int,
    delayed: int,
    gates: Gates,
    min_replicas: int,
    max_replicas: int,
    target_tasks_per_replica: int,
    concurrency: int,
    current_replicas: int,
    history: Sequence[int],
    window: int,
    semaphore_permits: Mapping[str, int] | None = None,
) -> Scale:
    """How many worker pods to run; see the module docstring for the policy.

    `history` is the `Scale.history` of the previous evaluation; empty after a
    restart, in which case `current_replicas` stands for it, so a restarted
    operator waits out a full window before scaling down."""
    del delayed  # stated so callers pass it; a delayed task is demand only once it is ready
    if target_tasks_per_replica < 1:
        raise ValueError("target_tasks_per_replica must be at least 1")
    if window < 1:
        raise ValueError("the stabilization window must hold at least one evaluation")
    if max_replicas < min_replicas:
        raise ValueError("max_replicas must be at least min_replicas")
    work = max(0, ready) + max(0, in_flight)
    demand = math.ceil(work / target_tasks_per_replica)
    ceiling = gate_ceiling(gates, concurrency, semaphore_permits)
    bounded = demand if ceiling is None else min(demand, ceiling)
    recommendation = _clamp(bounded, min_replicas, max_replicas)
    if work > 0 and max_replicas >= 1 and ceiling != 0:
        recommendation = max(recommendation, 1)

    prior = tuple(history) if history else (max(0, current_replicas),)
    recent = prior[-(window - 1) :] if window > 1 else ()
    stabilized = max((recommendation, *recent))
    upper = max(min_replicas, max_replicas if ceiling is None else min(max_replicas, ceiling))
    replicas = min(stabilized, upper)
    return Scale(
        replicas=replicas,
        recommendation=recommendation,
        demand=demand,
        ceiling=ceiling,
        history=(*prior, recommendation)[-window:],
    )
