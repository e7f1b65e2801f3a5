"""The operator's log lines: one JSON object a line by default, text for local
use (SLUICEWAY_LOG_FORMAT=text). Their shape (the declared fields, `about`,
the JSON formatter) is `sluiceway.model.loglines`, shared with the worker SDK."""

from __future__ import annotations

import logging
import sys

from sluiceway.model.loglines import CONTEXT, JsonFormatter, LogFormat, about, formatter

__all__ = ["CONTEXT", "JsonFormatter", "LogFormat", "about", "configure"]


def configure(level: str, log_format: LogFormat = "json") -> None:
    """Send the process's logs to stderr in the chosen format (replacing any handler)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # kopf logs whole objects at DEBUG ("Creation is in progress: {body}"), and a
    # WorkflowRun's body is a run's input: its lines stop at INFO, whatever the level.
    logging.getLogger("kopf").setLevel(max(logging.INFO, logging.getLevelName(level.upper())))
