"""Leasing tasks to workers, and the heartbeats that keep a lease alive.

A lease bumps the task's epoch; every later result or heartbeat must carry
that epoch, so a worker whose lease expired (and whose task was handed to
someone else) can change nothing. Every task may be delivered more than once;
each state transition happens exactly once."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from sluiceway.controls.gates import GateHold, GateState, SemaphoreState, closed
from sluiceway.controls.policy import Gates
from sluiceway.model.workflow import Executor
from sluiceway.store.sql import STILL_LEASED
from sluiceway.store.wakeups import READY_CHANNEL, SLOT_FREED


@dataclass(frozen=True)
class Lease:
    task_id: str
    epoch: int
    task_type: str
    execution_id: str
    ref: str
    attempt: int
    input: dict[str, Any]
    response_timeout: int
    heartbeat_timeout: int
    start_to_close_timeout: int
    kind: str = "SIMPLE"
    namespace: str = ""


# The one lease statement is an SQL function (migration 0009): called alone for
# an ungated queue, and by sluiceway_lease_within_gates under the queue's locks.
_LEASE = """
SELECT id, epoch, name, type, execution_id, ref, attempt, input, response_timeout, heartbeat_timeout,
       start_to_close_timeout, namespace
  FROM sluiceway_lease($1, $2, $3, $4, $5, NULL, clock_timestamp())
"""
_GATED_LEASE = "SELECT sluiceway_lease_within_gates($1, $2, $3, $4, $5, $6, $7, $8, $9)"


@dataclass(frozen=True)
class LeaseOutcome:
    leases: list[Lease]
    holds: list[GateHold] = field(default_factory=list)


def _lease(row: Mapping[str, Any]) -> Lease:
    """A leased row, as the driver returns it or as the gated lease's JSON holds it."""
    return Lease(
        str(row["id"]),
        row["epoch"],
        row["name"],
        str(row["execution_id"]),
        row["ref"],
        row["attempt"],
        row["input"],
        row["response_timeout"],
        row["heartbeat_timeout"],
        row["start_to_close_timeout"],
        row["type"],
        row["namespace"],
    )


async def lease(
    conn: asyncpg.Connection,
    namespace: str,
    task_type: str,
    worker_id: str,
    count: int,
    gates: Gates,
    executor: Executor = Executor.WORKER,
) -> LeaseOutcome:
    """Lease up to `count` tasks of one type, within its gates.

    Ungated types lease with one SKIP LOCKED statement. Gated types count and
    lease in one database call under an advisory lock keyed on the queue (and
    one per semaphore, taken in name order so two queues sharing semaphores
    never deadlock): ten dispatchers cannot all read zero in flight and all
    grant themselves the cap, and the locks are held only for as long as the
    database needs them. When gates hold some back, controls.gates says which,
    from the numbers the database decided by."""
    if not gates.any():
        rows = await conn.fetch(_LEASE, namespace, task_type, executor.value, worker_id, count)
        return LeaseOutcome([_lease(r) for r in rows])
    result = await conn.fetchval(
        _GATED_LEASE,
        namespace,
        task_type,
        executor.value,
        worker_id,
        count,
        gates.concurrent_exec_limit,
        gates.rate_limit_per_frequency,
        gates.rate_limit_frequency_seconds,
        list(gates.semaphores),
    )
    leases = [_lease(row) for row in result["leased"]]
    if len(leases) >= count:
        return LeaseOutcome(leases)
    # Say which gates held back the rest, from the same numbers the database decided by.
    state = GateState(
        in_flight=int(result["inFlight"]),
        window_used=int(result["windowUsed"]),
        seconds_to_next_window=float(result["windowStart"]) + gates.rate_limit_frequency_seconds - float(result["now"]),
        semaphores=[SemaphoreState(s["name"], s["permits"], s["held"]) for s in result["semaphores"]],
    )
    return LeaseOutcome(leases, closed(gates, state))


