"""What one task costs PostgreSQL on the hot path, per phase: its run's start,
the decider's first pass (the task's insert), its lease, its result and the
pass that ends its run. CPU time of the one database backend that does it all
(read from /proc), so the machine's other load does not count; each phase
runs the store's real statements through one connection.

Compares, on fresh databases of one PostgreSQL, one after the other: the
decider loop deciding every run against starts and results deciding their
own (SLUICEWAY_DECIDE_INLINE), each with PostgreSQL's default plan caching
and with generic plans (the store's pools plan generically: `open_pool`'s
`generic_plans`): the levers of the hot path, measured alone, without
Python's share or the machine's load.

    .venv/bin/python bench/queue_cost.py            # 20,000 tasks a variant
    .venv/bin/python bench/queue_cost.py --tasks 5000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

import asyncpg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sluiceway.controls.policy import Gates  # noqa: E402
from sluiceway.devenv.postgres import LocalPostgres  # noqa: E402
from sluiceway.model.execution import ResultStatus, TaskResult  # noqa: E402
from sluiceway.store import executions, leasing, results, workflows  # noqa: E402
from sluiceway.store.database import Pool, open_pool  # noqa: E402
from sluiceway.store.deciding import DeciderConfig, FirstDecisions, decide_batch, decide_inline  # noqa: E402

NS = "bench"
BATCH = 100
TICKS = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) the backend `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def _fresh(server: LocalPostgres, name: str) -> str:
    admin = await asyncpg.connect(server.dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return server.dsn.rsplit("/", 1)[0] + f"/{name}"


async def measure(server: LocalPostgres, label: str, tasks: int, inline: bool, generic: bool) -> dict[str, float]:
    dsn = await _fresh(server, f"cost_{uuid.uuid4().hex[:8]}")
    pool: Pool = await open_pool(dsn, min_size=1, max_size=1, generic_plans=generic)
    spent: dict[str, float] = {}
    try:
        async with pool.acquire() as conn:
            await workflows.upsert_workflow(
                conn, NS, "one", "one", 1, {"tasks": [{"name": "work", "taskReferenceName": "work"}]}
            )
            pid = int(await conn.fetchval("SELECT pg_backend_pid()"))

        async def phase(name: str, work: object) -> None:
            async with pool.acquire() as conn:
                wal_before = await conn.fetchval("SELECT pg_current_wal_insert_lsn()")
            before = backend_cpu(pid)
            await work  # type: ignore[misc]
            spent[name] = (backend_cpu(pid) - before) / tasks * 1e6
            async with pool.acquire() as conn:
                written = await conn.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)", wal_before)
            spent["WAL bytes"] = spent.get("WAL bytes", 0.0) + float(written) / tasks

        config = DeciderConfig(batch_size=BATCH)

        async def start() -> None:
            for first in range(0, tasks, BATCH):
                async with pool.acquire() as conn, conn.transaction():
                    items = [executions.StartItem(name="one")] * min(BATCH, tasks - first)
                    decider = FirstDecisions(config) if inline else None
                    await executions.start_runs(conn, NS, items, notify=not inline, first=decider)

        async def decide() -> None:
            while await decide_batch(pool, config):
                pass

        leased: list[leasing.Lease] = []

        async def lease() -> None:
            async with pool.acquire() as conn:
                while True:
                    async with conn.transaction():
                        got = (await leasing.lease(conn, NS, "work", "w", BATCH, Gates())).leases
                    if not got:
                        return
                    leased.extend(got)

        async def report() -> None:
            async with pool.acquire() as conn:
                for first in range(0, len(leased), BATCH):
                    batch = [
                        TaskResult(task_id=t.task_id, epoch=t.epoch, status=ResultStatus.COMPLETED)
                        for t in leased[first : first + BATCH]
                    ]
                    async with conn.transaction():
                        queued = results.Queued() if inline else None
                        await results.apply_results(conn, NS, batch, queued=queued)
                        if queued is not None:
                            await decide_inline(conn, queued.alone, config, unqueued=queued.quiet)

        await phase("start", start())
        await phase("first pass (insert)", decide())
        async with pool.acquire() as conn:  # what the operator's statistics refresh does after a burst
            await conn.execute("ANALYZE")
            pid = int(await conn.fetchval("SELECT pg_backend_pid()"))
        await phase("lease", lease())
        await phase("result", report())
        await phase("last pass (end)", decide())
        assert len(leased) == tasks, f"{label}: leased {len(leased)} of {tasks}"
    finally:
        await pool.close()
    return spent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2, help="each variant this many times, interleaved")
    args = parser.parse_args()
    variants = {
        "loop": (False, False),
        "loop, generic plans": (False, True),
        "inline": (True, False),
        "inline, generic plans": (True, True),
    }
    found: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
    with LocalPostgres() as server:
        for _ in range(args.rounds):
            for label, (inline, generic) in variants.items():
                started = time.perf_counter()
                found[label].append(await measure(server, label, args.tasks, inline, generic))
                print(f"  {label}: {time.perf_counter() - started:.1f} s", flush=True)
    print(
        f"\nPostgreSQL backend CPU per task, microseconds ({args.tasks} one-task runs, batches of {BATCH}; "
        f"best of {args.rounds}). Loop: the decider loop decides; inline: starts and results decide their runs."
    )
    phases = [name for name in next(iter(found.values()))[0] if name != "WAL bytes"]
    print(f"  {'phase':22}" + "".join(f"{label:>22}" for label in found))
    for name in [*phases, "total"]:
        row = [min(_total(r, phases) if name == "total" else r[name] for r in runs) for runs in found.values()]
        print(f"  {name:22}" + "".join(f"{v:>22.1f}" for v in row))
    wal = [min(r["WAL bytes"] for r in runs) for runs in found.values()]
    print(f"  {'WAL bytes per task':22}" + "".join(f"{v:>22.0f}" for v in wal))


def _total(spent: dict[str, float], phases: list[str]) -> float:
    return sum(spent[name] for name in phases)


if __name__ == "__main__":
    asyncio.run(main())
