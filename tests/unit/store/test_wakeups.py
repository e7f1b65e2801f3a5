"""A wake-up's payload is written in one place and read in one place; what
the SQL writes is what the listener reads."""

from __future__ import annotations

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
