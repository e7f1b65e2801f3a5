"""Gated throughput: how close Sluiceway runs to what its gates allow, and
whether any gate was ever exceeded, beside the ungated figure.

Three gate families run at once against one operator and one PostgreSQL:

- capped: ten task types `capped_0..9`, each `concurrentExecLimit` 8, whose
  handlers sleep S seconds: at most 10 x 8 / S tasks/s;
- metered: one no-op type with `rateLimitPerFrequency` R per 1-s fixed window:
  at most R tasks/s;
- semaphore: `erp_a` and `erp_b` both take a permit of `pool_x` and of
  `pool_y` (two permits per lease), P permits each, handlers sleep S2: at most
  P / S2 tasks/s for the pair.

Rates and violations come from the database afterwards (see bench/README.md).
A benchmark, not a test: it always exits 0, and prints VIOLATIONS! if a gate
was ever exceeded."""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import math
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import profiling  # noqa: E402
import throughput  # noqa: E402
from figures import record  # noqa: E402

from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.devenv.processes import Child  # noqa: E402
from sluiceway.store import definitions, workflows  # noqa: E402
from sluiceway.store.database import open_pool  # noqa: E402
from sluiceway.store.deciding import DeciderConfig, decide_batch  # noqa: E402

NS = throughput.NS
SEMAPHORES = ("pool_x", "pool_y")
SEMAPHORE_TYPES = ("erp_a", "erp_b")
METERED = "metered"


@dataclass
class Plan:
    capped_types: int
    cap: int
    sleep: float
    rate: int
    frequency: int
    permits: int
    semaphore_sleep: float
    seconds: float
    runs: dict[str, int] = field(default_factory=dict)

    @property
    def capped(self) -> list[str]:
        return [f"capped_{n}" for n in range(self.capped_types)]

    def theoretical(self) -> dict[str, float]:
        return {
            "capped": self.capped_types * self.cap / self.sleep,
            "metered": self.rate / self.frequency,
            "semaphore": self.permits / self.semaphore_sleep,
        }

    def definitions(self) -> dict[str, dict[str, object]]:
        specs: dict[str, dict[str, object]] = {name: {"concurrentExecLimit": self.cap} for name in self.capped}
        specs[METERED] = {"rateLimitPerFrequency": self.rate, "rateLimitFrequencySeconds": self.frequency}
        for name in SEMAPHORE_TYPES:
            specs[name] = {"semaphores": list(SEMAPHORES)}
        return specs

    def size(self) -> None:
        """Runs per type: `seconds` of work at each stream's theoretical rate."""
        per_capped = round(self.cap / self.sleep * self.seconds)
        self.runs = {name: per_capped for name in self.capped}
        self.runs[METERED] = round(self.rate / self.frequency * self.seconds)
        pair = round(self.permits / self.semaphore_sleep * self.seconds)
        self.runs[SEMAPHORE_TYPES[0]] = pair - pair // 2
        self.runs[SEMAPHORE_TYPES[1]] = pair // 2


def kube_name(name: str) -> str:
    return name.replace("_", "-")