# The locks of the gated queues leased in a transaction that must not wait
# (the leases that ride on a result batch): each lock is tried, never waited
# for. sluiceway_lease_within_gates takes the same keys (its queue's, then its
# semaphores'), and a session that holds an advisory lock gets it again at
# once, so a type whose every key was taken here then leases without waiting.
# A key another transaction holds is that transaction's until it commits:
# waiting for it would hold this one's commit (and the slots it hands over)
# back for as long.
_TRY_LOCK_GATES = """
SELECT kind, name, pg_try_advisory_xact_lock(hashtextextended(kind || ':' || $1 || '/' || name, 0)) AS taken FROM (
    SELECT 'queue' AS kind, name FROM unnest($2::text[]) AS name
    UNION
    SELECT 'semaphore', name FROM unnest($3::text[]) AS name
) keys
"""


async def try_lock_gates(conn: asyncpg.Connection, namespace: str, gates: Mapping[str, Gates]) -> set[str]:
    """Try, without waiting, every lock the gated leases of these task types
    take; the types whose locks were all taken (held to the end of the
    transaction). The others are left to a poll, which may wait."""
    semaphores = sorted({s for g in gates.values() for s in g.semaphores})
    rows = await conn.fetch(_TRY_LOCK_GATES, namespace, list(gates), semaphores)
    taken = {(row["kind"], row["name"]) for row in rows if row["taken"]}
    return {
        name
        for name, g in gates.items()
        if ("queue", name) in taken and all(("semaphore", s) in taken for s in g.semaphores)
    }


# Slots handed over: the transaction that released `$4` (tasks it took out of
# IN_PROGRESS) leases, per type, as many of the type's next tasks as it
# released of that type, each holding no semaphore the released one did not.
# Every gated count (the queue's in flight, each semaphore's holders) is then
# the same before and after the commit, and any other transaction sees either
# both changes or neither: a lease under the gate's locks counts the same
# number whichever it sees, so the handover needs no lock and never waits. A
# rate limit counts grants, not holders: those types never hand over. The
# counts read here only keep a lowered cap or permits from being topped up
# again (then the caller's locked lease decides); exactness rests on `freed`
# alone. All the types in one call: one round trip, however many; a function
# (migration 0033), so that its plan is made once per session, not per call. The
# permits released and not handed over wake a waiting poll each, as the
# results statement would have (apply_results' `handing`): a permit handed
# over wakes nobody, who would only find it taken.
_HAND_OVER = f"""
SELECT id, epoch, name, type, execution_id, ref, attempt, input, response_timeout, heartbeat_timeout,
       start_to_close_timeout, namespace
  FROM sluiceway_hand_over($1, $2, $3, $4, $5, $6, $7, $8, '{READY_CHANNEL}', '{SLOT_FREED}')
"""


def hands_over(gates: Gates) -> bool:
    """Whether a freed slot of a type with these gates may pass to its next task without the gate's locks."""
    return gates.any() and not gates.rate_limit_per_frequency


async def hand_over(
    conn: asyncpg.Connection,
    namespace: str,
    worker_id: str,
    wanted: Mapping[str, tuple[int, Gates]],
    released: list[str],
) -> list[Lease]:
    """Lease, per capped or semaphore-gated worker type in `wanted` (its
    count and gates), up to that many tasks into the slots `released` (ids of
    tasks this transaction has just taken out of IN_PROGRESS) freed of that
    type, without the gates' locks: see _HAND_OVER. Fewer (or none) when
    fewer were freed, the queue is short, or a cap or permits were lowered
    below what is in flight; the caller leases the rest under the locks."""
    types = {name: (count, gates) for name, (count, gates) in wanted.items() if hands_over(gates) and count > 0}
    if not types or not released:
        return []
    pairs = [(name, semaphore) for name, (_, gates) in types.items() for semaphore in gates.semaphores]
    rows = await conn.fetch(
        _HAND_OVER,
        namespace,
        worker_id,
        list(types),
        [uuid.UUID(task_id) for task_id in released],
        [count for count, _ in types.values()],
        [name for name, _ in pairs],
        [semaphore for _, semaphore in pairs],
        [gates.concurrent_exec_limit for _, gates in types.values()],
    )
    return [_lease(r) for r in rows]


async def lease_ungated(
    conn: asyncpg.Connection, namespace: str, task_type: str, worker_id: str, count: int
) -> list[Lease]:
    return (await lease(conn, namespace, task_type, worker_id, count, Gates())).leases


