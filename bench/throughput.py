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
import urllib.request
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import profiling
from figures import record

from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child, free_port, wait_until
from sluiceway.store import workflows
from sluiceway.store.database import open_pool
from sluiceway.store.deciding import DeciderConfig, decide_batch

HERE = Path(__file__).resolve().parent
NS = "bench"


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far, and of their
    children that have exited: PostgreSQL's backends that closed (pgqueuer's
    drain disconnects as soon as its queue is empty) count in the postmaster's."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / tick
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


@dataclass(frozen=True)
class Operator:
    child: Child
    url: str
    env: dict[str, str]  # the operator's environment, which its workers share (BENCH_* settings)


def start_operator(dsn: str, logs: Path, name: str = "operator", timeout: float = 60, **settings: str) -> Operator:
    """One operator process without Kubernetes on `dsn`, ready to serve; `settings` are
    extra environment (SLUICEWAY_* or the bench workers' BENCH_*)."""
    port = free_port()
    env = {
        **os.environ,
        "SLUICEWAY_DATABASE_URL": dsn,
        "SLUICEWAY_KUBERNETES": "false",
        "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
        "SLUICEWAY_LOG_LEVEL": "WARNING",
        **settings,
    }
    url = f"http://127.0.0.1:{port}"
    child = Child(name, [sys.executable, "-m", "sluiceway", "operator"], logs, env=env)
    try:
        wait_until(
            lambda: urllib.request.urlopen(f"{url}/readyz", timeout=2).status == 200,
            timeout=timeout,
            what=f"the {name}",
            child=child,
        )
    except BaseException:
        child.stop()
        raise
    return Operator(child, url, env)


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