async def prepare(server_dsn: str, plan: Plan) -> str:
    """A fresh database with the definitions written straight into the store
    (no Kubernetes) and every run started and decided: all tasks queued."""
    dsn = await throughput.create_database(server_dsn, "gated")
    pool = await open_pool(dsn, max_size=8)
    async with pool.acquire() as conn:
        for name, spec in plan.definitions().items():
            claim = await definitions.upsert_task_definition(conn, NS, name, kube_name(name), 1, spec)
            assert claim.is_ours(kube_name(name)), claim
        for name in SEMAPHORES:
            await definitions.upsert_semaphore(conn, NS, name, kube_name(name), 1, plan.permits)
        for name, count in plan.runs.items():
            await workflows.upsert_workflow(
                conn,
                NS,
                f"wf_{name}",
                kube_name(f"wf-{name}"),
                1,
                {"tasks": [{"name": name, "taskReferenceName": "only"}]},
            )
            version = await conn.fetchval(
                "SELECT latest_version FROM workflows WHERE namespace = $1 AND name = $2", NS, f"wf_{name}"
            )
            await conn.execute(
                "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status)"
                " SELECT gen_random_uuid(), $1, $2, $3, 'RUNNING' FROM generate_series(1, $4)",
                NS,
                f"wf_{name}",
                version,
                count,
            )
        await conn.execute("INSERT INTO decide_queue (execution_id, event) SELECT id, 'started' FROM executions")
    config = DeciderConfig(batch_size=500)
    while await decide_batch(pool, config):
        pass
    async with pool.acquire() as conn:
        queued = dict(
            await conn.fetch(
                "SELECT name, count(*) FROM tasks WHERE status = 'SCHEDULED' AND executor = 'worker' GROUP BY name"
            )
        )
        await conn.execute("VACUUM ANALYZE")
    await pool.close()
    assert queued == plan.runs, f"expected {plan.runs} queued, found {queued}"
    return dsn


