"""Deficit round robin over the operator's system-task slots: shares follow
the weights over time, a newcomer is served at once, credit is not hoarded."""

from __future__ import annotations

from collections import Counter

import pytest

from sluiceway.controls.fairness import DeficitRoundRobin


def served(drr: DeficitRoundRobin, weights: dict[str, float], rounds: int, free: int) -> Counter[str]:
    total: Counter[str] = Counter()
    for _ in range(rounds):
        total.update(drr.allocate(free, weights))
    return total


@pytest.mark.parametrize("free", [1, 3, 32])
def test_equal_weights_share_equally_whatever_the_batch_size(free: int) -> None:
    total = served(DeficitRoundRobin(), {"a": 1, "b": 1}, rounds=100, free=free)
    assert abs(total["a"] - total["b"]) <= 1 and total.total() == 100 * free


@pytest.mark.parametrize("free", [1, 4, 32])
def test_weights_set_the_proportions(free: int) -> None:
    total = served(DeficitRoundRobin(), {"gold": 3, "bronze": 1}, rounds=400, free=free)
    assert total["gold"] / total["bronze"] == pytest.approx(3, rel=0.02)


def test_a_namespace_arriving_behind_a_backlog_is_served_within_one_round() -> None:
    drr = DeficitRoundRobin()
    served(drr, {"busy": 1}, rounds=1000, free=1)  # the backlog had the slots to itself
    first = [drr.allocate(1, {"busy": 1, "new": 1}) for _ in range(2)]
    assert {"new": 1, "busy": 0} in first  # no credit hoarded by the busy one


def test_idle_namespaces_forget_their_credit() -> None:
    drr = DeficitRoundRobin()
    drr.allocate(1, {"a": 1, "b": 1})
    drr.allocate(5, {"a": 1})
    assert "b" not in drr.deficits


def test_unused_slots_are_refunded_so_a_short_queue_is_not_penalised() -> None:
    drr = DeficitRoundRobin()
    shares = drr.allocate(10, {"a": 1, "b": 1})
    assert shares == {"a": 5, "b": 5}
    drr.refund("a", 4)  # a had one ready task
    assert drr.allocate(2, {"a": 1, "b": 1})["a"] >= 1


def test_nothing_to_share_or_nobody_waiting() -> None:
    assert DeficitRoundRobin().allocate(0, {"a": 1}) == {"a": 0}
    assert DeficitRoundRobin().allocate(5, {}) == {}