async def sluiceway(
    server_dsn: str,
    tasks: int,
    workers: int,
    batch: int,
    timeout: float,
    profile: Path | None = None,
    classic: bool = False,
) -> tuple[float, float]:
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
    plane = start_operator(dsn, logs, BENCH_BATCH=str(batch), BENCH_CLASSIC="1" if classic else "0")
    operator, env = plane.child, plane.env
    children = [operator]
    try:
        watcher = asyncio.create_task(
            watch_drain(
                dsn,
                "SELECT (SELECT count(*) FROM tasks WHERE status = 'SCHEDULED' AND executor = 'worker')"
                " + (SELECT count(*) FROM tasks WHERE status = 'IN_PROGRESS' AND executor = 'worker')",
                tasks,
                timeout,
            )
        )
        stop_sampling = asyncio.Event()
        if profile is not None:
            await profiling.reset_statements(dsn)
            sampler = asyncio.create_task(profiling.sample_waits(dsn, stop_sampling))
        spying = profiling.py_spy(operator.process.pid, profile / "operator.txt") if profile else nullcontext()
        spying.__enter__()
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
                        plane.url,
                        "--namespace",
                        NS,
                        "--log-level",
                        "WARNING",
                    ],
                    logs,
                    env=env,
                )
            )
        # Where a worker's CPU goes too (the first one), once it has had a moment
        # to start its interpreter: py-spy cannot attach before that.
        worker_spying: AbstractContextManager[None] = nullcontext()
        if profile is not None:
            await asyncio.sleep(0.5)
            worker_spying = profiling.py_spy(children[1].process.pid, profile / "worker.txt")
        worker_spying.__enter__()
        try:
            drained, started = await watcher
        finally:
            worker_spying.__exit__(None, None, None)
            spying.__exit__(None, None, None)
            stop_sampling.set()
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
        if profile is not None:
            profiling.show("operator (py-spy)", profiling.top_frames(profile / "operator.txt"))
            profiling.show("a worker (py-spy)", profiling.top_frames(profile / "worker.txt"))
            profiling.show("database backends (pg_stat_activity samples)", profiling.top_waits(await sampler))
            profiling.show("database (pg_stat_statements)", await profiling.top_statements(dsn))
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
    postgres_before = cpu_seconds(postgres_pids())
    children = [
        Child(f"pgq-{n}", [sys.executable, str(HERE / "pgqueuer_drain.py"), dsn, str(batch)], logs)
        for n in range(workers)
    ]
    try:
        drained, _ = await watcher
        # The same accounting as Sluiceway's line: where each system spends its CPU per unit of work.
        cpu = (cpu_seconds([c.process.pid for c in children]), cpu_seconds(postgres_pids()) - postgres_before)
        print(
            f"    pgqueuer CPU seconds per 1000 jobs: workers {cpu[0] / jobs * 1000:.2f}, "
            f"postgres {cpu[1] / jobs * 1000:.2f} (wall {drained / jobs * 1000:.2f} s per 1000 jobs)"
        )
    finally:
        for child in children:
            child.stop()
    return jobs / drained


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def best(rates: dict[int, list[float]]) -> tuple[int, float]:
    """The batch whose median rate is highest, and that median."""
    return max(((batch, median(values)) for batch, values in rates.items()), key=lambda item: item[1])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2, help="worker processes, for Sluiceway and pgqueuer alike")
    parser.add_argument(
        "--batches",
        default="10,50,100,250,500",
        help="batch sizes swept for both: Sluiceway's lease/result batch per worker, pgqueuer's batch_size",
    )
    parser.add_argument("--clients", type=int, default=8, help="pgbench clients for the ceiling")
    parser.add_argument("--seconds", type=int, default=10, help="pgbench duration")
    parser.add_argument("--repeat", type=int, default=3, help="runs per system and batch, interleaved; medians")
    parser.add_argument("--synchronous-commit", default="on", choices=["on", "off"])
    parser.add_argument("--skip-pgqueuer", action="store_true")
    parser.add_argument(
        "--classic", action="store_true", help="also drain with the SDK as it was before issue 15 (BENCH_CLASSIC=1)"
    )
    parser.add_argument("--quick", action="store_true", help="about 2 minutes: fewer tasks, batches and rounds")
    parser.add_argument(
        "--profile", type=Path, help="py-spy on the operator and pg_stat_statements, into this directory"
    )
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.repeat, args.seconds, args.batches = 5000, 1, 3, "50,250"
    batches = [int(b) for b in args.batches.split(",")]

    settings = {
        "synchronous_commit": args.synchronous_commit,
        "max_connections": "300",
        **profiling.pg_settings(args.profile is not None),
    }
    with LocalPostgres(durable=True, settings=settings) as server:
        print(
            f"PostgreSQL (embedded, fsync on, synchronous_commit={args.synchronous_commit}), "
            f"{os.cpu_count()} cores shared by everything (load {os.getloadavg()[0]:.2f}); "
            f"medians of {args.repeat} interleaved runs per batch"
        )
        ceilings: dict[int, list[float]] = {1: [], 10: []}
        ours: dict[int, list[float]] = {b: [] for b in batches}
        runs: dict[int, list[float]] = {b: [] for b in batches}
        peers: dict[int, list[float]] = {b: [] for b in batches}
        classic: dict[int, list[float]] = {b: [] for b in batches}
        for round_ in range(args.repeat):
            print(f"round {round_ + 1}/{args.repeat}", flush=True)
            for per_txn in ceilings:
                ceilings[per_txn].append(
                    await ceiling(server.dsn, args.tasks * 20, per_txn, args.clients, args.seconds)
                )
            for batch in batches:
                profile = args.profile / f"batch-{batch}" if args.profile and round_ == 0 else None
                if profile is not None:
                    profile.mkdir(parents=True, exist_ok=True)
                rate, completed = await sluiceway(server.dsn, args.tasks, args.workers, batch, 600, profile)
                ours[batch].append(rate)
                runs[batch].append(completed)
                print(f"  sluiceway batch {batch}: {rate:.0f} tasks/s", flush=True)
                if args.classic:
                    classic[batch].append(
                        (await sluiceway(server.dsn, args.tasks, args.workers, batch, 600, None, True))[0]
                    )
                    print(f"  sluiceway, classic SDK, batch {batch}: {classic[batch][-1]:.0f} tasks/s", flush=True)
                if not args.skip_pgqueuer:
                    peers[batch].append(await pgqueuer(server.dsn, args.tasks, args.workers, batch, 600))
                    print(f"  pgqueuer  batch {batch}: {peers[batch][-1]:.0f} jobs/s", flush=True)
        single, batched = median(ceilings[1]), median(ceilings[10])
        print()
        print(f"  ceiling, claim+complete, 1 job/txn  : {single:8.0f} jobs/s")
        print(f"  ceiling, claim+complete, 10 jobs/txn: {batched:8.0f} jobs/s")
        print(f"  {args.tasks} tasks, {args.workers} workers; per second by batch (medians):")
        for batch in batches:
            line = f"    batch {batch:4d}: sluiceway {median(ours[batch]):8.0f} ({median(runs[batch]):6.0f} runs/s)"
            if classic[batch]:
                line += f"   classic SDK {median(classic[batch]):8.0f}"
            if peers[batch]:
                line += f"   pgqueuer {median(peers[batch]):8.0f}"
            print(line)
        best_batch, best_ours = best(ours)
        print(f"  sluiceway at its best (batch {best_batch}): {best_ours:8.0f} tasks/s")
        print(f"    ratio to the 1-job ceiling : {best_ours / single:5.2f}x")
        print(f"    ratio to the 10-job ceiling: {best_ours / batched:5.2f}x")
        record("1 drain", "ceiling 1 job/txn", single, "jobs/s")
        record("1 drain", "ceiling 10 jobs/txn", batched, "jobs/s")
        record("1 drain", "sluiceway best", best_ours, "tasks/s")
        record("1 drain", "sluiceway best batch", best_batch, "batch")
        if args.classic:
            classic_batch, best_classic = best(classic)
            print(f"  classic SDK at its best (batch {classic_batch}): {best_classic:8.0f} tasks/s")
            record("1 drain", "classic SDK best", best_classic, "tasks/s")
        if not args.skip_pgqueuer:
            peer_batch, best_peer = best(peers)
            ratio = best_ours / best_peer
            print(f"  pgqueuer 1.6 at its best (batch {peer_batch}): {best_peer:8.0f} jobs/s")
            print(f"    sluiceway / pgqueuer, each at its best: {ratio:5.2f}x (goal >= 1.05x)")
            record("1 drain", "pgqueuer best", best_peer, "jobs/s")
            record("1 drain", "sluiceway / pgqueuer best", ratio, "x")


if __name__ == "__main__":
    asyncio.run(main())
