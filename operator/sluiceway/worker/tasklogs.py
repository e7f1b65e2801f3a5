"""What a handler logs, captured for its task: through the standard `logging`
module while the handler runs (in its own asyncio task, or the thread a sync
handler runs in), or explicitly with `task.log(...)`. Lines wait in a bounded
buffer per task and leave with the next heartbeat or the result, so they
outlive the worker: `sluiceway logs RUN` reads them from the server."""

from __future__ import annotations

import contextvars
import datetime
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from sluiceway.model.common import wire_time
from sluiceway.model.execution import MAX_LOG_LINE

# The lines of the task whose handler is running in this context, if any.
current: contextvars.ContextVar[LogBuffer | None] = contextvars.ContextVar("sluiceway_task_log", default=None)

MAX_BUFFERED_BYTES = 1024 * 1024  # per task, between two shipments: past it lines are counted, not kept
_LEVEL_CHARS = 16


@dataclass
class LogBuffer:
    """Lines not shipped yet. Appended from the handler (any thread), drained
    by the worker's shipping loop."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    dropped: int = 0
    oldest: float | None = None  # monotonic time of the oldest line waiting
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, message: str, level: str = "INFO", at: datetime.datetime | None = None, now: float = 0.0) -> None:
        text = message if len(message) <= MAX_LOG_LINE else message[: MAX_LOG_LINE - 17] + " [line truncated]"
        stamp = wire_time(at or datetime.datetime.now(datetime.UTC))
        with self._lock:
            if self.size + len(text) > MAX_BUFFERED_BYTES:
                self.dropped += 1
                return
            self.lines.append({"at": stamp, "level": level.upper()[:_LEVEL_CHARS], "message": text})
            self.size += len(text)
            if self.oldest is None:
                self.oldest = now

    def drain(self) -> list[dict[str, Any]]:
        """Everything waiting, oldest first, with a line counting what was dropped."""
        with self._lock:
            lines, dropped = self.lines, self.dropped
            self.lines, self.size, self.dropped, self.oldest = [], 0, 0, None
        if dropped:
            lines.append(
                {"level": "WARNING", "message": f"[{dropped} log lines dropped by the worker: too many at once]"}
            )
        return lines

    def put_back(self, lines: list[dict[str, Any]]) -> None:
        """Lines a failed shipment did not deliver: first in line for the next one."""
        with self._lock:
            self.lines[:0] = lines
            self.size += sum(len(str(line.get("message", ""))) for line in lines)

    def waiting_since(self) -> float | None:
        with self._lock:
            return self.oldest if self.lines or self.dropped else None


class CaptureHandler(logging.Handler):
    """Installed on the root logger while a worker runs: a record emitted
    inside a handler goes to that task's buffer, and on to the handlers the
    application configured, as before."""

    def __init__(self, level: int = logging.INFO, clock: Any = None) -> None:
        super().__init__(level)
        self.clock = clock

    def emit(self, record: logging.LogRecord) -> None:
        buffer = current.get()
        if buffer is None or record.name.startswith("sluiceway.worker"):
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
        except Exception:  # noqa: BLE001 - a record that cannot format must not fail the handler's code
            message = str(record.msg)
        at = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        buffer.add(message, record.levelname, at, self.clock() if self.clock else 0.0)