async def drain(
    dsn: str,
    plan: Plan,
    workers: int,
    concurrency: int,
    batch: int,
    timeout: float,
    trace_dir: Path,
    profile: Path | None = None,
) -> tuple[float, dict[str, float], dict[str, float]]:
    """One operator and `workers` worker processes until no gated task is left;
    returns (wall seconds, CPU seconds per component)."""
    logs = Path(tempfile.mkdtemp(prefix="bench-gated-"))
    plane = throughput.start_operator(
        dsn,
        logs,
        BENCH_BATCH=str(batch),
        BENCH_CONCURRENCY=str(concurrency),
        BENCH_CAPPED_TYPES=str(plan.capped_types),
        BENCH_CAPPED_SLEEP=str(plan.sleep),
        BENCH_SEMAPHORE_SLEEP=str(plan.semaphore_sleep),
        BENCH_TRACE_DIR=str(trace_dir),
    )
    operator, env = plane.child, plane.env
    children = [operator]
    total = sum(plan.runs.values())
    try:
        # Rates come from the tasks' own timestamps; this watcher only says when to stop, so it polls
        # gently (throughput.py's 20 ms watcher would cost the database a tenth of a core here).
        watcher = asyncio.create_task(watch(dsn, total, timeout))
        stop_sampling = asyncio.Event()
        if profile is not None:
            await profiling.reset_statements(dsn)
            sampler = asyncio.create_task(profiling.sample_waits(dsn, stop_sampling))
        spying = profiling.py_spy(operator.process.pid, profile / "operator.txt") if profile else nullcontext()
        spying.__enter__()
        before = (throughput.cpu_seconds([operator.process.pid]), throughput.cpu_seconds(throughput.postgres_pids()))
        for n in range(workers):
            children.append(
                Child(
                    f"worker-{n}",
                    [
                        sys.executable,
                        "-m",
                        "sluiceway",
                        "worker",
                        str(HERE / "gated_worker.py"),
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
        try:
            wall, _ = await watcher
        finally:
            spying.__exit__(None, None, None)
            stop_sampling.set()
        if profile is not None:
            profiling.show("operator (py-spy)", profiling.top_frames(profile / "operator.txt"))
            profiling.show("database backends (pg_stat_activity samples)", profiling.top_waits(await sampler))
            profiling.show("database (pg_stat_statements)", await profiling.top_statements(dsn))
        server_side = scrape(plane.url)
        cpu = {
            "operator": throughput.cpu_seconds([operator.process.pid]) - before[0],
            "workers": throughput.cpu_seconds([c.process.pid for c in children[1:]]),
            "postgres": throughput.cpu_seconds(throughput.postgres_pids()) - before[1],
        }
    finally:
        for child in reversed(children):  # workers first: they write their traces on a graceful exit
            child.stop()
    return wall, cpu, server_side


async def watch(dsn: str, total: int, timeout: float, every: float = 0.25) -> tuple[float, float]:
    """Seconds from the first lease to no gated task left, to within `every`."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    started: float | None = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            left = await conn.fetchval(
                "SELECT count(*) FROM tasks WHERE status IN ('SCHEDULED', 'IN_PROGRESS') AND executor = 'worker'"
            )
            now = time.monotonic()
            if started is None and left < total:
                started = now
            if left == 0:
                return now - (started or now), started or now
            await asyncio.sleep(every)
    finally:
        await conn.close()
    raise TimeoutError(f"gated tasks not drained within {timeout} s")


def scrape(url: str) -> dict[str, float]:
    """The operator's own counters: lease and result calls and their time, gate holds."""
    wanted = (
        "sluiceway_lease_seconds_count",
        "sluiceway_lease_seconds_sum",
        "sluiceway_complete_seconds_count",
        "sluiceway_complete_seconds_sum",
        "sluiceway_decide_batch_seconds_count",
        "sluiceway_decide_batch_seconds_sum",
        "sluiceway_gate_holds_total",
    )
    found: dict[str, float] = {}
    try:
        text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    except OSError:
        return found
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith(wanted):
            found[name] = found.get(name, 0.0) + float(value)
    return found


def server_line(metrics: dict[str, float], total: int) -> str:
    def per(prefix: str) -> tuple[float, float]:
        count = metrics.get(f"{prefix}_count", 0.0)
        return count, 1000 * metrics.get(f"{prefix}_sum", 0.0) / count if count else 0.0

    leases, lease_ms = per("sluiceway_lease_seconds")
    results, result_ms = per("sluiceway_complete_seconds")
    decides, decide_ms = per("sluiceway_decide_batch_seconds")
    holds = {k.split('"')[1]: int(v) for k, v in metrics.items() if k.startswith("sluiceway_gate_holds_total{")}
    return (
        f"operator: {leases:.0f} lease attempts ({leases / total:.2f} per task, {lease_ms:.1f} ms each), "
        f"{results:.0f} result batches ({result_ms:.1f} ms each), {decides:.0f} decider batches "
        f"({decide_ms:.1f} ms each); gate holds {holds}"
    )


# -- analysis ---------------------------------------------------------------------------


@dataclass
class Family:
    name: str
    theoretical: float
    achieved: float
    worst: str
    violations: int
    notes: list[str] = field(default_factory=list)


def max_overlap(intervals: list[tuple[float, float]], limit: int) -> tuple[int, int]:
    """(most [start, end) intervals open at once, grants that took the count above `limit`)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])  # -1 sorts first: half-open
    open_, worst, excess = 0, 0, 0
    for _, step in events:
        open_ += step
        worst = max(worst, open_)
        if step == 1 and open_ > limit:
            excess += 1
    return worst, excess


def span_rate(intervals: list[tuple[float, float]]) -> float:
    """Tasks per second from the first lease to the last end."""
    return len(intervals) / (max(e for _, e in intervals) - min(s for s, _ in intervals))


def breakdown(rows: list[tuple[str, float, float]], trace: dict[str, tuple[float, float]], slots: int) -> str:
    """Where a slot's time goes: the server holds a slot from lease to result,
    which is delivery + handler + reporting; between a release and the next
    grant it sits idle (1 - occupancy)."""
    holds = [e - s for _, s, e in rows]
    span = max(e for _, _, e in rows) - min(s for _, s, _ in rows)
    occupancy = sum(holds) / (span * slots)
    traced = [(s, trace[i][0], trace[i][1], e) for i, s, e in rows if i in trace]
    text = f"slot held {1000 * sum(holds) / len(holds):.1f} ms per task"
    if traced:
        n = len(traced)
        delivery = sum(t0 - s for s, t0, _, _ in traced) / n
        handler = sum(t1 - t0 for _, t0, t1, _ in traced) / n
        report = sum(e - t1 for _, _, t1, e in traced) / n
        text += (
            f" = lease->handler {1000 * delivery:.1f} + handler {1000 * handler:.1f}"
            f" + handler->result {1000 * report:.1f}"
        )
    idle = (1 - occupancy) * span * slots / len(rows)
    return text + f"; occupancy {occupancy:.1%} of {slots} slots (idle {1000 * idle:.1f} ms per grant)"


def regrant_gaps(by_type: dict[str, list[tuple[str, float, float]]], names: list[str], cap: int) -> str:
    """How long a capped slot stays empty between a release and the grant that
    reuses it (the k-th release of a type freed the slot of its (k + cap)-th
    grant), and the share of time each type had none in flight: slots of one
    type released and granted together sit empty together."""
    gaps: list[float] = []
    empty = total = 0.0
    for name in names:
        rows = by_type[name]
        starts, ends = sorted(s for _, s, _ in rows), sorted(e for _, _, e in rows)
        gaps += [starts[k + cap] - ends[k] for k in range(len(ends) - cap)]
        events = sorted([(s, 1) for s in starts] + [(e, -1) for e in ends])
        open_, last = 0, events[0][0]
        for at, step in events:
            empty += at - last if open_ == 0 else 0.0
            open_, last = open_ + step, at
        total += events[-1][0] - events[0][0]
    gaps.sort()
    p50, p90, mean = gaps[len(gaps) // 2], gaps[len(gaps) * 9 // 10], sum(gaps) / len(gaps)
    return (
        f"release->regrant p50 {1000 * p50:.1f} ms, p90 {1000 * p90:.1f} ms, mean {1000 * mean:.1f} ms; "
        f"no task of the type in flight {empty / total:.1%} of the time"
    )


async def analyse(dsn: str, plan: Plan, trace_dir: Path) -> list[Family]:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    rows = await conn.fetch(
        "SELECT id::text AS id, name, status, extract(epoch FROM leased_at)::float8 AS leased,"
        " extract(epoch FROM ended_at)::float8 AS ended FROM tasks WHERE executor = 'worker'"
    )
    await conn.close()
    trace: dict[str, tuple[float, float]] = {}
    for path in trace_dir.glob("worker-*.json"):
        trace.update({i: (s, e) for i, s, e in json.loads(path.read_text())})
    by_type: dict[str, list[tuple[str, float, float]]] = {}
    odd = Counter(r["status"] for r in rows if r["status"] != "COMPLETED")
    for r in rows:
        if r["leased"] is not None and r["ended"] is not None:
            by_type.setdefault(r["name"], []).append((r["id"], r["leased"], r["ended"]))
    theory = plan.theoretical()
    families = []

    # capped: per type, overlap <= cap; the family's rate is the sum of the types' rates.
    rates, worst, violations, shares = [], 0, 0, []
    for name in plan.capped:
        intervals = [(s, e) for _, s, e in by_type[name]]
        peak, excess = max_overlap(intervals, plan.cap)
        worst, violations = max(worst, peak), violations + excess
        rates.append(span_rate(intervals))
        shares.append(rates[-1] / (plan.cap / plan.sleep))
    capped_rows = [row for name in plan.capped for row in by_type[name]]
    family = Family("capped", theory["capped"], sum(rates), f"{worst} in flight (cap {plan.cap})", violations)
    family.notes.append(
        f"per type share {min(shares):.2f}..{max(shares):.2f}; "
        + breakdown(capped_rows, trace, plan.cap * plan.capped_types)
    )
    family.notes.append(regrant_gaps(by_type, plan.capped, plan.cap))
    families.append(family)

    # metered: leases per fixed window floor(epoch / frequency) <= R, two adjacent <= 2R.
    leases = sorted(s for _, s, _ in by_type[METERED])
    windows = Counter(math.floor(s / plan.frequency) for s in leases)
    first, last = min(windows), max(windows)
    counts = [windows.get(w, 0) for w in range(first, last + 1)]
    pairs = [a + b for a, b in zip(counts, counts[1:], strict=False)] or [counts[0]]
    excess = sum(max(0, c - plan.rate) for c in counts)
    interior = counts[1:-1]
    # Fixed windows: the first and last are partial, so the rate is tokens spent per full window.
    achieved = (sum(interior) / len(interior) if interior else len(leases)) / plan.frequency
    sliding = max(bisect.bisect_left(leases, s + plan.frequency) - i for i, s in enumerate(leases))
    family = Family(
        "metered", theory["metered"], achieved, f"{max(counts)}/window, {max(pairs)}/2 windows (R {plan.rate})", excess
    )
    span = span_rate([(s, e) for _, s, e in by_type[METERED]])
    family.notes.append(
        f"{len(interior)} full windows, fullest {max(interior or counts)}, emptiest "
        f"{min(interior or counts)}; first-lease-to-last-end {span:.0f}/s;"
        f" worst sliding {plan.frequency} s: {sliding} (fixed windows allow up to 2R)"
    )
    families.append(family)

    # semaphore: erp_a and erp_b together hold at most P permits of each pool.
    pair_rows = [row for name in SEMAPHORE_TYPES for row in by_type[name]]
    intervals = [(s, e) for _, s, e in pair_rows]
    peak, excess = max_overlap(intervals, plan.permits)
    family = Family(
        "semaphore", theory["semaphore"], span_rate(intervals), f"{peak} permits held (P {plan.permits})", excess
    )
    family.notes.append(breakdown(pair_rows, trace, plan.permits))
    families.append(family)
    if odd:
        families[0].notes.append(f"tasks not COMPLETED: {dict(odd)}")
    return families


def table(families: list[Family], ungated: tuple[float, float] | None, wall: float, total: int) -> bool:
    header = (
        "gate family",
        "theoretical/s",
        "achieved/s",
        "share (goal>=0.9)",
        "worst observed",
        "violations (must be 0)",
    )
    lines = [header] + [
        (
            f.name,
            f"{f.theoretical:.0f}",
            f"{f.achieved:.0f}",
            f"{f.achieved / f.theoretical:.2f}",
            f.worst,
            str(f.violations),
        )
        for f in families
    ]
    theory = sum(f.theoretical for f in families)
    achieved = sum(f.achieved for f in families)
    lines.append(
        (
            "all gated",
            f"{theory:.0f}",
            f"{achieved:.0f}",
            f"{achieved / theory:.2f}",
            "",
            str(sum(f.violations for f in families)),
        )
    )
    if ungated is not None:
        lines.append(
            ("ungated (throughput.py)", "-", f"{ungated[0]:.0f}", "-", f"runs COMPLETED {ungated[1]:.0f}/s", "-")
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print(
            "  "
            + " | ".join(
                cell.ljust(w) if i in (0, 4) else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(line, widths, strict=False))
            )
        )
        if n == 0 or n == len(families):
            print("  " + "-+-".join("-" * w for w in widths))
    print(f"  ({total} gated tasks drained in {wall:.1f} s wall)")
    for f in families:
        for note in f.notes:
            print(f"  {f.name}: {note}")
    return any(f.violations for f in families)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sleep", type=float, default=0.1, help="S: seconds each capped handler sleeps")
    parser.add_argument("--cap", type=int, default=8, help="concurrentExecLimit of each capped type")
    parser.add_argument("--capped-types", type=int, default=10)
    parser.add_argument("--rate", type=int, default=200, help="R: rateLimitPerFrequency of `metered`")
    parser.add_argument("--frequency", type=int, default=1, help="rateLimitFrequencySeconds of `metered`")
    parser.add_argument("--permits", type=int, default=4, help="P: permits of pool_x and of pool_y")
    parser.add_argument("--semaphore-sleep", type=float, default=0.1, help="S2: seconds each erp handler sleeps")
    parser.add_argument("--seconds", type=float, default=20, help="seconds of work per stream at its theoretical rate")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (gated and ungated)")
    parser.add_argument("--concurrency", type=int, default=32, help="worker slots per task type and process")
    parser.add_argument("--batch", type=int, default=100, help="result batch (and the ungated lease batch)")
    parser.add_argument("--ungated-tasks", type=int, default=20000, help="0 skips the ungated run")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--classic", action="store_true", help="workers as the SDK was before issue 15 (BENCH_CLASSIC=1)"
    )
    parser.add_argument(
        "--no-handover",
        action="store_true",
        help="freed gated slots leased again under the gates' locks (SLUICEWAY_GATE_HANDOVER=0), as before",
    )
    parser.add_argument(
        "--linger", type=float, help="seconds every worker result waits for others (BENCH_LINGER; 0.002 was the SDK's)"
    )
    parser.add_argument("--quick", action="store_true", help="about 2 minutes: 6 s per stream, no ungated run")
    parser.add_argument("--profile", type=Path, help="py-spy on the operator, pg_stat_statements; into this directory")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.ungated_tasks = 6, 0
    if args.classic:
        os.environ["BENCH_CLASSIC"] = "1"
    if args.no_handover:
        os.environ["SLUICEWAY_GATE_HANDOVER"] = "0"
    if args.linger is not None:
        os.environ["BENCH_LINGER"] = str(args.linger)

    plan = Plan(
        args.capped_types,
        args.cap,
        args.sleep,
        args.rate,
        args.frequency,
        args.permits,
        args.semaphore_sleep,
        args.seconds,
    )
    plan.size()
    total = sum(plan.runs.values())
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    settings = {"max_connections": "300", **profiling.pg_settings(args.profile is not None)}
    with LocalPostgres(durable=True, settings=settings) as server:
        print(f"PostgreSQL (embedded, fsync on), {os.cpu_count()} cores shared by everything")
        ungated = None
        if args.ungated_tasks:
            print(f"ungated: {args.ungated_tasks} no-op tasks, {args.workers} workers x batch {args.batch}", flush=True)
            ungated = await throughput.sluiceway(server.dsn, args.ungated_tasks, args.workers, args.batch, args.timeout)
        print(
            f"gated: {total} one-task runs ({args.seconds:g} s of work per stream), {args.workers} workers x "
            f"{args.concurrency} slots per type; S={plan.sleep:g} s, R={plan.rate}/{plan.frequency} s, "
            f"P={plan.permits}, S2={plan.semaphore_sleep:g} s",
            flush=True,
        )
        started = time.monotonic()
        dsn = await prepare(server.dsn, plan)
        print(f"  queued in {time.monotonic() - started:.1f} s", flush=True)
        trace_dir = Path(tempfile.mkdtemp(prefix="bench-gated-trace-"))
        wall, cpu, server_side = await drain(
            dsn, plan, args.workers, args.concurrency, args.batch, args.timeout, trace_dir, args.profile
        )
        print(
            "  CPU seconds per 1000 gated tasks: "
            + ", ".join(f"{k} {v / total * 1000:.2f}" for k, v in cpu.items())
            + f" (busy {sum(cpu.values()) / wall:.2f} of {os.cpu_count()} cores)"
        )
        print("  " + server_line(server_side, total))
        families = await analyse(dsn, plan, trace_dir)
        shutil.rmtree(trace_dir, ignore_errors=True)
    print()
    if table(families, ungated, wall, total):
        print("\n  VIOLATIONS! A gate was exceeded; see 'worst observed'.")
    print(f"  (load {os.getloadavg()[0]:.2f} at the end; S={plan.sleep:g} s, S2={plan.semaphore_sleep:g} s)")
    sdk = "classic SDK" if args.classic else "sluiceway" + (" without handover" if args.no_handover else "")
    for family in families:
        record("6 gates", f"{sdk} {family.name} share of theoretical", family.achieved / family.theoretical, "x")
    record("6 gates", f"{sdk} violations", sum(f.violations for f in families), "count", higher_is_better=False)


if __name__ == "__main__":
    asyncio.run(main())
