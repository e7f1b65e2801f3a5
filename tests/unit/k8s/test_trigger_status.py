"""A Trigger's status (docs/triggers.md, "What a Trigger did"): the store's
(trigger, events read, outcome) sums folded per Trigger, written as every
count of its recent events with 0 for the outcomes it never had, its last run
kept when none of them started one, unchanged fields not written again, and
the sums read once per namespace per interval however many Triggers ask."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable

import kopf
import pytest

from sluiceway.k8s.reconciling import SharedReads, changed
from sluiceway.k8s.status_reports import trigger_status
from sluiceway.model.trigger import COUNTED_OUTCOMES, TriggerStatus
from sluiceway.store.events import TriggerActivity, fold_activity

T0 = datetime.datetime(2030, 1, 1, 12, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)


def test_rows_fold_into_one_activity_per_trigger() -> None:
    folded = fold_activity(
        [
            ("ship", 7, "started", 3, T0, "run-2"),
            ("ship", 7, "duplicate", 1, T1, "run-2"),
            ("ship", 7, "filtered", 2, T0, "run-2"),
            ("audit", 4, "refused", 4, T0, None),
            ("late", 7, None, None, None, None),  # listens to ship's event, judged none of those read
        ]
    )
    assert folded == {
        "ship": TriggerActivity(7, {"started": 3, "duplicate": 1, "filtered": 2}, T1, "run-2"),
        "audit": TriggerActivity(4, {"refused": 4}, T0, None),
        "late": TriggerActivity(7, {}, None, None),
    }


def test_the_status_names_the_window_every_count_and_the_newest_event_and_run() -> None:
    shown = trigger_status(TriggerActivity(6, {"started": 3, "duplicate": 1}, T1, "run-2"))
    assert shown == {
        "lastEventTime": "2030-01-01T12:05:00Z",
        "lastRunId": "run-2",
        "recent": {"events": 6, "started": 3, "duplicate": 1, "filtered": 0, "refused": 0, "invalid": 0},
    }
    # Every key is a field of the CRD's status schema (an unknown one would be pruned).
    schema = TriggerStatus.model_json_schema(by_alias=True)
    assert set(shown) <= set(schema["properties"])
    assert set(shown["recent"]) == set(schema["$defs"]["TriggerRecent"]["properties"])


def test_a_trigger_that_never_judged_an_event_says_so_with_zeros() -> None:
    shown = trigger_status(None)
    assert shown["lastEventTime"] is None and "lastRunId" not in shown
    assert shown["recent"] == {"events": 0, **{o: 0 for o in COUNTED_OUTCOMES}}


def test_a_run_older_than_the_recent_events_stays_the_last_run() -> None:
    """None of the events read started a run: the status keeps the run it
    had rather than writing null over it."""
    status = {"lastRunId": "run-2", "recent": {"events": 1000, "started": 1, "filtered": 999}}
    patch = kopf.Patch()
    changed(patch, status, trigger_status(TriggerActivity(1000, {"filtered": 1000}, T1, None)))
    assert "lastRunId" not in patch.status
    assert patch.status["recent"]["started"] == 0 and patch.status["recent"]["filtered"] == 1000


def test_an_unchanged_status_is_not_written_again() -> None:
    activity = TriggerActivity(4, {"started": 3, "duplicate": 1}, T1, "run-2")
    status = trigger_status(activity)
    patch = kopf.Patch()
    changed(patch, status, trigger_status(activity))
    assert not patch
    changed(patch, status, trigger_status(TriggerActivity(5, {"started": 4, "duplicate": 1}, T1, "run-2")))
    assert dict(patch.status) == {"recent": {**status["recent"], "events": 5, "started": 4}}


async def test_the_triggers_of_a_namespace_share_one_read_per_interval() -> None:
    reads: list[str] = []

    async def fetch(namespace: str) -> str:
        reads.append(namespace)
        await asyncio.sleep(0)  # the others ask while this read is in flight
        return f"sums of {namespace}"

    def reader(namespace: str) -> Callable[[], Awaitable[str]]:
        return lambda: fetch(namespace)

    shared = SharedReads()
    answers = await asyncio.gather(*(shared.read("activity", ns, 60.0, reader(ns)) for ns in ["a", "a", "a", "b"]))
    assert answers == ["sums of a"] * 3 + ["sums of b"]
    assert sorted(reads) == ["a", "b"]
    await shared.read("activity", "a", 0.0, lambda: fetch("a"))  # older than max_age: read again
    assert sorted(reads) == ["a", "a", "b"]


async def test_a_failed_read_is_not_kept() -> None:
    attempts = 0

    async def fetch() -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise RuntimeError("database away")
        return attempts

    shared = SharedReads()
    with pytest.raises(RuntimeError):  # the failure reaches the caller
        await shared.read("activity", "a", 60.0, fetch)
    assert await shared.read("activity", "a", 60.0, fetch) == 2
