"""Continuous load through the front door (issue 15, goal 2): runs started
through the HTTP API while workers drain them, sustained, against pgqueuer,
procrastinate and DBOS queues doing the same (enqueue + consume at once), each at
its best setting of a short sweep, one after the other on one PostgreSQL.

Prints each system's sustained completions per second and the ratios, then
Sluiceway's start -> COMPLETED latency percentiles with starts paced at half its
sustained rate. See bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import profiling  # noqa: E402
from figures import record  # noqa: E402
from throughput import NS, cpu_seconds, create_database, start_operator  # noqa: E402

from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.devenv.processes import Child  # noqa: E402
from sluiceway.store import workflows  # noqa: E402
from sluiceway.store.database import open_pool  # noqa: E402

GOAL = "2 continuous"
# What any queue on PostgreSQL is run with (pgqueuer and procrastinate advise it too):
# autovacuum that keeps up with tables whose rows churn, so the planner has statistics
# for a table that grew from empty a second ago and dead rows are reclaimed.
QUEUE_SETTINGS = {
    "autovacuum_naptime": "1s",
    "autovacuum_vacuum_scale_factor": "0.05",
    "autovacuum_analyze_scale_factor": "0.05",
}
PEERS = HERE / "peer_apps.py"


@dataclass(frozen=True)
class Window:
    """What one system sustained: completions per second over the measured window."""

    label: str
    rate: float
    backlog: tuple[int, int]  # queued but not done, at the window's start and end
    cpu: float  # CPU seconds of every process (PostgreSQL's too) per 1000 completions


async def measure(
    dsn: str,
    label: str,
    done_sql: str,
    backlog_sql: str,
    children: list[Child],
    warmup: float,
    seconds: float,
) -> Window:
    """Let the system warm up, then count completions over `seconds`.

    The producers would outrun any consumer, and then the number measured would be
    how fast a queue grows. So the backlog is held between LOW and HIGH: the
    producers (children named producer-*) are paused (SIGSTOP) above HIGH and
    resumed below LOW, the same for every system. Completions per second with a
    backlog that neither empties nor grows is what the system sustains."""
    conn = await asyncpg.connect(dsn)
    producers = [c for c in children if "produce" in c.name]
    flow = asyncio.create_task(hold_backlog(conn, backlog_sql, producers))
    try:
        await asyncio.sleep(warmup)
        settle = time.monotonic() + 10  # and until the backlog is up: a window that starts empty measures the fill
        while time.monotonic() < settle:
            async with lock:
                if int(await conn.fetchval(backlog_sql)) >= LOW:
                    break
            await asyncio.sleep(0.1)
        for child in children:
            if not child.alive():
                raise RuntimeError(f"{child.name} died:\n{child.tail()}")
        groups = cpu_groups(children)
        cpu_before = {name: cpu_seconds(pids) for name, pids in groups.items()} | {"postgres": cluster_cpu()}
        async with lock:
            done_before, backlog_before = int(await conn.fetchval(done_sql)), int(await conn.fetchval(backlog_sql))
        started = time.monotonic()
        await asyncio.sleep(seconds)
        async with lock:
            done_after, backlog_after = int(await conn.fetchval(done_sql)), int(await conn.fetchval(backlog_sql))
        elapsed = time.monotonic() - started
        cpu = {name: max(0.0, cpu_seconds(pids) - cpu_before[name]) for name, pids in groups.items()}
        cpu["postgres"] = cluster_cpu() - cpu_before["postgres"]
    finally:
        flow.cancel()
        for child in producers:
            resume(child)
        await conn.close()
    done = done_after - done_before
    window = Window(label, done / elapsed, (backlog_before, backlog_after), sum(cpu.values()) / max(done, 1) * 1000)
    print(
        f"    {label:58} {window.rate:8.0f}/s  backlog {backlog_before} -> {backlog_after}; CPU s per 1000: "
        + ", ".join(f"{name} {value / max(done, 1) * 1000:.2f}" for name, value in cpu.items()),
        flush=True,
    )
    return window


LOW, HIGH = 1000, 3000  # the backlog the producers keep: a few hundred milliseconds of work for any of them
lock = asyncio.Lock()  # one query at a time on the measuring connection


async def hold_backlog(conn: asyncpg.Connection, backlog_sql: str, producers: list[Child]) -> None:
    paused = False
    while True:
        async with lock:
            backlog = int(await conn.fetchval(backlog_sql))
        if backlog > HIGH and not paused:
            for child in producers:
                pause(child)
            paused = True
        elif backlog < LOW and paused:
            for child in producers:
                resume(child)
            paused = False
        await asyncio.sleep(0.05)


def pause(child: Child) -> None:
    if child.alive():
        os.killpg(child.process.pid, signal.SIGSTOP)


def resume(child: Child) -> None:
    if child.alive():
        os.killpg(child.process.pid, signal.SIGCONT)


def cpu_groups(children: list[Child]) -> dict[str, list[int]]:
    """Processes by role (the name before its number)."""
    groups: dict[str, list[int]] = {}
    for child in children:
        groups.setdefault(child.name.rstrip("0123456789").rstrip("-"), []).append(child.process.pid)
    return groups


POSTMASTER: list[int] = []  # the benchmark's own PostgreSQL (other clusters may run on the machine)


def cluster_cpu() -> float:
    """CPU seconds of our PostgreSQL so far: the postmaster with the backends it
    reaped (cutime, cstime) and those still alive (whose parent it is)."""
    if not POSTMASTER:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, parent = int(stat.parent.name), int(fields[1])
        if pid == POSTMASTER[0]:
            total += sum(int(f) for f in fields[11:15]) / tick
        elif parent == POSTMASTER[0]:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def stop_all(children: list[Child]) -> None:
    for child in children:
        child.stop(grace=5)


# -- Sluiceway ----------------------------------------------------------------------------------------


async def produce(url: str, batch: int, clients: int, rate: float) -> None:
    """Start runs through POST .../executions/starts, `clients` requests in flight, as
    fast as they are answered (rate 0) or paced to `rate` runs per second."""
    import aiohttp

    body = {"starts": [{"name": "noop_wf"}] * batch}
    interval = clients * batch / rate if rate else 0.0
    refused = 0

    async def client(session: aiohttp.ClientSession, offset: float) -> None:
        nonlocal refused
        await asyncio.sleep(offset)
        next_at = time.monotonic()
        while True:
            async with session.post(f"{url}/v1/ns/{NS}/executions/starts", json=body) as response:
                if response.status != 200:
                    refused += 1
                    if refused < 5:
                        print(f"producer: {response.status} {await response.text()}"[:300], flush=True)
                    await asyncio.sleep(0.1)
                await response.read()
            if interval:
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        await asyncio.gather(*(client(session, n * interval / clients) for n in range(clients)))


def sluiceway_children(dsn: str, logs: Path, workers: int, batch: int, operators: int) -> tuple[list[Child], list[str]]:
    children: list[Child] = []
    urls = []
    for n in range(operators):
        plane = start_operator(dsn, logs, name=f"operator-{n}")
        children.append(plane.child)
        urls.append(plane.url)
    for n in range(workers):
        argv = [sys.executable, "-m", "sluiceway", "worker", str(HERE / "noop_worker.py"), "--url", urls[n % len(urls)]]
        argv += ["--namespace", NS, "--log-level", "WARNING"]
        children.append(Child(f"worker-{n}", argv, logs, env={**os.environ, "BENCH_BATCH": str(batch)}))
    return children, urls


def producer(urls: list[str], batch: int, clients: int, rate: float, logs: Path, n: int = 0) -> Child:
    argv = [sys.executable, str(Path(__file__).resolve()), "--produce", urls[n % len(urls)]]
    argv += ["--start-batch", str(batch), "--clients", str(clients), "--rate", str(rate)]
    return Child(f"producer-{n}", argv, logs)


async def sluiceway_database(server_dsn: str) -> str:
    dsn = await create_database(server_dsn, "continuous_sluiceway")
    pool = await open_pool(dsn, max_size=2)
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(
            conn, NS, "noop_wf", "noop-wf", 1, {"tasks": [{"name": "noop", "taskReferenceName": "noop"}]}
        )
    await pool.close()
    return dsn


def sluiceway_label(setting: dict[str, int]) -> str:
    return (
        f"sluiceway {setting['operators']} op, {setting['workers']} w x {setting['batch']}, "
        f"starts of {setting['start_batch']}"
    )


SLUICEWAY_DONE = "SELECT count(*) FROM executions WHERE status = 'COMPLETED'"
SLUICEWAY_BACKLOG = "SELECT count(*) FROM executions WHERE status = 'RUNNING'"


async def sluiceway(
    server_dsn: str, setting: dict[str, int], warmup: float, seconds: float, producers: int, profile: bool = False
) -> Window:
    dsn = await sluiceway_database(server_dsn)
    if profile:
        await profiling.reset_statements(dsn)
    logs = Path(tempfile.mkdtemp(prefix="bench-continuous-"))
    children, urls = sluiceway_children(dsn, logs, setting["workers"], setting["batch"], setting["operators"])
    try:
        for n in range(producers):
            children.append(producer(urls, setting["start_batch"], setting["clients"], 0, logs, n))
        label = sluiceway_label(setting)
        if not profile:
            return await measure(dsn, label, SLUICEWAY_DONE, SLUICEWAY_BACKLOG, children, warmup, seconds)
        spied = logs / "operator-0.spy"
        with profiling.py_spy(children[0].process.pid, spied):
            window = await measure(dsn, label, SLUICEWAY_DONE, SLUICEWAY_BACKLOG, children, warmup, seconds)
        profiling.show("operator-0 (py-spy)", profiling.top_frames(spied))
        profiling.show("database (pg_stat_statements)", await profiling.top_statements(dsn))
        return window
    finally:
        stop_all(children)


async def latency(server_dsn: str, setting: dict[str, int], rate: float, seconds: float) -> dict[str, float]:
    """Start -> COMPLETED percentiles (ms) of runs started at `rate` per second."""
    dsn = await sluiceway_database(server_dsn)
    logs = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    children, urls = sluiceway_children(dsn, logs, setting["workers"], setting["batch"], setting["operators"])
    # Small batches, so that a start waits for no batch to fill: 10 runs per request, paced.
    batch = max(1, min(10, int(rate / 50)))
    clients = 16  # enough requests in flight that a slow answer never holds the pace back
    try:
        children.append(producer(urls, batch, clients, rate, logs))
        await asyncio.sleep(2 + seconds)
        children[-1].stop()
        conn = await asyncpg.connect(dsn)
        try:
            deadline = time.monotonic() + 30
            while await conn.fetchval(SLUICEWAY_BACKLOG) and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            row = await conn.fetchrow(
                """
                SELECT count(*) AS n,
                       percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP
                           (ORDER BY extract(epoch FROM ended_at - created_at)) AS p
                  FROM executions
                 WHERE status = 'COMPLETED' AND created_at >= (SELECT min(created_at) + interval '2 s' FROM executions)
                """
            )
        finally:
            await conn.close()
    finally:
        stop_all(children)
    p50, p90, p99 = (1000 * v for v in row["p"])
    achieved = row["n"] / seconds
    return {"p50": p50, "p90": p90, "p99": p99, "achieved": achieved}


# -- peers ---------------------------------------------------------------------------------------------


def peer(role: str, dsn: str, *args: object, logs: Path, name: str) -> Child:
    return Child(name, [sys.executable, str(PEERS), role, dsn, *map(str, args)], logs)


async def pgqueuer(server_dsn: str, setting: tuple[int, int], warmup: float, seconds: float, producers: int) -> Window:
    consumers, batch = setting
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    dsn = await create_database(server_dsn, "continuous_pgqueuer")
    conn = await asyncpg.connect(dsn)
    await Queries(AsyncpgDriver(conn)).install()
    await conn.close()
    logs = Path(tempfile.mkdtemp(prefix="bench-pgq-"))
    children = [peer("pgq-consume", dsn, batch, logs=logs, name=f"pgq-{n}") for n in range(consumers)]
    children += [peer("pgq-produce", dsn, 100, logs=logs, name=f"pgq-produce-{n}") for n in range(producers)]
    try:
        return await measure(
            dsn,
            f"pgqueuer 1.6, {consumers} consumers x batch {batch}",
            "SELECT (SELECT last_value FROM pgqueuer_id_seq) - (SELECT count(*) FROM pgqueuer)",
            "SELECT count(*) FROM pgqueuer",
            children,
            warmup,
            seconds,
        )
    finally:
        stop_all(children)


async def procrastinate(
    server_dsn: str, setting: tuple[int, int], warmup: float, seconds: float, producers: int
) -> Window:
    consumers, concurrency = setting
    dsn = await create_database(server_dsn, "continuous_procrastinate")
    subprocess.run([sys.executable, str(PEERS), "proc-install", dsn], check=True)
    logs = Path(tempfile.mkdtemp(prefix="bench-proc-"))
    children = [peer("proc-worker", dsn, concurrency, logs=logs, name=f"proc-{n}") for n in range(consumers)]
    children += [peer("proc-produce", dsn, 100, logs=logs, name=f"proc-produce-{n}") for n in range(producers)]
    try:
        return await measure(
            dsn,
            f"procrastinate 3.10, {consumers} workers x concurrency {concurrency}",
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')",
            children,
            warmup,
            seconds,
        )
    finally:
        stop_all(children)


async def dbos(server_dsn: str, setting: tuple[int, int], warmup: float, seconds: float, producers: int) -> Window:
    consumers, concurrency = setting
    dsn = await create_database(server_dsn, "continuous_dbos")
    logs = Path(tempfile.mkdtemp(prefix="bench-dbos-"))
    children = [peer("dbos-worker", dsn, concurrency, 0.05, logs=logs, name=f"dbos-{n}") for n in range(consumers)]
    await wait_for_table(dsn, "dbos.workflow_status", children)
    # DBOS enqueues one workflow per call: two producer processes of 16 threads keep its queue fed.
    children += [peer("dbos-produce", dsn, 16, logs=logs, name=f"dbos-produce-{n}") for n in range(2 * producers)]
    try:
        return await measure(
            dsn,
            f"DBOS 3.4 queue, {consumers} executors x concurrency {concurrency}",
            "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'",
            "SELECT count(*) FROM dbos.workflow_status WHERE status IN ('ENQUEUED', 'PENDING')",
            children,
            warmup,
            seconds,
        )
    finally:
        stop_all(children)


async def wait_for_table(dsn: str, table: str, children: list[Child], timeout: float = 60) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout
        while not await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
            if time.monotonic() > deadline or not all(c.alive() for c in children):
                raise RuntimeError(f"{table} never appeared:\n" + "\n".join(c.tail() for c in children))
            await asyncio.sleep(0.2)
        await asyncio.sleep(1)  # the executors register their queue after migrating
    finally:
        await conn.close()


def best(windows: list[Window]) -> Window:
    return max(windows, key=lambda w: w.rate)


async def main(args: argparse.Namespace) -> None:
    warmup, seconds = (3.0, 12.0) if args.quick else (10.0, args.seconds)
    # Worker processes are a knob of every system: each is swept with 2 and 4.
    sluiceway_settings = [
        {"operators": 1, "workers": 2, "batch": 100, "start_batch": 100, "clients": 4},
        {"operators": 2, "workers": 2, "batch": 100, "start_batch": 100, "clients": 4},
        {"operators": 2, "workers": 4, "batch": 100, "start_batch": 100, "clients": 4},
    ]
    pgq_settings = [(2, 10), (2, 100), (4, 100)]  # (consumers, batch)
    proc_settings = [(2, 10), (2, 50), (4, 10)]  # (workers, concurrency)
    dbos_settings = [(2, 10), (2, 100), (4, 100)]  # (executors, worker concurrency)
    if args.quick:  # two worker processes each, at each one's best knob of the full sweeps here
        sluiceway_settings, pgq_settings = sluiceway_settings[:1], [(2, 100)]
        proc_settings, dbos_settings = [(2, 50)], [(2, 100)]
    settings = {"max_connections": "300", **QUEUE_SETTINGS, **profiling.pg_settings(args.profile)}
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    with LocalPostgres(durable=True, settings=settings) as server:
        POSTMASTER[:] = [server.child.process.pid]
        print(
            f"PostgreSQL embedded (fsync on), {os.cpu_count()} cores shared; warm-up {warmup:.0f} s, "
            f"then {seconds:.0f} s measured per setting",
            flush=True,
        )
        ours = best([await sluiceway(server.dsn, s, warmup, seconds, 1, args.profile) for s in sluiceway_settings])
        peers: dict[str, Window] = {}
        if not args.skip_peers:
            peers["pgqueuer"] = best([await pgqueuer(server.dsn, s, warmup, seconds, 1) for s in pgq_settings])
            peers["procrastinate"] = best(
                [await procrastinate(server.dsn, s, warmup, seconds, 1) for s in proc_settings]
            )
            peers["DBOS queue"] = best([await dbos(server.dsn, s, warmup, seconds, 1) for s in dbos_settings])
        setting = next(s for s in sluiceway_settings if ours.label == sluiceway_label(s))
        lat = await latency(server.dsn, setting, ours.rate / 2, 10 if args.quick else 30)
    print()
    print(f"  sluiceway, starts through POST /executions/starts: {ours.rate:8.0f} runs/s sustained ({ours.label})")
    record(GOAL, "sluiceway runs/s", ours.rate, "runs/s")
    goals = {"pgqueuer": 1.5, "procrastinate": 3.0, "DBOS queue": 3.0}
    for name, window in peers.items():
        ratio = ours.rate / window.rate
        met = "met" if ratio >= goals[name] else "NOT met"
        print(
            f"  {name:14} {window.rate:8.0f} jobs/s ({window.label}): sluiceway / {name} {ratio:5.2f}x "
            f"(goal >= {goals[name]}x: {met})"
        )
        record(GOAL, f"{name} jobs/s", window.rate, "jobs/s")
        record(GOAL, f"sluiceway / {name}", ratio, "x")
    print(
        f"  latency at half that rate ({lat['achieved']:.0f} runs/s achieved), start -> COMPLETED: "
        f"p50 {lat['p50']:.0f} ms, p90 {lat['p90']:.0f} ms, p99 {lat['p99']:.0f} ms"
    )
    for key in ("p50", "p90", "p99"):
        record(GOAL, f"latency {key} at half rate", lat[key], "ms", higher_is_better=False)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one setting each, 12 s windows (about 2 minutes)")
    parser.add_argument("--seconds", type=float, default=60, help="measured window per setting")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--profile", action="store_true", help="py-spy on the operator, pg_stat_statements")
    # The producer role of this same script (a process of its own).
    parser.add_argument("--produce", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--start-batch", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, default=4, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    if arguments.produce:
        asyncio.run(produce(arguments.produce, arguments.start_batch, arguments.clients, arguments.rate))
    else:
        asyncio.run(main(arguments))
