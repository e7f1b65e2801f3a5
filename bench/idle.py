"""Idle cost (issue 15, goal 8): statements per second PostgreSQL runs for one
operator process with no work, alone and with N idle long-polling workers,
then lease statements per run while a trickle of runs is started to them.

One operator (no Kubernetes) on a fresh database with pg_stat_statements; the
pollers are raw HTTP long polls from this process (`POST .../tasks/poll` with
the SDK's default pollTimeoutSeconds, polling again as soon as one returns), so
N of them cost no worker processes. For each phase the script waits a moment,
resets the counters, waits `--seconds`, and reads:

- committed transactions per second of the benchmark's database
  (pg_stat_database.xact_commit), and
- statement calls per second by statement (pg_stat_statements, top level),
  the measuring connection's own statements left out.

No test fails on these figures: they are measurements (bench/README.md)."""

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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import throughput  # noqa: E402
from figures import record  # noqa: E402

from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.store import workflows  # noqa: E402
from sluiceway.store.database import open_pool  # noqa: E402

NS = "bench"
SDK_POLL_TIMEOUT = 10.0  # sluiceway.worker.runner's default pollTimeoutSeconds
_OWN = "/*idle-bench*/"  # marks the measuring connection's statements


async def poller(session: aiohttp.ClientSession, api: str, n: int, timeout: float, stop: asyncio.Event) -> int:
    """One idle worker: long polls back to back until `stop`; returns how many it sent."""
    body = {"taskTypes": ["noop"], "workerId": f"idle-{n}", "count": 10, "pollTimeoutSeconds": timeout}
    sent = 0
    while not stop.is_set():
        async with session.post(f"{api}/v1/ns/{NS}/tasks/poll", json=body) as response:
            await response.read()
            assert response.status == 200, response.status
        sent += 1
    return sent


async def measure(conn: asyncpg.Connection, database: str, seconds: float) -> tuple[float, list[tuple[float, str]]]:
    """Transactions per second of `database` and statement calls per second, over `seconds`."""
    await conn.execute(f"{_OWN} SELECT pg_stat_statements_reset()")
    await conn.execute(f"{_OWN} SELECT pg_stat_reset()")
    await asyncio.sleep(0.6)  # pg_stat_database is flushed by backends at most every ~0.5 s
    before = await conn.fetchval(f"{_OWN} SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    await asyncio.sleep(0.6)
    after = await conn.fetchval(f"{_OWN} SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database)
    elapsed = time.monotonic() - started - 0.6
    rows = await conn.fetch(
        f"{_OWN} SELECT calls, query FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
        " WHERE d.datname = $1 AND s.toplevel AND query NOT LIKE $2 ORDER BY calls DESC",
        database,
        f"%{_OWN}%",
    )
    own = 3  # the statements of this function between the two xact_commit reads, each its own transaction
    statements = [(r["calls"] / elapsed, " ".join(r["query"].split())) for r in rows]
    return max(0.0, (after - before - own)) / elapsed, statements


async def trickle_of_runs(
    session: aiohttp.ClientSession, conn: asyncpg.Connection, api: str, per_second: float, seconds: float
) -> float:
    """Start `per_second` one-task runs a second while the pollers wait; lease
    statements per second (each task wakes, at worst, every waiting poll)."""
    done = asyncio.Event()

    async def start_runs() -> None:
        while not done.is_set():
            async with session.post(f"{api}/v1/ns/{NS}/executions", json={"name": "noop_wf"}) as response:
                await response.read()
                assert response.status == 201, response.status
            await asyncio.sleep(1 / per_second)

    starting = asyncio.create_task(start_runs())
    try:
        tps, statements = await measure(conn, "idle", seconds)
    finally:
        done.set()
        await starting
    show(f"with the pollers and {per_second:g} runs/s started", tps, statements, 5)
    return sum(rate for rate, query in statements if "sluiceway_lease" in query)


def show(label: str, tps: float, statements: list[tuple[float, str]], top: int) -> float:
    calls = sum(rate for rate, _ in statements)
    print(f"  {label}: {tps:6.2f} transactions/s, {calls:6.2f} statements/s")
    for rate, query in statements[:top]:
        print(f"    {rate:7.2f}/s  {query[:150]}")
    return calls


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pollers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0, help="measuring window of each phase")
    parser.add_argument("--poll-timeout", type=float, default=SDK_POLL_TIMEOUT, help="pollTimeoutSeconds of each poll")
    parser.add_argument("--top", type=int, default=10, help="statements printed per phase")
    parser.add_argument("--trickle", type=float, default=10.0, help="runs/s started in the last phase")
    parser.add_argument("--quick", action="store_true", help="10-s windows (for make bench)")
    args = parser.parse_args()
    if args.quick:
        args.seconds = 10.0
    settings = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "top"}
    with LocalPostgres(durable=True, settings=settings) as server:
        dsn = await throughput.create_database(server.dsn, "idle")
        pool = await open_pool(dsn, min_size=1, max_size=1)
        async with pool.acquire() as conn:
            await workflows.upsert_workflow(
                conn, NS, "noop_wf", "noop-wf", 1, {"tasks": [{"name": "noop", "taskReferenceName": "noop"}]}
            )
        await pool.close()
        logs = Path(tempfile.mkdtemp(prefix="bench-idle-"))
        plane = throughput.start_operator(dsn, logs)
        operator, api = plane.child, plane.url
        conn = await asyncpg.connect(dsn)
        stop = asyncio.Event()
        polls: list[asyncio.Task[int]] = []
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            print(
                f"PostgreSQL (embedded), one operator, no work; {args.seconds:.0f}-s windows; "
                f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
            )
            lower = {"higher_is_better": False}
            await asyncio.sleep(3)  # start-up statements (migrations, caches) are not idle cost
            alone_tps, alone = await measure(conn, "idle", args.seconds)
            show("operator alone", alone_tps, alone, args.top)
            session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=args.poll_timeout + 30))
            polls = [asyncio.create_task(poller(session, api, n, args.poll_timeout, stop)) for n in range(args.pollers)]
            await asyncio.sleep(3)
            polling_tps, polling = await measure(conn, "idle", args.seconds)
            calls = show(
                f"with {args.pollers} idle long polls (pollTimeoutSeconds {args.poll_timeout:g})",
                polling_tps,
                polling,
                args.top,
            )
            trickle = await trickle_of_runs(session, conn, api, args.trickle, args.seconds)
            stop.set()
            await session.close()
            for task in polls:
                task.cancel()
            alone_calls = sum(rate for rate, _ in alone)
            per_poller = (calls - alone_calls) / args.pollers
            print(f"  each idle poller adds {per_poller:.3f} statements/s")
            leases_per_run = trickle / args.trickle
            print(f"  with {args.trickle:g} runs/s started: {leases_per_run:.2f} lease statements per run")
            record(
                "8 idle",
                f"lease statements per run, {args.pollers} pollers, {args.trickle:g} runs/s",
                leases_per_run,
                "calls",
                **lower,
            )
            record("8 idle", "transactions/s, operator alone", alone_tps, "tx/s", **lower)
            record("8 idle", f"transactions/s, {args.pollers} idle pollers", polling_tps, "tx/s", **lower)
            record("8 idle", f"statements/s, {args.pollers} idle pollers", calls, "calls/s", **lower)
            record("8 idle", "statements/s added by each idle poller", per_poller, "calls/s", **lower)
        finally:
            stop.set()
            for task in polls:
                task.cancel()
            await conn.close()
            operator.stop()


if __name__ == "__main__":
    asyncio.run(main())
