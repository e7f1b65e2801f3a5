"""Gate arithmetic at dequeue: the most restrictive gate wins."""

from __future__ import annotations

import pytest

from sluiceway.controls.gates import SemaphoreState, Window, allowance, window_start
from sluiceway.controls.policy import Gates


def test_a_poll_for_ten_under_a_cap_of_two_gets_two_then_zero() -> None:
    gates = Gates(concurrent_exec_limit=2)
    assert allowance(10, gates, in_flight=0, window=None, semaphores=[], now=0)[0] == 2
    allowed, holds = allowance(10, gates, in_flight=2, window=None, semaphores=[], now=0)
    assert allowed == 0
    assert [(h.control, h.detail) for h in holds] == [("concurrentExecLimit", "2/2 in flight")]


def test_the_minimum_across_gates_wins() -> None:
    gates = Gates(
        concurrent_exec_limit=8, rate_limit_per_frequency=100, rate_limit_frequency_seconds=60, semaphores=("erp",)
    )
    window = Window(start=0, size=60, used=97)
    allowed, holds = allowance(10, gates, 1, window, [SemaphoreState("erp", 4, 2)], now=10)
    assert allowed == 2 and holds == [], "2 free permits < 3 tokens < 7 slots"
    allowed, _ = allowance(10, gates, 1, window, [SemaphoreState("erp", 4, 0)], now=10)
    assert allowed == 3


def test_a_spent_window_says_when_the_next_one_opens() -> None:
    gates = Gates(rate_limit_per_frequency=100, rate_limit_frequency_seconds=60)
    allowed, [hold] = allowance(5, gates, 0, Window(start=60, size=60, used=100), [], now=97)
    assert allowed == 0 and hold.control == "rateLimit"
    assert hold.retry_in == pytest.approx(23) and "next window in 23 s" in hold.detail


def test_every_full_semaphore_is_named() -> None:
    gates = Gates(semaphores=("a", "b"))
    allowed, holds = allowance(1, gates, 0, None, [SemaphoreState("a", 2, 2), SemaphoreState("b", 1, 1)], 0)
    assert allowed == 0 and [h.control for h in holds] == ["semaphore:a", "semaphore:b"]


def test_ungated_is_unbounded() -> None:
    assert not Gates().any()
    assert allowance(50, Gates(), 10_000, None, [], 0) == (50, [])


@pytest.mark.parametrize(
    ("now", "size", "start"), [(0, 60, 0), (59.9, 60, 0), (60, 60, 60), (125.5, 60, 120), (7.3, 1, 7)]
)
def test_fixed_windows_are_floor_of_now_over_size(now: float, size: int, start: float) -> None:
    assert window_start(now, size) == start
