"""Every metric's value, not just its name: each test drives a real PostgreSQL
into a known state and reads the number back from a scrape, parsed with
prometheus_client's own text parser.

Counters live in the process-wide registry and other tests move them too, so
counter tests assert what one action added; the gauges read from the database
are absolute (each test has its own database)."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Mapping

import aiohttp
import asyncpg
import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluiceway.model.execution import ResultStatus
from sluiceway.observability import metrics
from sluiceway.observability.logs import JsonFormatter
from sluiceway.runtime import loops
from sluiceway.store import mirroring, schedules
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.sweeping import sweep
from tests.integration.test_schedules import add_schedule, db_now, rewind
from tests.integration.test_schedules import define_workflow as define_report_workflow
from tests.support.plane import Plane
from tests.support.store import NS, define_task, define_workflow, lease, report, settle, start, start_runs

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape() -> Samples:
    """The body /metrics serves (the endpoint returns generate_latest() of this registry)."""
    return parse(generate_latest(REGISTRY).decode())


async def scrape_http(plane: Plane) -> Samples:
    async with aiohttp.ClientSession() as http, http.get(f"{plane.url}/metrics") as response:
        assert response.status == 200
        return parse(await response.text())


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def added(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return (value(after, name, **labels) or 0.0) - (value(before, name, **labels) or 0.0)


async def published(pool: asyncpg.Pool) -> Samples:
    """What the leader exports after one pass of its gauges loop."""
    await loops.publish_database_metrics(pool)
    return scrape()


async def scheduled(pool: asyncpg.Pool, task_type: str, count: int) -> None:
    """Wait until `count` tasks of the type are queued: the plane's own decider
    may still be deciding a run when a settle() beside it finds nothing due."""
    for _ in range(400):
        async with pool.acquire() as conn:
            found = await conn.fetchval(
                "SELECT count(*) FROM tasks WHERE name = $1 AND status = 'SCHEDULED'", task_type
            )
        if found >= count:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{count} {task_type} tasks never got scheduled")


def observed() -> DeciderConfig:
    """A decider that counts what it decides, as the operator's does."""
    return DeciderConfig(on_decision=loops.observe_decision, on_quarantine=loops.count_quarantined)


def queue(samples: Samples, task_type: str, executor: str) -> Mapping[str, float | None]:
    labels = {"namespace": NS, "task_type": task_type, "executor": executor}
    return {kind: value(samples, f"sluiceway_tasks_{kind}", **labels) for kind in ("ready", "delayed", "in_flight")}


async def test_queue_depths_count_every_executor_and_each_state(pool: asyncpg.Pool) -> None:
    await define_task(pool, "work", retryCount=1, retryLogic="FIXED", retryDelaySeconds=600)
    await define_workflow(pool, "three", [{"name": "work", "taskReferenceName": "w"}])
    http = {"http_request": {"uri": "http://partner.invalid/", "method": "GET"}}
    call = {"name": "call", "taskReferenceName": "c", "type": "HTTP", "inputParameters": http}
    await define_workflow(pool, "call", [call])
    await start_runs(pool, "three", 4)
    await start(pool, "call")
    await settle(pool)
    first, _ = await lease(pool, "work", 2)
    await report(pool, first, ResultStatus.FAILED, reason="partner down")  # retried in 600 s: delayed
    await settle(pool)
    samples = await published(pool)
    # 4 tasks: 1 failed attempt (retried later), 1 leased, 2 waiting; the retry is the delayed one.
    assert queue(samples, "work", "worker") == {"ready": 2, "delayed": 1, "in_flight": 1}
    assert queue(samples, "call", "system") == {"ready": 1, "delayed": 0, "in_flight": 0}
    assert value(samples, "sluiceway_queue_pollers", namespace=NS, task_type="call") is None, "no worker polls it"


