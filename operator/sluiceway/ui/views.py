"""Small pure helpers the templates use: times, durations, JSON, and the
query strings of shareable links."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode

from sluiceway.model.common import wire_time

SINCE = {"15m": 900, "1h": 3600, "24h": 86_400, "7d": 604_800}


def when(value: datetime.datetime | str | None) -> str:
    """An instant as people read it, in UTC to the second."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def between(start: datetime.datetime | str | None, end: datetime.datetime | str | None, now: datetime.datetime) -> str:
    if start is None or start == "":
        return "—"
    a = datetime.datetime.fromisoformat(start.replace("Z", "+00:00")) if isinstance(start, str) else start
    if end is None or end == "":
        b = now
    else:
        b = datetime.datetime.fromisoformat(end.replace("Z", "+00:00")) if isinstance(end, str) else end
    return duration(max((b - a).total_seconds(), 0.0))


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def query(params: Mapping[str, str | Iterable[str] | None], **changes: str | None) -> str:
    """`?a=1&b=2`, with `changes` applied (None removes a key); empty values are left out."""
    merged: dict[str, Any] = {**params, **changes}
    pairs: list[tuple[str, str]] = []
    for key, value in merged.items():
        if value is None or value == "":
            continue
        if isinstance(value, str):
            pairs.append((key, value))
        else:
            pairs.extend((key, v) for v in value if v)
    return "?" + urlencode(pairs) if pairs else "?"


def started_after(since: str | None, now: datetime.datetime) -> str | None:
    """`since=1h` as the ISO instant the API's startedAfter takes."""
    seconds = SINCE.get(since or "")
    if seconds is None:
        return None
    return wire_time(now - datetime.timedelta(seconds=seconds))
