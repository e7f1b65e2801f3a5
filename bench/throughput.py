"""Throughput: PostgreSQL's own ceiling, Sluiceway, and pgqueuer, in one run.

Prints tasks/s for each and Sluiceway's ratios to the other two. See
bench/README.md for what is measured and how."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child, free_port, wait_until
from sluiceway.store import workflows
from sluiceway.store.database import open_pool
from sluiceway.store.deciding import DeciderConfig, decide_batch

HERE = Path(__file__).resolve().parent
NS = "bench"


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def postgres_pids() -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,comm"], capture_output=True, text=True).stdout.splitlines()[1:]
    return [int(line.split()[0]) for line in out if line.split()[1] == "postgres"]


async def create_database(server_dsn: str, name: str) -> str:
    conn = await asyncpg.connect(server_dsn)
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    return server_dsn.rsplit("/", 1)[0] + f"/{name}"


async def watch_drain(dsn: str, remaining_sql: str, total: int, timeout: float) -> tuple[float, float]:
    """Poll the remaining work; return (seconds from first progress to empty, first-progress time)."""
    conn = await asyncpg.connect(dsn)
    started: float | None = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            left = int(await conn.fetchval(remaining_sql))
            now = time.monotonic()
            if started is None and left < total:
                started = now
            if left == 0:
                return now - (started or now), started or now
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    raise TimeoutError(f"not drained within {timeout} s")


# -- 1. the PostgreSQL ceiling ------------------------------------------------------

CEILING_SQL = """
BEGIN;
WITH claimed AS (
    SELECT id FROM bench_jobs WHERE status = 'ready' ORDER BY id LIMIT {batch} FOR UPDATE SKIP LOCKED
)
UPDATE bench_jobs j SET status = 'done', done_at = now() FROM claimed WHERE j.id = claimed.id;
END;
"""


async def ceiling(server_dsn: str, jobs: int, batch: int, clients: int, seconds: int) -> float:
    dsn = await create_database(server_dsn, f"ceiling_{batch}")
    conn = await asyncpg.connect(dsn)
    await conn.execute(
        "CREATE TABLE bench_jobs (id bigserial PRIMARY KEY, status text NOT NULL, payload jsonb, done_at timestamptz)"
    )
    await conn.execute("CREATE INDEX ON bench_jobs (id) WHERE status = 'ready'")
    await conn.execute(
        "INSERT INTO bench_jobs (status, payload) SELECT 'ready', '{}' FROM generate_series(1, $1)", jobs
    )
    await conn.close()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(CEILING_SQL.format(batch=batch))
    result = subprocess.run(
        ["pgbench", "-n", "-c", str(clients), "-j", "2", "-T", str(seconds), "-f", script.name, dsn],
        capture_output=True,
        text=True,
        check=True,
    )
    os.unlink(script.name)
    tps = next(float(line.split("=")[1].split()[0]) for line in result.stdout.splitlines() if line.startswith("tps ="))
    return tps * batch


# -- 2. Sluiceway --------------------------------------------------------------------


async def sluiceway(server_dsn: str, tasks: int, workers: int, batch: int, timeout: float) -> tuple[float, float]:
    dsn = await create_database(server_dsn, "sluiceway")
    pool = await open_pool(dsn, max_size=8)
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(
            conn, NS, "noop_wf", "noop-wf", 1, {"tasks": [{"name": "noop", "taskReferenceName": "noop"}]}
        )
        version = await conn.fetchval("SELECT latest_version FROM workflows WHERE name = 'noop_wf'")
        # Start N runs in bulk, as N API calls would, then let the decider queue their tasks.
        await conn.execute(
            "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
            " SELECT gen_random_uuid(), $1, 'noop_wf', $2, 'RUNNING' FROM generate_series(1, $3)",
            NS,
            version,
            tasks,
        )
        await conn.execute("INSERT INTO decide_queue (execution_id, event) SELECT id, 'started' FROM executions")
    config = DeciderConfig(batch_size=500)
    while await decide_batch(pool, config):
        pass
    async with pool.acquire() as conn:
        queued = await conn.fetchval("SELECT count(*) FROM tasks WHERE status = 'SCHEDULED'")
        await conn.execute("VACUUM ANALYZE")
    assert queued == tasks, f"expected {tasks} queued tasks, found {queued}"
    await pool.close()

    logs = Path(tempfile.mkdtemp(prefix="bench-"))
    port = free_port()
    env = {
        **os.environ,
        "SLUICEWAY_DATABASE_URL": dsn,
        "SLUICEWAY_KUBERNETES": "false",
        "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
        "SLUICEWAY_LOG_LEVEL": "WARNING",
        "BENCH_BATCH": str(batch),
    }
    operator = Child("operator", [sys.executable, "-m", "sluiceway", "operator"], logs, env=env)
    children = [operator]
    try:
        import urllib.request

        wait_until(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200,
            timeout=60,
            what="the operator",
            child=operator,
        )
        watcher = asyncio.create_task(
            watch_drain(
                dsn,
                "SELECT (SELECT count(*) FROM tasks WHERE status = 'SCHEDULED' AND executor = 'worker')"
                " + (SELECT count(*) FROM tasks WHERE status = 'IN_PROGRESS' AND executor = 'worker')",
                tasks,
                timeout,
            )
        )
        cpu_before = (cpu_seconds([operator.process.pid]), cpu_seconds(postgres_pids()))
        for n in range(workers):
            children.append(
                Child(
                    f"worker-{n}",
                    [
                        sys.executable,
                        "-m",
                        "sluiceway",
                        "worker",
                        str(HERE / "noop_worker.py"),
                        "--url",
                        f"http://127.0.0.1:{port}",
                        "--namespace",
                        NS,
                        "--log-level",
                        "WARNING",
                    ],
                    logs,
                    env=env,
                )
            )
        drained, started = await watcher
        runs_done = await watch_drain(dsn, "SELECT count(*) FROM executions WHERE status = 'RUNNING'", tasks, timeout)
        runs_seconds = drained + max(0.0, runs_done[1] + runs_done[0] - (started + drained))
        cpu = (
            cpu_seconds([operator.process.pid]) - cpu_before[0],
            cpu_seconds([c.process.pid for c in children[1:]]),
            cpu_seconds(postgres_pids()) - cpu_before[1],
        )
        print(
            f"    CPU seconds per 1000 tasks: operator {cpu[0] / tasks * 1000:.2f}, workers "
            f"{cpu[1] / tasks * 1000:.2f}, postgres {cpu[2] / tasks * 1000:.2f} "
            f"(wall {runs_seconds / tasks * 1000:.2f} s per 1000 runs)"
        )
    finally:
        for child in children:
            child.stop()
    return tasks / drained, tasks / runs_seconds


# -- 3. pgqueuer -----------------------------------------------------------------------


async def pgqueuer(server_dsn: str, jobs: int, workers: int, batch: int, timeout: float) -> float:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    dsn = await create_database(server_dsn, "pgqueuer")
    conn = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(conn))
    await queries.install()
    for start in range(0, jobs, 1000):
        size = min(1000, jobs - start)
        await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
    await conn.execute("VACUUM ANALYZE")
    await conn.close()
    logs = Path(tempfile.mkdtemp(prefix="bench-pgq-"))
    watcher = asyncio.create_task(watch_drain(dsn, "SELECT count(*) FROM pgqueuer", jobs, timeout))
    children = [
        Child(f"pgq-{n}", [sys.executable, str(HERE / "pgqueuer_drain.py"), dsn, str(batch)], logs)
        for n in range(workers)
    ]
    try:
        drained, _ = await watcher
    finally:
        for child in children:
            child.stop()
    return jobs / drained


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2, help="worker processes, for Sluiceway and pgqueuer alike")
    parser.add_argument(
        "--batch",
        type=int,
        default=100,
        help="Sluiceway lease/result batch per worker, also pgqueuer's 'as tuned' batch",
    )
    parser.add_argument("--pgq-batch", type=int, default=10, help="pgqueuer's batch in its published benchmark")
    parser.add_argument("--clients", type=int, default=8, help="pgbench clients for the ceiling")
    parser.add_argument("--seconds", type=int, default=10, help="pgbench duration")
    parser.add_argument("--repeat", type=int, default=3, help="runs per system, interleaved; medians are reported")
    parser.add_argument("--synchronous-commit", default="on", choices=["on", "off"])
    parser.add_argument("--skip-pgqueuer", action="store_true")
    args = parser.parse_args()

    settings = {"synchronous_commit": args.synchronous_commit, "max_connections": "300"}
    with LocalPostgres(durable=True, settings=settings) as server:
        print(
            f"PostgreSQL (embedded, fsync on, synchronous_commit={args.synchronous_commit}), "
            f"{os.cpu_count()} cores shared by everything; medians of {args.repeat} interleaved runs"
        )
        results: dict[str, list[float]] = {
            "single": [],
            "batched": [],
            "ours": [],
            "runs": [],
            "pgq": [],
            "pgq_tuned": [],
        }
        for round_ in range(args.repeat):
            print(f"round {round_ + 1}/{args.repeat}", flush=True)
            results["single"].append(await ceiling(server.dsn, args.tasks * 20, 1, args.clients, args.seconds))
            results["batched"].append(await ceiling(server.dsn, args.tasks * 20, 10, args.clients, args.seconds))
            ours, runs = await sluiceway(server.dsn, args.tasks, args.workers, args.batch, timeout=600)
            results["ours"].append(ours)
            results["runs"].append(runs)
            if not args.skip_pgqueuer:
                results["pgq"].append(await pgqueuer(server.dsn, args.tasks, args.workers, args.pgq_batch, 600))
                results["pgq_tuned"].append(await pgqueuer(server.dsn, args.tasks, args.workers, args.batch, 600))
        single, batched, ours = median(results["single"]), median(results["batched"]), median(results["ours"])
        print()
        print(f"  ceiling, claim+complete, 1 job/txn  : {single:8.0f} jobs/s")
        print(f"  ceiling, claim+complete, 10 jobs/txn: {batched:8.0f} jobs/s")
        print(
            f"  sluiceway, {args.tasks} tasks, {args.workers} workers x batch {args.batch}: {ours:8.0f} tasks/s "
            f"(runs COMPLETED at {median(results['runs']):.0f}/s)  all: "
            + ", ".join(f"{v:.0f}" for v in results["ours"])
        )
        print(f"    ratio to the 1-job ceiling : {ours / single:5.2f}x (goal >= 0.6x)")
        print(f"    ratio to the 10-job ceiling: {ours / batched:5.2f}x")
        if not args.skip_pgqueuer:
            for key, batch, label in (("pgq", args.pgq_batch, "as published"), ("pgq_tuned", args.batch, "as tuned")):
                peer = median(results[key])
                print(
                    f"  pgqueuer 1.6 {label}, {args.workers} workers x batch {batch}: {peer:8.0f} jobs/s  all: "
                    + ", ".join(f"{v:.0f}" for v in results[key])
                )
                print(f"    sluiceway / pgqueuer {label}: {ours / peer:5.2f}x (goal > 1x)")


if __name__ == "__main__":
    asyncio.run(main())
