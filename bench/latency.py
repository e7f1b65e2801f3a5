"""Latency on an idle system: one operator, one long-polling SDK worker.

1. start -> lease: a run of a one-task workflow is started through the HTTP
   API; from just before the request is sent (the client's clock) to the
   task's `leased_at` (the database's clock; both are this host's clock).
2. result -> next lease: runs of a ten-step chain; from the moment a step's
   handler returns (the worker's clock) to the next step's `leased_at`.

Runs go one at a time, each after the previous one completed, so nothing
queues. Prints p50, p90, p99 and the max, and the goals (start->lease p50 <=
5 ms, p99 <= 20 ms; result->next lease p50 <= 5 ms). See bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import json
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

from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child
from sluiceway.store import workflows
from sluiceway.store.database import open_pool

HERE = Path(__file__).resolve().parent
NS = throughput.NS
STEPS = 10


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"p50 {percentile(ms, 0.5):6.2f} ms  p90 {percentile(ms, 0.9):6.2f}  p99 {percentile(ms, 0.99):6.2f}"
        f"  max {max(ms):6.2f}  (n={len(ms)})"
    )


async def prepare(server_dsn: str) -> str:
    dsn = await throughput.create_database(server_dsn, "latency")
    pool = await open_pool(dsn, max_size=2)
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(
            conn, NS, "one", "one", 1, {"tasks": [{"name": "lat", "taskReferenceName": "only"}]}
        )
        chain = [{"name": "lat", "taskReferenceName": f"step_{n}"} for n in range(STEPS)]
        await workflows.upsert_workflow(conn, NS, "chain", "chain", 1, {"tasks": chain})
    await pool.close()
    return dsn


async def run_one(http: aiohttp.ClientSession, conn: asyncpg.Connection, base: str, name: str) -> tuple[str, float]:
    """Start one run and wait until it completed; (run id, client time just before the start was sent)."""
    sent = time.time()
    async with http.post(f"{base}/v1/ns/{NS}/executions", json={"name": name}) as response:
        body = await response.json()
        assert response.status == 201, body
    run_id = body["id"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = await conn.fetchval("SELECT status FROM executions WHERE id = $1", run_id)
        if status != "RUNNING":
            assert status == "COMPLETED", status
            return run_id, sent
        await asyncio.sleep(0.01)
    raise TimeoutError(f"run {run_id} did not complete in 30 s")


async def measure(
    dsn: str, starts: int, chains: int, trace_dir: Path, profile: Path | None, **env: str
) -> dict[str, list[float]]:
    logs = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    plane = throughput.start_operator(dsn, logs, BENCH_TRACE_DIR=str(trace_dir), **env)
    operator, base, env = plane.child, plane.url, plane.env
    children = [operator]
    conn = await asyncpg.connect(dsn)
    try:
        worker_argv = [sys.executable, "-m", "sluiceway", "worker", str(HERE / "latency_worker.py")]
        worker_argv += ["--url", base, "--namespace", NS, "--log-level", "WARNING"]
        children.append(Child("worker", worker_argv, logs, env=env))
        await asyncio.sleep(2)  # the worker's first long poll is waiting
        async with aiohttp.ClientSession() as http:
            for _ in range(3):  # warm-up: connections, prepared statements, caches
                await run_one(http, conn, base, "one")
            if profile is not None:
                await profiling.reset_statements(dsn)
            spying = profiling.py_spy(operator.process.pid, profile / "operator.txt") if profile else None
            if spying is not None:
                spying.__enter__()
            try:
                started = [await run_one(http, conn, base, "one") for _ in range(starts)]
                chained = [(await run_one(http, conn, base, "chain"))[0] for _ in range(chains)]
            finally:
                if spying is not None:
                    spying.__exit__(None, None, None)
            if profile is not None:
                profiling.show("operator (py-spy)", profiling.top_frames(profile / "operator.txt"))
                profiling.show("database (pg_stat_statements)", await profiling.top_statements(dsn))
        # Each transaction's now() is its start: the run's row, its task's row (the decider), the lease.
        times = {
            str(r["run"]): r
            for r in await conn.fetch(
                "SELECT t.execution_id AS run, t.id::text AS task,"
                " extract(epoch FROM e.created_at)::float8 AS run_created,"
                " extract(epoch FROM t.created_at)::float8 AS task_created,"
                " extract(epoch FROM t.leased_at)::float8 AS leased"
                " FROM tasks t JOIN executions e ON e.id = t.execution_id WHERE t.execution_id = ANY($1::uuid[])",
                [run for run, _ in started],
            )
        }
        steps = await conn.fetch(
            "SELECT id::text AS id, execution_id::text AS run, ref, extract(epoch FROM leased_at)::float8 AS leased"
            " FROM tasks WHERE execution_id = ANY($1::uuid[]) ORDER BY execution_id, created_at",
            chained,
        )
    finally:
        await conn.close()
        for child in reversed(children):  # the worker first: it writes its trace on a graceful exit
            child.stop()
    ended: dict[str, float] = {}
    handled: dict[str, float] = {}
    for path in trace_dir.glob("latency-*.json"):
        for task_id, began, end in json.loads(path.read_text()):
            ended[task_id], handled[task_id] = end, began
    start_to_lease = [times[run]["leased"] - sent for run, sent in started]
    parts = {
        "  sent -> run's transaction": [times[run]["run_created"] - sent for run, sent in started],
        "  -> decider's transaction": [times[run]["task_created"] - times[run]["run_created"] for run, _ in started],
        "  -> lease": [times[run]["leased"] - times[run]["task_created"] for run, _ in started],
        # What the lease's time leaves out: its commit, the answer, the worker's dispatch.
        "  -> handler starts": [
            handled[times[run]["task"]] - times[run]["leased"] for run, _ in started if times[run]["task"] in handled
        ],
    }
    result_to_next = [
        after["leased"] - ended[before["id"]]
        for before, after in zip(steps, steps[1:], strict=False)
        if before["run"] == after["run"] and before["id"] in ended
    ]
    return {"start -> lease": start_to_lease, **parts, "result -> next lease": result_to_next}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=300, help="one-task runs started, one at a time")
    parser.add_argument("--chains", type=int, default=30, help=f"{STEPS}-step chains run, one at a time")
    parser.add_argument("--quick", action="store_true", help="about a minute: 100 starts, 10 chains")
    parser.add_argument("--profile", type=Path, help="py-spy on the operator, pg_stat_statements; into this directory")
    args = parser.parse_args()
    if args.quick:
        args.starts, args.chains = 100, 10
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    settings = {"max_connections": "300", **profiling.pg_settings(args.profile is not None)}
    with LocalPostgres(durable=True, settings=settings) as server:
        print(
            f"PostgreSQL (embedded, fsync on), {os.cpu_count()} cores shared by everything "
            f"(load {os.getloadavg()[0]:.2f}); one operator, one long-polling worker, one run at a time"
        )
        dsn = await prepare(server.dsn)
        # The default (the decider loops), then with SLUICEWAY_DECIDE_INLINE=true (docs/execution.md).
        for mode, env in MODES.items():
            trace_dir = Path(tempfile.mkdtemp(prefix="bench-latency-trace-"))
            found = await measure(dsn, args.starts, args.chains, trace_dir, args.profile, **env)
            report(mode, found)


MODES = {"": {"SLUICEWAY_DECIDE_INLINE": "false"}, ", inline": {"SLUICEWAY_DECIDE_INLINE": "true"}}


def report(mode: str, found: dict[str, list[float]]) -> None:
    goals = {"start -> lease": (5.0, 20.0), "result -> next lease": (5.0, None)}
    print(f"\n  {'deciding inline (SLUICEWAY_DECIDE_INLINE=true)' if mode else 'the default: decider loops'}")
    for name, values in found.items():
        if name not in goals:
            print(f"  {name:28} {summary(values)}")
            continue
        p50, p99 = percentile(values, 0.5) * 1000, percentile(values, 0.99) * 1000
        p50_goal, p99_goal = goals[name]
        verdict = f"goal p50 <= {p50_goal:g} ms" + (f", p99 <= {p99_goal:g} ms" if p99_goal else "")
        met = p50 <= p50_goal and (p99_goal is None or p99 <= p99_goal)
        print(f"  {name:28} {summary(values)}   {verdict}: {'met' if met else 'NOT met'}")
        key = name.replace(" -> ", "->")
        record("4 latency", f"{key} p50{mode}", p50, "ms", higher_is_better=False)
        record("4 latency", f"{key} p99{mode}", p99, "ms", higher_is_better=False)
    print(f"  (load {os.getloadavg()[0]:.2f} at the end)")


if __name__ == "__main__":
    asyncio.run(main())
