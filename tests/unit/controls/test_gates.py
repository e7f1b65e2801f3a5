"""Gate arithmetic at dequeue: the most restrictive gate wins."""

from __future__ import annotations

import pytest

from sluiceway.controls.gates import GateState, SemaphoreState, allowance, closed, in_flight_ceiling, window_start
from sluiceway.controls.policy import Gates


def test_a_poll_for_ten_under_a_cap_of_two_gets_two_then_zero() -> None:
    gates = Gates(concurrent_exec_limit=2)
    assert allowance(10, gates, GateState(in_flight=0))[0] == 2
    allowed, holds = allowance(10, gates, GateState(in_flight=2))
    assert allowed == 0
    assert [(h.control, h.detail) for h in holds] == [("concurrentExecLimit", "2/2 in flight")]


def test_the_minimum_across_gates_wins() -> None:
    gates = Gates(
        concurrent_exec_limit=8, rate_limit_per_frequency=100, rate_limit_frequency_seconds=60, semaphores=("erp",)
    )
    allowed, holds = allowance(10, gates, GateState(1, 97, 50, [SemaphoreState("erp", 4, 2)]))
    assert allowed == 2 and holds == [], "2 free permits < 3 tokens < 7 slots"
    allowed, _ = allowance(10, gates, GateState(1, 97, 50, [SemaphoreState("erp", 4, 0)]))
    assert allowed == 3


def test_a_spent_window_says_when_the_next_one_opens() -> None:
    gates = Gates(rate_limit_per_frequency=100, rate_limit_frequency_seconds=60)
    allowed, [hold] = allowance(5, gates, GateState(window_used=100, seconds_to_next_window=23))
    assert allowed == 0 and hold.control == "rateLimit"
    assert hold.retry_in == pytest.approx(23) and "next window in 23 s" in hold.detail
    assert hold.detail == "100/100 this window of 60 s, next window in 23 s"


def test_every_full_semaphore_is_named() -> None:
    gates = Gates(semaphores=("a", "b"))
    allowed, holds = allowance(1, gates, GateState(semaphores=[SemaphoreState("a", 2, 2), SemaphoreState("b", 1, 1)]))
    assert allowed == 0 and [h.control for h in holds] == ["semaphore:a", "semaphore:b"]
    assert [h.detail for h in holds] == ["2/2 held", "1/1 held"]


def test_ungated_is_unbounded() -> None:
    assert not Gates().any()
    assert allowance(50, Gates(), GateState(in_flight=10_000)) == (50, [])


def test_closed_gates_are_those_the_allowance_names_whatever_was_asked() -> None:
    gates = Gates(concurrent_exec_limit=2, rate_limit_per_frequency=5, semaphores=("s",))
    state = GateState(in_flight=2, window_used=1, semaphores=[SemaphoreState("s", 1, 1)])
    assert [h.control for h in closed(gates, state)] == ["concurrentExecLimit", "semaphore:s"]
    assert closed(gates, GateState(in_flight=1, window_used=1, semaphores=[SemaphoreState("s", 1, 0)])) == []


@pytest.mark.parametrize(
    ("gates", "permits", "ceiling"),
    [
        (Gates(), {"s": 3}, None),  # a semaphore the type does not list gates nothing
        (Gates(rate_limit_per_frequency=10), {}, None),  # a rate bounds a rate, not a count
        (Gates(concurrent_exec_limit=8), {}, 8),
        (Gates(concurrent_exec_limit=8, semaphores=("a", "b")), {"a": 5, "b": 3}, 3),
        (Gates(concurrent_exec_limit=2, semaphores=("a",)), {"a": 5}, 2),
        (Gates(semaphores=("a", "missing")), {"a": 4}, 4),  # an unconfigured semaphore gates nothing
    ],
)
def test_the_in_flight_ceiling_is_the_tightest_count_gate(
    gates: Gates, permits: dict[str, int], ceiling: int | None
) -> None:
    assert in_flight_ceiling(gates, permits) == ceiling


@pytest.mark.parametrize(
    ("now", "size", "start"), [(0, 60, 0), (59.9, 60, 0), (60, 60, 60), (125.5, 60, 120), (7.3, 1, 7)]
)
def test_fixed_windows_are_floor_of_now_over_size(now: float, size: int, start: float) -> None:
    assert window_start(now, size) == start
