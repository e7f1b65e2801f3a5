"""What keeps idle pollers cheap: one "empty" answer shared by the polls of a
process until a notification about the queue, and poller bookkeeping written
for every poller at once."""

from __future__ import annotations

from sluiceway.plane import Plane
from sluiceway.store.notifications import Notifications


def _notifications() -> Notifications:
    return Notifications("postgresql://unused")  # nothing here connects


def test_a_queue_found_empty_is_known_empty_until_a_notification_about_it() -> None:
    notes = _notifications()
    mark = notes.mark("ns", ["a", "b"])
    notes.note_empty("ns", ["a", "b"], mark, 60)
    assert 0 < (notes.empty_for("ns", ["a"]) or 0) <= 60 and notes.empty_for("ns", ["a", "b"])
    assert notes.empty_for("ns", ["a", "c"]) is None, "a queue nobody asked about is not known empty"
    assert notes.empty_for("other", ["a"]) is None
    notes.wake("ns", ["a"])
    assert notes.empty_for("ns", ["a"]) is None and notes.empty_for("ns", ["b"])


def test_a_notification_while_the_poll_asked_keeps_the_queue_unknown() -> None:
    notes = _notifications()
    mark = notes.mark("ns", ["a"])
    notes.wake("ns", ["a"])  # a task became ready while the lease statement ran
    notes.note_empty("ns", ["a"], mark, 60)
    assert notes.empty_for("ns", ["a"]) is None
    assert notes.changed_since("ns", ["a"], mark)


def test_known_empty_lasts_only_as_long_as_it_was_noted_for() -> None:
    notes = _notifications()
    notes.note_empty("ns", ["a"], notes.mark("ns", ["a"]), 0)
    assert notes.empty_for("ns", ["a"]) is None
    notes.note_empty("ns", ["a"], notes.mark("ns", ["a"]), -1.0)  # a delayed task is due already
    assert notes.empty_for("ns", ["a"]) is None
    notes.note_empty("ns", ["a"], notes.mark("ns", ["a"]), 1.5)  # a delayed task is due in 1.5 s
    assert 0 < (notes.empty_for("ns", ["a"]) or 0) <= 1.5, "polls wake when the delayed task is due"


def test_when_the_knowledge_runs_out_one_poll_asks_and_the_others_wait_for_it() -> None:
    notes = _notifications()
    notes.note_empty("ns", ["a"], notes.mark("ns", ["a"]), 1e-9)  # noted, and run out at once
    assert notes.empty_for("ns", ["a"]) is None, "the first poll asks the database"
    assert notes.empty_for("ns", ["a"]), "the next ones wait for its answer"
    notes.forget("ns", ["a"])  # it found work
    assert notes.empty_for("ns", ["a"]) is None, "then every poll asks"


async def test_a_waiting_poll_returns_at_once_when_a_notification_came_since_its_mark() -> None:
    notes = _notifications()
    mark = notes.mark("ns", ["a"])
    notes.wake("ns", ["a"])  # before the poll registered as a waiter: not lost
    assert await notes.wait_ready("ns", ["a"], 30, mark)


def test_idle_pollers_are_written_together_once_per_interval() -> None:
    plane = Plane(pool=None, poll_record_interval=5.0)  # type: ignore[arg-type]  # no database needed
    first = plane.polls_to_record("ns", ["a"], "w1")
    assert first == [("ns", "a", "w1")], "a new worker is written at once"
    assert plane.polls_to_record("ns", ["a"], "w1") == [], "a known worker waits for the interval"
    plane._polls_written_at -= 10  # the interval passed
    second = plane.polls_to_record("ns", ["a", "b"], "w1")
    assert sorted(second) == [("ns", "a", "w1"), ("ns", "b", "w1")]


def test_a_due_write_carries_every_poll_seen_since_the_last_one() -> None:
    plane = Plane(pool=None, poll_record_interval=5.0)  # type: ignore[arg-type]
    for worker in ("w1", "w2", "w3"):
        plane.polls_to_record("ns", ["a"], worker)
    for worker in ("w1", "w2"):
        assert plane.polls_to_record("ns", ["a"], worker) == []
    plane._polls_written_at -= 10
    assert sorted(plane.polls_to_record("ns", ["a"], "w3")) == [("ns", "a", "w1"), ("ns", "a", "w2"), ("ns", "a", "w3")]
