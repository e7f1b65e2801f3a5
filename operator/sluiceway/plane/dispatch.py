"""Dispatch: how tasks reach whoever runs them and how their results come
back, for workers over HTTP and for the operator's own system tasks alike.

- `poll`: lease up to `count` tasks of some types, within each type's gates,
  waiting (a long poll) until one is leasable, a gate opens or time runs out.
  A poll that waits on ungated queues stands as an offer the decider may
  lease its new tasks to in its own transaction (`store.matching`).
- `report`: apply a batch of results in one transaction: each result's
  search-attribute upserts checked against its run's declarations, its output
  against the payload limit (an output over it fails its task terminally,
  never truncated), its logs kept first; the runs the results queue decided
  inline; the gated slots they free handed over to the same worker's `next`
  before anyone is woken for them.
- `heartbeat`: renew leases, each fenced by its epoch.

Every lease bumps its task's epoch, and every result and heartbeat must carry
it: a worker whose lease was taken back changes nothing."""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sluiceway.controls import attributes as attribute_rules
from sluiceway.controls.gates import GateHold
from sluiceway.controls.payloads import Oversized, oversized_value
from sluiceway.controls.policy import TaskPolicy
from sluiceway.model.execution import (
    FieldError,
    Heartbeat,
    ItemOutcome,
    LogLine,
    NextLease,
    PollRequest,
    ResultStatus,
    TaskResult,
)
from sluiceway.model.workflow import Executor
from sluiceway.observability import metrics, tracing
from sluiceway.plane.core import Plane
from sluiceway.store import attributes, diagnostics, leasing, logs, matching, results
from sluiceway.store.database import Connection
from sluiceway.store.leasing import Lease
from sluiceway.store.notifications import Notifications
from sluiceway.store.wakeups import semaphore_queue

__all__ = ["Lease", "Reported", "heartbeat", "poll", "report", "task_types_of"]

DEFAULT_POLL_TIMEOUT = 30.0
# Even with no notification, a waiting poll re-checks this often, so a lost
# wake-up costs latency, never a stuck worker.
_RECHECK_SECONDS = 2.0
# How long idle polls of this process take one poll's "empty" for an ungated
# queue without asking the database again (a notification about the queue ends
# it at once): what a lost wake-up may cost, and what keeps idle pollers cheap.
_KNOWN_EMPTY_SECONDS = 10.0


async def task_types_of(plane: Plane, namespace: str, task_ids: Iterable[str]) -> dict[str, str]:
    """The task type of each of these tasks of `namespace` (tasks elsewhere are left out)."""
    async with plane.pool.acquire() as conn:
        return await leasing.task_types_of(conn, namespace, list(task_ids))


async def policies_of(plane: Plane, namespace: str, task_types: Sequence[str]) -> dict[str, TaskPolicy]:
    async with plane.pool.acquire() as conn:
        return await plane.policies.of(conn, namespace, task_types)


# -- leasing --------------------------------------------------------------------


def _count(namespace: str, leased: list[Lease], holds: list[GateHold]) -> None:
    for lease in leased:
        metrics.TASKS_LEASED.labels(namespace, lease.task_type).inc()
    for hold in holds:
        metrics.GATE_HOLDS.labels(hold.gate.wire).inc()


async def _lease_once(
    plane: Plane, namespace: str, request: PollRequest, policies: dict[str, TaskPolicy]
) -> tuple[list[Lease], list[GateHold]]:
    started = time.perf_counter()
    leased: list[Lease] = []
    holds: list[GateHold] = []
    async with plane.pool.acquire() as conn:
        for task_type in request.task_types:
            remaining = request.count - len(leased)
            if remaining <= 0:
                break
            outcome = await leasing.lease(
                conn, namespace, task_type, request.worker_id, remaining, policies[task_type].gates
            )
            leased.extend(outcome.leases)
            holds.extend(outcome.holds)
        due = plane.polls_to_record(namespace, request.task_types, request.worker_id)
        if due:
            await leasing.record_polls(conn, due)
    metrics.LEASE_LATENCY.observe(time.perf_counter() - started)
    _count(namespace, leased, holds)
    return leased, holds


