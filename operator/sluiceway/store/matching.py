"""Tasks leased to a waiting poll by the transaction that schedules them.

A long poll of ungated queues that found nothing stands as an offer while it
waits. When the decider then schedules tasks of one of those queues, it leases
them to the oldest offers in its own transaction, and each poll answers as
soon as that transaction commits: no wake-up, no second transaction and no
second commit between a task being decided and its lease (Temporal's matching
service calls this a sync match). Only this process's polls make offers;
other replicas' polls wake on the NOTIFY as before. Only ungated types: a
gated lease counts what is in flight under the gate's locks.

A claimed offer is settled once: with its leases when the transaction
committed, with none when it rolled back (the poll then asks the database
itself). A poll that was claimed waits for that, even past its own timeout:
the claiming transaction is already under way."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import asyncpg

from sluiceway.store import leasing

Queue = tuple[str, str]  # (namespace, task type)


@dataclass(eq=False)
class Offer:
    """One waiting poll: what it asked for, the event that wakes it, and, once
    claimed, the leases it will answer with."""

    namespace: str
    task_types: tuple[str, ...]
    worker_id: str
    count: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    claim: asyncio.Future[list[leasing.Lease]] | None = None
    leases: list[leasing.Lease] = field(default_factory=list)


class Offers:
    """The waiting polls of this process, oldest first per queue."""

    def __init__(self) -> None:
        self._waiting: dict[Queue, dict[Offer, None]] = defaultdict(dict)

    @contextlib.contextmanager
    def standing(self, offer: Offer) -> Iterator[Offer]:
        """Offer for as long as the block runs (the poll's wait); withdrawn after, claimed or not."""
        for name in offer.task_types:
            self._waiting[(offer.namespace, name)][offer] = None
        try:
            yield offer
        finally:
            self._withdraw(offer)

    def _withdraw(self, offer: Offer) -> None:
        for name in offer.task_types:
            queue = (offer.namespace, name)
            waiting = self._waiting.get(queue)
            if waiting is not None:
                waiting.pop(offer, None)
                if not waiting:
                    del self._waiting[queue]

    def claim(self, tasks: Mapping[Queue, int]) -> list[Offer]:
        """Claim the oldest waiting offers of each queue until they ask for at
        least its number of new `tasks`; a claimed offer is withdrawn at once, so
        nothing else claims it, and must be settled (`settle`)."""
        claimed: list[Offer] = []
        for queue, count in tasks.items():
            for offer in list(self._waiting.get(queue, ())):
                if count <= 0:
                    break
                offer.claim = asyncio.get_running_loop().create_future()
                self._withdraw(offer)
                claimed.append(offer)
                count -= offer.count
        return claimed

    def __len__(self) -> int:
        return len({offer for waiting in self._waiting.values() for offer in waiting})


async def lease_to(conn: asyncpg.Connection, claimed: list[Offer], tasks: Mapping[Queue, int]) -> int:
    """Lease to each claimed offer, in the caller's transaction, up to its
    count of the queues that got `tasks`; how many were leased. The leases
    are kept on the offer until `settle`."""
    leased = 0
    for offer in claimed:
        for name in offer.task_types:
            wanted = offer.count - len(offer.leases)
            if wanted <= 0:
                break
            if (offer.namespace, name) in tasks:
                got = await leasing.lease_ungated(conn, offer.namespace, name, offer.worker_id, wanted)
                offer.leases.extend(got)
                leased += len(got)
    return leased


def settle(claimed: list[Offer], committed: bool) -> None:
    """Answer the claimed polls: their leases if the transaction committed, none if not."""
    for offer in claimed:
        if offer.claim is not None and not offer.claim.done():
            offer.claim.set_result(offer.leases if committed else [])
        offer.wake.set()
