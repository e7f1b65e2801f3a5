"""The event loop the operator and the worker run on: uvloop unless
SLUICEWAY_EVENT_LOOP=asyncio, and a bad value refused, naming the variable."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest
import uvloop

from sluiceway.worker import cli, eventloop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_unless_asyncio_is_asked_for() -> None:
    assert eventloop.chosen({}) == "uvloop"
    assert eventloop.chosen({"SLUICEWAY_EVENT_LOOP": ""}) == "uvloop"
    assert eventloop.chosen({"SLUICEWAY_EVENT_LOOP": " AsyncIO "}) == "asyncio"
    assert eventloop.run(_loop_module(), "uvloop").startswith("uvloop")
    assert eventloop.run(_loop_module(), "asyncio").startswith("asyncio")


def test_a_bad_value_names_the_variable() -> None:
    with pytest.raises(ValueError, match="SLUICEWAY_EVENT_LOOP: 'trio' is not one of uvloop, asyncio"):
        eventloop.chosen({"SLUICEWAY_EVENT_LOOP": "trio"})


def test_without_uvloop_installed_asyncio_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert eventloop.factory("uvloop") is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    assert eventloop.factory("uvloop") is None
    assert eventloop.run(_loop_module(), "uvloop").startswith("asyncio")


def test_the_worker_command_refuses_a_bad_loop_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "one_worker.py"
    target.write_text(
        "from sluiceway.worker import Worker\n"
        "worker = Worker()\n"
        "@worker.task('noop')\n"
        "async def noop(task):\n"
        "    return None\n"
    )
    monkeypatch.setenv("SLUICEWAY_EVENT_LOOP", "gevent")
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    arguments = parser.parse_args([str(target), "--url", "http://127.0.0.1:9", "--namespace", "default"])
    assert cli.run(arguments) == 2
    assert "SLUICEWAY_EVENT_LOOP: 'gevent' is not one of uvloop, asyncio" in capsys.readouterr().err
