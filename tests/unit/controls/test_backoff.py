"""The retry delay formula, pinned by the reference's own table."""

from __future__ import annotations

from random import Random

import pytest

from sluiceway.controls.backoff import jitter_band, raw_delay, retry_delay
from sluiceway.controls.policy import RetryPolicy
from sluiceway.model.taskdefinition import RetryLogic

DEFAULTS = RetryPolicy()  # retryDelaySeconds 1, factor 2, cap 3600, jitter 0.2

# Retry | Raw | After cap | With ±20% jitter (the reference's table)
TABLE = [
    (1, 1, 1, (0.8, 1.2)),
    (2, 2, 2, (1.6, 2.4)),
    (3, 4, 4, (3.2, 4.8)),
    (8, 128, 128, (102.4, 153.6)),
    (12, 2048, 2048, (1638.4, 2457.6)),
    (14, 8192, 3600, (2880, 3600)),
]


@pytest.mark.parametrize(("attempt", "raw", "capped", "band"), TABLE)
def test_the_reference_delay_table(attempt: int, raw: float, capped: float, band: tuple[float, float]) -> None:
    assert raw_delay(DEFAULTS, attempt) == raw
    no_jitter = RetryPolicy(jitter=0)
    assert retry_delay(no_jitter, attempt, Random(0)) == capped
    low, high = jitter_band(DEFAULTS, attempt)
    assert (low, high) == pytest.approx(band)
    draws = [retry_delay(DEFAULTS, attempt, Random(seed)) for seed in range(2000)]
    assert min(draws) >= band[0] - 1e-9 and max(draws) <= band[1] + 1e-9
    # The draws really spread across the band, not a constant inside it.
    assert max(draws) - min(draws) > 0.8 * (band[1] - band[0])


class _Extreme(Random):
    """A random source pinned to one end of [-1, 1]."""

    def __init__(self, end: float) -> None:
        super().__init__(0)
        self.end = end

    def uniform(self, a: float, b: float) -> float:
        return self.end


def test_upward_jitter_cannot_push_a_delay_over_the_cap() -> None:
    policy = RetryPolicy(retry_delay_seconds=100, max_retry_delay_seconds=110, jitter=0.5)
    # Raw 100 is under the cap; +50% jitter would make it 150: the second clamp holds it at 110.
    assert retry_delay(policy, 1, _Extreme(1.0)) == 110
    assert retry_delay(policy, 1, _Extreme(-1.0)) == 50


def test_the_cap_applies_before_jitter_too() -> None:
    policy = RetryPolicy(retry_delay_seconds=1000, max_retry_delay_seconds=100, jitter=0.2)
    assert retry_delay(policy, 1, _Extreme(-1.0)) == 80  # 20% below the capped 100, not below 1000


@pytest.mark.parametrize(
    ("logic", "attempt", "expected"),
    [
        (RetryLogic.FIXED, 1, 5),
        (RetryLogic.FIXED, 9, 5),
        (RetryLogic.LINEAR_BACKOFF, 1, 15),
        (RetryLogic.LINEAR_BACKOFF, 4, 60),
        (RetryLogic.EXPONENTIAL_BACKOFF, 1, 5),
        (RetryLogic.EXPONENTIAL_BACKOFF, 4, 135),
    ],
)
def test_the_three_shapes(logic: RetryLogic, attempt: int, expected: float) -> None:
    policy = RetryPolicy(retry_logic=logic, retry_delay_seconds=5, backoff_scale_factor=3, jitter=0)
    assert retry_delay(policy, attempt, Random(0)) == expected


def test_the_operator_ceiling_caps_a_larger_policy_cap() -> None:
    policy = RetryPolicy(max_retry_delay_seconds=10**9, max_retry_backoff_seconds=86400, jitter=0)
    assert retry_delay(policy, 60, Random(0)) == 86400


def test_huge_attempts_do_not_overflow() -> None:
    assert retry_delay(RetryPolicy(jitter=0), 100, Random(0)) == 3600
    assert raw_delay(RetryPolicy(backoff_scale_factor=100), 100) > 1e100


def test_zero_jitter_is_deterministic() -> None:
    policy = RetryPolicy(jitter=0)
    assert {retry_delay(policy, 3, Random(s)) for s in range(50)} == {4}


def test_attempt_is_one_based() -> None:
    with pytest.raises(ValueError):
        raw_delay(DEFAULTS, 0)
