"""Workflows of more than one task (issue 15, goal 3): 10-step sequential chains and
100-branch fan-out/join runs completed per second, Sluiceway against DBOS workflows
on one PostgreSQL, and against Temporal's development server (bench/temporal_flows.py).

Sluiceway: N runs started through POST .../executions/starts, their tasks done by
SDK worker processes; the rate is N / (last run's end - first run's start), read
from the database. DBOS: N workflows started in one process with its documented
API (steps for the chain, child workflows on a queue for the fan-out), at the best
concurrency of a short sweep, timed the same way (first start to last result).
See bench/README.md."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import profiling  # noqa: E402
from continuous import PEERS, QUEUE_SETTINGS, sluiceway_children, stop_all  # noqa: E402
from figures import record  # noqa: E402
from throughput import NS, create_database  # noqa: E402

from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.devenv.processes import free_port  # noqa: E402
from sluiceway.store import workflows  # noqa: E402
from sluiceway.store.database import open_pool  # noqa: E402

GOAL = "3 workflows"
BRANCHES = 100
STEPS = 10
SHAPES = {
    "chain10": {"tasks": [{"name": "noop", "taskReferenceName": f"step_{n}"} for n in range(STEPS)]},
    "fanout100": {
        "tasks": [
            {
                "name": "fan_out",
                "taskReferenceName": "fan_out",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {"forkTaskName": "noop", "forkTaskInputs": "${workflow.input.items}"},
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        ]
    },
}
INPUTS = {"chain10": {}, "fanout100": {"items": [{"n": n} for n in range(BRANCHES)]}}


async def started_and_drained(
    conn: asyncpg.Connection, url: str, shape: str, runs: int, timeout: float
) -> tuple[int, float, int]:
    """Start `runs` runs of `shape` through the batch endpoint and wait until none is RUNNING:
    (completed, seconds from the first start to the last end, not completed)."""
    batch = max(1, min(1000, 200_000 // max(1, len(str(INPUTS[shape])))))
    async with aiohttp.ClientSession() as http:
        for first in range(0, runs, batch):
            body = {"starts": [{"name": shape, "input": INPUTS[shape]}] * min(batch, runs - first)}
            async with http.post(f"{url}/v1/ns/{NS}/executions/starts", json=body) as response:
                assert response.status == 200, await response.text()
    deadline = time.monotonic() + timeout
    while await conn.fetchval("SELECT count(*) FROM executions WHERE status = 'RUNNING'"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{shape}: not done in {timeout} s")
        await asyncio.sleep(0.1)
    done, seconds, failed = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE status = 'COMPLETED'), extract(epoch FROM max(ended_at) - min(created_at)),"
        " count(*) FILTER (WHERE status <> 'COMPLETED') FROM executions"
    )
    return int(done), float(seconds), int(failed)


async def sluiceway(
    server_dsn: str, shape: str, runs: int, setting: dict[str, int], timeout: float, profile: bool
) -> float:
    dsn = await create_database(server_dsn, f"workflows_{shape}")
    pool = await open_pool(dsn, max_size=2)
    async with pool.acquire() as conn:
        await workflows.upsert_workflow(conn, NS, shape, shape, 1, SHAPES[shape])
    await pool.close()
    if profile:
        await profiling.reset_statements(dsn)
    logs = Path(tempfile.mkdtemp(prefix=f"bench-{shape}-"))
    children, urls = sluiceway_children(dsn, logs, setting["workers"], setting["batch"], setting["operators"])
    conn = await asyncpg.connect(dsn)
    try:
        spied = logs / "operator-0.spy"
        with profiling.py_spy(children[0].process.pid, spied) if profile else contextlib.nullcontext():
            done, seconds, failed = await started_and_drained(conn, urls[0], shape, runs, timeout)
        if profile:
            profiling.show(f"operator-0 (py-spy), {shape}", profiling.top_frames(spied))
            profiling.show("database (pg_stat_statements)", await profiling.top_statements(dsn))
    finally:
        await conn.close()
        stop_all(children)
    assert done == runs and not failed, f"{shape}: {done} of {runs} completed, {failed} did not"
    rate = runs / float(seconds)
    print(f"    sluiceway {shape:16} {runs:6} runs in {float(seconds):6.2f} s: {rate:8.1f} runs/s", flush=True)
    return rate


def peer_rate(peer: str, argv: list[str], shape: str, runs: int, concurrency: int) -> float:
    """Run a peer's process, whose last line is "completed seconds"; its runs/s."""
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=900)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{peer} {shape} failed: {result.stderr[-2000:]}")
    done, seconds = lines[-1].split()
    if int(done) != runs:
        raise RuntimeError(f"{peer} {shape}: {done} of {runs} workflows completed as expected")
    rate = int(done) / float(seconds)
    print(
        f"    {peer:9} {shape:16} {runs:6} runs in {float(seconds):6.2f} s: {rate:8.1f} runs/s "
        f"(concurrency {concurrency})",
        flush=True,
    )
    return rate


