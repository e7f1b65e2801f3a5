"""Backlog (issue 15, goal 5): the dispatch rate at the front of a backlog of
1,000,000 ready tasks against the rate at the front of 1,000, and the
operator's memory while it drains the big one.

One operator process (no Kubernetes) and M SDK worker processes
(`sluiceway worker bench/noop_worker.py`, leases and results in batches) run
throughout, long-polling an empty queue. A backlog of one-task runs, their
tasks SCHEDULED, is then written straight into the store in one transaction
(multi-row INSERT ... SELECT from generate_series) and the queue notified, as
the decider would: the workers see all of it at once.

The rate of a backlog is measured from the database afterwards: the first
`--window` tasks leased (by leased_at), divided by the time from the first of
them leased to the last of them ended. The small backlog is measured
`--repeat` times (median); the big one once at its front, then its drain goes
on for `--drain` seconds, sampling the operator's RSS (/proc/PID/status) every
second and the rate of each second. The lease statement's plan (EXPLAIN
ANALYZE of its SELECT, without the row locks) is printed at both sizes.

No test fails on these figures: they are measurements (bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import throughput  # noqa: E402
from figures import record  # noqa: E402

from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.devenv.processes import Child  # noqa: E402
from sluiceway.store import workflows  # noqa: E402
from sluiceway.store.database import open_pool  # noqa: E402
from sluiceway.store.wakeups import READY_CHANNEL, ready_payload  # noqa: E402

NS = "bench"

# One chunk of the backlog: runs RUNNING and their one task SCHEDULED, as the
# decider leaves a one-task run it has just started.
_BACKLOG = """
WITH runs AS (
    INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, evaluated)
    SELECT gen_random_uuid(), $1, 'noop_wf', $2, 'RUNNING', true FROM generate_series(1, $3)
    RETURNING id
)
INSERT INTO tasks (id, execution_id, namespace, ref, type, executor, name, attempt, status,
                   first_scheduled_at, available_at)
SELECT gen_random_uuid(), id, $1, 'noop', 'SIMPLE', 'worker', 'noop', 1, 'SCHEDULED', now(), now() FROM runs
"""

# The lease statement's SELECT (sluiceway_lease, migration 0034), without FOR UPDATE SKIP LOCKED:
# EXPLAIN ANALYZE must not hold rows the workers are leasing.
_LEASE_SELECT = """
SELECT id FROM tasks
 WHERE executor = 'worker' AND namespace = $1 AND name = 'noop' AND status = 'SCHEDULED'
   AND available_at <= clock_timestamp() AND (close_deadline IS NULL OR close_deadline > clock_timestamp())
 ORDER BY sluiceway_ready_order(available_at, priority), id LIMIT 100
"""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def queue_backlog(conn: asyncpg.Connection, version: int, size: int, chunk: int = 100_000) -> tuple[float, str]:
    """Write `size` ready one-task runs in one transaction; the seconds it took,
    and the lease SELECT's plan over them just before they are committed."""
    started = time.monotonic()
    async with conn.transaction():
        for first in range(0, size, chunk):
            await conn.execute(_BACKLOG, NS, version, min(chunk, size - first))
        seconds = time.monotonic() - started
        plan = await lease_plan(conn)
        await conn.execute("SELECT pg_notify($1, $2)", READY_CHANNEL, ready_payload((NS, "noop")))
    return seconds, plan


async def front_rate(conn: asyncpg.Connection, since: Any, window: int) -> float | None:
    """Tasks/s over the first `window` tasks leased after `since`, once all of them ended."""
    row = await conn.fetchrow(
        "SELECT count(*) AS n, count(ended_at) AS ended, min(leased_at) AS first, max(ended_at) AS last FROM ("
        "  SELECT leased_at, ended_at FROM tasks WHERE name = 'noop' AND leased_at >= $1"
        "  ORDER BY leased_at LIMIT $2) AS front",
        since,
        window,
    )
    if row["n"] < window or row["ended"] < window:
        return None
    return float(window / (row["last"] - row["first"]).total_seconds())


