"""The worker process's log lines: JSON by default as the operator's, text on
request (the flag, or the operator's variable), with the ids of the task a
line is about."""

from __future__ import annotations

import argparse
import contextvars
import io
import json
import logging
from collections.abc import Iterator

import pytest

from sluiceway.model.loglines import JsonFormatter
from sluiceway.worker import cli, logs

RUN = "0b9d5f2e-8a7c-4c1e-9f3a-2d6b7e8f9a01"


@pytest.fixture(autouse=True)
def restored_root() -> Iterator[None]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    root.handlers[:], root.level = saved


def formatter_after(argv: list[str], monkeypatch: pytest.MonkeyPatch, env: str | None) -> logging.Formatter | None:
    """The format `sluiceway worker` set up (the target fails to load after that, exit 2)."""
    if env is None:
        monkeypatch.delenv("SLUICEWAY_LOG_FORMAT", raising=False)
    else:
        monkeypatch.setenv("SLUICEWAY_LOG_FORMAT", env)
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["no/such/worker.py", *argv])) == 2
    [handler] = logging.getLogger().handlers
    return handler.formatter


def test_the_worker_command_logs_json_unless_told_text(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(formatter_after([], monkeypatch, env=None), JsonFormatter)
    assert not isinstance(formatter_after([], monkeypatch, env="text"), JsonFormatter), "the operator's variable"
    assert not isinstance(formatter_after(["--log-format", "text"], monkeypatch, env="json"), JsonFormatter)
    assert isinstance(formatter_after(["--log-format", "json"], monkeypatch, env="text"), JsonFormatter)


def test_a_bad_format_variable_is_named_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEWAY_LOG_FORMAT", "yaml")
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["worker.py"])) == 2
    assert "SLUICEWAY_LOG_FORMAT must be json or text, not 'yaml'" in capsys.readouterr().err


def test_lines_logged_while_a_task_runs_carry_its_ids() -> None:
    stream = io.StringIO()
    logs.configure("INFO", "json", stream)
    fields = {"run_id": RUN, "task_id": "t-1", "epoch": 2, "task_type": "charge", "trace_id": RUN.replace("-", "")}

    def in_the_task() -> None:
        logs.current.set(fields)
        logging.getLogger("shop").info("charging")
        logging.getLogger("shop").info("about another task", extra={"task_id": "t-9"})  # its own wins

    contextvars.copy_context().run(in_the_task)
    logging.getLogger("shop").info("between tasks")
    charging, other, between = (json.loads(line) for line in stream.getvalue().splitlines())
    assert {k: charging[k] for k in fields} == fields and charging["message"] == "charging"
    assert other["task_id"] == "t-9" and other["run_id"] == RUN
    assert set(between) == {"time", "level", "logger", "message"}, "no task: no ids"
