"""The operator's log lines: one JSON object a line by default, text for local
use (SLUICEWAY_LOG_FORMAT=text).

A line about a run or a task carries its ids as fields, passed with
`extra=about(...)`, so a log query finds every line of a run without parsing
messages. Only the fields named in `CONTEXT` (and the standard ones) are ever
written: an `extra` carrying a payload or a secret by mistake is dropped, not
logged. Messages themselves never include task inputs, outputs or secrets."""

from __future__ import annotations

import datetime
import json
import logging
import sys
import uuid
from typing import Any, Literal

LogFormat = Literal["json", "text"]

# The fields a line about something may carry, and nothing else.
CONTEXT = ("namespace", "run_id", "task_id", "epoch", "workflow", "task_type", "trace_id")

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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


def configure(level: str, log_format: LogFormat = "json") -> None:
    """Send the process's logs to stderr in the chosen format (replacing any handler)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # kopf logs whole objects at DEBUG ("Creation is in progress: {body}"), and a
    # WorkflowRun's body is a run's input: its lines stop at INFO, whatever the level.
    logging.getLogger("kopf").setLevel(max(logging.INFO, logging.getLevelName(level.upper())))
