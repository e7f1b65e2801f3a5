"""The waiting polls a decider pass may lease tasks to (store.matching): who
is claimed, and what a claimed poll answers with. No database: the leases are
made up, as the decider's transaction would have made them."""

from __future__ import annotations

import asyncio

from sluiceway.model.execution import PollRequest
from sluiceway.plane.dispatch import _wait_offering
from sluiceway.store import matching
from sluiceway.store.leasing import Lease
from sluiceway.store.matching import Offer, Offers
from sluiceway.store.notifications import Notifications


def lease(task_id: str, task_type: str = "a") -> Lease:
    return Lease(task_id, 1, task_type, "run", "ref", 1, {}, 60, 0, 0)


def poll(worker: str, types: list[str], count: int = 1) -> PollRequest:
    return PollRequest.model_validate({"taskTypes": types, "workerId": worker, "count": count})


async def test_the_oldest_offers_are_claimed_until_they_cover_the_new_tasks() -> None:
    offers = Offers()
    first, second, third = (Offer("ns", ("a",), f"w{n}", 2) for n in range(3))
    other = Offer("ns", ("b",), "wb", 1)
    with offers.standing(first), offers.standing(second), offers.standing(third), offers.standing(other):
        claimed = offers.claim({("ns", "a"): 3})  # two offers of two tasks each cover three
        assert claimed == [first, second]
        assert all(o.claim is not None and not o.claim.done() for o in claimed)
        assert len(offers) == 2, "a claimed offer is withdrawn: nothing claims it twice"
        assert offers.claim({("ns", "a"): 1}) == [third]
        assert offers.claim({("other-ns", "b"): 1}) == [], "queues are per namespace"
    assert len(offers) == 0, "every offer is withdrawn when its wait ends"


async def test_an_offer_polling_two_types_is_claimed_once() -> None:
    offers = Offers()
    both = Offer("ns", ("a", "b"), "w", 4)
    with offers.standing(both):
        assert offers.claim({("ns", "a"): 1, ("ns", "b"): 1}) == [both]
        assert len(offers) == 0


async def test_a_claimed_poll_answers_with_its_leases_even_past_its_own_timeout() -> None:
    offers, notes = Offers(), Notifications("postgresql://unused")
    waiting = asyncio.create_task(_wait_offering(offers, notes, "ns", poll("w", ["a"]), ["a"], 0.05, None))
    await asyncio.sleep(0.01)
    [claimed] = offers.claim({("ns", "a"): 1})
    claimed.leases.append(lease("t1"))
    await asyncio.sleep(0.1)  # the poll's wait has run out; the claiming transaction has not committed yet
    assert not waiting.done()
    matching.settle([claimed], committed=True)
    assert [found.task_id for found in await waiting] == ["t1"]


async def test_a_claim_rolled_back_answers_nothing_at_once() -> None:
    offers, notes = Offers(), Notifications("postgresql://unused")
    waiting = asyncio.create_task(_wait_offering(offers, notes, "ns", poll("w", ["a"]), ["a"], 30, None))
    await asyncio.sleep(0.01)
    [claimed] = offers.claim({("ns", "a"): 1})
    claimed.leases.append(lease("t1"))  # leased in a transaction that then rolled back
    matching.settle([claimed], committed=False)
    assert await asyncio.wait_for(waiting, 5) == []  # the poll then asks the database itself


async def test_an_unclaimed_poll_woken_by_a_notification_answers_nothing_and_withdraws() -> None:
    offers, notes = Offers(), Notifications("postgresql://unused")
    waiting = asyncio.create_task(_wait_offering(offers, notes, "ns", poll("w", ["a"]), ["a"], 30, None))
    await asyncio.sleep(0.01)
    assert len(offers) == 1
    notes.wake("ns", ["a"])  # another replica's task, say: the poll leases it itself
    assert await asyncio.wait_for(waiting, 5) == []
    assert len(offers) == 0
