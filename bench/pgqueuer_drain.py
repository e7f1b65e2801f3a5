"""One pgqueuer consumer process, as its own benchmark runs them: drain mode."""

from __future__ import annotations

import asyncio
import sys

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode


async def main(dsn: str, batch: int) -> None:
    conn = await asyncpg.connect(dsn)
    manager = QueueManager(Queries(AsyncpgDriver(conn)))

    @manager.entrypoint("noop")
    async def noop(job: Job) -> None:
        return None

    await manager.run(batch_size=batch, mode=QueueExecutionMode.drain)
    await conn.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
