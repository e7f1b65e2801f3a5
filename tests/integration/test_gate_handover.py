"""A result's freed gated slot handed to the type's next task without the
gate's locks (leasing.hand_over), on a real PostgreSQL: beside leases under
the locks, in real concurrent transactions, no cap or semaphore is ever
exceeded, and what a handover may not do (top up a lowered cap, take a
semaphore the freed task did not hold, spend a rate limit) it does not."""

from __future__ import annotations

import asyncio
import random

import asyncpg

from sluiceway.controls.policy import Gates
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.store import definitions, leasing, results, wakeups
from tests.support.store import NS, define_task, define_workflow, gates_of, intervals, max_overlap, settle, start_runs

# One statement, one snapshot: what is committed as in flight at one instant.
_IN_USE = """
SELECT (SELECT count(*) FROM tasks WHERE namespace = $1 AND name = 'capped' AND status = 'IN_PROGRESS') AS capped,
       (SELECT count(*) FROM tasks WHERE namespace = $1 AND status = 'IN_PROGRESS' AND holds @> '{x}') AS x,
       (SELECT count(*) FROM tasks WHERE namespace = $1 AND status = 'IN_PROGRESS' AND holds @> '{y}') AS y
"""


def completed(leases: list[leasing.Lease]) -> list[TaskResult]:
    return [TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=ResultStatus.COMPLETED) for lease in leases]


async def release_and_refill(
    conn: asyncpg.Connection, task_type: str, worker: str, held: list[leasing.Lease], gates: Gates, more: int = 0
) -> tuple[list[leasing.Lease], int]:
    """What a result batch with `next` does: in one transaction, apply the
    results, hand the freed slots over, lease the rest (and `more`) under the
    locks. Returns the new leases and how many of them were handed over."""
    wanted = len(held) + more
    async with conn.transaction():
        answers = await results.apply_results(conn, NS, completed(held))
        assert all(a.applied for a in answers.values())
        handed = await leasing.hand_over(conn, NS, worker, {task_type: (wanted, gates)}, [h.task_id for h in held])
        rest = (await leasing.lease(conn, NS, task_type, worker, wanted - len(handed), gates)).leases
    return handed + rest, len(handed)


async def test_handovers_beside_locked_leases_never_exceed_a_cap_or_permits(pool: asyncpg.Pool) -> None:
    """Sixteen workers: each leases under the locks, then reports its tasks
    and refills in one transaction (handing over, the rest under the locks),
    beside eight plain pollers and a sampler reading the committed in-use
    counts in one snapshot as fast as it can. The worst case, from the
    sampler and from the database's own lease and release instants, is the
    gate exactly: bound, never passed."""
    async with pool.acquire() as conn:
        for name in ("x", "y"):
            await definitions.upsert_semaphore(conn, NS, name, name, 1, 2)
    await define_task(pool, "capped", concurrentExecLimit=3)
    await define_task(pool, "erp_a", semaphores=["x", "y"])
    await define_task(pool, "erp_b", semaphores=["y", "x"])
    types = ["capped", "erp_a", "erp_b"]
    expected = {"capped": 600, "erp_a": 250, "erp_b": 250}
    for name, count in expected.items():
        await define_workflow(pool, f"wf_{name}", [{"name": name, "taskReferenceName": "t"}])
        await start_runs(pool, f"wf_{name}", count)
    await settle(pool)
    gates = {t: await gates_of(pool, t) for t in types}
    total = sum(expected.values())
    done: set[str] = set()
    handed_over = 0
    rng = random.Random(15)

    async def refiller(n: int) -> None:
        nonlocal handed_over
        task_type = types[n % 3]
        held: list[leasing.Lease] = []
        while len(done) < total:
            async with pool.acquire() as conn:
                if not held:
                    held = (await leasing.lease(conn, NS, task_type, f"r{n}", 2, gates[task_type])).leases
                    if not held:
                        await asyncio.sleep(0.002)
                        continue
                await asyncio.sleep(rng.uniform(0, 0.003))
                finished = [h.task_id for h in held]
                more = n % 2  # asking for more than was freed: only the freed slots may pass without the locks
                held, handed = await release_and_refill(conn, task_type, f"r{n}", held, gates[task_type], more)
            done.update(finished)
            handed_over += handed

    async def poller(n: int) -> None:
        task_type = types[n % 3]
        while len(done) < total:
            async with pool.acquire() as conn:
                leased = (await leasing.lease(conn, NS, task_type, f"p{n}", 3, gates[task_type])).leases
            if not leased:
                await asyncio.sleep(0.002)
                continue
            await asyncio.sleep(rng.uniform(0, 0.003))
            async with pool.acquire() as conn:
                await results.apply_results(conn, NS, completed(leased))
            done.update(lease.task_id for lease in leased)

    worst = {"capped": 0, "x": 0, "y": 0}

    async def sampler() -> None:
        async with pool.acquire() as conn:
            while len(done) < total:
                row = await conn.fetchrow(_IN_USE, NS)
                for key in worst:
                    worst[key] = max(worst[key], row[key])

    workers = [refiller(n) for n in range(16)] + [poller(n) for n in range(8)]
    await asyncio.wait_for(asyncio.gather(sampler(), *workers), 180)
    assert len(done) == total, "every task was leased and reported"
    overlap_capped = max_overlap(await intervals(pool, ["capped"]))
    overlap_erp = max_overlap(await intervals(pool, ["erp_a", "erp_b"]))
    print(
        f"handed over {handed_over} of {total}; worst in use sampled {worst} (cap 3, permits 2); "
        f"worst overlap of lease intervals: capped {overlap_capped}, erp {overlap_erp}"
    )
    assert handed_over > total // 4, "handovers were too rare for the test to prove anything"
    assert worst["capped"] <= 3 and worst["x"] <= 2 and worst["y"] <= 2, worst
    assert overlap_capped <= 3 and overlap_erp <= 2
    assert overlap_capped == 3 and overlap_erp == 2, "the gates never bound: the test proves nothing"


