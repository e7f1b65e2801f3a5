"""Fair dispatch: how long a namespace's 100 HTTP calls wait behind another
namespace's 100,000, with the operator's slots shared by deficit round robin,
against the same 100 calls on an idle operator and behind the backlog
first-come (the runner before fair dispatch).

Everything in one process on one fresh embedded PostgreSQL: the runs are
started in bulk (as N API calls would) and their tasks queued by the
decider; then the system-task runner (SLUICEWAY_HTTP_CONCURRENCY slots)
calls a local HTTP server until every quiet call has been leased. The wait
of a call is its `leased_at` minus the moment the runner started; p50 and
p99 are printed. A benchmark, not a test: it always exits 0.

    .venv/bin/python bench/fair_dispatch.py                       # 100,000 + 100
    .venv/bin/python bench/fair_dispatch.py --backlog 10000       # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from aiohttp import web

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import throughput  # noqa: E402

from sluiceway.controls.breaker import BreakerConfig, Breakers  # noqa: E402
from sluiceway.controls.egress import EgressPolicy  # noqa: E402
from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.plane import Plane as ExecutionPlane  # noqa: E402
from sluiceway.store import workflows  # noqa: E402
from sluiceway.store.database import Pool, open_pool  # noqa: E402
from sluiceway.store.deciding import DeciderConfig, decide_batch  # noqa: E402
from sluiceway.systemtasks.egress import Egress  # noqa: E402
from sluiceway.systemtasks.http import HttpTasks  # noqa: E402
from sluiceway.systemtasks.runner import SystemTaskRunner  # noqa: E402

BUSY, QUIET = "team-busy", "team-quiet"


class FirstCome:
    """The allocation before fair dispatch: every free slot to the first
    namespace with work (in the order the queues are found), the rest after."""

    def allocate(self, free: int, weights: Mapping[str, float]) -> dict[str, int]:
        shares = dict.fromkeys(weights, 0)
        if weights:
            shares[min(weights)] = free
        return shares

    def refund(self, name: str, unused: int) -> None:
        pass


async def server() -> tuple[web.AppRunner, str]:
    async def answer(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"  # type: ignore[union-attr]


async def queue(pool: Pool, namespace: str, url: str, count: int) -> None:
    task = {
        "name": "call",
        "taskReferenceName": "call",
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": url}},
    }
    async with pool.acquire() as conn:
        _, version = await workflows.upsert_workflow(conn, namespace, "calls", "calls", 1, {"tasks": [task]})
        await conn.execute(
            "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
            " SELECT gen_random_uuid(), $1, 'calls', $2, 'RUNNING' FROM generate_series(1, $3)",
            namespace,
            version,
            count,
        )
        await conn.execute(
            "INSERT INTO decide_queue (execution_id, event) SELECT id, 'started' FROM executions WHERE namespace = $1",
            namespace,
        )
    config = DeciderConfig(batch_size=500)
    while await decide_batch(pool, config):
        pass


async def measure(
    server_dsn: str, name: str, backlog: int, quiet: int, concurrency: int, fair: bool, timeout: float
) -> None:
    dsn = await throughput.create_database(server_dsn, name)
    pool = await open_pool(dsn, max_size=8)
    http, url = await server()
    try:
        began = time.monotonic()
        if backlog:
            await queue(pool, BUSY, url, backlog)
        await queue(pool, QUIET, url, quiet)
        async with pool.acquire() as conn:
            await conn.execute("VACUUM ANALYZE")
        prepared = time.monotonic() - began
        stop = asyncio.Event()
        egress = Egress(EgressPolicy(allowed=("127.0.0.1",)))
        runner = SystemTaskRunner(
            ExecutionPlane(pool), [HttpTasks(Breakers(BreakerConfig()), egress=egress)], concurrency=concurrency
        )
        if not fair:
            runner.fairness = FirstCome()  # type: ignore[assignment]
        async with pool.acquire() as conn:
            started = await conn.fetchval("SELECT now()")
        running = asyncio.create_task(runner.run(stop))
        deadline = time.monotonic() + timeout
        leased_quiet = 0
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            async with pool.acquire() as conn:
                leased_quiet = await conn.fetchval(
                    "SELECT count(*) FROM tasks WHERE namespace = $1 AND leased_at IS NOT NULL", QUIET
                )
            if leased_quiet >= quiet:
                break
        stop.set()
        await asyncio.wait_for(running, 60)
        async with pool.acquire() as conn:
            waits = sorted(
                (r["leased_at"] - started).total_seconds()
                for r in await conn.fetch(
                    "SELECT leased_at FROM tasks WHERE namespace = $1 AND leased_at IS NOT NULL", QUIET
                )
            )
            busy_done = await conn.fetchval(
                "SELECT count(*) FROM tasks WHERE namespace = $1 AND leased_at IS NOT NULL", BUSY
            )
        label = f"{name:<12} backlog {backlog:>7}, quiet {quiet}"
        if len(waits) < quiet:
            print(
                f"{label}: only {len(waits)} of {quiet} quiet calls leased in {timeout:.0f} s "
                f"({busy_done} backlog calls made meanwhile)  [prepared in {prepared:.0f} s]"
            )
            return
        p50, p99 = waits[len(waits) // 2], waits[min(len(waits) - 1, int(len(waits) * 0.99))]
        print(
            f"{label}: quiet wait p50 {p50 * 1000:7.0f} ms  p99 {p99 * 1000:7.0f} ms  "
            f"({busy_done} backlog calls made meanwhile)  [prepared in {prepared:.0f} s]"
        )
    finally:
        await http.cleanup()
        await pool.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=100_000, help="HTTP calls queued by the busy namespace")
    parser.add_argument("--quiet", type=int, default=100, help="HTTP calls queued by the quiet namespace after it")
    parser.add_argument("--concurrency", type=int, default=32, help="the operator's system-task slots")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for the quiet calls")
    args = parser.parse_args()
    with LocalPostgres(durable=False, settings={"max_connections": "100"}) as pg:
        print(f"{args.concurrency} slots; waits from the runner's start, {datetime.date.today()}")
        await measure(pg.dsn, "idle", 0, args.quiet, args.concurrency, True, args.timeout)
        await measure(pg.dsn, "fair", args.backlog, args.quiet, args.concurrency, True, args.timeout)
        await measure(pg.dsn, "first-come", args.backlog, args.quiet, args.concurrency, False, args.timeout)


if __name__ == "__main__":
    asyncio.run(main())
