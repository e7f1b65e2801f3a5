"""When a schedule fires, computed without a clock: `cron` expressions (five
fields and the usual macros) read in an IANA time zone, or `every` an interval
with an offset; bounded by `startAt` and `endAt`.

Time zones follow literal clock matching, as Kubernetes CronJob (robfig/cron:
"jobs scheduled during daylight-savings leap-ahead transitions will not be
run") and Temporal Schedules document it: a cron expression fires at every
instant at which the zone's clock shows a matching time. A time the clock
skips (02:30 on a spring-forward night) does not fire that day; a time the
clock shows twice (01:30 on a fall-back night) fires twice, an hour apart.
Intervals are absolute: `every: 2h` ignores the zone.

Every instant here is an aware UTC datetime."""

from __future__ import annotations

import datetime
import heapq
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC = datetime.UTC
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = datetime.timedelta(microseconds=1)
# An expression that matches no day for this many days in a row never fires (robfig/cron gives up after five years).
_SEARCH_DAYS = 5 * 366 + 1
_LAST_DAY = datetime.date(9999, 12, 30)  # a day later, a fold near midnight could leave what datetime can hold
_LAST_MICROSECOND = (datetime.datetime(9999, 12, 30, tzinfo=UTC) - _EPOCH) // _MICROSECOND

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {name: i + 1 for i, name in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}
_WEEKDAYS = {name: i for i, name in enumerate("SUN MON TUE WED THU FRI SAT".split())}
_ELEMENT = re.compile(r"^(?P<range>\*|\?|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(?P<step>\d+))?$")


class CalendarError(ValueError):
    """An expression, interval or time zone that cannot be read; the message says which part."""


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day of month", 1, 31, {}),
    _Field("month", 1, 12, _MONTHS),
    _Field("day of week", 0, 7, _WEEKDAYS),  # 7 is Sunday too
)


def _value(text: str, field: _Field) -> int:
    value = field.names.get(text.upper()) if not text.isdigit() else int(text)
    if value is None or not field.low <= value <= field.high:
        raise CalendarError(f"{field.name} {text!r} is not in {field.low}-{field.high}")
    return value


def _element(text: str, field: _Field) -> set[int]:
    match = _ELEMENT.match(text)
    if match is None:
        raise CalendarError(f"{field.name} {text!r} is not a value, a range, a list or a step")
    span, step_text = match.group("range"), match.group("step")
    if span in ("*", "?"):
        low, high = field.low, field.high
    elif "-" in span:
        first, last = span.split("-", 1)
        low, high = _value(first, field), _value(last, field)
        if low > high:
            raise CalendarError(f"{field.name} range {span!r} runs backwards")
    else:
        low = _value(span, field)
        high = field.high if step_text else low  # `5/15`: from 5, every 15
    step = int(step_text) if step_text else 1
    if step < 1:
        raise CalendarError(f"{field.name} step in {text!r} must be at least 1")
    return set(range(low, high + 1, step))


def _parse_field(text: str, field: _Field) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        values |= _element(part, field)
    if field.name == "day of week" and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


