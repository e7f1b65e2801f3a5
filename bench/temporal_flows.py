"""Temporal, the peer of bench/workflows.py: the same two shapes with its Python SDK
(temporalio), against its development server (`temporal server start-dev`).

    python bench/temporal_flows.py ADDRESS SHAPE RUNS CONCURRENCY

SHAPE is `chain10` (ten activities one after the other) or `fanout100` (100
activities at once, then their sum). One worker in this process polls the task
queue while RUNS workflows are started, at most CONCURRENCY in flight; the last
line printed is "completed seconds", timed from the first start to the last
result, as bench/workflows.py times DBOS.

This module holds only what Temporal's workflow sandbox may import (it
re-imports a workflow's module on every run)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

QUEUE = "bench"
STEPS = 10
BRANCHES = 100
_TIMEOUT = timedelta(seconds=120)


@activity.defn
async def noop(n: int) -> int:
    return n


@workflow.defn
class Chain10:
    @workflow.run
    async def run(self) -> int:
        total = 0
        for step in range(STEPS):
            total += await workflow.execute_activity(noop, step, start_to_close_timeout=_TIMEOUT)
        return total


@workflow.defn
class Fanout100:
    @workflow.run
    async def run(self) -> int:
        branches = [workflow.execute_activity(noop, n, start_to_close_timeout=_TIMEOUT) for n in range(BRANCHES)]
        return sum(await asyncio.gather(*branches))


SHAPES: dict[str, type] = {"chain10": Chain10, "fanout100": Fanout100}


async def connect(address: str, seconds: float = 60.0) -> Client:
    """The development server takes a few seconds to listen after it starts."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await Client.connect(address)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def flows(address: str, shape: str, runs: int, concurrency: int) -> tuple[int, float]:
    client = await connect(address)
    in_flight = asyncio.Semaphore(concurrency)
    expected = sum(range(STEPS)) if shape == "chain10" else sum(range(BRANCHES))

    async def one(n: int) -> bool:
        async with in_flight:
            result = await client.execute_workflow(
                SHAPES[shape].run, id=f"{shape}-{n}-{time.time_ns()}", task_queue=QUEUE
            )
            return bool(result == expected)

    async with Worker(
        client,
        task_queue=QUEUE,
        workflows=[Chain10, Fanout100],
        activities=[noop],
        max_concurrent_activities=max(BRANCHES, concurrency),
    ):
        began = time.monotonic()
        done = await asyncio.gather(*(one(n) for n in range(runs)))
        seconds = time.monotonic() - began
    return sum(done), seconds


def main() -> None:
    address, shape, runs, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    done, seconds = asyncio.run(flows(address, shape, runs, concurrency))
    print(f"{done} {seconds:.3f}", flush=True)
    # The SDK's native threads can abort the interpreter's finalization
    # ("PyGILState_Release: thread state ... must be current"), which turned a
    # finished, measured run into a failed one: the figure is out, so leave now.
    os._exit(0)


if __name__ == "__main__":
    main()
