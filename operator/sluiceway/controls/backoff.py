"""The retry delay of the execution-controls reference:

    FIXED                delay = retryDelaySeconds
    LINEAR_BACKOFF       delay = retryDelaySeconds * backoffScaleFactor * attempt
    EXPONENTIAL_BACKOFF  delay = retryDelaySeconds * backoffScaleFactor ^ (attempt - 1)

    delay = min(delay, maxRetryDelaySeconds)
    if jitter > 0:  delay = delay ± (delay * jitter)
    delay = clamp(delay, 0, maxRetryDelaySeconds)

`attempt` is 1-based: 1 is the delay before the first retry. The cap is applied
twice, because upward jitter would otherwise push a delay back over it.

The jitter band `[d(1-j), d(1+j)]` is fitted under the cap before the draw
(the TaskQ reference): once the curve saturates, delays are drawn uniformly
from `[cap(1-j), cap]`. Clamping the drawn value instead would put half of a
cohort retrying at the cap, the retries most likely to follow a fleet-wide
event, on exactly the same instant.
"""

from __future__ import annotations

import hashlib
from random import Random

from sluiceway.controls.policy import RetryPolicy
from sluiceway.model.taskdefinition import RetryLogic


def raw_delay(policy: RetryPolicy, attempt: int) -> float:
    """The curve before any cap or jitter (may be huge: Python floats saturate to inf)."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    base = policy.retry_delay_seconds
    if policy.retry_logic is RetryLogic.FIXED:
        return base
    if policy.retry_logic is RetryLogic.LINEAR_BACKOFF:
        return base * policy.backoff_scale_factor * attempt
    try:
        return float(base * policy.backoff_scale_factor ** (attempt - 1))
    except OverflowError:
        return float("inf")


def ceiling(policy: RetryPolicy) -> float:
    """The effective cap: the policy's own, under the operator-wide ceiling."""
    return min(policy.max_retry_delay_seconds, policy.max_retry_backoff_seconds)


def retry_delay(policy: RetryPolicy, attempt: int, rng: Random) -> float:
    """Seconds to wait before retry number `attempt`: uniform over the jitter band."""
    return delay_at(policy, attempt, rng.random())


def delay_at(policy: RetryPolicy, attempt: int, unit: float) -> float:
    """The delay at position `unit` (in [0, 1)) of the jitter band."""
    low, high = jitter_band(policy, attempt)
    return min(max(low + (high - low) * unit, low), high)


def unit_of(seed: str) -> float:
    """A position in [0, 1) derived from `seed` alone: the same on every
    replica and every evaluation, spread evenly over seeds."""
    digest = hashlib.sha256(seed.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def jitter_band(policy: RetryPolicy, attempt: int) -> tuple[float, float]:
    """The closed interval `retry_delay` draws from: the band around the capped
    curve, fitted under the cap (its upper edge clipped to the cap, never the
    draw)."""
    cap = ceiling(policy)
    delay = min(raw_delay(policy, attempt), cap)
    spread = delay * policy.jitter
    return max(delay - spread, 0.0), min(delay + spread, cap)
