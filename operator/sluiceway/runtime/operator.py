"""`sluiceway operator`: kopf reconcilers against a PostgreSQL store."""

from __future__ import annotations

import asyncio
import datetime
import logging
import signal

import kopf

from sluiceway.k8s.handlers import Context, register
from sluiceway.runtime.settings import Settings
from sluiceway.store.database import open_pool

log = logging.getLogger(__name__)

FINALIZER = "sluiceway.dev/finalizer"


def kopf_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.finalizer = FINALIZER
    # Keep kopf's bookkeeping in our own annotations, never in `status`, which
    # belongs to the schema and to the operator's reports.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sluiceway.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="sluiceway.dev", key="last-handled-configuration"
    )
    # Events are for notable transitions only; kopf's per-handler chatter is not one.
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    return settings


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class _Memo(kopf.Memo):
    context: Context


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    pool = await open_pool(settings.database_url)
    registry = kopf.OperatorRegistry()
    register(registry)
    memo = _Memo()
    memo.context = Context(pool=pool, clock=utc_now)
    try:
        await kopf.operator(
            registry=registry,
            settings=kopf_settings(),
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            standalone=True,
            memo=memo,
            stop_flag=stop,
        )
    finally:
        await pool.close()


def main(settings: Settings) -> None:
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def supervise() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(settings, stop)
        if not stop.is_set():
            raise SystemExit("the operator stopped on its own; see the log above")

    asyncio.run(supervise())
