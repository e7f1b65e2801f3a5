"""Waiting for a run to end, for whichever edge asks (a start or a read with
`wait`): the caller sleeps on the process's one listener
(`store.notifications`), which the statement that ends runs wakes with their
ids (`wakeups.ENDED_CHANNEL`); it then reads its run once. No connection is
held while it sleeps, and nothing asks PostgreSQL on a timer.

A waiter costs a slot of the process's `max_run_waiters`: beyond them a wait
is refused (`TooManyWaiters`), so a crowd of callers cannot grow without
bound in one process."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from sluiceway.plane.core import Plane
from sluiceway.store.runs import RunView, get_run

MAX_WAIT_SECONDS = 60.0  # one wait; a caller that needs longer waits again

# Without a listener (a plane built without notifications, as some tests
# build one) nothing announces an end: the waiter reads its run this often.
_UNANNOUNCED_RECHECK = 1.0


@dataclass(frozen=True)
class TooManyWaiters:
    """This process already holds `limit` waiters: retry after a while."""

    limit: int
    retry_after_seconds: int = 1

    @property
    def message(self) -> str:
        return f"{self.limit} callers already wait for runs to end in this replica: retry, or wait less"


@contextlib.contextmanager
def waiter(plane: Plane) -> Iterator[Waiter | TooManyWaiters]:
    """A slot among the process's waiters, held until the block ends (taken
    before a start that waits, so a full process refuses before it starts
    anything), or the refusal when they are all taken."""
    if plane.run_waiters >= plane.max_run_waiters:
        yield TooManyWaiters(plane.max_run_waiters)
        return
    plane.run_waiters += 1
    try:
        yield Waiter(plane)
    finally:
        plane.run_waiters -= 1


@dataclass(frozen=True)
class Waiter:
    plane: Plane

    async def until_ended(self, namespace: str, run_id: str, seconds: float) -> RunView | None:
        """The run once it has ended, or as it was last read when `seconds`
        pass first (still running); None when there is no such run."""
        try:
            key = str(uuid.UUID(run_id))
        except ValueError:
            return None
        return await _wait(self.plane, namespace, key, seconds)


async def _wait(plane: Plane, namespace: str, run_id: str, seconds: float) -> RunView | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(seconds, MAX_WAIT_SECONDS)
    with _announced(plane, run_id) as woken:
        while True:
            # Watched before the read: an end committed after it still wakes us.
            if woken is not None:
                woken.clear()
            run = await _read(plane, namespace, run_id)
            left = deadline - loop.time()
            if run is None or run.status.is_terminal() or left <= 0:
                return run
            if woken is None:
                await asyncio.sleep(min(left, _UNANNOUNCED_RECHECK))
                continue
            # No safety re-read: an end is announced after it commits, and a
            # listener that reconnects wakes every waiter (what it may have
            # missed meanwhile), so a wait that times out saw no end.
            try:
                await asyncio.wait_for(woken.wait(), left)
            except TimeoutError:
                return run


@contextlib.contextmanager
def _announced(plane: Plane, run_id: str) -> Iterator[asyncio.Event | None]:
    if plane.notifications is None:
        yield None
        return
    with plane.notifications.watch_end(run_id) as woken:
        yield woken


async def _read(plane: Plane, namespace: str, run_id: str) -> RunView | None:
    plane.run_reads += 1
    async with plane.pool.acquire() as conn:
        return await get_run(conn, namespace, run_id)
