"""An execution plane in the test's event loop: the HTTP API on a free port,
the decider and the sweeper, all on a real PostgreSQL. No Kubernetes."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import asyncpg
import pytest
import uvicorn

from sluiceway.api.app import create_app
from sluiceway.api.services import Services
from sluiceway.kubeapi.secrets import StaticSecrets
from sluiceway.runtime import loops
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.notifications import Notifications


@dataclass
class Plane:
    url: str
    pool: asyncpg.Pool
    secrets: StaticSecrets  # what webhooks verify with: put Secrets in it, by (namespace, name)


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
async def plane(pool: asyncpg.Pool, database_url: str) -> AsyncIterator[Plane]:
    notifications = Notifications(database_url)
    await notifications.start()
    port = _port()
    secrets = StaticSecrets()
    server = _QuietServer(
        uvicorn.Config(
            create_app(Services(pool, notifications, secrets=secrets)),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    stop = asyncio.Event()
    config = DeciderConfig()
    notifications.caches.append(config.policies)
    tasks = [
        asyncio.create_task(server.serve()),
        asyncio.create_task(loops.run_decider(pool, notifications, config, stop)),
        asyncio.create_task(loops.run_sweeper(pool, stop)),
    ]
    while not server.started:
        await asyncio.sleep(0.01)
    yield Plane(f"http://127.0.0.1:{port}", pool, secrets)
    stop.set()
    server.should_exit = True
    await asyncio.wait(tasks, timeout=10)
    await notifications.stop()
