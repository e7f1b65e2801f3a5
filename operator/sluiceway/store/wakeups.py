"""Wake-ups: the NOTIFY channels the operator's waiters listen on, and the
format of their payloads, written here once (as Python and as SQL) and read
here once (`parse_ready`, for store.notifications).

- `DECIDE_CHANNEL`: runs were queued for the decider. No payload: every
  decider looks at the whole queue.
- `READY_CHANNEL`: a queue may have work; the payload names it,
  "namespace/name", where the name is a task type, a semaphore's
  (`semaphore_queue`: a permit came free) or the system tasks' (`SYSTEM_WAKE`).
  A payload that ends in `SLOT_FREED` and a number says one gated slot came
  free: it wakes one waiter, not all of them (the number only keeps
  PostgreSQL from folding the notifications of one transaction into one).
- `ENDED_CHANNEL`: runs ended; the payload is their ids, comma-separated,
  at most `ENDED_PER_PAYLOAD` of them (NOTIFY's payload is under 8000
  bytes), one notification per statement that ends runs and per that many.
  It wakes whoever waits for those runs to end (a start with `wait`).

Migration 0033's `sluiceway_hand_over` writes a semaphore's payload in SQL of
its own (a released migration is never edited): it is given the channel and
the marker from here, and tests/integration/test_gate_handover.py reads what
it sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DECIDE_CHANNEL = "sluiceway_decide"
READY_CHANNEL = "sluiceway_ready"
ENDED_CHANNEL = "sluiceway_ended"

# 36 characters and a comma per id: 200 ids take 7400 bytes, under NOTIFY's 8000.
ENDED_PER_PAYLOAD = 200

Queue = tuple[str, str]  # (namespace, name): what a ready payload names

SLOT_FREED = "#slot"  # a payload suffix: one slot freed, so wake one waiter, not all of them
SYSTEM_WAKE: Queue = ("@system", "@http")  # what the system-task runner waits on
_SEMAPHORE = "@sem:"  # the queue name of a semaphore's waiters


def semaphore_queue(semaphore: str) -> str:
    """The name under which polls wait for a permit of `semaphore` (in their namespace)."""
    return f"{_SEMAPHORE}{semaphore}"


def ready_payload(queue: Queue) -> str:
    namespace, name = queue
    return f"{namespace}/{name}"


def ready_payloads(queues: Iterable[Queue]) -> list[str]:
    """The payloads of these queues, in a stable order (a transaction's
    notifications go out in the order it sent them)."""
    return [ready_payload(queue) for queue in sorted(queues)]


@dataclass(frozen=True)
class Ready:
    """A READY_CHANNEL notification, read."""

    queue: Queue
    one_slot: bool  # one gated slot came free: wake one waiter, not all of them


def parse_ready(payload: str) -> Ready:
    key, marker, _ = payload.partition(SLOT_FREED)
    namespace, _, name = key.partition("/")
    return Ready((namespace, name), bool(marker))


def ended_payloads(run_ids: Iterable[str]) -> list[str]:
    """What `ended_sql` sends for these runs (tests read it back with `parse_ended`)."""
    ids = list(run_ids)
    return [",".join(ids[at : at + ENDED_PER_PAYLOAD]) for at in range(0, len(ids), ENDED_PER_PAYLOAD)]


def parse_ended(payload: str) -> list[str]:
    return [run_id for run_id in payload.split(",") if run_id]


# -- the same, as SQL ----------------------------------------------------------------


def ready_payload_sql(namespace: str, name: str) -> str:
    """`ready_payload` as an SQL expression of two text expressions."""
    return f"{namespace} || '/' || {name}"


def notify_ready_sql(payload: str) -> str:
    """An SQL call that notifies READY_CHANNEL with `payload` (an SQL text expression)."""
    return f"pg_notify('{READY_CHANNEL}', {payload})"


SYSTEM_PAYLOAD_SQL = f"'{ready_payload(SYSTEM_WAKE)}'"
NOTIFY_DECIDER_SQL = f"pg_notify('{DECIDE_CHANNEL}', '')"


def released(rows: str, refilled: str | None = None, handing: str | None = None) -> str:
    """A CTE body that wakes the pollers of gated queues whose tasks in `rows`
    (namespace, name, holds) just left IN_PROGRESS: their queue, and every
    semaphore they held, one notification per freed slot. Ungated leases have
    NULL holds and wake nobody. `refilled` (an SQL text[] of task types) names
    queues whose freed slots the caller leases again at once: waking a poll
    for them would only have it queue for the lock and find the gate closed.
    Semaphores are woken whoever refills: other types wait on them too, except
    for the types in `handing`, whose permits the caller hands over and wakes
    for those it does not (leasing.hand_over)."""
    skip = f" AND NOT (name = ANY({refilled}))" if refilled else ""
    keep = f" WHERE NOT (name = ANY({handing}))" if handing else ""
    semaphore = f"'{_SEMAPHORE}' || semaphore"
    # Numbered: PostgreSQL folds identical payloads of one transaction into one notification.
    return f"""
    SELECT {notify_ready_sql(f"key || '{SLOT_FREED}' || row_number() OVER ()")} FROM (
        SELECT {ready_payload_sql("namespace", "name")} AS key FROM {rows} WHERE holds IS NOT NULL{skip}
        UNION ALL
        SELECT {ready_payload_sql("namespace", semaphore)} FROM {rows}, unnest(holds) AS semaphore{keep}
    ) keys"""


def ended_sql(rows: str) -> str:
    """A CTE body that notifies ENDED_CHANNEL of the runs in `rows` (an `id`
    uuid column): one notification per `ENDED_PER_PAYLOAD` of them, none when
    there are none."""
    return f"""
    SELECT pg_notify('{ENDED_CHANNEL}', string_agg(id::text, ',')) FROM (
        SELECT id, (row_number() OVER () - 1) / {ENDED_PER_PAYLOAD} AS part FROM {rows}
    ) numbered GROUP BY part"""
