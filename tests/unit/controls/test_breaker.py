"""The circuit breaker's state machine, with time passed in (milliseconds)."""

from __future__ import annotations

import pytest

from sluiceway.controls.breaker import BreakerConfig, Breakers, BreakerState, CircuitBreaker

ON = BreakerConfig(
    enabled=True, minimum_requests=10, failure_ratio=0.5, window_ms=30_000, open_ms=5_000, max_open_ms=60_000
)


def trip(breaker: CircuitBreaker, at: float = 0) -> None:
    for i in range(10):
        breaker.record(at + i, server_failure=True)


def test_off_by_default_and_then_never_refuses() -> None:
    breaker = CircuitBreaker(BreakerConfig())
    for i in range(100):
        breaker.record(i, server_failure=True)
    assert breaker.allow(100).allowed and breaker.state is BreakerState.CLOSED


def test_below_minimum_requests_it_never_opens() -> None:
    breaker = CircuitBreaker(ON)
    for i in range(9):
        breaker.record(i, server_failure=True)
    assert breaker.state is BreakerState.CLOSED


def test_it_opens_at_the_failure_ratio_with_enough_samples() -> None:
    breaker = CircuitBreaker(ON)
    for i in range(5):
        breaker.record(i, server_failure=False)
    for i in range(4):
        breaker.record(10 + i, server_failure=True)
    assert breaker.state is BreakerState.CLOSED  # 4/9: not enough samples yet
    breaker.record(20, server_failure=True)  # 5/10 = 0.5: at the ratio opens
    assert breaker.state is BreakerState.OPEN
    verdict = breaker.allow(1000)
    assert not verdict.allowed and verdict.retry_in_ms == pytest.approx(4_020)  # opened at 20 ms, open 5 s


def test_old_outcomes_are_forgotten() -> None:
    breaker = CircuitBreaker(ON)
    for i in range(9):
        breaker.record(i, server_failure=True)
    breaker.record(40_000, server_failure=True)  # the nine are older than windowMs
    assert breaker.state is BreakerState.CLOSED


def test_half_open_admits_exactly_one_probe_and_a_success_closes() -> None:
    breaker = CircuitBreaker(ON)
    trip(breaker)
    assert not breaker.allow(4_000).allowed
    probe = breaker.allow(5_010)
    assert probe.allowed and probe.probe and breaker.state is BreakerState.HALF_OPEN
    assert not breaker.allow(5_011).allowed, "a second caller during the probe is refused"
    breaker.record(5_100, server_failure=False, probe=True)
    assert breaker.state is BreakerState.CLOSED and breaker.allow(5_101).allowed


def test_a_failed_probe_doubles_the_open_time_up_to_the_ceiling() -> None:
    breaker = CircuitBreaker(ON)
    trip(breaker)
    now, expected = 9.0, [10_000, 20_000, 40_000, 60_000, 60_000]
    for open_ms in expected:
        now += breaker.open_ms + 1
        assert breaker.allow(now).probe
        breaker.record(now, server_failure=True, probe=True)
        assert breaker.state is BreakerState.OPEN and breaker.open_ms == open_ms


def test_client_errors_do_not_count_against_the_dependency() -> None:
    breaker = CircuitBreaker(ON)
    for i in range(50):
        breaker.record(i, server_failure=False)  # 404s and 422s are recorded as answers
    assert breaker.state is BreakerState.CLOSED


def test_breakers_are_per_target() -> None:
    breakers = Breakers(ON)
    trip(breakers("down.example"))
    assert breakers("down.example").state is BreakerState.OPEN
    assert breakers("up.example").state is BreakerState.CLOSED


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ('{"enabled": true, "failureRatio": 0}', "failureRatio"),
        ('{"enabled": true, "failureRatio": 1.5}', "failureRatio"),
        ('{"enabled": true, "openMs": 10000, "maxOpenMs": 5000}', "maxOpenMs"),
        ("not json", "CIRCUIT_BREAKER"),
    ],
)
def test_bad_configuration_is_refused_naming_the_option(raw: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        BreakerConfig.parse(raw)


def test_the_reference_defaults() -> None:
    config = BreakerConfig.parse('{"enabled": true}')
    assert (config.failure_ratio, config.minimum_requests, config.window_ms, config.open_ms, config.max_open_ms) == (
        0.5,
        10,
        30_000,
        5_000,
        60_000,
    )
