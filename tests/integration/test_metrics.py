"""Every metric's value, not just its name: each test drives a real PostgreSQL
into a known state and reads the number back from a scrape, parsed with
prometheus_client's own text parser.

Counters live in the process-wide registry and other tests move them too, so
counter tests assert what one action added; the gauges read from the database
are absolute (each test has its own database)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import aiohttp
import asyncpg
import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sluiceway.controls.webhooks import signed_headers
from sluiceway.model.execution import MAX_QUEUED_MESSAGES, ResultStatus
from sluiceway.model.trigger import TriggerSpec
from sluiceway.observability import metrics
from sluiceway.observability.logs import JsonFormatter
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.plane import events as publishing
from sluiceway.runtime import loops
from sluiceway.store import mirroring, schedules, triggers, webhooks
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.sweeping import sweep
from tests.integration.test_schedules import add_schedule, db_now, rewind
from tests.integration.test_schedules import define_workflow as define_report_workflow
from tests.integration.test_waiting_tasks import call, send, waiting
from tests.support.plane import Plane, post
from tests.support.store import (
    NS,
    define_task,
    define_workflow,
    fetchval,
    lease,
    report,
    scheduled,
    settle,
    start,
    start_runs,
)
from tests.support.waiting import eventually_async

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


async def running_loop(loop: Coroutine[Any, Any, None], until: Callable[[], bool], what: str) -> None:
    """Run a background loop of the operator until `until()` holds, then stop it."""
    task = asyncio.create_task(loop)

    async def probe() -> bool:
        return until() or task.done()

    try:
        await eventually_async(probe, timeout=20, what=what)
        assert not task.done(), "the loop ended on its own"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_decide_batch_seconds_observes_each_pass_that_decided(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "three", [{"name": "job", "taskReferenceName": "j"}])
    await start_runs(pool, "three", 3)  # queued before the decider starts: one pass takes all three
    before = scrape()
    started = time.perf_counter()
    await running_loop(
        loops.run_decider(pool, None, DeciderConfig(), asyncio.Event()),
        lambda: added(before, scrape(), "sluiceway_decisions_total") >= 3,
        "the decider to decide the three runs",
    )
    elapsed = time.perf_counter() - started
    await scheduled(pool, "job", 3)
    after = scrape()
    assert added(before, after, "sluiceway_decide_batch_seconds_count") == 1, "one pass, one observation"
    spent = added(before, after, "sluiceway_decide_batch_seconds_sum")
    assert 0 < spent <= elapsed, (spent, elapsed)
    assert added(before, after, "sluiceway_decisions_total") == 3


async def test_loop_failures_count_a_pass_that_raised_and_the_loop_goes_on(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler's report hook raises on its first pass (a bug, not the
    database): one failed pass, counted by loop; the loop goes on."""
    monkeypatch.setattr(loops, "_FAILED_PASS_PAUSE", 0.05)
    # An idle scheduler makes no pass, so three schedules are due, one per pass (batch=1).
    await define_report_workflow(pool)
    fire = (await db_now(pool)).replace(microsecond=0) - datetime.timedelta(seconds=1)
    for name in ("first", "second", "third"):
        await add_schedule(pool, name, every="1h", offset=f"{int(fire.timestamp()) % 3600}s")
        await rewind(pool, name, fire)
    passes: list[schedules.PassReport] = []

    def flaky(report: schedules.PassReport) -> None:
        passes.append(report)
        if len(passes) == 1:
            raise RuntimeError("a bug in a hook")

    before = scrape()
    await running_loop(
        loops.run_scheduler(ExecutionPlane(pool), asyncio.Event(), on_report=flaky, batch=1),
        lambda: len(passes) >= 3,
        "two more scheduler passes after the failed one",
    )
    after = scrape()
    assert added(before, after, "sluiceway_loop_failures_total", loop="scheduler") == 1
    assert added(before, after, "sluiceway_loop_failures_total", loop="decider") == 0


async def test_timeout_alerts_count_deadlines_missed_under_alert_only(pool: asyncpg.Pool) -> None:
    await define_task(pool, "watched", timeoutSeconds=600, timeoutPolicy="ALERT_ONLY")
    await define_workflow(pool, "two", [{"name": "watched", "taskReferenceName": "w"}])
    await start_runs(pool, "two", 2)
    await settle(pool)
    await lease(pool, "watched", 2)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE tasks SET total_at = now() - interval '1 second' WHERE name = 'watched'")
    before = scrape()
    await sweep(pool, 500, loops.report_sweep)
    await sweep(pool, 500, loops.report_sweep)  # the missed deadline is disarmed: alerted once
    after = scrape()
    assert added(before, after, "sluiceway_timeout_alerts_total", task_type="watched", deadline="timeoutSeconds") == 2
    assert added(before, after, "sluiceway_timers_fired_total", deadline="timeoutSeconds") == 0, "nothing ended"
    async with pool.acquire() as conn:
        statuses = await conn.fetch("SELECT status FROM tasks WHERE name = 'watched'")
    assert [r["status"] for r in statuses] == ["IN_PROGRESS", "IN_PROGRESS"], "ALERT_ONLY: the tasks go on"