_SECONDS_UNTIL_AVAILABLE = """
SELECT extract(epoch FROM min(available_at) - clock_timestamp()) FROM tasks
 WHERE executor = 'worker' AND namespace = $1 AND name = ANY($2) AND status = 'SCHEDULED'
"""


async def seconds_until_available(conn: asyncpg.Connection, namespace: str, task_types: list[str]) -> float | None:
    """Seconds until the earliest queued task of these types becomes leasable
    (zero or less: it already is, and a gate or a race is what holds it);
    None when nothing is queued. Measured on the database's clock."""
    value = await conn.fetchval(_SECONDS_UNTIL_AVAILABLE, namespace, task_types)
    return None if value is None else float(value)


_HEARTBEAT = f"""
UPDATE tasks t
   SET last_heartbeat_at = now(),
       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0 THEN now() + make_interval(secs => t.heartbeat_timeout) END,
       lease_expires_at = now() + make_interval(secs => t.response_timeout)
  FROM unnest($2::uuid[], $3::int[]) AS b(id, epoch)
 WHERE t.id = b.id AND t.epoch = b.epoch AND t.status = {STILL_LEASED} AND t.namespace = $1
RETURNING t.id
"""


async def heartbeat(conn: asyncpg.Connection, namespace: str, beats: list[tuple[str, int]]) -> set[str]:
    """Renew leases; return the ids that were still leased under those epochs."""
    ids = [uuid.UUID(task_id) for task_id, _ in beats]
    rows = await conn.fetch(_HEARTBEAT, namespace, ids, [epoch for _, epoch in beats])
    return {str(r["id"]) for r in rows}


_TASK_TYPES = "SELECT id, name FROM tasks WHERE namespace = $1 AND id = ANY($2::uuid[])"


async def task_types_of(conn: asyncpg.Connection, namespace: str, task_ids: list[str]) -> dict[str, str]:
    """The task type of each of these tasks that is in `namespace`, by task id
    (in canonical form); ids of other namespaces, unknown or malformed, are left out."""
    ids = []
    for task_id in task_ids:
        try:
            ids.append(uuid.UUID(task_id))
        except ValueError:
            continue
    if not ids:
        return {}
    return {str(r["id"]): r["name"] for r in await conn.fetch(_TASK_TYPES, namespace, ids)}


_TOUCH_POLLERS = """
INSERT INTO pollers (namespace, name, worker_id, last_poll)
SELECT p.namespace, p.name, p.worker_id, now()
  FROM unnest($1::text[], $2::text[], $3::text[]) AS p(namespace, name, worker_id)
ON CONFLICT (namespace, name, worker_id) DO UPDATE SET last_poll = now()
"""


async def record_polls(conn: asyncpg.Connection, polls: list[tuple[str, str, str]]) -> None:
    """Note that these (namespace, task type, worker id) polled now, each once, in one statement."""
    unique = list(dict.fromkeys(polls))
    if unique:
        await conn.execute(_TOUCH_POLLERS, [p[0] for p in unique], [p[1] for p in unique], [p[2] for p in unique])


async def record_poll(conn: asyncpg.Connection, namespace: str, task_types: list[str], worker_id: str) -> None:
    await record_polls(conn, [(namespace, task_type, worker_id) for task_type in task_types])


_DUE_SYSTEM_QUEUES = """
SELECT DISTINCT namespace, name FROM tasks
 WHERE executor = 'system' AND status = 'SCHEDULED' AND available_at <= now()
 LIMIT 100
"""
_SECONDS_UNTIL_SYSTEM = """
SELECT extract(epoch FROM min(available_at) - clock_timestamp()) FROM tasks
 WHERE executor = 'system' AND status = 'SCHEDULED'
"""


async def due_system_queues(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    """(namespace, task type) of every queue with a system task leasable now."""
    return [(r["namespace"], r["name"]) for r in await conn.fetch(_DUE_SYSTEM_QUEUES)]


async def seconds_until_system_available(conn: asyncpg.Connection) -> float | None:
    value = await conn.fetchval(_SECONDS_UNTIL_SYSTEM)
    return None if value is None else float(value)
