"""The operator's supervisor: a part that dies takes the process down with a
non-zero status and its traceback in the log, so Kubernetes restarts it; a
requested stop ends every part and exits 0."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from sluiceway.runtime.operator import PartDied, supervise


async def _forever(stop: asyncio.Event, stopped: list[str], name: str) -> None:
    try:
        await stop.wait()
    finally:
        stopped.append(name)


async def _dies() -> None:
    await asyncio.sleep(0.01)
    raise RuntimeError("the decider met a bug")


async def test_a_part_that_raises_stops_the_others_and_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = asyncio.Event()
    stopped: list[str] = []
    with caplog.at_level(logging.CRITICAL), pytest.raises(PartDied, match="decider"):
        await supervise([("sweeper", _forever(stop, stopped, "sweeper")), ("decider", _dies())], stop)
    assert stopped == ["sweeper"], "the other parts were stopped, not abandoned"
    record = next(r for r in caplog.records if "decider part" in r.getMessage())
    assert record.exc_info is not None and "the decider met a bug" in str(record.exc_info[1])


async def test_a_part_that_returns_on_its_own_is_a_death_too() -> None:
    async def returns() -> None:
        return None

    stop = asyncio.Event()
    with pytest.raises(PartDied, match="API server"):
        await supervise([("API server", returns()), ("sweeper", _forever(stop, [], "sweeper"))], stop)


async def test_a_requested_stop_ends_every_part_without_error() -> None:
    stop = asyncio.Event()
    stopped: list[str] = []
    asyncio.get_running_loop().call_later(0.05, stop.set)
    await supervise([(n, _forever(stop, stopped, n)) for n in ("decider", "sweeper")], stop)
    assert sorted(stopped) == ["decider", "sweeper"]


_PROCESS = textwrap.dedent(
    """
    import asyncio, logging, sys
    from sluiceway.runtime.operator import exit_status, supervise

    logging.basicConfig(level=logging.INFO)
    mode = sys.argv[1]

    async def body(stop):
        async def decider():
            if mode == "dies":
                await asyncio.sleep(0.05)
                raise RuntimeError("the decider met a bug")
            print("ready", type(asyncio.get_running_loop()).__module__, flush=True)
            await stop.wait()

        async def sweeper():
            await stop.wait()

        await supervise([("decider", decider()), ("sweeper", sweeper())], stop)

    sys.exit(exit_status(body, *sys.argv[2:]))
    """
)


def _operator_like(mode: str, *loop: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _PROCESS, mode, *loop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_the_process_exits_non_zero_when_a_part_dies() -> None:
    process = _operator_like("dies")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    assert "Traceback" in stderr and "RuntimeError: the decider met a bug" in stderr
    assert "exiting with status 1 so that Kubernetes restarts this replica" in stderr


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_the_process_exits_zero_on_sigterm(loop: str) -> None:
    process = _operator_like("serves", loop)
    assert process.stdout is not None
    ready, running_on = process.stdout.readline().split()
    assert ready == "ready" and running_on.startswith(loop), running_on
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
