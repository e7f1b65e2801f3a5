"""How commands print: tables by default (`-o wide` for more columns), the
API's JSON or YAML as it is, or just the ids (`-o name`). Colour only on a
terminal (and never with NO_COLOR or `--no-color`); messages for people go
to stderr, so stdout stays what a script parses."""

from __future__ import annotations

import datetime
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text


class Format(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    NAME = "name"


STATUS_STYLES = {
    "COMPLETED": "green",
    "COMPLETED_WITH_ERRORS": "yellow",
    "SKIPPED": "dim",
    "RUNNING": "cyan",
    "IN_PROGRESS": "cyan",
    "SCHEDULED": "blue",
    "PAUSED": "yellow",
    "FAILED": "red",
    "FAILED_WITH_TERMINAL_ERROR": "red",
    "TIMED_OUT": "red",
    "TERMINATED": "magenta",
    "CANCELED": "magenta",
}

_no_color = False


def disable_color() -> None:
    global _no_color
    _no_color = True


def console(stderr: bool = False) -> Console:
    """A console that colours only a terminal, and never with NO_COLOR."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(
        file=stream,
        no_color=_no_color or "NO_COLOR" in os.environ or not terminal,
        highlight=False,
        width=None if terminal else 1000,  # piped: whole lines, never folded to 80 columns
        emoji=False,
    )


def print_lines(renderable: Any, out: Console | None = None) -> None:
    """Print without the padding a table leaves at the end of its lines."""
    out = out or console()
    with out.capture() as captured:
        out.print(renderable)
    for line in captured.get().splitlines():
        out.file.write(line.rstrip() + "\n")
    out.file.flush()


def status(text: str | None) -> Text:
    value = text or ""
    return Text(value, style=STATUS_STYLES.get(value, ""))


def instant(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def duration(seconds: float) -> str:
    """`45s`, `3m12s`, `2h5m`, `3d4h`: kubectl's way of saying an age."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds}s" if minutes < 10 and seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def age(text: str | None, now: datetime.datetime | None = None) -> str:
    moment = instant(text)
    if moment is None:
        return ""
    return duration(((now or datetime.datetime.now(datetime.UTC)) - moment).total_seconds())


def elapsed(start: str | None, end: str | None, now: datetime.datetime | None = None) -> str:
    began = instant(start)
    if began is None:
        return ""
    finished = instant(end) or now or datetime.datetime.now(datetime.UTC)
    return duration((finished - began).total_seconds())


Column = tuple[str, Callable[[dict[str, Any]], str | Text]]


def table(rows: Iterable[dict[str, Any]], columns: Sequence[Column]) -> Table:
    """A kubectl-like table: no borders, upper-case headers."""
    grid = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 3, 0, 0))
    for header, _ in columns:
        grid.add_column(header, no_wrap=True, overflow="ellipsis" if header in ("REASON", "MESSAGE") else "fold")
    for row in rows:
        grid.add_row(*(cell(row) for _, cell in columns))
    return grid


def emit(data: Any, fmt: Format, render: Callable[[], Any] | None = None, names: Iterable[str] = ()) -> None:
    """Print `data` (the API's body) as `fmt` asks; `render` builds the table."""
    out = console()
    if fmt is Format.JSON:
        out.out(json.dumps(data, indent=2, ensure_ascii=False), highlight=False)
    elif fmt is Format.YAML:
        out.out(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip(), highlight=False)
    elif fmt is Format.NAME:
        for name in names:
            out.out(name, highlight=False)
    elif render is not None and (not isinstance(data, dict) or data.get("items", True)):
        print_lines(render(), out)  # an empty list prints no header: the caller says "no ... found"


def note(message: str) -> None:
    """A line for people, on stderr."""
    console(stderr=True).print(message, highlight=False, markup=False)
