"""Leader election over a coordination.k8s.io Lease, as client-go does it.

Only the reconcilers (kopf), the WorkflowRun status mirror and the status
reports need one replica at a time; the decider, the sweeper and the API run
on every replica and coordinate through PostgreSQL.

The holder renews every `renew_seconds`. Another replica takes the lease when
the record has not changed for `duration_seconds` by its *own* monotonic clock,
so clock skew between pods never matters. A replica that cannot renew for the
lease duration steps down before anyone else may take over; one that stops
cleanly releases the lease so the next replica takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from sluiceway.kubeapi.client import KubeError, LeaseRecord, Leases

log = logging.getLogger(__name__)

LeaderWork = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


class LeaderElector:
    def __init__(
        self,
        leases: Leases,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration_seconds: int = 10,
        renew_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = leases
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration_seconds
        self.renew = renew_seconds
        self.clock = clock
        self.leading = False
        self._observed: tuple[str, float] | None = None  # (resourceVersion, when we first saw it)

    def _expired(self, record: LeaseRecord) -> bool:
        now = self.clock()
        if self._observed is None or self._observed[0] != record.resource_version:
            self._observed = (record.resource_version, now)
        return not record.holder or now - self._observed[1] > max(record.duration_seconds, 1)

    async def try_acquire(self) -> bool:
        """One attempt to take or keep the lease; True while we hold it."""
        try:
            record = await self.leases.read(self.namespace, self.name)
            if record is None:
                await self.leases.create(self.namespace, self.name, self.identity, self.duration)
                return True
            if record.holder == self.identity or self._expired(record):
                transitions = record.transitions + (0 if record.holder == self.identity else 1)
                await self.leases.replace(self.namespace, self.name, self.identity, self.duration, record, transitions)
                return True
            return False
        except KubeError as error:
            if error.status not in (409, 404):
                log.warning("leader election: %s", error.message)
            return False
        except OSError as error:
            log.warning("leader election: cannot reach the API server: %s", error)
            return False

    async def release(self) -> None:
        with contextlib.suppress(KubeError, OSError):
            record = await self.leases.read(self.namespace, self.name)
            if record is not None and record.holder == self.identity:
                await self.leases.replace(self.namespace, self.name, "", self.duration, record, record.transitions)

    async def run(self, work: LeaderWork, stop: asyncio.Event) -> None:
        """Run `work` while leading; stop it when leadership is lost; repeat until `stop`."""
        try:
            while not stop.is_set():
                if not await self.try_acquire():
                    await _sleep(stop, self.renew)
                    continue
                log.info("%s leads %s/%s", self.identity, self.namespace, self.name)
                self.leading = True
                stepped_down = asyncio.Event()
                worker: asyncio.Task[None] = asyncio.create_task(work(stepped_down))
                last_renewal = self.clock()
                while not stop.is_set() and not worker.done():
                    await _sleep(stop, self.renew)
                    if await self.try_acquire():
                        last_renewal = self.clock()
                    elif self.clock() - last_renewal >= self.duration - self.renew:
                        log.warning("%s lost the lease %s/%s; stepping down", self.identity, self.namespace, self.name)
                        break
                self.leading = False
                stepped_down.set()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(worker, 20)
        finally:
            self.leading = False
            await self.release()


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