def dbos(server_dsn_database: str, shape: str, runs: int, concurrency: int) -> float:
    argv = [str(PEERS), "dbos-flows", server_dsn_database, shape, str(runs), str(concurrency)]
    return peer_rate("DBOS 3.4", argv, shape, runs, concurrency)


TEMPORAL_FLOWS = HERE / "temporal_flows.py"


def temporal_binary() -> str | None:
    """The Temporal CLI, whose `server start-dev` is the development server: built by
    hack/build-temporal.sh (`make bench` passes it in SLUICEWAY_TEMPORAL), or on PATH."""
    return os.environ.get("SLUICEWAY_TEMPORAL") or shutil.which("temporal")


@contextlib.contextmanager
def temporal_server(binary: str, logs: Path) -> Iterator[str]:
    """`temporal server start-dev` (in-memory SQLite, no UI) on a free port; yields its address."""
    port = free_port()
    with (logs / "temporal.log").open("w") as log:
        argv = [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
        process = subprocess.Popen(argv + ["--log-level", "error"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def temporal(address: str, shape: str, runs: int, concurrency: int) -> float:
    argv = [str(TEMPORAL_FLOWS), address, shape, str(runs), str(concurrency)]
    return peer_rate("Temporal", argv, shape, runs, concurrency)


def compare(shape: str, ours: float, peer: str, theirs: float) -> None:
    ratio = ours / theirs
    met = "met" if ratio >= 2 else "NOT met"
    print(f"  {shape}: sluiceway {ours:.1f} runs/s, {peer} {theirs:.1f} runs/s: {ratio:.2f}x (goal >= 2x: {met})")
    record(GOAL, f"{peer} {shape} runs/s", theirs, "runs/s")
    record(GOAL, f"sluiceway / {peer} {shape}", ratio, "x")


async def main(args: argparse.Namespace) -> None:
    runs = {"chain10": 300, "fanout100": 30} if args.quick else {"chain10": 2000, "fanout100": 200}
    peer_runs = {"chain10": 300, "fanout100": 30} if args.quick else {"chain10": 1000, "fanout100": 40}
    # DBOS's knobs: workflows in flight, and (fan-out) children on a queue or started directly.
    dbos_sweeps = {
        "chain10": [("chain10", 32)] if args.quick else [("chain10", 8), ("chain10", 32), ("chain10", 64)],
        "fanout100": [("fanout100-direct", 8)]
        if args.quick
        else [("fanout100", 8), ("fanout100-direct", 8), ("fanout100-direct", 32)],
    }
    # Temporal's knob: workflows in flight (its worker runs up to 100 activities at once).
    temporal_sweeps = {
        "chain10": [32] if args.quick else [8, 32, 64],
        "fanout100": [8] if args.quick else [8, 32],
    }
    binary = None if args.skip_peers else temporal_binary()
    logs = Path(tempfile.mkdtemp(prefix="bench-workflows-"))
    setting = {"operators": 1, "workers": 2, "batch": 100}
    settings = {"max_connections": "300", **QUEUE_SETTINGS, **profiling.pg_settings(args.profile)}
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    with LocalPostgres(durable=True, settings=settings) as server:
        print(f"PostgreSQL embedded (fsync on), {os.cpu_count()} cores shared", flush=True)
        for shape in args.shapes:
            ours = await sluiceway(server.dsn, shape, runs[shape], setting, 900, args.profile)
            record(GOAL, f"sluiceway {shape} runs/s", ours, "runs/s")
            if args.skip_peers:
                continue
            best = 0.0
            for variant, c in dbos_sweeps[shape]:
                dsn = await create_database(server.dsn, f"dbos_{variant}_{c}".replace("-", "_"))
                best = max(best, dbos(dsn, variant, peer_runs[shape], c))
            compare(shape, ours, "DBOS", best)
            if binary is not None:
                with temporal_server(binary, logs) as address:
                    best = max(temporal(address, shape, peer_runs[shape], c) for c in temporal_sweeps[shape])
                compare(shape, ours, "Temporal", best)
    if binary is None and not args.skip_peers:
        print(
            "  Temporal: not measured: no `temporal` binary (hack/build-temporal.sh builds it; `make bench` runs that)"
        )
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs, one DBOS setting (about 2 minutes)")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--profile", action="store_true", help="py-spy on the operator, pg_stat_statements")
    asyncio.run(main(parser.parse_args()))
