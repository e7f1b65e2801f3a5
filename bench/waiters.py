"""Waiting for runs to end: hundreds of callers at once, against one operator.

For each N (100, 500, 1000 by default), N clients start a run of a one-task
workflow at the same moment, which SDK workers complete, and each waits for
its run's output, two ways in the same run, against the same PostgreSQL:

- **wait**: `POST .../executions?wait=60s`, answered when the run ends (its
  end's NOTIFY wakes the request);
- **poll**: `POST .../executions`, then `GET .../{id}` every 100 ms until
  the run has ended, as a client without the wait would.

Prints start -> answer latency p50/p99 (from just before the start is sent to
the answer that carries the ended run) and, from pg_stat_statements, how many
times per client the run's row was read (`store.runs.get_run`) and how many
statements the whole round cost per client: a waiter reads its run about
twice (once on arrival, once when its end wakes it) whatever the run's
length; a poller once per 100 ms. See bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import asyncpg
import profiling
import throughput
from figures import record
from latency import percentile

from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child
from sluiceway.store import workflows
from sluiceway.store.database import open_pool

HERE = Path(__file__).resolve().parent
NS = throughput.NS
TERMINAL = {"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED"}
POLL_INTERVAL = 0.1
# What pg_stat_statements keeps of the run read (store/runs.py's _GET_RUN).
RUN_READ = "%AS next_run_id%FROM executions e WHERE id = $1%"


async def prepare(server_dsn: str) -> str:
    dsn = await throughput.create_database(server_dsn, "waiters")
    pool = await open_pool(dsn, max_size=2)
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(
            conn, NS, "one", "one", 1, {"tasks": [{"name": "noop", "taskReferenceName": "n"}]}
        )
    await pool.close()
    return dsn


async def waiting(http: aiohttp.ClientSession, base: str, ready: asyncio.Event) -> float:
    await ready.wait()
    sent = time.monotonic()
    async with http.post(f"{base}/v1/ns/{NS}/executions?wait=60s", json={"name": "one"}) as response:
        body = await response.json()
    assert response.status == 200 and body["status"] == "COMPLETED", (response.status, body)
    return time.monotonic() - sent


async def polling(http: aiohttp.ClientSession, base: str, ready: asyncio.Event) -> float:
    await ready.wait()
    sent = time.monotonic()
    async with http.post(f"{base}/v1/ns/{NS}/executions", json={"name": "one"}) as response:
        run_id = (await response.json())["id"]
    while True:
        async with http.get(f"{base}/v1/ns/{NS}/executions/{run_id}", params={"include_tasks": "false"}) as response:
            body = await response.json()
        if body["status"] in TERMINAL:
            assert body["status"] == "COMPLETED", body
            return time.monotonic() - sent
        await asyncio.sleep(POLL_INTERVAL)


async def statements(dsn: str) -> tuple[int, int]:
    """(run reads, every statement) since the last reset, in this database."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT coalesce(sum(calls) FILTER (WHERE query LIKE $1), 0) AS reads, coalesce(sum(calls), 0) AS total"
            " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            RUN_READ,
        )
    finally:
        await conn.close()
    return int(row["reads"]), int(row["total"])


async def round_of(dsn: str, base: str, how: str, clients: int) -> tuple[list[float], float, float]:
    """N clients at once: their latencies, run reads and statements per client."""
    client = waiting if how == "wait" else polling
    await profiling.reset_statements(dsn)
    ready = asyncio.Event()
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=120)
    ) as http:
        calls = [asyncio.create_task(client(http, base, ready)) for _ in range(clients)]
        await asyncio.sleep(0.2)  # every client is at the line
        ready.set()
        latencies = await asyncio.gather(*calls)
    reads, total = await statements(dsn)
    return list(latencies), reads / clients, total / clients


async def measure(dsn: str, sizes: list[int], workers: int) -> None:
    logs = Path(tempfile.mkdtemp(prefix="bench-waiters-"))
    plane = throughput.start_operator(dsn, logs, BENCH_BATCH="50")
    children = [plane.child]
    try:
        for n in range(workers):
            argv = [sys.executable, "-m", "sluiceway", "worker", str(HERE / "noop_worker.py")]
            argv += ["--url", plane.url, "--namespace", NS, "--log-level", "WARNING"]
            children.append(Child(f"worker-{n}", argv, logs, env=plane.env))
        await asyncio.sleep(2)  # the workers' first long polls are waiting
        await round_of(dsn, plane.url, "wait", 20)  # warm-up: connections, prepared statements, caches
        head = ("clients", "how", "p50 ms", "p99 ms", "run reads/client", "statements/client")
        print("  {:>7} {:>5}  {:>8} {:>8}  {:>16} {:>17}".format(*head))
        for clients in sizes:
            for how in ("wait", "poll"):
                latencies, reads, total = await round_of(dsn, plane.url, how, clients)
                p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
                print(f"  {clients:7d} {how:>5}  {p50:8.1f} {p99:8.1f}  {reads:16.2f} {total:17.2f}")
                record("waiters", f"{clients} {how} p50", p50, "ms", higher_is_better=False)
                record("waiters", f"{clients} {how} run reads per client", reads, "reads", higher_is_better=False)
    finally:
        for child in reversed(children):
            child.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="100,500,1000", help="clients at once, per round (comma-separated)")
    parser.add_argument("--workers", type=int, default=2, help="SDK worker processes completing the runs")
    parser.add_argument("--quick", action="store_true", help="100 and 500 clients")
    args = parser.parse_args()
    sizes = [100, 500] if args.quick else [int(n) for n in args.clients.split(",")]
    settings = {"max_connections": "300", **profiling.pg_settings(True)}
    with LocalPostgres(durable=True, settings=settings) as server:
        print(
            f"PostgreSQL (embedded, fsync on), {os.cpu_count()} cores shared by everything "
            f"(load {os.getloadavg()[0]:.2f}); one operator, {args.workers} SDK workers; "
            f"waiting on the server vs polling GET every {POLL_INTERVAL * 1000:.0f} ms"
        )
        dsn = await prepare(server.dsn)
        await measure(dsn, sizes, args.workers)
    print(f"  (load {os.getloadavg()[0]:.2f} at the end)")


if __name__ == "__main__":
    asyncio.run(main())
