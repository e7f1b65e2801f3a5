"""Every gate under real concurrency, on a real PostgreSQL: many pollers at
once, and the worst case observed is recorded from the database's own lease
and release instants, not just the final state."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter

import asyncpg

from sluiceway.controls.policy import Gates
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.store import admission, definitions, executions, leasing, results
from sluiceway.store.database import init_connection
from sluiceway.store.sweeping import sweep
from tests.support.store import (
    NS,
    define_task,
    define_workflow,
    gates_of,
    intervals,
    max_overlap,
    settle,
    start_runs,
)
from tests.support.timetravel import time_passes


async def hammer(
    pool: asyncpg.Pool,
    task_types: list[str],
    pollers: int,
    expected: int,
    hold: tuple[float, float] = (0.0, 0.004),
    timeout: float = 120,
) -> list[leasing.Lease]:
    """`pollers` concurrent pollers lease and complete until `expected` tasks are done."""
    gates = {t: await gates_of(pool, t) for t in task_types}
    done: list[leasing.Lease] = []
    rng = random.Random(7)

    async def poller(n: int) -> None:
        while len(done) < expected:
            task_type = task_types[n % len(task_types)]
            async with pool.acquire() as conn:
                outcome = await leasing.lease(conn, NS, task_type, f"w{n}", 1 + n % 10, gates[task_type])
            if not outcome.leases:
                await asyncio.sleep(0.001)
                continue
            await asyncio.sleep(rng.uniform(*hold))
            async with pool.acquire() as conn:
                answers = await results.apply_results(
                    conn,
                    NS,
                    [
                        TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=ResultStatus.COMPLETED)
                        for lease in outcome.leases
                    ],
                )
            assert all(a.applied for a in answers.values())
            done.extend(outcome.leases)

    await asyncio.wait_for(asyncio.gather(*(poller(n) for n in range(pollers))), timeout)
    return done


async def test_concurrent_exec_limit_holds_over_thousands_of_leases(pool: asyncpg.Pool) -> None:
    await define_task(pool, "capped", concurrentExecLimit=3)
    await define_workflow(pool, "capped_wf", [{"name": "capped", "taskReferenceName": "c"}])
    await start_runs(pool, "capped_wf", 1500)
    await settle(pool)
    done = await hammer(pool, ["capped"], pollers=24, expected=1500)
    assert len({lease.task_id for lease in done}) == 1500, "every task leased exactly once"
    worst = max_overlap(await intervals(pool, ["capped"]))
    print(f"concurrentExecLimit 3: worst in flight observed {worst} over 1500 leases by 24 pollers")
    assert worst == 3, "the cap was exceeded" if worst > 3 else "the cap never bound: the test proves nothing"


async def test_a_poll_for_ten_under_a_cap_of_two_gets_two_and_the_next_gets_zero(pool: asyncpg.Pool) -> None:
    await define_task(pool, "two", concurrentExecLimit=2)
    await define_workflow(pool, "two_wf", [{"name": "two", "taskReferenceName": "t"}])
    await start_runs(pool, "two_wf", 5)
    await settle(pool)
    gates = await gates_of(pool, "two")
    async with pool.acquire() as conn:
        first = await leasing.lease(conn, NS, "two", "a", 10, gates)
        second = await leasing.lease(conn, NS, "two", "b", 10, gates)
    assert len(first.leases) == 2
    assert second.leases == [] and second.holds[0].control == "concurrentExecLimit"


async def test_two_types_needing_the_same_two_permits_never_deadlock_or_overshoot(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, NS, "x", "x", 1, 2)
        await definitions.upsert_semaphore(conn, NS, "y", "y", 1, 2)
    # The same two semaphores, declared in opposite orders: acquisition order must not depend on it.
    await define_task(pool, "erp_a", semaphores=["x", "y"])
    await define_task(pool, "erp_b", semaphores=["y", "x"])
    await define_workflow(pool, "a_wf", [{"name": "erp_a", "taskReferenceName": "a"}])
    await define_workflow(pool, "b_wf", [{"name": "erp_b", "taskReferenceName": "b"}])
    await start_runs(pool, "a_wf", 400)
    await start_runs(pool, "b_wf", 400)
    await settle(pool)
    done = await hammer(pool, ["erp_a", "erp_b"], pollers=16, expected=800, timeout=120)
    assert len(done) == 800, "a deadlock would have stopped the drain"
    worst = max_overlap(await intervals(pool, ["erp_a", "erp_b"]))
    print(f"semaphores x, y with 2 permits each: worst concurrent holders {worst}")
    assert worst == 2


async def test_an_unconfigured_semaphore_gates_nothing(pool: asyncpg.Pool) -> None:
    await define_task(pool, "free", semaphores=["not_yet_created"])
    await define_workflow(pool, "free_wf", [{"name": "free", "taskReferenceName": "f"}])
    await start_runs(pool, "free_wf", 5)
    await settle(pool)
    async with pool.acquire() as conn:
        outcome = await leasing.lease(conn, NS, "free", "w", 10, await gates_of(pool, "free"))
    assert len(outcome.leases) == 5


async def test_changing_permits_takes_effect_at_the_next_lease(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, NS, "pool", "pool", 1, 1)
    await define_task(pool, "guarded", semaphores=["pool"])
    await define_workflow(pool, "g_wf", [{"name": "guarded", "taskReferenceName": "g"}])
    await start_runs(pool, "g_wf", 5)
    await settle(pool)
    gates = await gates_of(pool, "guarded")
    async with pool.acquire() as conn:
        assert len((await leasing.lease(conn, NS, "guarded", "w", 10, gates)).leases) == 1
        await definitions.upsert_semaphore(conn, NS, "pool", "pool", 2, 3)
        assert len((await leasing.lease(conn, NS, "guarded", "w", 10, gates)).leases) == 2


async def test_permits_are_freed_by_terminated_and_crashed_holders(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, NS, "one", "one", 1, 1)
    await define_task(pool, "exclusive", semaphores=["one"], responseTimeoutSeconds=1, retryCount=0)
    await define_workflow(pool, "x_wf", [{"name": "exclusive", "taskReferenceName": "x"}])
    first, second, third = await start_runs(pool, "x_wf", 3)
    await settle(pool)
    gates = await gates_of(pool, "exclusive")

    async def lease_one() -> list[leasing.Lease]:
        async with pool.acquire() as conn:
            return (await leasing.lease(conn, NS, "exclusive", "w", 5, gates)).leases

    [held] = await lease_one()
    assert await lease_one() == [], "the permit is held"
    async with pool.acquire() as conn, conn.transaction():
        await executions.request_termination(conn, NS, held.execution_id, "stop it")
    await settle(pool)
    [crashing] = await lease_one()
    assert crashing.execution_id != held.execution_id, "terminating the holder's run freed the permit"
    await time_passes(pool, 1.2)  # its worker never reports: the one-second lease expires
    assert [e.missed.value for e in (await sweep(pool)).expired] == ["responseTimeoutSeconds"]
    [last] = await lease_one()
    assert last.execution_id not in (held.execution_id, crashing.execution_id), "the crashed holder's permit is back"


async def test_the_fixed_window_admits_at_most_twice_the_limit_across_a_boundary(pool: asyncpg.Pool) -> None:
    limit = 25
    await define_task(pool, "metered", rateLimitPerFrequency=limit, rateLimitFrequencySeconds=1)
    await define_workflow(pool, "m_wf", [{"name": "metered", "taskReferenceName": "m"}])
    await start_runs(pool, "m_wf", 130)
    await settle(pool)
    await hammer(pool, ["metered"], pollers=12, expected=130, timeout=60)
    async with pool.acquire() as conn:
        stamps = [
            r["t"]
            for r in await conn.fetch(
                "SELECT extract(epoch FROM leased_at)::float8 AS t FROM tasks WHERE name = 'metered' ORDER BY 1"
            )
        ]
    per_window = Counter(int(t // 1) for t in stamps)
    worst_window = max(per_window.values())
    worst_span = max(sum(1 for u in stamps if t <= u < t + 1) for t in stamps)  # any one-second span
    print(f"rate limit {limit}/s: worst fixed window {worst_window}, worst sliding second {worst_span}")
    assert worst_window == limit, "a window exceeded the limit" if worst_window > limit else "the limit never bound"
    assert worst_span <= 2 * limit


async def test_two_starts_racing_for_the_last_quota_slot_admit_exactly_one(
    pool: asyncpg.Pool, database_url: str
) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "default", 1, 3, None, None, None)
    await define_workflow(pool, "q_wf", [{"name": "never", "taskReferenceName": "n"}])
    await start_runs(pool, "q_wf", 2)  # two of the three slots taken
    conns = [await connect(database_url) for _ in range(12)]

    async def start(conn: asyncpg.Connection) -> object:
        async with conn.transaction():
            return await executions.start_run(conn, NS, "q_wf", None, {"n": uuid.uuid4().hex})

    try:
        outcomes = await asyncio.gather(*(start(c) for c in conns))
    finally:
        for conn in conns:
            await conn.close()
    started = [o for o in outcomes if isinstance(o, executions.Started)]
    refused = [o for o in outcomes if isinstance(o, executions.Refused)]
    assert len(started) == 1 and len(refused) == 11
    quota = refused[0]
    assert isinstance(quota, admission.QuotaExceeded) and quota.control == "quota:default"
    assert (quota.quota, quota.limit, quota.current) == ("default", 3, 3) and quota.retry_after_seconds >= 1


async def test_max_concurrent_executions_refuses_with_limit_exceeded(pool: asyncpg.Pool, database_url: str) -> None:
    await define_workflow(pool, "nightly", [{"name": "never", "taskReferenceName": "n"}], maxConcurrentExecutions=1)
    conns = [await connect(database_url) for _ in range(8)]

    async def start(conn: asyncpg.Connection) -> object:
        async with conn.transaction():
            return await executions.start_run(conn, NS, "nightly", None, {})

    try:
        outcomes = await asyncio.gather(*(start(c) for c in conns))
    finally:
        for conn in conns:
            await conn.close()
    refused = [o for o in outcomes if isinstance(o, executions.Refused)]
    assert len(refused) == 7
    assert isinstance(refused[0], admission.LimitExceeded) and refused[0].control == "maxConcurrentExecutions"
    assert refused[0].code == "LIMIT_EXCEEDED" and (refused[0].limit, refused[0].current) == (1, 1)


async def test_per_key_admission_queues_in_order_and_keys_never_contend(pool: asyncpg.Pool) -> None:
    await define_workflow(
        pool,
        "tenant_sync",
        [{"name": "sync", "taskReferenceName": "s"}],
        rateLimitConfig={"rateLimitKey": "${workflow.input.tenantId}", "concurrentExecLimit": 1},
    )
    outcomes = []
    async with pool.acquire() as conn:
        for tenant in ["acme", "acme", "acme", "globex", None]:
            async with conn.transaction():
                outcomes.append(
                    await executions.start_run(conn, NS, "tenant_sync", None, {"tenantId": tenant} if tenant else {})
                )
    assert [o.awaiting_admission for o in outcomes] == [False, True, True, False, False]  # type: ignore[union-attr]
    await settle(pool)
    acme1, acme2, acme3 = (o.id for o in outcomes[:3])  # type: ignore[union-attr]
    leased = await leasing_all(pool, "sync")
    assert {lease.execution_id for lease in leased} == {acme1, outcomes[3].id, outcomes[4].id}  # type: ignore[union-attr]
    for lease in leased:
        if lease.execution_id == acme1:
            async with pool.acquire() as conn:
                await results.apply_results(
                    conn, NS, [TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=ResultStatus.COMPLETED)]
                )
    await settle(pool)
    assert [lease.execution_id for lease in await leasing_all(pool, "sync")] == [acme2], "admitted in order"


async def connect(database_url: str) -> asyncpg.Connection:
    """A connection of its own, set up as the pool's are: concurrent starts need one each."""
    conn = await asyncpg.connect(database_url)
    await init_connection(conn)
    return conn


async def leasing_all(pool: asyncpg.Pool, task_type: str) -> list[leasing.Lease]:
    async with pool.acquire() as conn:
        return (await leasing.lease(conn, NS, task_type, "w", 100, Gates())).leases
