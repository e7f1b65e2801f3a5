"""Wake-ups over LISTEN/NOTIFY: the decider is told when runs are queued,
long polls when tasks become ready, callers waiting for a run when it ends.
One dedicated connection per process; NOTIFY is sent once per transaction and
queue (once per statement for the runs that end), never per task.

A notification can be missed (a reconnect, another replica's pass); every
waiter therefore also wakes on its own timeout and re-checks the database, so
a lost wake-up costs latency, never correctness."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Protocol

import asyncpg

from sluiceway.store.definitions import DEFINITIONS_CHANNEL
from sluiceway.store.wakeups import DECIDE_CHANNEL, ENDED_CHANNEL, READY_CHANNEL, parse_ended, parse_ready

log = logging.getLogger(__name__)

# How long the other idle polls wait for the one poll asking again about a
# queue known empty (a notification about the queue ends the wait at once).
_RECHECKING = 1.0


class Cache(Protocol):
    """What a process keeps of a namespace's definitions (task policies, the
    tenant rules of its Quotas): dropped when they change."""

    def invalidate(self, namespace: str | None = None) -> None: ...


class Notifications:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: asyncpg.Connection | None = None
        # Waiters per queue, oldest first: a freed slot wakes the oldest waiter only.
        self._ready: dict[tuple[str, str], dict[asyncio.Event, None]] = defaultdict(dict)
        # Callers waiting for a run to end, by run id (`watch_end`).
        self._ending: dict[str, set[asyncio.Event]] = defaultdict(set)
        self.decide = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.caches: list[Cache] = []  # dropped for a namespace whose definitions or Quotas change
        # Idle polls ask the database once per queue, not once each: a queue a
        # poll found empty stays known empty (until the monotonic time stored
        # here) until a notification about it comes. `_changes` counts the
        # notifications per queue and `_reconnects` the reconnects (after
        # which anything may have changed), so a poll can tell whether one came
        # while it was asking.
        self._empty: dict[tuple[str, str], float] = {}
        self._changes: dict[tuple[str, str], int] = {}
        self._reconnects = 0

    async def start(self) -> None:
        await self._connect()
        self._task = asyncio.create_task(self._watch(), name="notifications")

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self.dsn)
        await conn.add_listener(READY_CHANNEL, self._on_ready)
        await conn.add_listener(DECIDE_CHANNEL, self._on_decide)
        await conn.add_listener(DEFINITIONS_CHANNEL, self._on_definitions)
        await conn.add_listener(ENDED_CHANNEL, self._on_ended)
        self._conn = conn
        self._reconnects += 1
        self._empty.clear()
        for cache in self.caches:
            cache.invalidate()
        # Anything may have happened while we were not listening.
        self.decide.set()
        self._wake_all()

    async def _watch(self) -> None:
        """Reconnect when the listening connection drops."""
        while not self._stopping:
            await asyncio.sleep(1.0)
            if self._conn is None or self._conn.is_closed():
                try:
                    await self._connect()
                    log.info("notification listener reconnected")
                except (OSError, asyncpg.PostgresError) as error:
                    log.warning("notification listener cannot reconnect: %s", error)

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()

    def _on_ready(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        ready = parse_ready(payload)
        self._changed(ready.queue)
        waiters = self._ready.get(ready.queue, {})
        if ready.one_slot:
            # Waking every poll for one slot only makes them queue for the same lock.
            sleeping = next((e for e in waiters if not e.is_set()), None)
            if sleeping is not None:
                sleeping.set()
            return
        for event in waiters:
            event.set()

    def _on_decide(self, *_: object) -> None:
        self.decide.set()

    def wake_decider(self) -> None:
        """This process just committed work for the decider: wake its own at
        once, rather than when its NOTIFY comes back (the other replicas'
        deciders still wake on that)."""
        self.decide.set()

    def wake_queues(self, queues: set[tuple[str, str]]) -> None:
        """Wake local waiters of these (namespace, task type) queues: this
        process committed work to them (the NOTIFY wakes the other replicas)."""
        for namespace, name in queues:
            self.wake(namespace, [name])

    def _on_definitions(self, _conn: object, _pid: int, _channel: str, namespace: str) -> None:
        for cache in self.caches:
            cache.invalidate(namespace)

    def _wake_all(self) -> None:
        for events in self._ready.values():
            for event in events:
                event.set()
        for watchers in self._ending.values():
            for event in watchers:
                event.set()

    def _on_ended(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        for run_id in parse_ended(payload):
            for event in self._ending.get(run_id, ()):
                event.set()

    @contextlib.contextmanager
    def watch_end(self, run_id: str) -> Iterator[asyncio.Event]:
        """An event set when `run_id` may have ended: its end was announced, or
        the listener reconnected (an end may have gone unheard meanwhile).
        Watch before reading the run, so an end between the read and the wait
        still wakes it; clear it before each read."""
        event = asyncio.Event()
        self._ending[run_id].add(event)
        try:
            yield event
        finally:
            watchers = self._ending.get(run_id)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._ending[run_id]

    def wake(self, namespace: str, names: Iterable[str]) -> None:
        """Wake local waiters directly (this process made the change)."""
        for name in names:
            self._changed((namespace, name))
            for event in self._ready.get((namespace, name), ()):
                event.set()

    def _changed(self, key: tuple[str, str]) -> None:
        self._changes[key] = self._changes.get(key, 0) + 1
        self._empty.pop(key, None)

    def mark(self, namespace: str, names: Iterable[str]) -> tuple[int, ...]:
        """Where these queues' notifications stand now: taken before asking the database."""
        return (self._reconnects, *(self._changes.get((namespace, name), 0) for name in names))

    def changed_since(self, namespace: str, names: Iterable[str], mark: tuple[int, ...]) -> bool:
        return self.mark(namespace, names) != mark

    def note_empty(self, namespace: str, names: list[str], mark: tuple[int, ...], seconds: float) -> None:
        """A poll that took `mark` before asking found these queues empty: other polls
        may take that as the answer for `seconds`, unless a notification came since."""
        if seconds <= 0 or self.changed_since(namespace, names, mark):
            return
        until = time.monotonic() + seconds
        for name in names:
            self._empty[(namespace, name)] = until

    def empty_for(self, namespace: str, names: list[str]) -> float | None:
        """Seconds these queues stay known empty (until a delayed task's time, or
        the recheck); None when this caller should ask the database. When the
        knowledge runs out, the first caller asks and the others wait
        `_RECHECKING` for its answer, so idle polls do not all ask at once."""
        now = time.monotonic()
        left = float("inf")
        for name in names:
            until = self._empty.get((namespace, name))
            if until is None:
                return None
            if until <= now:
                self._empty[(namespace, name)] = now + _RECHECKING
                return None
            left = min(left, until - now)
        return left

    def forget(self, namespace: str, names: list[str]) -> None:
        """A poll found work: no poll of this process takes these queues for empty."""
        for name in names:
            self._empty.pop((namespace, name), None)

    async def wait_ready(
        self,
        namespace: str,
        names: list[str],
        timeout: float,
        mark: tuple[int, ...] | None = None,
        event: asyncio.Event | None = None,
    ) -> bool:
        """Wait until one of these queues may have work, or `timeout` passes; at
        once when a notification came since `mark` (taken before the poll asked)
        or `event` (the caller's, if it has another reason to wake) is set."""
        if timeout <= 0:
            return False
        event = event or asyncio.Event()
        keys = [(namespace, name) for name in names]
        for key in keys:
            self._ready[key][event] = None
        if mark is not None and self.changed_since(namespace, names, mark):
            event.set()
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiters = self._ready.get(key)
                if waiters is not None:
                    waiters.pop(event, None)
                    if not waiters:
                        del self._ready[key]
