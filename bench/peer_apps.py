"""The peers' processes for bench/continuous.py and bench/workflows.py, one role per process:

    python bench/peer_apps.py pgq-consume DSN BATCH          pgqueuer consumer, continuous mode
    python bench/peer_apps.py pgq-produce DSN BATCH          pgqueuer producer, enqueues BATCH jobs per call
    python bench/peer_apps.py proc-worker DSN CONCURRENCY    procrastinate worker
    python bench/peer_apps.py proc-produce DSN BATCH         procrastinate producer, batch_defer_async
    python bench/peer_apps.py dbos-worker DSN CONCURRENCY    DBOS executor: a queue of no-op workflows
    python bench/peer_apps.py dbos-produce DSN THREADS       DBOS client enqueueing from THREADS threads
    python bench/peer_apps.py dbos-flows DSN SHAPE RUNS CONCURRENCY   DBOS workflows: chain10 or fanout100

A producer enqueues as fast as it can (or at --rate per second) until it is stopped. Each
role is the peer's own documented way of doing it; the knobs are the ones the harness
sweeps."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any

NOOP = "noop"


async def pgq_consume(dsn: str, batch: int) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(dsn)
    manager = QueueManager(Queries(AsyncpgDriver(conn)))

    @manager.entrypoint(NOOP)
    async def noop(job: Job) -> None:
        return None

    await manager.run(batch_size=batch)


async def pgq_produce(dsn: str, batch: int) -> None:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    queries = Queries(AsyncpgDriver(await asyncpg.connect(dsn)))
    while True:
        await queries.enqueue([NOOP] * batch, [None] * batch, [0] * batch)


def _procrastinate(dsn: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name=NOOP)
    async def noop() -> None:
        return None

    return app


async def proc_worker(dsn: str, concurrency: int) -> None:
    app = _procrastinate(dsn)
    async with app.open_async():
        await app.run_worker_async(concurrency=concurrency, install_signal_handlers=True)


async def proc_produce(dsn: str, batch: int) -> None:
    app = _procrastinate(dsn)
    async with app.open_async():
        task = app.tasks[NOOP]
        while True:
            await task.batch_defer_async(*([{}] * batch))


async def proc_install(dsn: str) -> None:
    app = _procrastinate(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


def _dbos(dsn: str, name: str) -> Any:
    from dbos import DBOS

    sqlalchemy_dsn = dsn.replace("postgresql://", "postgresql+psycopg://", 1)
    DBOS(config={"name": name, "system_database_url": sqlalchemy_dsn, "log_level": "WARNING"})
    return DBOS


def dbos_worker(dsn: str, concurrency: int, polling: float) -> None:
    dbos = _dbos(dsn, "bench")

    @dbos.workflow(name=NOOP)
    def noop() -> None:
        return None

    dbos.launch()  # a queue is registered in the system database, so after the launch that migrates it
    dbos.register_queue("bench", worker_concurrency=concurrency, polling_interval_sec=polling)
    threading.Event().wait()


def dbos_produce(dsn: str, threads: int) -> None:
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=dsn.replace("postgresql://", "postgresql+psycopg://", 1))

    def loop() -> None:
        while True:
            client.enqueue({"queue_name": "bench", "workflow_name": NOOP})

    for _ in range(threads):
        threading.Thread(target=loop, daemon=True).start()
    threading.Event().wait()


def dbos_flows(dsn: str, shape: str, runs: int, concurrency: int) -> None:
    """Run RUNS workflows of SHAPE (`chain10`: ten steps one after the other;
    `fanout100`: a hundred child workflows started, then all joined) with at most
    CONCURRENCY at once, and print `runs seconds` when the last has completed.
    `fanout100-direct` starts the children without a queue."""
    from concurrent.futures import ThreadPoolExecutor

    dbos = _dbos(dsn, "bench")

    @dbos.step()
    def step(n: int) -> int:
        return n + 1

    @dbos.workflow()
    def chain10() -> int:
        value = 0
        for _ in range(10):
            value = step(value)
        return value

    @dbos.workflow()
    def branch(n: int) -> int:
        return step(n)

    @dbos.workflow()
    def fanout100() -> int:  # the documented fan-out: children on a queue, then their results
        handles = [queue.enqueue(branch, n) for n in range(100)]
        return sum(h.get_result() for h in handles)

    @dbos.workflow()
    def fanout100_direct() -> int:  # children started at once, no queue
        handles = [dbos.start_workflow(branch, n) for n in range(100)]
        return sum(h.get_result() for h in handles)

    dbos.launch()
    queue = dbos.register_queue("branches", polling_interval_sec=0.01)
    flow = {"chain10": chain10, "fanout100": fanout100, "fanout100-direct": fanout100_direct}[shape]
    started = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: dbos.start_workflow(flow).get_result(), range(runs)))
    print(runs, time.monotonic() - started, flush=True)
    dbos.destroy()


def main() -> None:
    role, dsn, *rest = sys.argv[1:]
    numbers = [int(r) for r in rest if r.isdigit()]
    if role == "pgq-consume":
        asyncio.run(pgq_consume(dsn, numbers[0]))
    elif role == "pgq-produce":
        asyncio.run(pgq_produce(dsn, numbers[0]))
    elif role == "proc-install":
        asyncio.run(proc_install(dsn))
    elif role == "proc-worker":
        asyncio.run(proc_worker(dsn, numbers[0]))
    elif role == "proc-produce":
        asyncio.run(proc_produce(dsn, numbers[0]))
    elif role == "dbos-worker":
        dbos_worker(dsn, numbers[0], float(rest[1]) if len(rest) > 1 else 0.1)
    elif role == "dbos-produce":
        dbos_produce(dsn, numbers[0])
    elif role == "dbos-flows":
        dbos_flows(dsn, rest[0], int(rest[1]), int(rest[2]))
    else:
        raise SystemExit(f"unknown role {role}")


if __name__ == "__main__":
    main()
