"""An idle loop ends when asked, not at its next recheck: a replica handing
over leadership (SIGTERM) must not sit out the minutes-long waits that keep an
idle system quiet. The rechecks are set to an hour, so a loop that only ends
on its recheck would hang, and the bound below would fail it."""

from __future__ import annotations

import asyncio

import pytest
from asyncpg import Pool

from sluiceway.controls.breaker import BreakerConfig, Breakers
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.runtime import loops
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.notifications import Notifications
from sluiceway.systemtasks import runner as system_runner
from sluiceway.systemtasks.http import HttpTasks
from sluiceway.systemtasks.runner import SystemTaskRunner

AN_HOUR = 3600.0
LONG_ENOUGH = 30.0  # far below the recheck; reached only if stop is ignored


async def test_an_idle_decider_and_system_task_runner_end_when_stopped(
    pool: Pool, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loops, "_DECIDER_RECHECK", AN_HOUR)
    monkeypatch.setattr(system_runner, "_RECHECK", AN_HOUR)
    notifications = Notifications(database_url)
    await notifications.start()
    stop = asyncio.Event()
    runner = SystemTaskRunner(ExecutionPlane(pool, notifications), [HttpTasks(Breakers(BreakerConfig()))])
    running = [
        asyncio.create_task(loops.run_decider(pool, notifications, DeciderConfig(), stop)),
        asyncio.create_task(runner.run(stop)),
    ]
    try:
        await asyncio.sleep(0.5)  # both have found nothing to do and are waiting
        assert not any(task.done() for task in running)
        stop.set()
        done, pending = await asyncio.wait(running, timeout=LONG_ENOUGH)
        assert not pending, "an idle loop waited for its recheck instead of the stop"
        for task in done:
            task.result()  # ended cleanly, not by an error
    finally:
        for task in running:
            task.cancel()
        await notifications.stop()