def _py_spy(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    """py-spy record, as collapsed stacks (`--format raw`): flamegraph.pl or speedscope read them."""
    spy = [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--duration", str(int(seconds))]
    spy += ["--rate", "50", "--nonblocking", "--format", "raw", "--output", str(out)]
    return subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def profile_top(path: Path, top: int = 10) -> list[str]:
    """The frames the operator spent its samples in (self time), from collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        total += int(count)
        own[stack.rsplit(";", 1)[-1]] += int(count)
    return [f"{n / total:6.1%}  {frame}" for frame, n in own.most_common(top)] if total else []


async def top_statements(conn: asyncpg.Connection, top: int = 8) -> None:
    """The statements that took PostgreSQL's time during the drain."""
    rows = await conn.fetch(
        "SELECT calls, total_exec_time, query FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"
        " ORDER BY total_exec_time DESC LIMIT $1",
        top,
    )
    print("  PostgreSQL's time during the drain, by statement (pg_stat_statements):")
    for row in rows:
        per_call = row["total_exec_time"] / max(row["calls"], 1)
        query = " ".join(row["query"].split())[:110]
        print(f"    {row['total_exec_time'] / 1000:6.2f} s {row['calls']:7} calls {per_call:8.2f} ms  {query}")


def results_so_far(api: str) -> float:
    """Results the operator accepted so far (its /metrics): cheap to read at any backlog size."""
    with urllib.request.urlopen(f"{api}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("sluiceway_task_results_total{")
    )


async def wait_results(api: str, count: float, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while results_so_far(api) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} results not reached within {timeout} s")
        await asyncio.sleep(0.1)


async def lease_plan(conn: asyncpg.Connection) -> str:
    raw = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {_LEASE_SELECT}", NS)
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    nodes: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        kind = node["Node Type"] + (f" {node['Index Name']}" if "Index Name" in node else "")
        if node.get("Shared Hit Blocks") is not None and "Index Name" in node:
            kind += f" (buffers {node['Shared Hit Blocks'] + node.get('Shared Read Blocks', 0)})"
        nodes.append(kind)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    return f"{plan['Execution Time']:.2f} ms: " + " > ".join(nodes)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=1_000, help="tasks at the front of each backlog measured")
    parser.add_argument("--repeat", type=int, default=3, help="small backlogs measured (median)")
    parser.add_argument("--drain", type=float, default=30.0, help="seconds of the big drain sampled for RSS")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--analyze", action="store_true", help="ANALYZE after writing the big backlog")
    parser.add_argument("--explain-slow", type=int, metavar="MS", help="auto_explain statements slower than MS")
    parser.add_argument("--profile", type=Path, help="py-spy record the operator during the drain into this SVG")
    parser.add_argument("--quick", action="store_true", help="100,000 tasks, 10 s of drain (for make bench)")
    args = parser.parse_args()
    if args.quick:
        args.big, args.drain = 100_000, 10.0
    settings = {"shared_preload_libraries": "pg_stat_statements"}
    if args.explain_slow is not None:
        settings = {
            "shared_preload_libraries": "pg_stat_statements,auto_explain",
            "auto_explain.log_min_duration": f"{args.explain_slow}ms",
            "auto_explain.log_nested_statements": "on",
        }
    with LocalPostgres(durable=True, settings=settings) as server:
        dsn = await throughput.create_database(server.dsn, "backlog")
        pool = await open_pool(dsn, min_size=1, max_size=1)
        async with pool.acquire() as c:
            spec = {"tasks": [{"name": "noop", "taskReferenceName": "noop"}]}
            await workflows.upsert_workflow(c, NS, "noop_wf", "noop-wf", 1, spec)
            version = int(await c.fetchval("SELECT latest_version FROM workflows WHERE name = 'noop_wf'"))
        await pool.close()
        logs = Path(tempfile.mkdtemp(prefix="bench-backlog-"))
        plane = throughput.start_operator(dsn, logs, BENCH_BATCH=str(args.batch))
        operator, api, env = plane.child, plane.url, plane.env
        children = [operator]
        conn = await asyncpg.connect(dsn)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        try:
            worker = [sys.executable, "-m", "sluiceway", "worker", str(HERE / "noop_worker.py"), "--url", api]
            worker += ["--namespace", NS, "--log-level", "WARNING"]
            children += [Child(f"worker-{n}", worker, logs, env=env) for n in range(args.workers)]
            print(
                f"PostgreSQL (embedded, fsync on); one operator, {args.workers} SDK workers x batch {args.batch}; "
                f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
            )
            small: list[float] = []
            plan_small = ""
            for n in range(args.repeat + 1):  # the first is a warm-up
                since = await conn.fetchval("SELECT now()")
                base = results_so_far(api)
                _, plan_small = await queue_backlog(conn, version, args.small)
                await wait_results(api, base + args.small)
                rate = await front_rate(conn, since, min(args.window, args.small))
                if n and rate is not None:
                    small.append(rate)
            print(
                f"  {args.small:>9,} ready: {statistics.median(small):8.0f} tasks/s at the front "
                f"(first {args.window:,} leased; " + ", ".join(f"{r:.0f}" for r in small) + ")"
            )
            print(f"    lease SELECT with {args.small:,} ready: {plan_small}")
            since = await conn.fetchval("SELECT now()")
            rss_before = rss_mib(operator.process.pid)
            seconds, plan_big = await queue_backlog(conn, version, args.big)
            print(f"  {args.big:,} ready tasks written in {seconds:.0f} s (one transaction)")
            if args.analyze:
                await conn.execute("ANALYZE tasks, executions")
            await conn.execute("SELECT pg_stat_statements_reset()")
            spy = _py_spy(operator.process.pid, args.drain, args.profile) if args.profile else None
            rss, per_second = await sample_drain(api, operator.process.pid, args.drain)
            if spy is not None:
                spy.wait(60)
                print(f"  py-spy profile of the operator during the drain ({args.profile}), self time:")
                for line in profile_top(args.profile):
                    print(f"    {line}")
            await top_statements(conn)
            plan_late = await lease_plan(conn)
            big = await front_rate(conn, since, args.window)
            assert big is not None, f"the first {args.window} tasks did not end within {args.drain} s"
            ratio = big / statistics.median(small)
            print(f"  {args.big:>9,} ready: {big:8.0f} tasks/s at the front (first {args.window:,} leased)")
            print(f"    lease SELECT with {args.big:,} ready: {plan_big}")
            print(f"    lease SELECT after {args.drain:.0f} s of draining: {plan_late}")
            print(
                "  drain of the big backlog, tasks/s per second: "
                + " ".join(f"{r:.0f}" for r in per_second)
                + f" (mean {statistics.mean(per_second):.0f})"
            )
            print(
                f"  operator RSS (MiB): before {rss_before:.0f}; every second of the drain: "
                + " ".join(f"{m:.0f}" for m in rss)
            )
            growth = rss[-1] - rss[0]
            print(f"  ratio, rate with {args.big:,} / rate with {args.small:,}: {ratio:.2f}x (goal >= 0.8x)")
            print(f"  RSS growth over {args.drain:.0f} s of draining: {growth:+.0f} MiB")
            size = f"{args.big // 1000}k" if args.big < 1_000_000 else f"{args.big // 1_000_000}M"
            record("5 backlog", f"rate {size} / rate {args.small // 1000}k", ratio, "x")
            record("5 backlog", f"rate at the front of {size}", big, "tasks/s")
            small_label = f"rate at the front of {args.small // 1000}k, beside {size}"
            record("5 backlog", small_label, statistics.median(small), "tasks/s")
            record("5 backlog", f"operator RSS growth draining {size}", growth, "MiB", higher_is_better=False)
        finally:
            for child in reversed(children):
                child.stop()
            await conn.close()
            if args.explain_slow is not None and server.child is not None:
                slow = [line for line in server.child.log_path.read_text().splitlines() if "duration:" in line]
                kept = HERE.parent / ".run" / "backlog-slow-plans.log"
                kept.parent.mkdir(exist_ok=True)
                kept.write_text(server.child.log_path.read_text())
                print(f"  {len(slow)} statements slower than {args.explain_slow} ms; their plans: {kept}")


async def sample_drain(api: str, pid: int, seconds: float) -> tuple[list[float], list[float]]:
    """The operator's RSS each second, and the results it accepted in each second."""
    rss: list[float] = []
    rates: list[float] = []
    last, last_at = results_so_far(api), time.monotonic()
    for _ in range(int(seconds)):
        await asyncio.sleep(1.0)
        count, now = results_so_far(api), time.monotonic()
        rates.append((count - last) / (now - last_at))
        last, last_at = count, now
        rss.append(rss_mib(pid))
    return rss, rates


if __name__ == "__main__":
    asyncio.run(main())
