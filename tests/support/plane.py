"""An execution plane in the test's event loop: the HTTP API on a free port,
the decider and the sweeper, all on a real PostgreSQL; no Kubernetes. And
what integration tests do with it: HTTP calls, waiting for a run to finish,
and SDK workers running in the background."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import uvicorn

from sluiceway.api.app import create_app
from sluiceway.api.services import Services
from sluiceway.devenv.processes import free_port
from sluiceway.kubeapi.secrets import StaticSecrets
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.runtime import loops
from sluiceway.store.database import Pool
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.matching import Offers
from sluiceway.store.notifications import Notifications
from sluiceway.ui.web import install as install_ui
from sluiceway.worker import Worker
from tests.support.store import NS
from tests.support.waiting import eventually_async

# The options of execution_plane that are the HTTP edge's, not the plane's.
_EDGE_OPTIONS = ("rate_limits", "max_request_bytes", "authenticate", "authenticator")


@dataclass
class Plane:
    url: str
    pool: Pool
    secrets: StaticSecrets  # what webhooks verify with: put Secrets in it, by (namespace, name)
    offers: Offers | None = None  # the polls waiting as offers to the decider (store.matching)
    core: ExecutionPlane | None = None  # the plane's commands, as the API calls them


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def execution_plane(
    pool: Pool,
    database_url: str,
    *,
    decide_inline: bool = False,
    decider_loop: bool = True,
    match_polls: bool = True,
    ui: bool = False,
    decider_recheck: float | None = None,
    **options: Any,
) -> AsyncIterator[Plane]:
    """`options`: fields of the execution plane (limits, say) or of the API's
    Services (rate limits) to set. `decide_inline` as
    SLUICEWAY_DECIDE_INLINE, `match_polls` as SLUICEWAY_MATCH_POLLS;
    `decider_loop=False` runs no decider loop, so only what starts and results
    decide inline moves on; `ui` serves the web UI at /ui too. `decider_recheck`:
    how long an idle decider loop waits without a notification (the
    operator's default when None)."""
    notifications = Notifications(database_url)
    await notifications.start()
    port = free_port()
    secrets = StaticSecrets()
    offers = Offers() if match_polls else None
    config = DeciderConfig(
        on_ready=notifications.wake_queues,
        on_decision=loops.observe_decision,
        on_quarantine=loops.count_quarantined,
        offers=offers,
    )
    notifications.caches.append(config.policies)
    decider = config if decide_inline else None
    edge = {name: options.pop(name) for name in _EDGE_OPTIONS if name in options}
    core = ExecutionPlane(pool, notifications, decider=decider, offers=offers, **options)
    app = create_app(Services(core, secrets=secrets, **edge))
    if ui:
        install_ui(app)
    server = _QuietServer(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
        )
    )
    stop = asyncio.Event()
    tasks = [asyncio.create_task(server.serve()), asyncio.create_task(loops.run_sweeper(pool, stop))]
    if decider_loop:
        tasks.append(asyncio.create_task(loops.run_decider(pool, notifications, config, stop, decider_recheck)))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield Plane(f"http://127.0.0.1:{port}", pool, secrets, offers, core)
    finally:
        stop.set()
        server.should_exit = True
        await asyncio.wait(tasks, timeout=10)
        await notifications.stop()


async def post(plane: Plane, path: str, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.post(f"{plane.url}{path}", json=body) as response:
        return response.status, await response.json()


async def get(plane: Plane, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{plane.url}{path}") as response:
        return response.status, await response.json()


async def finished(plane: Plane, run_id: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        _, body = await get(plane, f"/v1/ns/{NS}/executions/{run_id}")
        return body if body["status"] != "RUNNING" else None

    return await eventually_async(probe, timeout=20, what=f"run {run_id} to finish")


class Running:
    """A Worker running in the background of a test."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Worker:
        self.task = asyncio.create_task(self.worker.run(self.stop))
        return self.worker

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)
