"""The shape of Sluiceway's log lines, one schema for the operator
(`sluiceway.observability.logs`) and the worker SDK (`sluiceway.worker.logs`):
one JSON object a line by default, text for local use.

A line about a run or a task carries its ids as fields, passed with
`extra=about(...)`, so a log query finds every line of a run without parsing
messages. Only the fields named in `CONTEXT` (and the standard ones) are ever
written: an `extra` carrying a payload or a secret by mistake is dropped, not
logged. Messages themselves never include task inputs, outputs or secrets.

It lives with the model, not with observability, because the worker SDK may
import only the model (it speaks the public API and nothing of the operator);
it is pure formatting, the standard library's logging and json alone."""

from __future__ import annotations

import datetime
import json
import logging
import uuid
from typing import Any, Literal

LogFormat = Literal["json", "text"]
LOG_FORMATS: tuple[LogFormat, ...] = ("json", "text")

# The fields a line about something may carry, and nothing else.
CONTEXT = ("namespace", "run_id", "task_id", "epoch", "workflow", "task_type", "trace_id")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def about(
    *,
    namespace: str | None = None,
    run_id: object = None,
    task_id: object = None,
    epoch: int | None = None,
    workflow: str | None = None,
    task_type: str | None = None,
) -> dict[str, Any]:
    """The `extra` of a line about a run or a task: its ids (and the run's
    trace id, which is its run id in hex), never its data."""
    fields = {
        "namespace": namespace,
        "run_id": None if run_id is None else str(run_id),
        "trace_id": None if run_id is None else _trace_id(str(run_id)),
        "task_id": None if task_id is None else str(task_id),
        "epoch": epoch,
        "workflow": workflow,
        "task_type": task_type,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _trace_id(run_id: str) -> str | None:
    """A run's trace id is its run id (observability.tracing): the line leads to the trace."""
    try:
        return uuid.UUID(run_id).hex
    except ValueError:
        return None


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in CONTEXT:
            value = getattr(record, key, None)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
