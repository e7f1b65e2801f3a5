"""The loops' guard: a failed pass never ends a loop that every tenant's
runs depend on; only a stop, or a cancel someone asked for, does."""

from __future__ import annotations

import asyncio

import pytest

from sluiceway.runtime import loops


async def test_a_cancelled_error_raised_from_below_is_one_failed_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "_OUTAGE_PAUSE", 0.01)
    stop = asyncio.Event()
    passes: list[int] = []

    async def step() -> bool:
        passes.append(1)
        if len(passes) == 1:
            # What a driver does when a task of its own is cancelled under it.
            raise asyncio.CancelledError("a connection cleanup cancelled under the pass")
        stop.set()
        return False

    await asyncio.wait_for(loops._guarded("purger", stop, step), 5)
    assert len(passes) == 2, "the loop went on after the stray CancelledError"


async def test_a_requested_cancel_still_ends_the_loop() -> None:
    stop = asyncio.Event()
    started = asyncio.Event()

    async def step() -> bool:
        started.set()
        await asyncio.sleep(60)
        return False

    loop = asyncio.create_task(loops._guarded("purger", stop, step))
    await started.wait()
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert loop.cancelled()