async def test_a_handover_never_tops_up_a_lowered_cap(pool: asyncpg.Pool) -> None:
    await define_task(pool, "capped", concurrentExecLimit=3)
    await define_workflow(pool, "wf", [{"name": "capped", "taskReferenceName": "t"}])
    await start_runs(pool, "wf", 6)
    await settle(pool)
    async with pool.acquire() as conn:
        held = (await leasing.lease(conn, NS, "capped", "w", 3, await gates_of(pool, "capped"))).leases
    assert len(held) == 3
    await define_task(pool, "capped", concurrentExecLimit=1)  # two too many in flight now
    lowered = await gates_of(pool, "capped")
    async with pool.acquire() as conn:
        leased, handed = await release_and_refill(conn, "capped", "w", held[:1], lowered)
        assert (leased, handed) == ([], 0), "2 in flight under a cap of 1: nothing may be granted"
        leased, handed = await release_and_refill(conn, "capped", "w", held[1:2], lowered)
        assert (leased, handed) == ([], 0), "1 in flight under a cap of 1: still nothing"
        leased, handed = await release_and_refill(conn, "capped", "w", held[2:], lowered)
    assert len(leased) == 1 and handed == 1, "the cap of 1 is met again: its slot passes on"


async def test_a_handover_never_takes_a_semaphore_the_freed_task_did_not_hold(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        for name in ("x", "y"):
            await definitions.upsert_semaphore(conn, NS, name, name, 1, 1)
    await define_task(pool, "erp", semaphores=["x"])
    await define_workflow(pool, "wf", [{"name": "erp", "taskReferenceName": "t"}])
    await start_runs(pool, "wf", 3)
    await settle(pool)
    async with pool.acquire() as conn:
        held = (await leasing.lease(conn, NS, "erp", "w", 1, await gates_of(pool, "erp"))).leases
        await define_task(pool, "erp", semaphores=["x", "y"])
        wider = await gates_of(pool, "erp")
        async with conn.transaction():
            await results.apply_results(conn, NS, completed(held))
            handed = await leasing.hand_over(conn, NS, "w", {"erp": (1, wider)}, [held[0].task_id])
            assert handed == [], "the freed task held x only: taking y needs the locks"
            locked = (await leasing.lease(conn, NS, "erp", "w", 1, wider)).leases
        assert len(locked) == 1, "under the locks, both permits are free"


async def test_a_rate_limited_type_never_hands_over(pool: asyncpg.Pool) -> None:
    await define_task(pool, "metered", concurrentExecLimit=5, rateLimitPerFrequency=2, rateLimitFrequencySeconds=60)
    await define_workflow(pool, "wf", [{"name": "metered", "taskReferenceName": "t"}])
    await start_runs(pool, "wf", 4)
    await settle(pool)
    gates = await gates_of(pool, "metered")
    assert not leasing.hands_over(gates)
    async with pool.acquire() as conn:
        held = (await leasing.lease(conn, NS, "metered", "w", 2, gates)).leases
        assert len(held) == 2
        leased, handed = await release_and_refill(conn, "metered", "w", held, gates)
    assert (leased, handed) == ([], 0), "the window's two grants are spent; a freed slot does not refund them"


async def test_two_open_handovers_that_both_see_a_free_slot_take_only_what_each_freed(pool: asyncpg.Pool) -> None:
    """Cap 3, two in flight: one slot free. Two transactions, open at once,
    each release one task and ask for two: each sees the free slot (the
    other's release is not committed, its grant not visible), so only the
    bound to what each freed keeps the pair from granting four."""
    await define_task(pool, "capped", concurrentExecLimit=3)
    await define_workflow(pool, "wf", [{"name": "capped", "taskReferenceName": "t"}])
    await start_runs(pool, "wf", 8)
    await settle(pool)
    gates = await gates_of(pool, "capped")
    async with pool.acquire() as conn:
        first, second = (await leasing.lease(conn, NS, "capped", "w", 2, gates)).leases
    async with pool.acquire() as one, pool.acquire() as other:
        one_tx, other_tx = one.transaction(), other.transaction()
        await one_tx.start()
        await other_tx.start()
        granted = 0
        for conn, held in ((one, first), (other, second)):
            await results.apply_results(conn, NS, completed([held]))
            granted += len(await leasing.hand_over(conn, NS, "w", {"capped": (2, gates)}, [held.task_id]))
        await one_tx.commit()
        await other_tx.commit()
        in_flight = await one.fetchval(
            "SELECT count(*) FROM tasks WHERE namespace = $1 AND name = 'capped' AND status = 'IN_PROGRESS'", NS
        )
    assert granted == 2 and in_flight == 2, (granted, in_flight)
    async with pool.acquire() as conn:
        assert len((await leasing.lease(conn, NS, "capped", "w", 5, gates)).leases) == 1, "the free slot is still free"


async def test_a_permit_handed_over_wakes_nobody_and_one_not_handed_over_wakes_one_poll(
    pool: asyncpg.Pool, database_url: str
) -> None:
    """A semaphore's release notifies one waiting poll per permit freed; when
    the same transaction hands the permit over, a woken poll would only find
    it taken, so no notification; when the queue is empty and the permit
    stays free, the handover sends it."""
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, NS, "x", "x", 1, 1)
    await define_task(pool, "erp", semaphores=["x"])
    await define_workflow(pool, "wf", [{"name": "erp", "taskReferenceName": "t"}])
    await start_runs(pool, "wf", 2)
    await settle(pool)
    gates = await gates_of(pool, "erp")
    heard: list[str] = []
    listener = await asyncpg.connect(database_url)
    await listener.add_listener(wakeups.READY_CHANNEL, lambda *args: heard.append(args[3]))

    async def wake_ups_for_x() -> int:
        """Permit wake-ups heard so far: a marker sent after the transaction, so all of its arrived."""
        marker = f"marker-{len(heard)}"
        async with pool.acquire() as conn:
            await conn.execute("SELECT pg_notify($1, $2)", wakeups.READY_CHANNEL, marker)
        while marker not in heard:
            await asyncio.sleep(0.01)
        permit_of_x = wakeups.Ready((NS, wakeups.semaphore_queue("x")), one_slot=True)
        return sum(1 for payload in heard if wakeups.parse_ready(payload) == permit_of_x)

    try:
        async with pool.acquire() as conn:
            [first] = (await leasing.lease(conn, NS, "erp", "w", 1, gates)).leases
            async with conn.transaction():
                await results.apply_results(conn, NS, completed([first]), ["erp"], handing=["erp"])
                [second] = await leasing.hand_over(conn, NS, "w", {"erp": (1, gates)}, [first.task_id])
            assert await wake_ups_for_x() == 0, "the permit went straight to the next task"
            async with conn.transaction():
                await results.apply_results(conn, NS, completed([second]), ["erp"], handing=["erp"])
                assert await leasing.hand_over(conn, NS, "w", {"erp": (1, gates)}, [second.task_id]) == []
            assert await wake_ups_for_x() == 1, "nothing to hand it to: one waiting poll is told"
    finally:
        await listener.close()
