"""Waiting for what another process or task does: one `eventually`, in a
blocking form (e2e, whose probes run kubectl or HTTP calls) and an awaitable
form (integration, whose probes run on the test's event loop), with one
contract: poll until the probe returns something truthy and return it; fail
after `timeout` naming what was awaited and the last value seen; fail at once
if the process the probe depends on has exited, with the tail of its log.

The default intervals differ for a reason: a blocking probe usually starts a
kubectl process, so it polls five times a second; an awaitable one is a query
or a request on the loop, so it polls twenty times."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sluiceway.devenv.processes import Child

T = TypeVar("T")

TIMEOUT = 30.0


def eventually(
    probe: Callable[[], T | None],
    *,
    timeout: float = TIMEOUT,
    interval: float = 0.2,
    what: str = "the condition",
    child: Child | None = None,
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        _still_running(child, what)
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, last, child)
        time.sleep(interval)


async def eventually_async(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = TIMEOUT,
    interval: float = 0.05,
    what: str = "the condition",
    child: Child | None = None,
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        _still_running(child, what)
        last = await probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, last, child)
        await asyncio.sleep(interval)


def _still_running(child: Child | None, what: str) -> None:
    if child is not None and not child.alive():
        raise AssertionError(f"{child.name} exited while waiting for {what}:\n{child.tail()}")


def _timed_out(timeout: float, what: str, last: object, child: Child | None) -> AssertionError:
    tail = f"\n{child.name}'s log:\n{child.tail()}" if child is not None else ""
    return AssertionError(f"timed out after {timeout:g}s waiting for {what}; last value: {last!r}{tail}")