@dataclass(frozen=True)
class CronExpression:
    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 is Sunday
    either_day: bool  # both day fields restricted: a day matches either (cron's rule); otherwise both

    def matches_day(self, day: datetime.date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = day.isoweekday() % 7 in self.weekdays
        return in_month or in_week if self.either_day else in_month and in_week


def parse_cron(text: str) -> CronExpression:
    """Five fields (minute hour day-of-month month day-of-week) or a macro."""
    expanded = MACROS.get(text.strip().lower(), text.strip())
    parts = expanded.split()
    if len(parts) != 5:
        raise CalendarError(
            f"{text!r} has {len(parts)} fields: write five (minute hour day-of-month month day-of-week) or a macro "
            f"such as @hourly"
        )
    minutes, hours, days, months, weekdays = (_parse_field(p, f) for p, f in zip(parts, _FIELDS, strict=True))
    return CronExpression(
        text=text,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=days,
        months=months,
        weekdays=weekdays,
        either_day=not parts[2].startswith(("*", "?")) and not parts[4].startswith(("*", "?")),
    )


def zone(name: str) -> ZoneInfo:
    """An IANA time zone by name (`Europe/Paris`, `UTC`)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise CalendarError(f"{name!r} is not an IANA time zone (such as UTC or Europe/Paris)") from error


def _instants(local: datetime.datetime, tz: ZoneInfo) -> list[datetime.datetime]:
    """The instants at which the zone's clock shows `local` (naive): none in a
    gap, two in a fold, one otherwise."""
    found: list[datetime.datetime] = []
    for fold in (0, 1):
        instant = local.replace(tzinfo=tz, fold=fold).astimezone(UTC)
        if instant.astimezone(tz).replace(tzinfo=None) == local and instant not in found:
            found.append(instant)
    return found


def cron_fires_after(expression: CronExpression, tz: ZoneInfo, after: datetime.datetime) -> Iterator[datetime.datetime]:
    """Every instant strictly after `after` at which the clock matches, in order."""
    # From the day before: a fold can put an earlier clock reading after `after`.
    day = after.astimezone(tz).date() - datetime.timedelta(days=1)
    idle = 0  # days in a row that matched nothing
    while idle < _SEARCH_DAYS:
        idle += 1
        if expression.matches_day(day):
            idle = 0
            instants = sorted(
                instant
                for hour in expression.hours
                for minute in expression.minutes
                for instant in _instants(datetime.datetime.combine(day, datetime.time(hour, minute)), tz)
            )
            yield from (instant for instant in instants if instant > after)
        if day >= _LAST_DAY:
            return  # the calendar ends with the year 9999
        day += datetime.timedelta(days=1)


@dataclass(frozen=True)
class Interval:
    """Fires at offset + k * every since the Unix epoch: two schedules with the
    same interval and offset fire at the same instants, whenever they were created."""

    every: datetime.timedelta
    offset: datetime.timedelta = datetime.timedelta(0)

    def __post_init__(self) -> None:
        if self.every <= datetime.timedelta(0):
            raise CalendarError("every must be a positive duration")
        if not datetime.timedelta(0) <= self.offset < self.every:
            raise CalendarError("offset must be at least 0 and less than the interval")

    def fires_after(self, after: datetime.datetime) -> Iterator[datetime.datetime]:
        step, offset = self.every // _MICROSECOND, self.offset // _MICROSECOND
        since = (after - _EPOCH) // _MICROSECOND
        k = (since - offset) // step + 1
        while offset + k * step <= _LAST_MICROSECOND:  # the calendar ends with the year 9999
            yield _EPOCH + datetime.timedelta(microseconds=offset + k * step)
            k += 1

    def count_between(self, start: datetime.datetime, end: datetime.datetime) -> int:
        """Fires in [start, end)."""
        step, offset = self.every // _MICROSECOND, self.offset // _MICROSECOND
        first = -(-((start - _EPOCH) // _MICROSECOND - offset) // step)  # ceil
        last = -(-((end - _EPOCH) // _MICROSECOND - offset) // step)
        return max(0, last - first)


@dataclass(frozen=True)
class Calendar:
    """All the fire times of one schedule: the union of its cron expressions
    (or its interval), within [start, end]."""

    crons: tuple[CronExpression, ...] = ()
    tz: ZoneInfo = ZoneInfo("UTC")
    interval: Interval | None = None
    start: datetime.datetime | None = None
    end: datetime.datetime | None = None

    def fires_after(self, after: datetime.datetime) -> Iterator[datetime.datetime]:
        """Every fire strictly after `after`, in order, each once."""
        if self.start is not None and after < self.start:
            after = _just_before(self.start)
        if after.year >= 9999 or after.year < 2:
            return  # outside what the calendar computes (datetime ends in 9999)
        sources: list[Iterator[datetime.datetime]] = (
            [self.interval.fires_after(after)]
            if self.interval is not None
            else [cron_fires_after(c, self.tz, after) for c in self.crons]
        )
        previous: datetime.datetime | None = None
        for instant in heapq.merge(*sources):
            if self.end is not None and instant > self.end:
                return
            if instant != previous:
                yield instant
            previous = instant

    def next_fires(self, after: datetime.datetime, count: int) -> list[datetime.datetime]:
        return _take(self.fires_after(after), count)

    def first_at_or_after(self, instant: datetime.datetime) -> datetime.datetime | None:
        return next(self.fires_after(_just_before(instant)), None)

    def between(self, start: datetime.datetime, end: datetime.datetime, limit: int) -> list[datetime.datetime]:
        """Fires in [start, end], at most `limit`."""
        found: list[datetime.datetime] = []
        for instant in self.fires_after(_just_before(start)):
            if instant > end or len(found) >= limit:
                break
            found.append(instant)
        return found

    def count_between(self, start: datetime.datetime, end: datetime.datetime, cap: int) -> int:
        """Fires in [start, end), counted up to `cap` (exactly for an interval)."""
        if self.interval is not None:
            low = max(start, self.start) if self.start else start
            high = min(end, self.end + _MICROSECOND) if self.end else end
            return self.interval.count_between(low, high) if low < high else 0
        count = 0
        for instant in self.fires_after(_just_before(start)):
            if instant >= end or count >= cap:
                break
            count += 1
        return count


def _just_before(instant: datetime.datetime) -> datetime.datetime:
    return instant - _MICROSECOND if instant.year > 1 else instant


def _take(fires: Iterable[datetime.datetime], count: int) -> list[datetime.datetime]:
    found: list[datetime.datetime] = []
    for instant in fires:
        if len(found) >= count:
            break
        found.append(instant)
    return found
