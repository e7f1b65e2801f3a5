"""Gate arithmetic at dequeue: the most restrictive gate wins. And the table
of gate kinds: every wire name reads back as its kind, every kind has its
sentence, and a kind the table does not know is an error."""

from __future__ import annotations

import pytest

from sluiceway.controls.gates import (
    GATES,
    SEMAPHORE,
    GateHold,
    GateKind,
    GateState,
    Held,
    SemaphoreState,
    UnknownGate,
    allowance,
    closed,
    in_flight_ceiling,
    parse_control,
    window_start,
)
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


def test_the_wire_names_are_those_clients_and_dashboards_read() -> None:
    assert [gate.wire for gate in GATES] == [
        "concurrentExecLimit",
        "rateLimit",
        "semaphore",
        "maxConcurrentTasks",
        "rateLimitConfig",
    ]
    assert [gate.wire for gate in GATES if gate.names is not None] == ["semaphore"]


def _named(gate: GateKind) -> str:
    return "legacy_erp" if gate.names is not None else ""


@pytest.mark.parametrize("gate", GATES, ids=lambda gate: gate.wire)
def test_every_kind_round_trips_from_its_wire_text(gate: GateKind) -> None:
    control = gate.control(_named(gate))
    assert parse_control(control) == (gate, _named(gate))
    assert parse_control(control)[0].control(_named(gate)) == control
    assert control.partition(":")[0] == gate.wire


@pytest.mark.parametrize("gate", GATES, ids=lambda gate: gate.wire)
def test_every_kind_has_a_why_sentence_with_its_numbers(gate: GateKind) -> None:
    hold = GateHold(gate, 7, 7, retry_in=3.0, window_seconds=60, name=_named(gate))
    sentence = hold.sentence(Held("export", ["t1 (run r1)"]))
    assert "7/7" in sentence and hold.detail.startswith("7/7")
    assert "export" in sentence or gate.names is not None, "the sentence names what it holds back"
    assert _named(gate) in sentence, "a gate that names something says which"


@pytest.mark.parametrize(
    ("control", "complaint"),
    [
        ("bandwidth:eu", "unknown gate kind 'bandwidth'"),
        ("Semaphore:erp", "unknown gate kind 'Semaphore'"),
        ("", "unknown gate kind ''"),
        ("semaphore", "semaphore needs the Semaphore's name"),
        ("semaphore:", "semaphore needs the Semaphore's name"),
        ("rateLimit:eu", "rateLimit names nothing after a colon"),
    ],
)
def test_an_unknown_or_misshapen_control_is_an_error_naming_it(control: str, complaint: str) -> None:
    with pytest.raises(UnknownGate, match=complaint):
        parse_control(control)


def test_a_hold_cannot_leave_out_what_its_gate_names() -> None:
    with pytest.raises(UnknownGate, match="needs the Semaphore's name"):
        GateHold(SEMAPHORE, 1, 1)
