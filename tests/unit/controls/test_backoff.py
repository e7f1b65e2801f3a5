"""The retry delay formula, pinned by the reference's own table."""

from __future__ import annotations

from random import Random

import pytest

from sluiceway.controls.backoff import delay_at, jitter_band, raw_delay, retry_delay, unit_of
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
    """A random source pinned to one end of the band: -1 the lower, 1 the upper."""

    def __init__(self, end: float) -> None:
        super().__init__(0)
        self.end = end

    def random(self) -> float:
        return (self.end + 1) / 2


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


def test_at_the_cap_delays_are_uniform_over_the_band_fitted_under_it() -> None:
    """Seed 002: the band is fitted under the cap before the draw. Clamping the
    drawn value instead put about half of the capped delays on the cap
    itself; here none sits there and the band [cap(1-j), cap] fills evenly."""
    cap, jitter = 3600.0, 0.2
    draws = [retry_delay(DEFAULTS, 20, Random(seed)) for seed in range(20_000)]
    assert min(draws) >= cap * (1 - jitter) and max(draws) <= cap
    at_cap = sum(1 for d in draws if d == cap) / len(draws)
    assert at_cap < 0.001, f"{at_cap:.1%} of the capped delays equal the cap"
    # Ten equal bins over [2880, 3600]: each within 15% of the expected 2,000.
    bins = [0] * 10
    for d in draws:
        bins[min(int((d - cap * (1 - jitter)) / (cap * jitter) * 10), 9)] += 1
    assert all(abs(b - 2000) < 300 for b in bins), bins
    # The mean is the band's middle (3240), not pulled up to the cap.
    assert abs(sum(draws) / len(draws) - 3240) < 10


def test_a_band_reaching_over_the_cap_is_clipped_not_piled_on_it() -> None:
    """Raw 3300 with ±20%: the band [2640, 3960] is fitted to [2640, 3600] and drawn uniformly in it."""
    policy = RetryPolicy(retry_delay_seconds=3300, backoff_scale_factor=1, jitter=0.2)
    assert jitter_band(policy, 1) == pytest.approx((2640, 3600))
    draws = [retry_delay(policy, 1, Random(seed)) for seed in range(5000)]
    assert sum(1 for d in draws if d == 3600) == 0
    assert sum(1 for d in draws if d > 3120) / len(draws) == pytest.approx(0.5, abs=0.03)


def test_a_derived_position_is_deterministic_and_spread() -> None:
    """Crash reclaim draws from (task id, attempt): the same seed gives the same
    delay; different tasks spread over the band."""
    assert unit_of("task-1:2") == unit_of("task-1:2")
    units = [unit_of(f"task-{i}:3") for i in range(4000)]
    assert 0 <= min(units) and max(units) < 1
    assert sum(1 for u in units if u < 0.5) / len(units) == pytest.approx(0.5, abs=0.03)
    assert delay_at(DEFAULTS, 3, 0.0) == pytest.approx(3.2) and delay_at(DEFAULTS, 3, 0.999999) == pytest.approx(4.8)


def test_attempt_is_one_based() -> None:
    with pytest.raises(ValueError):
        raw_delay(DEFAULTS, 0)
