"""The timeline: a bar per attempt, cut into backoff, queue and running time,
as fractions of the run's span."""

from __future__ import annotations

import datetime

import pytest

from sluiceway.ui.gantt import MAX_ROWS, Attempt, timeline

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def test_a_retried_task_shows_its_backoff_gap_and_both_attempts() -> None:
    attempts = [
        Attempt("charge", 1, "FAILED", at(0), at(0), at(2), at(4)),
        Attempt("charge", 2, "COMPLETED", at(4), at(10), at(12), at(20)),
    ]
    found = timeline(attempts, T0, at(20), at(99))
    assert [r.key for r in found.rows] == ["charge"]
    kinds = [(s.kind, s.start, s.width) for s in found.rows[0].segments]
    assert kinds == [
        ("queued", 0.0, 0.1),
        ("running", 0.1, 0.1),
        ("backoff", 0.2, 0.3),
        ("queued", 0.5, 0.1),
        ("running", 0.6, 0.4),
    ]
    assert "retry backoff 6.0 s" in found.rows[0].segments[2].label
    assert found.seconds == 20


def test_an_open_attempt_runs_until_now() -> None:
    found = timeline([Attempt("wait", 1, "IN_PROGRESS", at(0), at(0), at(5), None)], T0, None, at(10))
    running = found.rows[0].segments[-1]
    assert running.kind == "running" and running.start == pytest.approx(0.5) and running.width == pytest.approx(0.5)


def test_an_engine_task_that_was_never_leased_shows_its_wait() -> None:
    found = timeline([Attempt("approval", 1, "COMPLETED", at(1), at(1), None, at(9))], T0, at(10), at(10))
    (segment,) = found.rows[0].segments
    assert segment.kind == "waiting" and segment.start == pytest.approx(0.1) and segment.width == pytest.approx(0.8)


def test_a_folded_fan_out_is_one_row_and_rows_are_capped() -> None:
    attempts = [Attempt(f"fan__{i}", 1, "COMPLETED", at(i), at(i), at(i), at(i + 1)) for i in range(5000)]
    folded = timeline(attempts, T0, at(5001), at(5001), folded=frozenset({"fan"}))
    assert [r.key for r in folded.rows] == ["fan__*"]
    assert "5,000 attempts" in folded.rows[0].segments[0].label
    unfolded = timeline(attempts, T0, at(5001), at(5001))
    assert len(unfolded.rows) == MAX_ROWS and unfolded.hidden == 5000 - MAX_ROWS
