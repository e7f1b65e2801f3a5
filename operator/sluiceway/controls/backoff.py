"""The retry delay of the execution-controls reference:

    FIXED                delay = retryDelaySeconds
    LINEAR_BACKOFF       delay = retryDelaySeconds * backoffScaleFactor * attempt
    EXPONENTIAL_BACKOFF  delay = retryDelaySeconds * backoffScaleFactor ^ (attempt - 1)

    delay = min(delay, maxRetryDelaySeconds)
    if jitter > 0:  delay = delay ± (delay * jitter)
    delay = clamp(delay, 0, maxRetryDelaySeconds)

`attempt` is 1-based: 1 is the delay before the first retry. The cap is applied
twice, because upward jitter would otherwise push a delay back over it.
"""

from __future__ import annotations

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
    """Seconds to wait before retry number `attempt`."""
    cap = ceiling(policy)
    delay = min(raw_delay(policy, attempt), cap)
    if policy.jitter > 0:
        delay += delay * policy.jitter * rng.uniform(-1.0, 1.0)
    return min(max(delay, 0.0), cap)


def jitter_band(policy: RetryPolicy, attempt: int) -> tuple[float, float]:
    """The closed interval `retry_delay` draws from; for tests and diagnostics."""
    cap = ceiling(policy)
    delay = min(raw_delay(policy, attempt), cap)
    spread = delay * policy.jitter
    return max(delay - spread, 0.0), min(delay + spread, cap)
