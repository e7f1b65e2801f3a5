"""A run's timeline: one row per task reference, one bar per attempt, each bar
cut into what the attempt spent waiting (a retry backoff or a snooze before it
could be leased, then in its queue) and running. Positions are fractions of the
run's span, so the template only multiplies by its width.

Pure: attempts and the span go in; `now` closes the bars still open."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from sluiceway.ui.rungraph import group_key, spawned_base

MAX_ROWS = 200


@dataclass(frozen=True)
class Attempt:
    ref: str
    attempt: int
    status: str
    created_at: datetime.datetime
    available_at: datetime.datetime
    leased_at: datetime.datetime | None
    ended_at: datetime.datetime | None


@dataclass(frozen=True)
class Segment:
    kind: str  # backoff, queued, running, waiting (an engine task), span (a folded group)
    start: float  # fraction of the span
    width: float
    seconds: float
    status: str
    label: str


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    segments: list[Segment]


@dataclass(frozen=True)
class Timeline:
    rows: list[Row]
    seconds: float  # the whole span
    hidden: int  # rows left out past MAX_ROWS


def _seconds(a: datetime.datetime, b: datetime.datetime) -> float:
    return max((b - a).total_seconds(), 0.0)


def _describe(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def _segments(found: Attempt, origin: datetime.datetime, span: float, now: datetime.datetime) -> list[Segment]:
    end = found.ended_at or now

    def piece(kind: str, a: datetime.datetime, b: datetime.datetime, what: str) -> Segment:
        seconds = _seconds(a, b)
        text = f"attempt {found.attempt}: {what} {_describe(seconds)}"
        return Segment(kind, _seconds(origin, a) / span, seconds / span, seconds, found.status, text)

    pieces = []
    if found.available_at > found.created_at:
        what = "retry backoff" if found.attempt > 1 else "delayed"
        pieces.append(piece("backoff", found.created_at, min(found.available_at, end), what))
    if found.leased_at is None:
        start = max(found.available_at, found.created_at)
        kind, what = ("queued", "waited in its queue") if found.ended_at is None else ("waiting", "took")
        pieces.append(piece(kind, min(start, end), end, what))
    else:
        start = max(found.available_at, found.created_at)
        if found.leased_at > start:
            pieces.append(piece("queued", start, found.leased_at, "waited in its queue"))
        pieces.append(piece("running", found.leased_at, end, f"{found.status.lower()} after running"))
    return pieces


def timeline(
    attempts: Sequence[Attempt],
    start: datetime.datetime,
    end: datetime.datetime | None,
    now: datetime.datetime,
    *,
    folded: frozenset[str] = frozenset(),
) -> Timeline:
    """Rows in the order tasks were first scheduled. Branches of a fan-out
    in `folded` share one row: the span from the first branch's start to the
    last one's end."""
    close = end or now
    span = max(_seconds(start, close), 0.001)
    rows: dict[str, list[Segment]] = {}
    labels: dict[str, str] = {}
    groups: dict[str, tuple[datetime.datetime, datetime.datetime, int]] = {}
    for found in sorted(attempts, key=lambda a: (a.created_at, a.ref, a.attempt)):
        base = spawned_base(found.ref)
        if base is not None and base in folded:
            key = group_key(base)
            first, last, count = groups.get(key, (found.created_at, found.ended_at or now, 0))
            groups[key] = (min(first, found.created_at), max(last, found.ended_at or now), count + 1)
            rows.setdefault(key, [])
            labels[key] = f"{base} branches"
            continue
        rows.setdefault(found.ref, []).extend(_segments(found, start, span, now))
        labels[found.ref] = found.ref
    for key, (first, last, count) in groups.items():
        seconds = _seconds(first, last)
        text = f"{count:,} attempts from first scheduled to last ended: {_describe(seconds)}"
        rows[key] = [Segment("span", _seconds(start, first) / span, seconds / span, seconds, "", text)]
    shown = [Row(key, labels[key], segments) for key, segments in list(rows.items())[:MAX_ROWS]]
    return Timeline(shown, span, max(len(rows) - MAX_ROWS, 0))