async def test_schedule_lag_missed_and_skipped_fires(pool: asyncpg.Pool) -> None:
    """An hourly Skip schedule whose last fire was 2 s ago starts a run (its
    lag observed). Rewound five hours (an outage) with a two-hour catch-up
    window: the 4 fires from 5 to 2 hours ago are older than the window,
    missed; the one an hour ago is inside it, skipped (the first run still
    runs); the fire 2 s ago already ran."""
    await define_report_workflow(pool)
    now = (await db_now(pool)).replace(microsecond=0)
    fire = now - datetime.timedelta(seconds=2)
    offset = f"{int(fire.timestamp()) % 3600}s"
    await add_schedule(pool, "hourly", every="1h", offset=offset, overlapPolicy="Skip", catchupWindowSeconds=7200)
    await rewind(pool, "hourly", fire)
    before = scrape()
    async with pool.acquire() as conn, conn.transaction():
        loops.count_fires(await schedules.fire_due(conn))
    after = scrape()
    assert added(before, after, "sluiceway_schedule_fires_total", namespace="team-s", result="started") == 1
    assert added(before, after, "sluiceway_schedule_lag_seconds_count") == 1
    lag = added(before, after, "sluiceway_schedule_lag_seconds_sum")
    assert 2 <= lag < 30, lag
    assert added(before, after, "sluiceway_schedule_lag_seconds_bucket", le="1.0") == 0, "2 s late, not under 1 s"

    await rewind(pool, "hourly", fire - datetime.timedelta(hours=5))
    before = scrape()
    async with pool.acquire() as conn, conn.transaction():
        loops.count_fires(await schedules.fire_due(conn))
    after = scrape()
    assert added(before, after, "sluiceway_schedule_missed_total", namespace="team-s") == 4
    assert added(before, after, "sluiceway_schedule_skipped_total", namespace="team-s") == 1
    assert added(before, after, "sluiceway_schedule_fires_total", namespace="team-s", result="skipped") == 1
    assert added(before, after, "sluiceway_schedule_fires_total", namespace="team-s", result="started") == 0
    assert added(before, after, "sluiceway_schedule_lag_seconds_count") == 0, "lag is measured on started runs"


async def test_runs_and_tasks_purged_by_the_purger_loop(pool: asyncpg.Pool) -> None:
    await define_workflow(
        pool, "pair", [{"name": "a", "taskReferenceName": "a"}, {"name": "b", "taskReferenceName": "b"}]
    )
    await start_runs(pool, "pair", 3)
    await settle(pool)
    for task_type in ("a", "b"):
        for leased in await lease(pool, task_type, 3):
            await report(pool, leased)
        await settle(pool)
    async with pool.acquire() as conn:
        # Two of the three finished runs are past their retention.
        await conn.execute(
            "UPDATE executions SET expires_at = now() - interval '1 second'"
            " WHERE id IN (SELECT id FROM executions WHERE status = 'COMPLETED' ORDER BY id LIMIT 2)"
        )
    before = scrape()
    await running_loop(
        loops.run_purger(pool, asyncio.Event(), batch=100, interval=60, idempotency_window=86400),
        lambda: added(before, scrape(), "sluiceway_runs_purged_total") > 0,
        "the purger's first pass",
    )
    after = scrape()
    assert added(before, after, "sluiceway_runs_purged_total") == 2
    assert added(before, after, "sluiceway_tasks_purged_total") == 4, "two tasks each"
    assert await fetchval(pool, "SELECT count(*) FROM executions") == 1


async def test_chain_timeouts_count_chains_past_their_deadline(plane: Plane) -> None:
    """A loop whose first link still waits when its 1 s chainTimeoutSeconds
    passes, on the plane's own decider (its hooks are the operator's)."""
    tasks = [
        {"name": "pause", "taskReferenceName": "pause", "type": "WAIT", "inputParameters": {"duration": "5s"}},
        {"name": "again", "taskReferenceName": "again", "type": "CONTINUE_AS_NEW", "inputParameters": {"input": {}}},
    ]
    await define_workflow(plane.pool, "poller", tasks, timeoutSeconds=60, chainTimeoutSeconds=1)
    await define_workflow(plane.pool, "slow", [{"name": "job", "taskReferenceName": "j"}], timeoutSeconds=1)
    before = await scrape_http(plane)
    await start(plane.pool, "poller")
    await start(plane.pool, "slow")  # its own timeoutSeconds: a run timeout, not a chain's

    async def timed_out() -> bool:
        found = await fetchval(plane.pool, "SELECT count(*) FROM executions WHERE status = 'TIMED_OUT'")
        return bool(found == 2)

    await eventually_async(timed_out, timeout=20, what="the chain and the slow run to time out")
    after = await scrape_http(plane)
    assert added(before, after, "sluiceway_chain_timeouts_total") == 1
    timed = {"namespace": NS, "status": "TIMED_OUT"}
    assert added(before, after, "sluiceway_runs_finished_total", workflow="poller", **timed) == 1
    assert added(before, after, "sluiceway_runs_finished_total", workflow="slow", **timed) == 1


