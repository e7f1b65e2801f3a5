"""Operating a big history: list pages, dispatch and purge with a million
finished runs stored.

1. Fill: a million finished runs (with a task and two search attributes
   each) written straight into the store, spread over 30 days, in the shapes
   people search by (ten workflows, 5% FAILED, 1% past their SLA, a
   correlation id on one in ten, a hundred tenants).
2. Pages: the latency of `GET /v1/ns/{ns}/executions` through one operator
   process, first page and deep in the history (by cursor), for each filter,
   with the plan PostgreSQL chose and its own execution time.
3. Dispatch: N one-task runs drained by M SDK worker processes through the
   API, with the million runs in the tables.
4. Purge: every finished run expired at once; the operator's purger deletes
   them (its default batch of 500) while the same dispatch runs again, so the
   rate printed is dispatch during the purge, and the purge's own throughput.

No test fails on these figures: they are measurements (bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import throughput  # noqa: E402

from sluiceway.controls.attributes import Op, TypedFilter  # noqa: E402
from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.devenv.processes import Child  # noqa: E402
from sluiceway.model.attributes import AttributeType  # noqa: E402
from sluiceway.model.execution import RunStatus  # noqa: E402
from sluiceway.plane.finding import Order, encode_cursor  # noqa: E402
from sluiceway.store import executions, listing, workflows  # noqa: E402
from sluiceway.store.database import open_pool  # noqa: E402

NS = "bench"
DAY = 86_400

_FILL = """
WITH made AS (
    INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, correlation_id, created_at,
                            ended_at, sla_breached_at, sla_seconds, evaluated, mirror_seq, mirrored_seq)
    SELECT gen_random_uuid(), $1, 'wf-' || (i % 10), 1,
           CASE WHEN i % 100 = 0 THEN 'TIMED_OUT' WHEN i % 20 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
           CASE WHEN i % 10 = 0 THEN 'order-' || i END,
           now() - make_interval(secs => ($3 - i) * $4::float8) - interval '1 hour',
           now() - make_interval(secs => ($3 - i) * $4::float8) - interval '59 minutes',
           CASE WHEN i % 100 = 1 THEN now() END, 600, true, 1, 1
      FROM generate_series($2, $3 - 1) AS i
    RETURNING id, created_at, ended_at, status
), tasks_made AS (
    INSERT INTO tasks (id, execution_id, namespace, ref, type, executor, name, attempt, status, first_scheduled_at,
                       available_at, created_at, leased_at, ended_at, worker_id)
    SELECT gen_random_uuid(), id, $1, 'step', 'SIMPLE', 'worker', 'step', 1,
           CASE WHEN status = 'COMPLETED' THEN 'COMPLETED' ELSE 'FAILED' END,
           created_at, created_at, created_at, created_at, ended_at, 'worker-' || (abs(hashtext(id::text)) % 20)
      FROM made
)
INSERT INTO run_attributes (run_id, name, namespace, created_at, type, keyword, double_value)
SELECT id, 'tenant', $1, created_at, 'keyword', 'tenant-' || (abs(hashtext(id::text)) % 100), NULL FROM made
UNION ALL
SELECT id, 'amount', $1, created_at, 'double', NULL, (abs(hashtext(id::text || 'a')) % 100000) / 100.0 FROM made
"""

SHAPES: list[tuple[str, dict[str, Any], listing.RunFilter]] = [
    ("every run", {}, listing.RunFilter()),
    ("one workflow", {"workflow": "wf-3"}, listing.RunFilter(workflow="wf-3")),
    ("status FAILED", {"status": "FAILED"}, listing.RunFilter(statuses=(RunStatus.FAILED,))),
    (
        "FAILED or TIMED_OUT, last day",
        {"status": "FAILED,TIMED_OUT", "startedAfter": "-1d"},
        listing.RunFilter(statuses=(RunStatus.FAILED, RunStatus.TIMED_OUT)),
    ),
    ("a correlation id", {"correlationId": "order-500000"}, listing.RunFilter(correlation_id="order-500000")),
    ("SLA breached", {"slaBreached": "true"}, listing.RunFilter(sla_breached=True)),
    (
        "tenant=tenant-7",
        {"searchAttribute": "tenant=tenant-7"},
        listing.RunFilter(attributes=(TypedFilter("tenant", AttributeType.KEYWORD, Op.EQ, ("tenant-7",)),)),
    ),
    (
        "amount>=999 (0.1%)",
        {"searchAttribute": "amount>=999"},
        listing.RunFilter(attributes=(TypedFilter("amount", AttributeType.DOUBLE, Op.GE, (999.0,)),)),
    ),
]


async def fill(dsn: str, runs: int, chunk: int = 100_000) -> None:
    pool = await open_pool(dsn, max_size=2)
    started = time.monotonic()
    async with pool.acquire() as conn:
        for name in [f"wf-{i}" for i in range(10)] + ["noop_wf"]:
            spec: dict[str, Any] = {
                "tasks": [{"name": "noop" if name == "noop_wf" else "step", "taskReferenceName": "step"}]
            }
            if name == "wf-3":
                spec["searchAttributes"] = [{"name": "tenant", "type": "keyword"}, {"name": "amount", "type": "double"}]
            await workflows.upsert_workflow(conn, NS, name, name.replace("_", "-"), 1, spec)
        spread = 30 * DAY / runs
        for first in range(0, runs, chunk):
            await conn.execute(_FILL, NS, first, min(first + chunk, runs), spread)
            print(f"  {min(first + chunk, runs):>9,} runs stored ({time.monotonic() - started:.0f} s)", flush=True)
        await conn.execute("VACUUM ANALYZE")
        # The fill leaves gigabytes of dirty pages; a measurement must not pay for writing them out.
        await conn.execute("CHECKPOINT")
        sizes = await conn.fetch(
            "SELECT relname, pg_size_pretty(pg_total_relation_size(oid)) AS size FROM pg_class "
            "WHERE relname IN ('executions', 'tasks', 'run_attributes') ORDER BY relname"
        )
    await pool.close()
    print(f"  filled in {time.monotonic() - started:.0f} s: " + ", ".join(f"{r['relname']} {r['size']}" for r in sizes))


def get(url: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = json.loads(response.read())
    return time.perf_counter() - started, body


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def plan_of(dsn: str, shape: listing.RunFilter, after: listing.Position | None) -> str:
    """The plan's scan nodes and PostgreSQL's own execution time, in one line."""
    pool = await open_pool(dsn, min_size=1, max_size=1)
    sql, args = listing.runs_query(NS, shape, after, 50)
    async with pool.acquire() as conn:
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
    await pool.close()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    nodes: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        kind = node["Node Type"]
        if "Index Name" in node:
            kind += f" {node['Index Name']}"
        nodes.append(kind)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    return f"{plan['Execution Time']:.2f} ms in PostgreSQL: " + " > ".join(nodes)


async def deep_position(dsn: str, runs: int) -> str | None:
    """A cursor half-way through the history, as a client paging that far would hold."""
    pool = await open_pool(dsn, min_size=1, max_size=1)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT created_at, id FROM executions WHERE namespace = $1"
            " ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1",
            NS,
            runs // 2,
        )
    await pool.close()
    return encode_cursor(listing.Position(row["created_at"], row["id"]), Order.NEWEST) if row else None


async def pages(dsn: str, api: str, repeat: int, runs: int) -> None:
    deep = await deep_position(dsn, runs)
    print(f"  {'filter':<32} {'first page p50/p95':>20} {'deep page p50/p95':>20}   rows")
    for label, params, shape in SHAPES:
        query = {"limit": 50, **params}
        if query.get("startedAfter") == "-1d":
            query["startedAfter"] = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)).isoformat()
        url = f"{api}/v1/ns/{NS}/executions?" + urllib.parse.urlencode(query)
        first = [get(url)[0] for _ in range(repeat)]
        rows = len(get(url)[1]["items"])
        deep_times = [get(f"{url}&cursor={deep}")[0] for _ in range(repeat)] if deep else [0.0]
        print(
            f"  {label:<32} {percentile(first, 0.5) * 1000:8.1f} /{percentile(first, 0.95) * 1000:7.1f} ms"
            f" {percentile(deep_times, 0.5) * 1000:8.1f} /{percentile(deep_times, 0.95) * 1000:7.1f} ms   {rows}"
        )
        print(f"    plan: {await plan_of(dsn, shape, None)}")
    tasks = [get(f"{api}/v1/ns/{NS}/tasks?limit=50&workerId=worker-7")[0] for _ in range(repeat)]
    print(
        f"  {'tasks of one worker':<32} {percentile(tasks, 0.5) * 1000:8.1f} /{percentile(tasks, 0.95) * 1000:7.1f} ms"
    )


async def dispatch(dsn: str, api: str, tasks: int, workers: int, batch: int, logs: Path) -> float:
    """Start `tasks` one-task runs and drain them with worker processes; tasks/s."""
    pool = await open_pool(dsn, max_size=2)
    async with pool.acquire() as conn:
        await conn.execute(
            "WITH runs AS (INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
            " SELECT gen_random_uuid(), $1, 'noop_wf', 1, 'RUNNING' FROM generate_series(1, $2) RETURNING id)"
            " INSERT INTO decide_queue (execution_id, event) SELECT id, 'started' FROM runs",
            NS,
            tasks,
        )
        await executions.notify_decider(conn)
    await pool.close()
    remaining = (
        "SELECT (SELECT count(*) FROM executions WHERE namespace = 'bench' AND workflow_name = 'noop_wf'"
        " AND status = 'RUNNING')"
    )
    watcher = asyncio.create_task(throughput.watch_drain(dsn, remaining, tasks, 900))
    env = {**os.environ, "BENCH_BATCH": str(batch)}
    children = [
        Child(
            f"worker-{n}-{time.monotonic_ns()}",
            [
                sys.executable,
                "-m",
                "sluiceway",
                "worker",
                str(HERE / "noop_worker.py"),
                "--url",
                api,
                "--namespace",
                NS,
                "--log-level",
                "WARNING",
            ],
            logs,
            env=env,
        )
        for n in range(workers)
    ]
    try:
        drained, _ = await watcher
    finally:
        for child in children:
            child.stop()
    return tasks / drained


# The indexes migration 0010 adds for pages: what they cost dispatch is
# measured by dropping them for one drain (--index-cost).
PAGE_INDEXES = (
    "executions_page",
    "executions_page_workflow",
    "executions_page_status",
    "executions_page_correlation",
    "executions_page_ended",
    "executions_page_sla",
    "executions_page_awaiting",
    "executions_page_paused",
    "executions_expiry",
    "tasks_page",
    "tasks_page_type",
    "tasks_page_worker",
    "tasks_page_failed",
)


async def index_cost(dsn: str, api: str, tasks: int, workers: int, batch: int, logs: Path) -> None:
    pool = await open_pool(dsn, min_size=1, max_size=1)
    async with pool.acquire() as conn:
        definitions = [
            r["indexdef"]
            for r in await conn.fetch("SELECT indexdef FROM pg_indexes WHERE indexname = ANY($1)", list(PAGE_INDEXES))
        ]
        for name in PAGE_INDEXES:
            await conn.execute(f"DROP INDEX IF EXISTS {name}")
    without = await dispatch(dsn, api, tasks, workers, batch, logs)
    async with pool.acquire() as conn:
        for definition in definitions:
            await conn.execute(definition)
    with_them = await dispatch(dsn, api, tasks, workers, batch, logs)
    await pool.close()
    print(
        f"  without the {len(definitions)} page indexes: {without:8.0f} runs/s; "
        f"with them again: {with_them:8.0f} runs/s"
    )


async def purge(dsn: str, api: str, tasks: int, workers: int, batch: int, logs: Path, share: str) -> None:
    pool = await open_pool(dsn, max_size=2)
    async with pool.acquire() as conn:
        started = time.monotonic()
        expired = await conn.execute(
            "UPDATE executions SET expires_at = now() - interval '1 second' WHERE status <> 'RUNNING'"
        )
        print(f"  {expired.split()[-1]} finished runs expired at once ({time.monotonic() - started:.0f} s to mark)")
        total = int(await conn.fetchval("SELECT count(*) FROM executions WHERE expires_at <= now()"))
    await pool.close()
    began = time.monotonic()
    during = await dispatch(dsn, api, tasks, workers, batch, logs)
    pool = await open_pool(dsn, min_size=1, max_size=1)
    async with pool.acquire() as conn:
        # Runs the dispatch just completed expire in 30 days: they are not part of the purge.
        expired = "SELECT count(*) FROM executions WHERE expires_at <= now()"
        left_after_dispatch = int(await conn.fetchval(expired))
        while True:
            left = int(await conn.fetchval(expired))
            if left == 0:
                break
            await asyncio.sleep(2)
        tasks_left = int(await conn.fetchval("SELECT count(*) FROM tasks WHERE name = 'step'"))
    await pool.close()
    seconds = time.monotonic() - began
    deleted_during = total - left_after_dispatch
    print(f"  dispatch during the purge: {during:8.0f} runs/s ({deleted_during:,} runs deleted meanwhile)")
    print(
        f"  purge: {total:,} runs (and their tasks and attributes) in {seconds:.0f} s = {total / seconds:,.0f} runs/s"
        f" with one operator process (batch 500, SLUICEWAY_PURGE_SHARE {share});"
        f" {tasks_left} tasks of them left"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=20_000, help="runs drained to measure dispatch")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20, help="requests per page measured")
    parser.add_argument("--index-cost", action="store_true", help="also drain once without the page indexes")
    parser.add_argument("--purge-share", default="0.25", help="SLUICEWAY_PURGE_SHARE of the operator")
    args = parser.parse_args()
    with LocalPostgres(durable=True, settings={"max_connections": "300"}) as server:
        print(f"PostgreSQL (embedded, fsync on), {os.cpu_count()} cores shared by everything")
        dsn = await throughput.create_database(server.dsn, "runs")
        print(f"1. storing {args.runs:,} finished runs")
        await fill(dsn, args.runs)
        logs = Path(tempfile.mkdtemp(prefix="bench-runs-"))
        plane = throughput.start_operator(
            dsn, logs, timeout=120, SLUICEWAY_PURGE_INTERVAL="1", SLUICEWAY_PURGE_SHARE=args.purge_share
        )
        operator, api = plane.child, plane.url
        try:
            print(f"2. list pages (limit 50), {args.repeat} requests each, through the API")
            await pages(dsn, api, args.repeat, args.runs)
            print(f"3. dispatch with {args.runs:,} finished runs stored")
            await dispatch(dsn, api, args.tasks // 4, args.workers, args.batch, logs)  # a warm-up, not reported
            rates = [await dispatch(dsn, api, args.tasks, args.workers, args.batch, logs) for _ in range(2)]
            print(
                f"  {args.tasks} one-task runs started and completed, {args.workers} workers x batch {args.batch}: "
                + ", ".join(f"{rate:.0f}" for rate in rates)
                + " runs/s (two drains after a warm-up)"
            )
            if args.index_cost:
                await index_cost(dsn, api, args.tasks, args.workers, args.batch, logs)
            print("4. purge")
            await purge(dsn, api, args.tasks, args.workers, args.batch, logs, args.purge_share)
        finally:
            operator.stop()


if __name__ == "__main__":
    asyncio.run(main())
