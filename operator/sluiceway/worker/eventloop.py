"""The event loop the operator and the worker run on: uvloop where it is
installed (a declared dependency on Linux and macOS), asyncio's own otherwise
or when SLUICEWAY_EVENT_LOOP=asyncio asks for it.

uvloop does the loop's socket and timer work in C: on the gated benchmark the
operator spent about a fifth less CPU per task with it (docs/performance.md, "The
event loop"). Nothing in either process depends on which loop runs it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal, TypeVar

EventLoop = Literal["uvloop", "asyncio"]
EVENT_LOOPS: tuple[EventLoop, ...] = ("uvloop", "asyncio")
VARIABLE = "SLUICEWAY_EVENT_LOOP"

T = TypeVar("T")


def chosen(env: Mapping[str, str]) -> EventLoop:
    """The loop SLUICEWAY_EVENT_LOOP names (uvloop when unset); a ValueError naming the variable otherwise."""
    value = env.get(VARIABLE, "").strip().lower() or "uvloop"
    for loop in EVENT_LOOPS:
        if value == loop:
            return loop
    raise ValueError(f"{VARIABLE}: {value!r} is not one of {', '.join(EVENT_LOOPS)}")


def factory(choice: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, when it is chosen and importable; None: asyncio's default loop."""
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:  # not installed here (Windows has none): asyncio's loop does the same work
            return None
        return uvloop.new_event_loop
    return None


def run(main: Coroutine[Any, Any, T], choice: EventLoop) -> T:
    """asyncio.run(main) on the chosen loop."""
    with asyncio.Runner(loop_factory=factory(choice)) as runner:
        return runner.run(main)
