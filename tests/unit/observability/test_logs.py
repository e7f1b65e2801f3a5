"""The operator's log lines: JSON by default with the ids of what they are
about, text on request, and never a field nobody declared."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from sluiceway.observability import logs, tracing
from sluiceway.runtime.settings import Settings, SettingsError


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    logs.configure("INFO", "json")
    root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    yield stream
    root.handlers[:], root.level = saved


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_about_a_task_carries_its_ids_as_fields(captured: io.StringIO) -> None:
    run_id = "0b9d5f2e-8a7c-4c1e-9f3a-2d6b7e8f9a01"
    about = logs.about(namespace="team-a", run_id=run_id, task_id="t-1", epoch=3)
    logging.getLogger("sluiceway.test").warning("task %s timed out", "t-1", extra=about)
    [line] = lines(captured)
    assert line["message"] == "task t-1 timed out" and line["level"] == "WARNING"
    assert line["logger"] == "sluiceway.test"
    assert {k: line[k] for k in ("namespace", "run_id", "task_id", "epoch", "trace_id")} == {
        "namespace": "team-a",
        "run_id": run_id,
        "task_id": "t-1",
        "epoch": 3,
        "trace_id": f"{tracing.trace_id(run_id):032x}",  # the run's trace, as tracing exports it
    }
    assert str(line["time"]).endswith("+00:00")


def test_undeclared_extras_never_reach_the_line(captured: io.StringIO) -> None:
    """A payload or a secret passed as an extra by mistake is dropped, not logged."""
    secret = "s3cr3t-token-value"
    logging.getLogger("sluiceway.test").info("called", extra={"input": {"card": "4111"}, "password": secret})
    text = captured.getvalue()
    assert secret not in text and "4111" not in text
    assert set(lines(captured)[0]) == {"time", "level", "logger", "message"}


def test_an_exception_is_one_line_with_its_traceback_as_a_field(captured: io.StringIO) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("sluiceway.test").exception("a pass failed")
    [line] = lines(captured)
    assert "ValueError: boom" in str(line["error"]) and line["message"] == "a pass failed"


def test_text_format_on_request(captured: io.StringIO) -> None:
    logs.configure("INFO", "text")
    stream = io.StringIO()
    logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
    logging.getLogger("sluiceway.test").info("hello %s", "there", extra=logs.about(run_id="r-1"))
    assert stream.getvalue().rstrip().endswith("INFO sluiceway.test: hello there")


def test_the_format_comes_from_sluiceway_log_format() -> None:
    base = {"SLUICEWAY_DATABASE_URL": "postgresql://x/y"}
    assert Settings.from_env(base).log_format == "json"
    assert Settings.from_env({**base, "SLUICEWAY_LOG_FORMAT": "TEXT"}).log_format == "text"
    with pytest.raises(SettingsError, match="SLUICEWAY_LOG_FORMAT"):
        Settings.from_env({**base, "SLUICEWAY_LOG_FORMAT": "xml"})


def test_kopf_never_logs_object_bodies_even_at_debug(captured: io.StringIO) -> None:
    logs.configure("DEBUG", "json")
    stream = io.StringIO()
    logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
    logging.getLogger("kopf.objects").debug("Creation is in progress: %r", {"spec": {"input": {"card": "4111"}}})
    logging.getLogger("sluiceway.test").debug("ours still logs at DEBUG")
    assert "4111" not in stream.getvalue() and "ours still logs at DEBUG" in stream.getvalue()
    logging.getLogger("kopf").setLevel(logging.NOTSET)
