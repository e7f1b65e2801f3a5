"""A wake-up's payload is written in one place and read in one place; what
the SQL writes is what the listener reads."""

from __future__ import annotations

import uuid

import pytest

from sluiceway.store import wakeups


@pytest.mark.parametrize(
    "queue", [("team-a", "charge_card"), ("team-a", wakeups.semaphore_queue("erp")), wakeups.SYSTEM_WAKE]
)
def test_a_ready_payload_names_its_queue(queue: tuple[str, str]) -> None:
    assert wakeups.parse_ready(wakeups.ready_payload(queue)) == wakeups.Ready(queue, one_slot=False)


def test_a_freed_slot_wakes_one_waiter_of_its_queue() -> None:
    payload = wakeups.ready_payload(("team-a", "erp")) + wakeups.SLOT_FREED + "3"
    assert wakeups.parse_ready(payload) == wakeups.Ready(("team-a", "erp"), one_slot=True)


def test_the_sql_payloads_are_the_python_ones() -> None:
    assert wakeups.ready_payload_sql("'team-a'", "'erp'") == "'team-a' || '/' || 'erp'"
    assert wakeups.SYSTEM_PAYLOAD_SQL == f"'{wakeups.ready_payload(wakeups.SYSTEM_WAKE)}'"
    assert f"'{wakeups.READY_CHANNEL}'" in wakeups.released("done")


def test_runs_ending_together_are_announced_within_notifys_payload() -> None:
    run_ids = [str(uuid.UUID(int=n)) for n in range(450)]
    payloads = wakeups.ended_payloads(run_ids)
    assert [len(wakeups.parse_ended(p)) for p in payloads] == [200, 200, 50]
    assert [r for p in payloads for r in wakeups.parse_ended(p)] == run_ids
    assert max(len(p.encode()) for p in payloads) < 8000
    assert f"'{wakeups.ENDED_CHANNEL}'" in wakeups.ended_sql("ended")
    assert f"/ {wakeups.ENDED_PER_PAYLOAD}" in wakeups.ended_sql("ended")
