"""The plane itself: what every command shares, built once by the
composition root (the pool, the wake-up channels, the caches of policies and
tenants, the limits, the inline decider) and handed to every edge."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field
from typing import Any

from sluiceway.controls.payloads import DEFAULT_MAX_PAYLOAD_BYTES, PayloadLimit, payload_limit
from sluiceway.plane.audit import Announcer
from sluiceway.store import deciding, executions, matching
from sluiceway.store.archives import Archive
from sluiceway.store.database import Pool
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.executions import IDEMPOTENCY_WINDOW_SECONDS
from sluiceway.store.logs import DEFAULT_CAP_BYTES
from sluiceway.store.matching import Offers
from sluiceway.store.notifications import Notifications
from sluiceway.store.policies import Policies
from sluiceway.store.tenancy import Tenants

log = logging.getLogger(__name__)


@dataclass
class Plane:
    pool: Pool
    notifications: Notifications | None = None
    policies: Policies = field(default_factory=Policies)  # the process's one, shared with the decider
    tenants: Tenants = field(default_factory=Tenants)  # what each namespace's Quotas allow
    announcer: Announcer = field(default_factory=Announcer)  # audit entries as Events on WorkflowRuns
    idempotency_window: float = IDEMPOTENCY_WINDOW_SECONDS  # how long a requestId names its run
    log_cap_bytes: int = DEFAULT_CAP_BYTES  # what one task may keep of its log
    gate_handover: bool = True  # freed gated slots pass to their next task without the gate's locks
    # This process's waiting polls of ungated queues, which the decider leases
    # the tasks it schedules (store.matching); None: polls wake and lease.
    offers: Offers | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES  # one JSON value; a Quota may lower it
    # Poller bookkeeping ("who polled and when") needs seconds, not every poll:
    # the polls seen are written together, one statement per interval for the
    # whole process, so idle pollers cost one write per interval, not one each.
    # A worker or queue not written before is written at once.
    poll_record_interval: float = 5.0
    # Set: starts and results decide the runs they queue in their own
    # transaction (SLUICEWAY_DECIDE_INLINE), with the decider loop's config
    # (the same hooks, metrics and wake-ups); None: the loop decides them all.
    decider: DeciderConfig | None = None
    max_run_waiters: int = 10_000  # callers waiting at once for runs to end (plane.waiting)
    run_waiters: int = 0  # how many wait now
    run_reads: int = 0  # how many times waiters read their run, for tests and the bench
    archive: Archive | None = None  # where purged runs are read back from (store.archives); None: off
    _polls_seen: dict[tuple[str, str, str], None] = field(default_factory=dict)
    _polls_written: set[tuple[str, str, str]] = field(default_factory=set)
    _polls_written_at: float = 0.0

    def __post_init__(self) -> None:
        if self.notifications is not None:  # both dropped for a namespace whose definitions change
            for cache in (self.policies, self.tenants):
                if cache not in self.notifications.caches:
                    self.notifications.caches.append(cache)

    async def limit_of(self, namespace: str) -> PayloadLimit:
        """The payload limit of `namespace`: the operator's, lowered by its Quotas."""
        rules = await self.tenants.of(self.pool, namespace)
        return payload_limit(self.max_payload_bytes, rules.payload_limits)

    def polls_to_record(self, namespace: str, task_types: list[str], worker_id: str) -> list[tuple[str, str, str]]:
        """Note this poll; when a write is due, every poll noted since the last
        one as (namespace, task type, worker id), to write now."""
        now = time.monotonic()
        fresh = False
        for task_type in task_types:
            key = (namespace, task_type, worker_id)
            self._polls_seen[key] = None
            fresh = fresh or key not in self._polls_written
        if not fresh and now - self._polls_written_at < self.poll_record_interval:
            return []
        due = list(self._polls_seen)
        self._polls_seen.clear()
        self._polls_written_at = now
        if len(self._polls_written) > 100_000:  # forget long-gone workers
            self._polls_written.clear()
        self._polls_written.update(due)
        return due

    @property
    def decides_inline(self) -> bool:
        return self.decider is not None

    @contextlib.asynccontextmanager
    async def inline_decisions(self) -> AsyncIterator[InlineDecisions]:
        """Around one transaction (entered before it, so left once it has ended):
        the runs it decides inline, and the waiting polls those decisions leased
        tasks to, answered with their leases if it committed, with none if not."""
        inline = InlineDecisions(self.decider)
        try:
            yield inline
        except BaseException:
            inline.settle(committed=False)
            raise
        inline.settle(committed=True)

    async def committed(self, decided: deciding.Decided | None, queued: bool) -> None:
        """Once a transaction that queued runs for the decider has committed:
        report what it decided inline, as the decider loop would (metrics,
        logs, woken pollers, traces), and wake this process's decider at once
        for the runs it left, or `queued` without deciding (the NOTIFY wakes
        the other replicas')."""
        left = queued or (decided is not None and bool(decided.left))
        if left and self.notifications is not None:
            self.notifications.wake_decider()
        if decided is not None and self.decider is not None:
            deciding.report(decided, self.decider)
            if decided.decisions:
                try:
                    await deciding.trace_pass(self.pool, decided.started_ns, decided.traced())
                except Exception as error:  # noqa: BLE001 - committed already: a lost span never fails the command
                    log.warning("inline decisions: their spans were not written (%s)", error)


@dataclass
class InlineDecisions:
    """What one transaction decided inline (Plane.inline_decisions)."""

    config: DeciderConfig | None  # None: inline deciding is off
    decided: deciding.Decided | None = None

    async def decide(
        self,
        conn: Any,
        run_ids: Collection[uuid.UUID],
        unmatched: Collection[tuple[str, str]] = (),
        unqueued: Collection[uuid.UUID] = (),
    ) -> None:
        """Decide these runs, just queued (or `unqueued`: not queued, queued
        now if left), in the caller's transaction; tell every decider of those
        it leaves. Nothing when inline deciding is off. `unmatched`: queues
        (namespace, task type) whose new tasks the caller leases itself, not
        to be leased to waiting polls."""
        if self.config is None or not (run_ids or unqueued):
            return
        self._add(await deciding.decide_inline(conn, run_ids, self.config, unmatched, unqueued))
        if self.decided is not None and self.decided.left:
            await executions.notify_decider(conn)

    def first(self) -> deciding.FirstDecisions | None:
        """What decides the plain runs a start writes before they are written
        (store.deciding.FirstDecisions); None when inline deciding is off. Once
        the start has written them, `took_first` it."""
        return deciding.FirstDecisions(self.config) if self.config is not None else None

    async def took_first(self, conn: Any, first: deciding.FirstDecisions | None) -> None:
        """Count what `first` decided with this transaction's inline decisions;
        tell every decider of the runs it left."""
        if first is None:
            return
        self._add(first.decided)
        if first.decided.left:
            await executions.notify_decider(conn)

    def _add(self, decided: deciding.Decided) -> None:
        self.decided = decided if self.decided is None else self.decided.merged(decided)

    def settle(self, committed: bool) -> None:
        if self.decided is not None:
            matching.settle(self.decided.claimed, committed)
            self.decided.claimed = []
