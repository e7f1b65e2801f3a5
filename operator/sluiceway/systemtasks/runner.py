"""The system-task runner: leases the tasks whose executor is the operator
itself and runs each with the kind of system task its type names.

One loop for every system task type: it finds the queues with a system task
leasable now, leases within each type's gates, and hands every lease to the
`SystemTask` registered for its type. A new system task type brings its model
entry (model.workflow), its SystemTask, and one line of wiring
(runtime.operator); nothing here changes. A type this operator has no
SystemTask for (a newer release's, say) fails terminally, naming it, rather
than being run as something else.

The slots are shared across namespaces by deficit round robin, weighted by
each namespace's Quota (`sluiceway.controls.fairness`): one namespace's
backlog never holds every slot while another's calls wait. Slots a namespace
cannot fill go to whoever has work."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from sluiceway.controls.fairness import DeficitRoundRobin
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.workflow import TaskType
from sluiceway.plane import Plane, dispatch
from sluiceway.plane.dispatch import Lease
from sluiceway.store.database import Connection
from sluiceway.store.errors import StoreError
from sluiceway.store.wakeups import SYSTEM_WAKE

log = logging.getLogger(__name__)

_WAKE = (SYSTEM_WAKE[0], [SYSTEM_WAKE[1]])
# An idle runner asks the database this often (it used to every second): what a
# lost notification may cost, and what an idle operator pays for system tasks.
_RECHECK = 5.0


class SystemTask(Protocol):
    """One kind of system task: what the operator does for a leased task of its types."""

    types: frozenset[TaskType]
    # False for a kind that waits on something running elsewhere (a CONTAINER
    # task's pod): its calls hold none of the runner's slots, which bound the
    # operator's own work, and a stop abandons them at once (the next replica
    # adopts what they watched) instead of waiting for them.
    holds_slot: bool

    async def start(self) -> None:
        """Before the first call (open clients)."""

    async def stop(self) -> None:
        """After the last call (close them)."""

    async def call(self, lease: Lease) -> TaskResult | None:
        """Run one leased task; the outcome, classified. Never raises for the
        task's own failures: they are results. None: nothing to report (the
        attempt was fenced, or its deadline is the sweeper's to apply)."""
        ...


class SystemTaskRunner:
    def __init__(
        self,
        plane: Plane,
        kinds: Sequence[SystemTask],
        *,
        concurrency: int = 32,
        worker_id: str = "operator/system",
    ) -> None:
        self.plane = plane
        self.pool = plane.pool
        self.fairness = DeficitRoundRobin()
        self.kinds = {task_type: kind for kind in kinds for task_type in kind.types}
        self.notifications = plane.notifications
        self.slots = asyncio.Semaphore(concurrency)
        self.concurrency = concurrency
        self.worker_id = worker_id
        self.in_flight: set[asyncio.Task[None]] = set()
        self.watching: set[asyncio.Task[None]] = set()  # calls that hold no slot (SystemTask.holds_slot)

    async def run(self, stop: asyncio.Event) -> None:
        kinds = list(dict.fromkeys(self.kinds.values()))
        for kind in kinds:
            await kind.start()
        try:
            while not stop.is_set():
                mark = self.notifications.mark(*_WAKE) if self.notifications is not None else None
                # An outage (a failover takes ~10 s) pauses this loop; it never ends it.
                try:
                    leased = await self._lease_batch()
                    for lease in leased:
                        task = asyncio.create_task(self._execute(lease))
                        tracked = self.in_flight if self._holds_slot(lease) else self.watching
                        tracked.add(task)
                        task.add_done_callback(tracked.discard)
                    if not leased:
                        await self._idle(stop, mark)
                except (OSError, StoreError) as error:
                    log.warning("system tasks: database unavailable (%s)", error)
                    await asyncio.sleep(1.0)
        finally:
            for task in self.watching:
                task.cancel()
            if self.in_flight:
                await asyncio.wait(self.in_flight, timeout=10)
            for kind in kinds:
                await kind.stop()

    async def _idle(self, stop: asyncio.Event, mark: tuple[int, ...] | None) -> None:
        """Wait for a system task: every one scheduled is notified (SYSTEM_WAKE), a
        delayed one is due at `until`; the recheck only covers a lost notification."""
        until = await dispatch.seconds_until_system_work(self.plane)
        recheck = _RECHECK if self.notifications is not None else 1.0
        wait = recheck if until is None else min(max(until, 0.01), recheck)
        ready = self.notifications.wait_ready(*_WAKE, wait, mark) if self.notifications is not None else None
        # A stop ends the wait at once: a replica handing over leadership must not sit out a recheck.
        waiting = asyncio.ensure_future(ready if ready is not None else asyncio.sleep(wait))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            stopping.cancel()

    async def _lease_batch(self) -> list[Lease]:
        free = self.concurrency - len(self.in_flight)
        if free <= 0:
            return []
        queues = await dispatch.system_queues_due(self.plane)
        by_namespace: dict[str, list[str]] = {}
        for namespace, name in queues:
            by_namespace.setdefault(namespace, []).append(name)
        weights = {ns: float((await self.plane.tenants.of(self.pool, ns)).dispatch_weight) for ns in by_namespace}
        shares = self.fairness.allocate(free, weights)
        leased: list[Lease] = []
        async with self.pool.acquire() as conn:
            for namespace, names in by_namespace.items():
                got = await self._lease_from(conn, namespace, names, shares[namespace], leased)
                self.fairness.refund(namespace, shares[namespace] - got)
            if len(leased) < free:  # slots nobody's share filled: to whoever has more work
                for namespace, names in by_namespace.items():
                    await self._lease_from(conn, namespace, names, free - len(leased), leased)
        return leased

    async def _lease_from(
        self, conn: Connection, namespace: str, names: list[str], wanted: int, leased: list[Lease]
    ) -> int:
        """Lease up to `wanted` tasks from these queues of `namespace` into `leased`; how many."""
        got = 0
        for name in names:
            if got >= wanted:
                break
            found = await dispatch.lease_system(self.plane, conn, namespace, name, self.worker_id, wanted - got)
            leased.extend(found)
            got += len(found)
        return got

    def _holds_slot(self, lease: Lease) -> bool:
        try:
            return self.kinds[TaskType(lease.kind)].holds_slot
        except (ValueError, KeyError):
            return True

    async def _execute(self, lease: Lease) -> None:
        if self._holds_slot(lease):
            async with self.slots:
                result = await self.call(lease)
        else:
            result = await self.call(lease)
        if result is not None:
            # As a worker's result: its output bounded, its run decided, its attempt traced.
            await dispatch.report(self.plane, lease.namespace, [result])

    async def call(self, lease: Lease) -> TaskResult | None:
        try:
            kind = self.kinds[TaskType(lease.kind)]
        except (ValueError, KeyError):
            return TaskResult(
                task_id=lease.task_id,
                epoch=lease.epoch,
                status=ResultStatus.FAILED_WITH_TERMINAL_ERROR,
                reason=f"no system task of type {lease.kind} runs in this operator",
            )
        return await kind.call(lease)