async def poll(plane: Plane, namespace: str, request: PollRequest) -> list[Lease]:
    """Lease up to `request.count` tasks of its types within each type's gates
    (concurrentExecLimit, rate limit, semaphores: the most restrictive wins);
    when none can be leased, wait up to the poll's timeout (at most the task
    types' own pollTimeoutSeconds) and answer as soon as a task becomes
    leasable or a gate opens. The leases, possibly none."""
    policies = await policies_of(plane, namespace, request.task_types)
    ceiling = max(p.timeouts.poll_timeout for p in policies.values())
    asked = request.poll_timeout_seconds
    timeout = min(asked if asked is not None else DEFAULT_POLL_TIMEOUT, ceiling)
    wake_keys = list(request.task_types) + sorted(
        {semaphore_queue(s) for p in policies.values() for s in p.gates.semaphores}
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    notifications = plane.notifications
    # Ungated queues an idle poll of this process found empty are not asked again (see _KNOWN_EMPTY_SECONDS).
    shared = notifications is not None and not any(p.gates.any() for p in policies.values())
    leased: list[Lease]
    holds: list[GateHold]
    while True:
        mark = notifications.mark(namespace, wake_keys) if notifications is not None else None
        empty_for = notifications.empty_for(namespace, request.task_types) if shared and notifications else None
        known_empty = empty_for is not None
        if known_empty:
            leased, holds = [], []
            await _record_idle_poll(plane, namespace, request)
        else:
            leased, holds = await _lease_once(plane, namespace, request, policies)
            if leased and shared and notifications is not None:
                notifications.forget(namespace, request.task_types)
        remaining = deadline - loop.time()
        if leased or remaining <= 0:
            return leased
        wait = min(remaining, _RECHECK_SECONDS, empty_for if empty_for is not None else _RECHECK_SECONDS)
        reopening = [h.retry_in for h in holds if h.retry_in is not None]
        if reopening:
            wait = min(wait, max(min(reopening), 0.01))
        if not holds and not known_empty:
            async with plane.pool.acquire() as conn:
                until = await leasing.seconds_until_available(conn, namespace, request.task_types)
            if until is not None and until > 0:
                wait = min(wait, until)
            if shared and notifications is not None and mark is not None and (until is None or until > 0):
                seconds = _KNOWN_EMPTY_SECONDS if until is None else min(until, _KNOWN_EMPTY_SECONDS)
                notifications.note_empty(namespace, wake_keys, mark, seconds)
        if notifications is None:
            await asyncio.sleep(min(wait, 0.2))
        elif shared and plane.offers is not None:
            matched = await _wait_offering(plane.offers, notifications, namespace, request, wake_keys, wait, mark)
            if matched:
                _count(namespace, matched, [])
                metrics.TASKS_MATCHED.labels(namespace).inc(len(matched))
                notifications.forget(namespace, request.task_types)
                return matched
        else:
            await notifications.wait_ready(namespace, wake_keys, wait, mark)


async def _wait_offering(
    offers: matching.Offers,
    notifications: Notifications,
    namespace: str,
    request: PollRequest,
    wake_keys: list[str],
    wait: float,
    mark: tuple[int, ...] | None,
) -> list[Lease]:
    """Wait as an offer (store.matching): the decider may lease this poll
    the tasks it schedules in its own transaction. The leases it got, once
    that committed; none when it was not claimed, or the claim rolled back."""
    offer = matching.Offer(namespace, tuple(request.task_types), request.worker_id, request.count)
    with offers.standing(offer):
        await notifications.wait_ready(namespace, wake_keys, wait, mark, event=offer.wake)
    # Claimed (the poll's own time may have run out meanwhile): the claiming
    # transaction is under way, and its leases are this poll's to answer with.
    return [] if offer.claim is None else await offer.claim


async def _record_idle_poll(plane: Plane, namespace: str, request: PollRequest) -> None:
    """The bookkeeping of a poll that did not need to ask for tasks."""
    due = plane.polls_to_record(namespace, request.task_types, request.worker_id)
    if due:
        async with plane.pool.acquire() as conn:
            await leasing.record_polls(conn, due)


async def _hand_over(
    conn: Connection, namespace: str, wanted: NextLease | None, policies: dict[str, TaskPolicy], released: list[str]
) -> list[Lease]:
    """The slots of capped or semaphore-gated types of `next` that `released`
    freed, handed over without the gates' locks (leasing.hand_over): most
    requests then take no lock at all, and none waits for another's commit."""
    if wanted is None or not released:
        return []
    gates = {t: (n, policies[t].gates) for t, n in wanted.counts.items()}
    return await leasing.hand_over(conn, namespace, wanted.worker_id, gates, released)


async def _lease_next(
    conn: Connection, namespace: str, wanted: NextLease, policies: dict[str, TaskPolicy], handed: list[Lease]
) -> list[Lease]:
    """The `next` of a result batch beyond what was `handed` over (_hand_over),
    in its transaction, never waiting: a gated type whose locks another
    transaction holds (leasing.try_lock_gates) gets nothing here, and the
    worker's poll leases it. Waiting would hold this commit, and every slot
    it hands over, back until the other one commits."""
    started = time.perf_counter()
    leased = list(handed)
    taken = Counter(lease.task_type for lease in handed)
    counts = {t: n - taken[t] for t, n in wanted.counts.items() if n > taken[t]}
    gated = {t: policies[t].gates for t in counts if policies[t].gates.any()}
    if gated:
        locked = await leasing.try_lock_gates(conn, namespace, gated)
        counts = {t: n for t, n in counts.items() if t not in gated or t in locked}
    holds: list[GateHold] = []
    for task_type, count in counts.items():
        outcome = await leasing.lease(conn, namespace, task_type, wanted.worker_id, count, policies[task_type].gates)
        leased.extend(outcome.leases)
        holds.extend(outcome.holds)
    metrics.LEASE_LATENCY.observe(time.perf_counter() - started)
    _count(namespace, leased, holds)
    return leased


async def system_queues_due(plane: Plane) -> list[tuple[str, str]]:
    """The queues (namespace, task type) with a system task leasable now."""
    async with plane.pool.acquire() as conn:
        return await leasing.due_system_queues(conn)


async def seconds_until_system_work(plane: Plane) -> float | None:
    """How long until a system task is leasable (None: none is scheduled)."""
    async with plane.pool.acquire() as conn:
        return await leasing.seconds_until_system_available(conn)


async def lease_system(
    plane: Plane, conn: Connection, namespace: str, task_type: str, worker_id: str, count: int
) -> list[Lease]:
    """Lease tasks the operator runs itself (system tasks), within their type's gates."""
    gates = (await plane.policies.of(conn, namespace, [task_type]))[task_type].gates
    outcome = await leasing.lease(conn, namespace, task_type, worker_id, count, gates, Executor.SYSTEM)
    _count(namespace, outcome.leases, outcome.holds)
    return outcome.leases


# -- results ----------------------------------------------------------------------

# The outcome label of a refused result (sluiceway_task_results_total), named
# after the status code a worker gets for it: dashboards read these.
_REFUSED_LABELS = {results.Verdict.NO_SUCH_TASK: "refused_404", results.Verdict.NOT_LEASED: "refused_409"}
Upserts = dict[str, tuple[uuid.UUID, datetime.datetime, list[attribute_rules.Attribute]]]


@dataclass
class Reported:
    """What `report` did with each result of a batch, by task id."""

    applied: dict[str, results.Outcome] = field(default_factory=dict)  # the store's verdict
    invalid: dict[str, ItemOutcome] = field(default_factory=dict)  # refused before the store: changed nothing
    # Over the payload limit: applied as a terminal failure naming the limit.
    over: dict[str, Oversized] = field(default_factory=dict)
    leases: list[Lease] = field(default_factory=list)  # what `next` leased


async def report(
    plane: Plane, namespace: str, batch: Sequence[TaskResult], wanted: NextLease | None = None
) -> Reported:
    """Apply a batch of results, then lease what `wanted` asks for, in one
    transaction: see the module's docstring."""
    reported = Reported()
    valid, upserts = await _checked_attributes(plane, namespace, list(batch), reported)
    bounded = await _bounded(plane, namespace, valid, upserts, reported)
    await _store_logs(plane, namespace, bounded)
    if bounded or wanted is not None:
        reported.applied, reported.leases = await _apply(plane, namespace, bounded, upserts, wanted)
    return reported


def _within_cap(lines: Sequence[LogLine], cap: int) -> Sequence[LogLine]:
    """The lines of one item the store could keep (and the one that crosses
    the cap, so it marks the log truncated): a request never makes the store
    weigh more than each task may keep."""
    total = 0
    for index, line in enumerate(lines):
        total += len(line.message) + logs.LINE_OVERHEAD
        if total > cap:
            return lines[: index + 1]
    return lines


async def _store_logs(plane: Plane, namespace: str, items: Sequence[TaskResult | Heartbeat]) -> None:
    """Logs go in before the result that ends their task, so whoever sees the
    task end can read all it logged."""
    shipped = [(item.task_id, _within_cap(item.logs, plane.log_cap_bytes)) for item in items if item.logs]
    if shipped:
        async with plane.pool.acquire() as conn:
            await logs.append(conn, namespace, shipped, plane.log_cap_bytes)


async def _checked_attributes(
    plane: Plane, namespace: str, batch: list[TaskResult], reported: Reported
) -> tuple[list[TaskResult], Upserts]:
    """The results whose attribute upserts fit their runs' declarations, with
    the upserts; the others go to `reported.invalid` (422 naming the
    attribute) and change nothing, as any invalid item."""
    wanted = [r for r in batch if r.search_attributes]
    if not wanted:
        return batch, {}
    async with plane.pool.acquire() as conn:
        runs = await attributes.of_tasks(conn, namespace, [uuid.UUID(r.task_id) for r in wanted])
    upserts: Upserts = {}
    for result in wanted:
        found = runs.get(uuid.UUID(result.task_id))
        if found is None:
            continue  # an unknown task: the store answers 404 for it
        checked = attribute_rules.upserted(found[2], result.search_attributes)
        if checked.problems:
            fields = [FieldError(field=p.field, message=p.message) for p in checked.problems]
            error = "; ".join(str(p) for p in checked.problems)
            reported.invalid[result.task_id] = ItemOutcome(task_id=result.task_id, code=422, error=error, fields=fields)
        else:
            upserts[result.task_id] = (found[0], found[1], list(checked.attributes.values()))
    return [r for r in batch if r.task_id not in reported.invalid], upserts


async def _bounded(
    plane: Plane, namespace: str, batch: list[TaskResult], upserts: Upserts, reported: Reported
) -> list[TaskResult]:
    """The results to apply: as sent, except those whose output is over the
    namespace's payload limit, which fail their task terminally with a reason
    naming the limit (an output is never truncated, nor its upserts kept)."""
    if not batch:
        return batch
    limit = await plane.limit_of(namespace)
    bounded: list[TaskResult] = []
    for result in batch:
        found = oversized_value("output", result.output, limit)
        if found is None:
            bounded.append(result)
            continue
        reported.over[result.task_id] = found
        upserts.pop(result.task_id, None)
        failed: dict[str, object] = {
            "status": ResultStatus.FAILED_WITH_TERMINAL_ERROR,
            "output": {},
            "reason": found.message,
            "retry_after_seconds": None,
            "retry_kind": None,
            "callback_after_seconds": None,
            "search_attributes": {},
        }
        bounded.append(result.model_copy(update=failed))  # its logs still go in
    return bounded


async def _apply(
    plane: Plane,
    namespace: str,
    batch: list[TaskResult],
    upserts: Upserts,
    wanted: NextLease | None,
) -> tuple[dict[str, results.Outcome], list[Lease]]:
    """Apply the results and lease what `wanted` asks for, in one transaction:
    one commit, and the slots the results free are taken again (by the worker
    that freed them) before anyone is woken for them."""
    started = time.perf_counter()
    refilled = list(wanted.counts) if wanted is not None else []
    # Inline, the runs these results queue are decided before `next` is leased:
    # a chain's next task, scheduled here, goes back in this very answer.
    queued = results.Queued() if plane.decides_inline else None
    async with plane.pool.acquire() as conn, plane.inline_decisions() as inline, conn.transaction():
        attempts = await diagnostics.attempts(conn, namespace, [r.task_id for r in batch]) if tracing.enabled() else {}
        policies = await plane.policies.of(conn, namespace, refilled) if wanted is not None else {}
        handing = _handing(plane, wanted, policies) if batch else []
        outcomes = (
            await results.apply_results(conn, namespace, batch, refilled, queued=queued, handing=handing)
            if batch
            else {}
        )
        for task_id, (run, created_at, found) in upserts.items():
            if outcomes[task_id].applied:  # with the result that carried them, fenced by the same epoch
                await attributes.write(conn, run, namespace, created_at, found)
        # The freed gated slots pass on before the runs are decided: they would sit empty meanwhile.
        handed = await _hand_over(conn, namespace, wanted, policies, _released(batch, outcomes) if handing else [])
        if queued is not None:  # the tasks of `next`'s types go back in this answer, not to waiting polls
            await inline.decide(conn, queued.alone, [(namespace, name) for name in refilled], unqueued=queued.quiet)
        leased = await _lease_next(conn, namespace, wanted, policies, handed) if wanted is not None else []
    metrics.COMPLETE_LATENCY.observe(time.perf_counter() - started)
    left = bool(queued.busy) if queued is not None else any(o.applied for o in outcomes.values())
    await plane.committed(inline.decided, left)
    for result in batch:
        outcome = outcomes[result.task_id]
        label = result.status.value if outcome.applied else _REFUSED_LABELS[outcome.verdict]
        metrics.RESULTS.labels(label).inc()
        attempt = attempts.get(result.task_id)
        if outcome.applied and attempt is not None and attempt.epoch == result.epoch:
            tracing.record_attempt(
                attempt.execution_id,
                result.task_id,
                result.epoch,
                namespace,
                attempt.task_type,
                result.status.value,
                attempt.leased_at,
            )
    return outcomes, leased


def _handing(plane: Plane, wanted: NextLease | None, policies: dict[str, TaskPolicy]) -> list[str]:
    """The types of `next` whose freed slots (and permits) are handed over
    (leasing.hand_over), which also wakes pollers for the permits it does not hand over."""
    if wanted is None or not plane.gate_handover:
        return []
    return [t for t in wanted.counts if leasing.hands_over(policies[t].gates)]


def _released(batch: list[TaskResult], outcomes: dict[str, results.Outcome]) -> list[str]:
    """The tasks these applied results took out of IN_PROGRESS (all but progress reports)."""
    return [
        r.task_id
        for r in batch
        if outcomes[r.task_id].applied
        and not (r.status is ResultStatus.IN_PROGRESS and r.callback_after_seconds is None)
    ]


# -- heartbeats -------------------------------------------------------------------


async def heartbeat(plane: Plane, namespace: str, beats: Sequence[Heartbeat]) -> set[str]:
    """Renew the leases of these tasks, each fenced by its epoch; the ids of
    those still leased under it (their logs are kept either way)."""
    await _store_logs(plane, namespace, beats)
    if not beats:
        return set()
    async with plane.pool.acquire() as conn:
        return await leasing.heartbeat(conn, namespace, [(b.task_id, b.epoch) for b in beats])