async def test_human_decisions_by_decision(plane: Plane) -> None:
    approval = [{"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"}]
    await define_workflow(plane.pool, "refund", approval)
    before = await scrape_http(plane)
    runs = [await start(plane.pool, "refund") for _ in range(3)]
    tasks = [(await waiting(plane.pool, run_id, "approve"))["id"] for run_id in runs]
    for task_id, verb, body in [
        (tasks[0], "complete", {"output": {"ok": True}}),
        (tasks[1], "complete", {}),
        (tasks[2], "reject", {"reason": "amount looks wrong"}),
        (tasks[2], "complete", {}),  # 409: decided already, not counted
    ]:
        await post(plane, f"/v1/ns/{NS}/tasks/{task_id}/{verb}", body)
    after = await scrape_http(plane)
    assert added(before, after, "sluiceway_human_decisions_total", decision="COMPLETED") == 2
    assert added(before, after, "sluiceway_human_decisions_total", decision="FAILED_WITH_TERMINAL_ERROR") == 1


async def test_run_messages_queued_and_refused(plane: Plane) -> None:
    await define_workflow(plane.pool, "quiet", [{"name": "nobody", "taskReferenceName": "never"}])
    run_id = await start(plane.pool, "quiet")
    before = await scrape_http(plane)
    for n in range(3):
        assert (await send(plane, run_id, {"n": n}))[0] == 202
    async with plane.pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO run_messages (execution_id, payload, bytes) SELECT $1::uuid, to_jsonb(n), 1"
            " FROM generate_series(1, $2::int - 3) n",
            run_id,
            MAX_QUEUED_MESSAGES,
        )
    assert (await send(plane, run_id, "one too many"))[0] == 429
    after = await scrape_http(plane)
    assert added(before, after, "sluiceway_run_messages_total", outcome="queued") == 3
    assert added(before, after, "sluiceway_run_messages_total", outcome="refused") == 1


async def test_webhook_calls_refused_matched_and_unmatched(plane: Plane) -> None:
    async with plane.pool.acquire() as conn:
        await webhooks.upsert(conn, NS, "paid", "paid", 1, {"hmac": {"secretRef": {"name": "hooks", "key": "k"}}})
    plane.secrets.secrets[(NS, "hooks")] = {"k": b"whsec-metrics"}
    waits = {"name": "wait", "taskReferenceName": "paid", "type": "WAIT_FOR_WEBHOOK", "webhook": "paid"}
    await define_workflow(plane.pool, "checkout", [waits | {"inputParameters": {"matches": {"order": 1}}}])
    run_id = await start(plane.pool, "checkout")
    await waiting(plane.pool, run_id, "paid")
    body = json.dumps({"order": 1}).encode()
    path = f"/v1/ns/{NS}/webhooks/paid"
    before = await scrape_http(plane)
    for secret, expected in [(b"forged", 401), (b"whsec-metrics", 200), (b"whsec-metrics", 200)]:
        status, _ = await call(plane, path, body, signed_headers(secret, int(time.time()), body))
        assert status == expected
    after = await scrape_http(plane)
    assert added(before, after, "sluiceway_webhook_calls_total", outcome="refused") == 1
    assert added(before, after, "sluiceway_webhook_calls_total", outcome="matched") == 1
    assert added(before, after, "sluiceway_webhook_calls_total", outcome="unmatched") == 1, "the task completed once"


async def test_trigger_outcomes_count_each_trigger_s_verdict(plane: Plane) -> None:
    await define_workflow(plane.pool, "ship", [{"name": "pack", "taskReferenceName": "pack"}])
    async with plane.pool.acquire() as conn:
        for name, condition in (("every-order", None), ("big-orders", "event.payload.total > 100")):
            spec = TriggerSpec.model_validate({"event": "order", "workflow": "ship", "condition": condition})
            await triggers.upsert(conn, NS, name, name, 1, spec)
    before = await scrape_http(plane)
    for event in ("order", "order", "nobody-listens"):
        status, _ = await call(plane, f"/v1/ns/{NS}/events/{event}", b'{"total": 5}', {"Idempotency-Key": "o-1"})
        assert status == 202
    after = await scrape_http(plane)
    counted = {o: added(before, after, "sluiceway_trigger_outcomes_total", outcome=o) for o in publishing.OUTCOMES}
    assert counted == {"started": 1, "duplicate": 1, "filtered": 2, "refused": 0, "invalid": 0, "unmatched": 1}
