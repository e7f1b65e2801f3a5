"""How a status is shown: a colour class, an icon and a word, so that colour
is never the only signal."""

from __future__ import annotations

from dataclasses import dataclass

NOT_STARTED = "NOT_STARTED"


@dataclass(frozen=True)
class Shown:
    css: str  # the colour class: ok, bad, busy, wait, off, warn
    icon: str
    label: str


_SHOWN = {
    "COMPLETED": Shown("ok", "✓", "completed"),
    "COMPLETED_WITH_ERRORS": Shown("warn", "✓!", "completed with errors"),
    "SKIPPED": Shown("off", "↷", "skipped"),
    "FAILED": Shown("bad", "✗", "failed"),
    "FAILED_WITH_TERMINAL_ERROR": Shown("bad", "✗", "failed (terminal)"),
    "TIMED_OUT": Shown("bad", "◔", "timed out"),
    "TERMINATED": Shown("bad", "■", "terminated"),
    "CANCELED": Shown("off", "⊘", "canceled"),
    "IN_PROGRESS": Shown("busy", "▶", "in progress"),
    "RUNNING": Shown("busy", "▶", "running"),
    "SCHEDULED": Shown("wait", "◷", "scheduled"),
    "PAUSED": Shown("warn", "‖", "paused"),
    NOT_STARTED: Shown("off", "○", "not started"),
}
# Worst first: a group takes the first status any member has.
SEVERITY = (
    "FAILED",
    "FAILED_WITH_TERMINAL_ERROR",
    "TIMED_OUT",
    "TERMINATED",
    "IN_PROGRESS",
    "SCHEDULED",
    "COMPLETED_WITH_ERRORS",
    "CANCELED",
    "COMPLETED",
    "SKIPPED",
    NOT_STARTED,
)


def shown(status: str) -> Shown:
    return _SHOWN.get(status, Shown("off", "?", status.lower().replace("_", " ")))


def worst(statuses: dict[str, int]) -> str:
    present = [s for s in SEVERITY if statuses.get(s)]
    if present:
        return present[0]
    return next(iter(statuses), NOT_STARTED)


def is_failure(status: str) -> bool:
    return status in ("FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT", "TERMINATED")