async def test_pollers_count_the_workers_seen_in_the_last_minute(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    async with aiohttp.ClientSession() as http:
        for worker in ("w1", "w2"):
            body = {"taskTypes": ["job"], "workerId": worker, "count": 1, "pollTimeoutSeconds": 0}
            async with http.post(f"{plane.url}/v1/ns/{NS}/tasks/poll", json=body) as response:
                assert response.status == 200
    samples = await published(plane.pool)
    assert value(samples, "sluiceway_queue_pollers", namespace=NS, task_type="job") == 2
    assert queue(samples, "job", "worker") == {"ready": 0, "delayed": 0, "in_flight": 0}
    async with plane.pool.acquire() as conn:
        await conn.execute("UPDATE pollers SET last_poll = now() - interval '2 minutes' WHERE worker_id = 'w1'")
    samples = await published(plane.pool)
    assert value(samples, "sluiceway_queue_pollers", namespace=NS, task_type="job") == 1


async def test_decide_queue_oldest_age_is_the_decider_lag(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await start(pool, "one")
    async with pool.acquire() as conn:
        await conn.execute("UPDATE decide_queue SET due_at = now() - interval '30 seconds'")
    lag = value(await published(pool), "sluiceway_decide_queue_oldest_seconds")
    assert lag is not None and 30 <= lag < 60, lag
    await settle(pool)
    assert value(await published(pool), "sluiceway_decide_queue_oldest_seconds") == 0


async def test_timers_overdue_count_task_and_run_deadlines_past_due(pool: asyncpg.Pool) -> None:
    await define_task(pool, "slow")
    await define_workflow(pool, "one", [{"name": "slow", "taskReferenceName": "s"}], timeoutSeconds=600)
    await start_runs(pool, "one", 3)
    await settle(pool)
    assert value(await published(pool), "sluiceway_timers_overdue") == 0
    async with pool.acquire() as conn:
        [task] = await conn.fetch("SELECT id FROM tasks ORDER BY created_at LIMIT 1")
        await conn.execute("UPDATE tasks SET total_at = now() - interval '10 seconds' WHERE id = $1", task["id"])
        [run] = await conn.fetch("SELECT id FROM executions ORDER BY created_at DESC LIMIT 1")
        await conn.execute("UPDATE executions SET timeout_at = now() - interval '10 seconds' WHERE id = $1", run["id"])
    assert value(await published(pool), "sluiceway_timers_overdue") == 2
    before = scrape()
    await sweep(pool, 500, loops.report_sweep)
    await settle(pool)  # the run's timeout is the decider's to apply
    after = await published(pool)
    assert added(before, after, "sluiceway_timers_fired_total", deadline="timeoutSeconds") == 1, "the task's"
    assert value(after, "sluiceway_timers_overdue") == 0, "the sweeper and the decider caught up"


async def test_quarantined_runs_are_counted_and_gauged_by_namespace(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    await define_workflow(pool, "poisoned", [{"name": "job", "taskReferenceName": "j"}])
    async with pool.acquire() as conn:
        await conn.execute(
            'UPDATE workflow_versions SET spec = \'{"tasks": "not a list"}\' WHERE namespace = $1 AND name = $2',
            NS,
            "poisoned",
        )
    before = scrape()
    await start_runs(pool, "poisoned", 2)
    await settle(pool, observed())
    after = await published(pool)
    assert added(before, after, "sluiceway_runs_quarantined_total", namespace=NS) == 2
    assert value(after, "sluiceway_runs_in_quarantine", namespace=NS) == 2
    # Each log line about a quarantine names its run and namespace as JSON fields.
    quarantined = [r for r in caplog.records if "is quarantined" in r.getMessage()]
    assert len(quarantined) == 2
    for record in quarantined:
        line = json.loads(JsonFormatter().format(record))
        assert line["namespace"] == NS and line["workflow"] == "poisoned" and line["run_id"] in record.getMessage()


async def test_dead_letters_are_counted_once_each_from_the_database(pool: asyncpg.Pool) -> None:
    """Whichever replica dead-letters a status, and however often a pass retries
    before its mark, the counter is the store's: one per (run, mirrorSeq)."""
    await define_workflow(pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    [run_id, other] = await start_runs(pool, "one", 2)
    assert value(await published(pool), "sluiceway_outbox_dead_lettered_total", namespace=NS) is None
    refused = mirroring.DeadLetter(run_id, 3, NS, "order-1")
    async with pool.acquire() as a, pool.acquire() as b:  # two replicas, one after the other took over
        await mirroring.mark_mirrored(a, [(run_id, 3, False)], [refused])
        await mirroring.mark_mirrored(b, [(run_id, 3, False)], [refused])
        await mirroring.mark_mirrored(b, [(other, 1, False)], [mirroring.DeadLetter(other, 1, NS, "order-2")])
    assert value(await published(pool), "sluiceway_outbox_dead_lettered_total", namespace=NS) == 2


async def test_only_the_exporting_replica_shows_the_database_metrics(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await start(pool, "one")
    await settle(pool)
    metrics.FROM_THE_DATABASE.withdraw()  # a follower's state
    assert value(scrape(), "sluiceway_database_metrics_exporter") == 0
    stop = asyncio.Event()
    gauges = asyncio.create_task(loops.run_gauges(pool, stop, interval=0.05))
    for _ in range(200):
        if value(scrape(), "sluiceway_database_metrics_exporter") == 1:
            break
        await asyncio.sleep(0.05)
    leading = scrape()
    assert queue(leading, "job", "worker") == {"ready": 1, "delayed": 0, "in_flight": 0}
    stop.set()
    await gauges
    stepped_down = scrape()
    assert value(stepped_down, "sluiceway_database_metrics_exporter") == 0
    assert not any(name.startswith("sluiceway_tasks_ready") for name, _ in stepped_down), "withdrawn with the lead"


async def test_leases_results_and_gate_holds_over_http(plane: Plane) -> None:
    await define_task(plane.pool, "limited", concurrentExecLimit=1)
    await define_workflow(plane.pool, "two", [{"name": "limited", "taskReferenceName": "l"}])
    await start_runs(plane.pool, "two", 2)
    await scheduled(plane.pool, "limited", 2)
    before = await scrape_http(plane)
    async with aiohttp.ClientSession() as http:
        body = {"taskTypes": ["limited"], "workerId": "w", "count": 1, "pollTimeoutSeconds": 0}
        async with http.post(f"{plane.url}/v1/ns/{NS}/tasks/poll", json=body) as response:
            [task] = (await response.json())["tasks"]
        async with http.post(f"{plane.url}/v1/ns/{NS}/tasks/poll", json=body) as response:
            assert (await response.json())["tasks"] == [], "the limit of 1 holds the second run's task back"
        result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED"}
        for status in (200, 409):  # the second time, the task is no longer leased: a stale result
            async with http.post(f"{plane.url}/v1/ns/{NS}/tasks/{task['taskId']}/result", json=result) as response:
                assert response.status == status
    after = await scrape_http(plane)
    assert added(before, after, "sluiceway_tasks_leased_total", namespace=NS, task_type="limited") == 1
    assert added(before, after, "sluiceway_gate_holds_total", control="concurrentExecLimit") == 1
    assert added(before, after, "sluiceway_task_results_total", outcome="COMPLETED") == 1
    assert added(before, after, "sluiceway_task_results_total", outcome="refused_409") == 1
    assert added(before, after, "sluiceway_lease_seconds_count") == 2, "one observation per poll"
    assert added(before, after, "sluiceway_complete_seconds_count") == 2, "one per result request"


async def test_runs_finished_by_workflow_and_status(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "pay", [{"name": "charge", "taskReferenceName": "c"}])
    await start_runs(pool, "pay", 3)
    await settle(pool, observed())
    before = scrape()
    ok, bad, _ = await lease(pool, "charge", 3)
    await report(pool, ok)
    await report(pool, bad, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason="card declined")
    await settle(pool, observed())
    after = scrape()
    labels = {"namespace": NS, "workflow": "pay"}
    assert added(before, after, "sluiceway_runs_finished_total", **labels, status="COMPLETED") == 1
    assert added(before, after, "sluiceway_runs_finished_total", **labels, status="FAILED") == 1
    assert added(before, after, "sluiceway_decisions_total") == 2, "one decision per run with news"


async def test_sla_breaches_by_workflow(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "promise", [{"name": "job", "taskReferenceName": "j"}], slaSeconds=60)
    await start_runs(pool, "promise", 2)
    await settle(pool)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE executions SET sla_at = now() - interval '1 second'")
    before = scrape()
    await sweep(pool, 500, loops.report_sweep)
    await sweep(pool, 500, loops.report_sweep)  # a breach is reported once
    after = scrape()
    assert added(before, after, "sluiceway_workflow_sla_breached_total", namespace=NS, workflow="promise") == 2


async def test_schedule_fires_by_namespace_and_result(pool: asyncpg.Pool) -> None:
    await define_report_workflow(pool)
    now = (await db_now(pool)).replace(microsecond=0)
    fire = now - datetime.timedelta(seconds=1)
    await add_schedule(pool, "nightly", every="1h", offset=f"{int(fire.timestamp()) % 3600}s")
    await rewind(pool, "nightly", fire)
    before = scrape()
    async with pool.acquire() as conn, conn.transaction():
        loops.count_fires(await schedules.fire_due(conn))
    after = scrape()
    assert added(before, after, "sluiceway_schedule_fires_total", namespace="team-s", result="started") == 1


async def test_pool_connections_in_use_and_idle(pool: asyncpg.Pool) -> None:
    metrics.POOL.usage = pool.usage
    try:
        async with pool.acquire(), pool.acquire():  # two held by this test
            samples = scrape()
            in_use = value(samples, "sluiceway_db_pool_connections", state="in_use")
            idle = value(samples, "sluiceway_db_pool_connections", state="idle")
        assert in_use == 2 and idle is not None and idle >= 0
        assert value(samples, "sluiceway_db_pool_max_connections") == 20, "the fixture's max_size"
        assert value(scrape(), "sluiceway_db_pool_connections", state="in_use") == 0, "given back"
    finally:
        metrics.POOL.usage = None
