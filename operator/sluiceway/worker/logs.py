"""The worker process's own log lines, in the operator's shape
(`sluiceway.model.loglines`): one JSON object a line by default, text with
`--log-format text` or SLUICEWAY_LOG_FORMAT=text, the operator's variable.

A line logged while a task runs (by its handler, or by the SDK about it)
carries the task's run id, task id, epoch, type and trace id as fields, so
one log query finds a run's lines from the operator and its workers alike."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, TextIO

from sluiceway.model.loglines import LOG_FORMATS, LogFormat, formatter

# The fields of the task running in this context (its asyncio task, or the thread a sync handler runs in).
current: ContextVar[Mapping[str, Any] | None] = ContextVar("sluiceway_task_fields", default=None)


class TaskFields(logging.Filter):
    """Put the ids of the task running in this context on a line that names none itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (current.get() or {}).items():
            if getattr(record, key, None) is None:
                setattr(record, key, value)
        return True


def log_format(env: Mapping[str, str]) -> LogFormat:
    """The format SLUICEWAY_LOG_FORMAT asks for: json unless it says text."""
    raw = env.get("SLUICEWAY_LOG_FORMAT", "").strip().lower() or "json"
    for known in LOG_FORMATS:
        if raw == known:
            return known
    raise ValueError(f"SLUICEWAY_LOG_FORMAT must be json or text, not {raw!r}")


def configure(level: str, log_format: LogFormat = "json", stream: TextIO | None = None) -> logging.Handler:
    """Send the process's logs to `stream` (stderr) in the chosen format, replacing any handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(log_format))
    handler.addFilter(TaskFields())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
