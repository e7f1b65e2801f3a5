"""Durations and instants written by people: `90`, `"30s"`, `"1h 30m"`,
`"2 days"`, and ISO 8601 instants such as `"2026-12-24T18:00:00Z"`."""

from __future__ import annotations

import datetime
import re

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*")


def parse_duration(value: object) -> float:
    """Seconds; raises ValueError naming what it could not read."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"not a duration: {value!r}")
    text = value.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    total, position = 0.0, 0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None or match.group(2) not in _UNITS:
            raise ValueError(f"cannot read duration {value!r}: use forms like 30s, 5m, 1h 30m, 2 days")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return total


def parse_instant(value: object) -> datetime.datetime:
    if not isinstance(value, str):
        raise ValueError(f"not an instant: {value!r}")
    try:
        instant = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as error:
        raise ValueError(f"cannot read instant {value!r}: use ISO 8601, e.g. 2026-12-24T18:00:00Z") from error
    if instant.tzinfo is None:
        raise ValueError(f"instant {value!r} has no time zone: add Z or an offset")
    return instant
