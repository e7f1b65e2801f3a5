"""The scheduler against a real PostgreSQL: a fire starts one run named by
the schedule and the fire time, concurrent scheduler passes (replicas) start
each fire exactly once, a catch-up starts what is inside its window, the
overlap policies against runs that still run, backfills, triggers and maxRuns.

Runs here stay RUNNING (no worker leases their task), which is what the
overlap policies need; a run "ends" by having its row ended, as the decider
would end it."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import asyncpg
import pytest

from sluiceway.controls.schedules import run_id
from sluiceway.model.schedule import OverlapPolicy, ScheduleSpec
from sluiceway.store import attributes, schedules, workflows

NAMESPACE = "team-s"
WORKFLOW = {"tasks": [{"name": "export", "taskReferenceName": "export"}]}


async def define_workflow(pool: asyncpg.Pool, namespace: str = NAMESPACE) -> None:
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(conn, namespace, "report", "report", 1, WORKFLOW)


async def add_schedule(pool: asyncpg.Pool, name: str, **fields: Any) -> str:
    """Store a schedule as the reconciler does; return its uid."""
    uid = str(uuid.uuid4())
    spec = ScheduleSpec.model_validate({"workflow": "report", "input": {"region": "eu"}, **fields})
    async with pool.acquire() as conn:
        assert await schedules.upsert_schedule(conn, NAMESPACE, name, uid, 1, spec) is None
    return uid


async def db_now(pool: asyncpg.Pool) -> datetime.datetime:
    async with pool.acquire() as conn:
        now: datetime.datetime = await conn.fetchval("SELECT now()")
    return now


async def rewind(pool: asyncpg.Pool, name: str, next_fire: datetime.datetime) -> None:
    """As if the operator had been down since `next_fire`."""
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE schedules SET next_fire_at = $2, due_at = $2 WHERE namespace = $3 AND name = $1",
            name,
            next_fire,
            NAMESPACE,
        )


async def scheduler_pass(pool: asyncpg.Pool) -> schedules.PassReport:
    async with pool.acquire() as conn, conn.transaction():
        return await schedules.fire_due(conn)


async def fires_of(pool: asyncpg.Pool, name: str) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT fire_at, kind, outcome, run_id FROM schedule_fires WHERE schedule = $1 ORDER BY fire_at", name
        )
    return [dict(r) for r in rows]


async def runs_of(pool: asyncpg.Pool, name: str) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT id, status, input, terminate_requested FROM executions WHERE schedule_name = $1"
            " ORDER BY created_at",
            name,
        )
    return [dict(r) for r in rows]


async def end_runs(pool: asyncpg.Pool, name: str) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE executions SET status = 'COMPLETED', ended_at = now()"
            " WHERE schedule_name = $1 AND status = 'RUNNING'",
            name,
        )


async def test_a_due_fire_starts_one_run_named_by_the_schedule_and_the_fire_time(pool: asyncpg.Pool) -> None:
    await define_workflow(pool)
    now = (await db_now(pool)).replace(microsecond=0)
    fire = now - datetime.timedelta(seconds=1)  # hourly, and the last fire was a second ago
    uid = await add_schedule(pool, "nightly", every="1h", offset=f"{int(fire.timestamp()) % 3600}s")
    await rewind(pool, "nightly", fire)
    report = await scheduler_pass(pool)
    assert [(f.outcome, f.kind, f.run_id) for f in report.fires] == [("started", "scheduled", run_id(uid, fire))]
    [run] = await runs_of(pool, "nightly")
    assert str(run["id"]) == run_id(uid, fire) and run["status"] == "RUNNING" and run["input"] == {"region": "eu"}
    assert await fires_of(pool, "nightly") == [
        {"fire_at": fire, "kind": "scheduled", "outcome": "started", "run_id": run["id"]}
    ]
    assert (await scheduler_pass(pool)).fires == [], "nothing more is due before the next hour"


async def test_concurrent_scheduler_passes_start_every_fire_exactly_once(pool: asyncpg.Pool) -> None:
    """Six replicas' schedulers race over five schedules, each a minute behind
    (a catch-up of some 60 fires each) and firing every second while they run."""
    await define_workflow(pool)
    names = [f"tick-{i}" for i in range(5)]
    for name in names:
        await add_schedule(pool, name, every="1s", overlapPolicy="AllowAll", catchupWindowSeconds=3600)
        await rewind(pool, name, (await db_now(pool)).replace(microsecond=0) - datetime.timedelta(seconds=60))
    passes = 0

    async def replica(deadline: float) -> None:
        nonlocal passes
        while asyncio.get_running_loop().time() < deadline:
            async with pool.acquire() as conn, conn.transaction():
                await schedules.fire_due(conn, batch=2)
            passes += 1
            await asyncio.sleep(0.01)

    deadline = asyncio.get_running_loop().time() + 3.0
    await asyncio.gather(*(replica(deadline) for _ in range(6)))
    worst_gap = datetime.timedelta(0)
    for name in names:
        fired = await fires_of(pool, name)
        runs = await runs_of(pool, name)
        times = [f["fire_at"] for f in fired]
        assert len(times) >= 61 and all(f["outcome"] == "started" for f in fired)
        gaps = {b - a for a, b in zip(times, times[1:], strict=False)}
        worst_gap = max([worst_gap, *gaps])
        assert gaps == {datetime.timedelta(seconds=1)}, "a fire was lost"
        assert sorted(str(r["id"]) for r in runs) == sorted(str(f["run_id"]) for f in fired), "a run was doubled"
    print(f"{passes} concurrent passes; every fire once; widest gap {worst_gap.total_seconds()} s")


async def test_a_catch_up_starts_the_fires_inside_its_window_and_counts_the_older_ones(pool: asyncpg.Pool) -> None:
    await define_workflow(pool)
    now = await db_now(pool)
    # Hourly, ten minutes before now: the fires sit far from the window's edge.
    offset = int(now.timestamp() - 600) % 3600
    await add_schedule(
        pool, "hourly", every="1h", offset=f"{offset}s", overlapPolicy="AllowAll", catchupWindowSeconds=7200
    )
    last = datetime.datetime.fromtimestamp((int(now.timestamp() - 600) // 3600) * 3600 + offset, tz=datetime.UTC)
    await rewind(pool, "hourly", last - datetime.timedelta(hours=5))
    report = await scheduler_pass(pool)
    started = [f.fire_at for f in report.fires if f.outcome == "started"]
    assert started == [last - datetime.timedelta(hours=1), last]
    assert {f.kind for f in report.fires} == {"catchup"}
    assert [(m.schedule, m.count) for m in report.missed] == [("hourly", 4)]
    async with pool.acquire() as conn:
        [state] = await schedules.states(conn, NAMESPACE, "hourly")
    assert state.missed == 4 and state.runs_started == 2 and state.next_fire_at == last + datetime.timedelta(hours=1)


async def trigger(pool: asyncpg.Pool, name: str) -> schedules.Fire:
    async with pool.acquire() as conn, conn.transaction():
        return await schedules.trigger(conn, NAMESPACE, name)


@pytest.mark.parametrize(
    ("policy", "outcomes", "stopped", "after_end"),
    [
        ("Skip", ["started", "skipped", "skipped"], 0, []),
        ("Forbid", ["started", "skipped", "skipped"], 0, []),
        ("BufferOne", ["started", "buffered", "skipped"], 0, ["started"]),
        ("BufferAll", ["started", "buffered", "buffered"], 0, ["started"]),  # one at a time, in order
        ("CancelOther", ["started", "buffered", "skipped"], 1, ["started"]),
        ("TerminateOther", ["started", "started", "started"], 2, []),
        ("Replace", ["started", "started", "started"], 2, []),
        ("AllowAll", ["started", "started", "started"], 0, []),
    ],
)
async def test_each_overlap_policy_against_a_run_that_still_runs(
    pool: asyncpg.Pool, policy: str, outcomes: list[str], stopped: int, after_end: list[str]
) -> None:
    await define_workflow(pool)
    await add_schedule(pool, "slow", every="1h", overlapPolicy=policy)
    fired = [await trigger(pool, "slow") for _ in range(3)]
    assert [f.outcome for f in fired] == outcomes
    runs = await runs_of(pool, "slow")
    assert sum(1 for r in runs if r["terminate_requested"]) == stopped, "runs asked to stop"
    await end_runs(pool, "slow")
    drained = (await scheduler_pass(pool)).fires
    assert [f.outcome for f in drained] == after_end
    if after_end:  # the waiting fire starts the run its fire time names
        assert drained[0].fire_at == fired[1].fire_at and drained[0].run_id == fired[1].run_id
    if policy == "BufferAll":
        await end_runs(pool, "slow")
        assert [f.fire_at for f in (await scheduler_pass(pool)).fires] == [fired[2].fire_at]


async def test_a_backfill_starts_one_run_per_fire_of_its_range_and_never_twice(pool: asyncpg.Pool) -> None:
    await define_workflow(pool)
    await add_schedule(pool, "daily", cron=["0 6 * * *"], overlapPolicy="AllowAll")
    start = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    end = datetime.datetime(2026, 3, 4, 12, tzinfo=datetime.UTC)
    async with pool.acquire() as conn, conn.transaction():
        fires = await schedules.backfill(conn, NAMESPACE, "daily", start, end)
    assert [(f.fire_at.day, f.outcome, f.kind) for f in fires] == [(d, "started", "backfill") for d in (1, 2, 3, 4)]
    async with pool.acquire() as conn, conn.transaction():
        again = await schedules.backfill(conn, NAMESPACE, "daily", start, end, OverlapPolicy.ALLOW_ALL)
    assert {f.outcome for f in again} == {"duplicate"}
    assert len(await runs_of(pool, "daily")) == 4
    async with pool.acquire() as conn, conn.transaction():
        with pytest.raises(schedules.BackfillError, match="^endTime: a backfill fills the past"):
            await schedules.backfill(conn, NAMESPACE, "daily", start, end.replace(year=2999))
        with pytest.raises(schedules.BackfillError, match="^endTime: must not be before startTime"):
            await schedules.backfill(conn, NAMESPACE, "daily", end, start)


async def test_max_runs_stops_the_schedule_and_triggers_do_not_count(pool: asyncpg.Pool) -> None:
    await define_workflow(pool)
    await add_schedule(pool, "twice", every="1s", maxRuns=2, overlapPolicy="AllowAll", catchupWindowSeconds=3600)
    await trigger(pool, "twice")
    await rewind(pool, "twice", (await db_now(pool)).replace(microsecond=0) - datetime.timedelta(seconds=10))
    report = await scheduler_pass(pool)
    assert [f.kind for f in report.fires] == ["catchup", "catchup"]
    async with pool.acquire() as conn:
        [state] = await schedules.states(conn, NAMESPACE, "twice")
    assert state.runs_started == 2 and state.next_fire_at is None and len(await runs_of(pool, "twice")) == 3


async def test_a_refused_start_is_recorded_and_the_schedule_goes_on(pool: asyncpg.Pool) -> None:
    await add_schedule(pool, "orphan", every="1h")  # its workflow does not exist
    fire = await trigger(pool, "orphan")
    assert fire.outcome == "refused" and fire.reason == "workflow report not found"
    assert [f["outcome"] for f in await fires_of(pool, "orphan")] == ["refused"]


async def test_a_suspended_schedule_has_no_next_fire_and_a_resumed_one_goes_on_from_now(pool: asyncpg.Pool) -> None:
    await define_workflow(pool)
    uid = await add_schedule(pool, "paused", every="1s", suspend=True)
    async with pool.acquire() as conn:
        [state] = await schedules.states(conn, NAMESPACE, "paused")
        assert state.next_fire_at is None
        before = await conn.fetchval("SELECT now()")
        spec = ScheduleSpec.model_validate({"workflow": "report", "every": "1s"})
        await schedules.upsert_schedule(conn, NAMESPACE, "paused", uid, 2, spec)
        [state] = await schedules.states(conn, NAMESPACE, "paused")
    assert state.next_fire_at is not None and before < state.next_fire_at <= before + datetime.timedelta(seconds=1)


async def test_a_scheduled_run_carries_the_schedules_search_attributes_checked_as_a_starts(
    pool: asyncpg.Pool,
) -> None:
    declared = {
        **WORKFLOW,
        "searchAttributes": [{"name": "team", "type": "keyword"}, {"name": "priority", "type": "int"}],
    }
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(conn, NAMESPACE, "tagged", "tagged", 1, declared)
    await add_schedule(pool, "tagged", workflow="tagged", every="1h", searchAttributes={"team": "ops", "priority": 2})
    fire = await trigger(pool, "tagged")
    assert fire.outcome == "started" and fire.run_id is not None
    async with pool.acquire() as conn:
        found = await attributes.of_runs(conn, NAMESPACE, [uuid.UUID(fire.run_id)])
    assert found[uuid.UUID(fire.run_id)] == {"team": "ops", "priority": 2}

    await add_schedule(pool, "mistyped", workflow="tagged", every="1h", searchAttributes={"priority": "high"})
    refused = await trigger(pool, "mistyped")
    assert refused.outcome == "refused" and "priority" in (refused.reason or ""), refused


async def test_a_scheduled_run_takes_the_schedules_priority(pool: asyncpg.Pool) -> None:
    await define_workflow(pool)
    await add_schedule(pool, "urgent-report", every="1h", priority=1)
    await trigger(pool, "urgent-report")
    [run] = await runs_of(pool, "urgent-report")
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT priority FROM executions WHERE id = $1", run["id"]) == 1
