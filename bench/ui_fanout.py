"""How long the UI takes to render a run with a 5,000-branch fan-out.

A run of `prepare -> FORK_JOIN_DYNAMIC(5,000 x work) -> JOIN -> report` is
driven through the real store on an embedded PostgreSQL until its branches
are 4,950 completed, 12 failed and 38 in progress; then its page is fetched
from the UI over HTTP (the API application with /ui installed, as the
operator serves it), folded (the default: one group node with counts) and
with every branch drawn (`?expand=fan`), and the server-side render time is
printed. A measurement, not a test (bench/README.md).

    .venv/bin/python bench/ui_fanout.py [--branches 5000] [--repeat 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sluiceway.api.services import Services  # noqa: E402
from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.model.execution import ResultStatus, TaskResult  # noqa: E402
from sluiceway.plane import Plane as ExecutionPlane  # noqa: E402
from sluiceway.store import executions, leasing, results, workflows  # noqa: E402
from sluiceway.store.database import Pool, open_pool  # noqa: E402
from sluiceway.store.deciding import DeciderConfig, decide_batch  # noqa: E402
from tests.support.ui import serve_ui  # noqa: E402

NS = "bench"
SPEC = {
    "tasks": [
        {"name": "prepare", "taskReferenceName": "prepare"},
        {
            "name": "fan",
            "taskReferenceName": "fan",
            "type": "FORK_JOIN_DYNAMIC",
            "inputParameters": {"forkTaskName": "work", "forkTaskInputs": "${workflow.input.items}"},
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        {"name": "report", "taskReferenceName": "report"},
    ]
}


async def settle(pool: Pool) -> None:
    config = DeciderConfig()
    while await decide_batch(pool, config) > 0:
        pass


async def lease(pool: Pool, task_type: str, count: int) -> list[leasing.Lease]:
    found: list[leasing.Lease] = []
    while len(found) < count:
        async with pool.acquire() as conn, conn.transaction():
            got = await leasing.lease_ungated(conn, NS, task_type, "bench-worker", min(1000, count - len(found)))
        if not got:
            break
        found.extend(got)
    return found


async def report(pool: Pool, leases: list[leasing.Lease], status: ResultStatus) -> None:
    for start in range(0, len(leases), 500):
        batch = [TaskResult(task_id=x.task_id, epoch=x.epoch, status=status) for x in leases[start : start + 500]]
        async with pool.acquire() as conn, conn.transaction():
            await results.apply_results(conn, NS, batch)


async def build_run(pool: Pool, branches: int, fresh: bool = False) -> str:
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(conn, NS, "fanout", "fanout", 1, SPEC)
    async with pool.acquire() as conn, conn.transaction():
        started = await executions.start_run(conn, NS, "fanout", None, {"items": [{"n": i} for i in range(branches)]})
    assert isinstance(started, executions.Started), started
    await settle(pool)
    await report(pool, await lease(pool, "prepare", 1), ResultStatus.COMPLETED)
    await settle(pool)
    if fresh:
        return started.id
    work = await lease(pool, "work", branches - 38)  # 38 stay leased: in progress
    failed = 12
    # optional failures would end the run; these report FAILED with retries left, so they are rescheduled
    await report(pool, work[: len(work) - failed], ResultStatus.COMPLETED)
    await report(pool, work[len(work) - failed :], ResultStatus.FAILED)
    await settle(pool)
    return started.id


async def measure(base: str, path: str, repeat: int) -> tuple[list[float], list[float], int]:
    """Wall time per request, the server's own render time, and the page size."""
    walls, renders, size = [], [], 0
    async with aiohttp.ClientSession() as session:
        for _ in range(repeat + 1):
            began = time.perf_counter()
            async with session.get(base + path) as response:
                body = await response.text()
                assert response.status == 200, body[:500]
            walls.append(time.perf_counter() - began)
            marker = body.rsplit("Rendered in ", 1)[-1].split(" ms", 1)[0]
            renders.append(float(marker) / 1000)
            size = len(body.encode())
    return walls[1:], renders[1:], size  # the first warms the caches


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--branches", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--fresh", action="store_true", help="leave every branch scheduled (none leased yet)")
    args = parser.parse_args()
    with LocalPostgres() as server:
        pool = await open_pool(server.dsn, min_size=1, max_size=8)
        try:
            began = time.perf_counter()
            run_id = await build_run(pool, args.branches, args.fresh)
            print(f"run {run_id} with {args.branches:,} branches built in {time.perf_counter() - began:.1f} s")
            async with serve_ui(Services(ExecutionPlane(pool))) as base:
                for label, query in (("folded (default)", ""), ("every branch drawn", "?expand=fan")):
                    walls, renders, size = await measure(base, f"/ui/ns/{NS}/runs/{run_id}{query}", args.repeat)
                    print(
                        f"{label:20} render median {statistics.median(renders) * 1000:6.0f} ms, "
                        f"max {max(renders) * 1000:6.0f} ms; request median {statistics.median(walls) * 1000:6.0f} ms; "
                        f"page {size / 1024:,.0f} KiB"
                    )
        finally:
            await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
