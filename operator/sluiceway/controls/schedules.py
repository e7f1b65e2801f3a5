"""The policy of a schedule, in pure code: its calendar from the spec, the
deterministic jitter of a fire, which missed fires a catch-up starts, and
what a fire does while earlier runs still run (the overlap policy)."""

from __future__ import annotations

import datetime
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from sluiceway.controls.calendar import Calendar, CalendarError, Interval, parse_cron, zone
from sluiceway.controls.durations import parse_duration
from sluiceway.model.schedule import OverlapPolicy, ScheduleSpec

# Runs of a schedule are named by the schedule and the fire time: a fire
# started twice (two replicas, a retry after a crash) is one run.
_RUN_IDS = uuid.UUID("5c4ed01e-5c4e-4d01-9e5c-4ed01e5c4ed0")
MAX_BUFFERED = 1000  # BufferAll keeps at most this many fires waiting; later ones are skipped
MISSED_COUNT_CAP = 100_000  # beyond this a cron's missed fires are counted as this many
FIRES_PER_PASS = 100  # a long catch-up goes on over several passes


def calendar_of(spec: ScheduleSpec) -> Calendar:
    """The schedule's fire times; CalendarError naming the field when unreadable."""
    start = _aware(spec.start_at, "startAt")
    end = _aware(spec.end_at, "endAt")
    if spec.every is not None:
        try:
            every = datetime.timedelta(seconds=parse_duration(spec.every))
            offset = datetime.timedelta(seconds=parse_duration(spec.offset or 0))
        except ValueError as error:
            raise CalendarError(f"every/offset: {error}") from error
        if every < datetime.timedelta(seconds=1):
            raise CalendarError("every: the shortest interval is 1s")
        try:
            return Calendar(interval=Interval(every, offset), start=start, end=end)
        except CalendarError as error:
            raise CalendarError(f"every/offset: {error}") from error
    if not spec.cron:
        raise CalendarError("cron: set cron expressions or every")
    crons = []
    for index, text in enumerate(spec.cron):
        try:
            crons.append(parse_cron(text))
        except CalendarError as error:
            raise CalendarError(f"cron[{index}]: {error}") from error
    try:
        tz = zone(spec.timezone)
    except CalendarError as error:
        raise CalendarError(f"timezone: {error}") from error
    return Calendar(crons=tuple(crons), tz=tz, start=start, end=end)


def _aware(instant: datetime.datetime | None, name: str) -> datetime.datetime | None:
    if instant is None:
        return None
    if instant.tzinfo is None:
        raise CalendarError(f"{name}: give a time zone (Z or an offset)")
    return instant.astimezone(datetime.UTC)


def run_id(schedule_uid: str, fire_time: datetime.datetime) -> str:
    """The id of the run a fire starts: the same on every replica and every retry."""
    return str(uuid.uuid5(_RUN_IDS, f"{schedule_uid}/{fire_time.astimezone(datetime.UTC).isoformat()}"))


def jitter(schedule_uid: str, fire_time: datetime.datetime, jitter_seconds: int) -> datetime.timedelta:
    """A delay in [0, jitter_seconds), derived from the schedule and the fire
    time: every replica computes the same one, so they agree when it is due."""
    if jitter_seconds <= 0:
        return datetime.timedelta(0)
    digest = hashlib.sha256(f"{schedule_uid}/{fire_time.isoformat()}".encode()).digest()
    return datetime.timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (jitter_seconds * 1000))


class Action(StrEnum):
    START = "start"
    SKIP = "skip"
    BUFFER = "buffer"
    TERMINATE_OTHERS_AND_START = "terminate-others-and-start"
    CANCEL_OTHERS_AND_BUFFER = "cancel-others-and-buffer"


def overlap_action(policy: OverlapPolicy, active: int, buffered: int) -> Action:
    """What one fire does, given the schedule's runs still running and its fires waiting.

    Skip: nothing while a run runs. BufferOne: wait for the running one, at
    most one waiting. BufferAll: every fire waits its turn, in order.
    CancelOther: stop the running ones, and start once they have ended.
    TerminateOther: stop the running ones and start now. AllowAll: start now."""
    policy = policy.effective()
    if policy is OverlapPolicy.ALLOW_ALL or (active == 0 and buffered == 0):
        return Action.START
    if policy is OverlapPolicy.SKIP:
        return Action.SKIP
    if policy is OverlapPolicy.BUFFER_ONE:
        return Action.BUFFER if buffered == 0 else Action.SKIP
    if policy is OverlapPolicy.BUFFER_ALL:
        return Action.BUFFER if buffered < MAX_BUFFERED else Action.SKIP
    if policy is OverlapPolicy.CANCEL_OTHER:
        return Action.CANCEL_OTHERS_AND_BUFFER if buffered == 0 else Action.SKIP
    return Action.TERMINATE_OTHERS_AND_START


@dataclass(frozen=True)
class Due:
    """What one pass of the scheduler does for one schedule."""

    fires: list[datetime.datetime] = field(default_factory=list)  # in order; late ones are catch-up
    missed: int = 0  # older than the catch-up window: skipped, counted
    missed_range: tuple[datetime.datetime, datetime.datetime] | None = None
    next_fire: datetime.datetime | None = None  # the first fire not handled yet (None: the schedule is over)


def due_fires(
    calendar: Calendar,
    next_fire: datetime.datetime | None,
    now: datetime.datetime,
    catchup_window_seconds: int,
    jitter_of: Callable[[datetime.datetime], datetime.timedelta] = lambda _: datetime.timedelta(0),
    jitter_bound: datetime.timedelta = datetime.timedelta(0),
    limit: int = FIRES_PER_PASS,
) -> Due:
    """The fires from `next_fire` that are due at `now`.

    A fire is due at its time plus its jitter (`jitter_of`, below
    `jitter_bound`). One later than that by more than the catch-up window is
    missed: counted, never started; the others are started in order, at most
    `limit` a pass."""
    window = datetime.timedelta(seconds=catchup_window_seconds)
    oldest_allowed = now - window - jitter_bound
    missed = 0
    missed_range: tuple[datetime.datetime, datetime.datetime] | None = None
    if next_fire is not None and next_fire < oldest_allowed:
        first_kept = calendar.first_at_or_after(oldest_allowed)
        missed = calendar.count_between(next_fire, oldest_allowed, MISSED_COUNT_CAP)
        missed_range = (next_fire, oldest_allowed)
        next_fire = first_kept
    fires: list[datetime.datetime] = []
    while next_fire is not None and next_fire + jitter_of(next_fire) <= now and len(fires) < limit:
        fires.append(next_fire)
        next_fire = next(calendar.fires_after(next_fire), None)
    return Due(fires, missed, missed_range if missed else None, next_fire)


def backfill_fires(
    calendar: Calendar, start: datetime.datetime, end: datetime.datetime, limit: int
) -> list[datetime.datetime]:
    """The fires of a past range, [start, end], at most `limit`."""
    return calendar.between(start, end, limit)


def upcoming(
    spec: ScheduleSpec, next_fire: datetime.datetime | None, runs_started: int, count: int
) -> list[datetime.datetime]:
    """The next `count` fires as the scheduler will see them, from its stored
    next fire on (none while suspended, or once maxRuns is reached)."""
    if next_fire is None or spec.suspend:
        return []
    fires = [next_fire]
    for fire in calendar_of(spec).fires_after(next_fire):
        if len(fires) >= count:
            break
        fires.append(fire)
    if spec.max_runs is not None:
        fires = fires[: max(0, spec.max_runs - runs_started)]
    return fires
