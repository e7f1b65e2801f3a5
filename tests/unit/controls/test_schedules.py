"""Fire times and the policy of a schedule, in pure code with fixed clocks:
cron fields and macros, time zones across daylight-saving changes, intervals
with offsets, bounds, jitter, catch-up and the overlap policies."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from sluiceway.controls.calendar import CalendarError, parse_cron
from sluiceway.controls.schedules import (
    MAX_BUFFERED,
    Action,
    backfill_fires,
    calendar_of,
    due_fires,
    jitter,
    overlap_action,
    run_id,
)
from sluiceway.model.schedule import OverlapPolicy, ScheduleSpec

UTC = datetime.UTC


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def spec(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"workflow": "report", **fields})


def fires(after: str, count: int, **fields: Any) -> list[str]:
    found = calendar_of(spec(**fields)).next_fires(at(after), count)
    return [f.isoformat().replace("+00:00", "Z") for f in found]


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        ("*/15 * * * *", "2026-05-04T10:07:00Z", ["2026-05-04T10:15:00Z", "2026-05-04T10:30:00Z"]),
        ("0 9 * * MON-FRI", "2026-05-08T10:00:00Z", ["2026-05-11T09:00:00Z", "2026-05-12T09:00:00Z"]),  # Fri -> Mon
        ("@hourly", "2026-05-04T10:00:00Z", ["2026-05-04T11:00:00Z", "2026-05-04T12:00:00Z"]),
        ("@daily", "2026-05-04T10:00:00Z", ["2026-05-05T00:00:00Z", "2026-05-06T00:00:00Z"]),
        ("@weekly", "2026-05-04T10:00:00Z", ["2026-05-10T00:00:00Z", "2026-05-17T00:00:00Z"]),  # Sundays
        ("@monthly", "2026-05-04T10:00:00Z", ["2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"]),
        ("@yearly", "2026-05-04T10:00:00Z", ["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
        ("0 0 29 2 *", "2026-05-04T10:00:00Z", ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
        ("0 12 * JAN,jul 7", "2026-05-04T10:00:00Z", ["2026-07-05T12:00:00Z", "2026-07-12T12:00:00Z"]),  # 7 is Sunday
        # Both day fields restricted: either matches (the 13th, or a Friday), as cron does.
        ("0 0 13 * 5", "2026-05-04T10:00:00Z", ["2026-05-08T00:00:00Z", "2026-05-13T00:00:00Z"]),
        # Day of week starts with *: both must match (a Tuesday that is the 1st..7th).
        ("0 0 1-7 * */2", "2026-05-04T10:00:00Z", ["2026-05-05T00:00:00Z", "2026-05-07T00:00:00Z"]),
        ("5/20 8 * * *", "2026-05-04T00:00:00Z", ["2026-05-04T08:05:00Z", "2026-05-04T08:25:00Z"]),
    ],
)
def test_cron_expressions_fire_when_their_fields_match(cron: str, after: str, expected: list[str]) -> None:
    assert fires(after, 2, cron=[cron]) == expected


def test_several_expressions_fire_at_the_union_of_their_times_once_each() -> None:
    assert fires("2026-05-04T08:50:00Z", 4, cron=["0 9 * * *", "*/30 9 * * *", "15 9 * * *"]) == [
        "2026-05-04T09:00:00Z",
        "2026-05-04T09:15:00Z",
        "2026-05-04T09:30:00Z",
        "2026-05-05T09:00:00Z",
    ]


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "minute '60' is not in 0-59"),
        ("0 24 * * *", "hour '24' is not in 0-23"),
        ("0 0 0 * *", "day of month '0' is not in 1-31"),
        ("0 0 * 13 *", "month '13' is not in 1-12"),
        ("0 0 * * FUN", "day of week 'FUN' is not in 0-7"),
        ("0 5-3 * * *", "runs backwards"),
        ("*/0 * * * *", "step in '*/0' must be at least 1"),
        ("0 0 L * *", "day of month 'L' is not in 1-31"),
        ("@sometimes", "has 1 fields"),
    ],
)
def test_an_unreadable_expression_is_refused_naming_the_part(cron: str, message: str) -> None:
    with pytest.raises(CalendarError, match=re.escape(message)):
        parse_cron(cron)


def test_a_bad_expression_of_a_schedule_names_its_index_and_a_bad_zone_its_field() -> None:
    with pytest.raises(CalendarError, match=r"^cron\[1\]: minute '99'"):
        calendar_of(spec(cron=["0 * * * *", "99 * * * *"]))
    with pytest.raises(CalendarError, match="^timezone: 'Mars/Olympus' is not an IANA time zone"):
        calendar_of(spec(cron=["0 * * * *"], timezone="Mars/Olympus"))
    with pytest.raises(CalendarError, match="^every/offset: cannot read duration"):
        calendar_of(spec(every="soon"))
    with pytest.raises(CalendarError, match="offset must be at least 0 and less than the interval"):
        calendar_of(spec(every="1m", offset="1m"))


# New York in 2026: clocks spring forward on Sunday 8 March (02:00 EST becomes
# 03:00 EDT) and fall back on Sunday 1 November (02:00 EDT becomes 01:00 EST).
NEW_YORK = {"timezone": "America/New_York"}


def test_dst_a_time_the_clock_skips_does_not_fire_that_day() -> None:
    assert fires("2026-03-07T17:00:00Z", 3, cron=["30 2 * * *"], **NEW_YORK) == [
        "2026-03-09T06:30:00Z",  # 02:30 EDT on Monday; Sunday had no 02:30
        "2026-03-10T06:30:00Z",
        "2026-03-11T06:30:00Z",
    ]


def test_dst_a_time_the_clock_shows_twice_fires_twice_an_hour_apart() -> None:
    assert fires("2026-10-31T16:00:00Z", 3, cron=["30 1 * * *"], **NEW_YORK) == [
        "2026-11-01T05:30:00Z",  # 01:30 EDT
        "2026-11-01T06:30:00Z",  # 01:30 EST, the same clock time an hour later
        "2026-11-02T06:30:00Z",
    ]


def test_dst_an_hourly_schedule_fires_every_real_hour_across_both_changes() -> None:
    assert fires("2026-03-08T04:30:00Z", 4, cron=["0 * * * *"], **NEW_YORK) == [
        "2026-03-08T05:00:00Z",  # 00:00 EST
        "2026-03-08T06:00:00Z",  # 01:00 EST
        "2026-03-08T07:00:00Z",  # 03:00 EDT: the clock went from 01:59 to 03:00
        "2026-03-08T08:00:00Z",
    ]
    assert fires("2026-11-01T04:30:00Z", 3, cron=["0 * * * *"], **NEW_YORK) == [
        "2026-11-01T05:00:00Z",  # 01:00 EDT
        "2026-11-01T06:00:00Z",  # 01:00 EST
        "2026-11-01T07:00:00Z",  # 02:00 EST
    ]


def test_a_daily_time_follows_the_zone_across_a_change() -> None:
    assert fires("2026-03-06T20:00:00Z", 3, cron=["0 9 * * *"], **NEW_YORK) == [
        "2026-03-07T14:00:00Z",  # 09:00 EST
        "2026-03-08T13:00:00Z",  # 09:00 EDT
        "2026-03-09T13:00:00Z",
    ]


def test_an_interval_fires_at_multiples_since_the_epoch_plus_its_offset() -> None:
    assert fires("2026-05-04T10:00:01Z", 3, every="2s") == [
        "2026-05-04T10:00:02Z",
        "2026-05-04T10:00:04Z",
        "2026-05-04T10:00:06Z",
    ]
    assert fires("2026-05-04T10:20:00Z", 2, every="1h", offset="15m", timezone="Asia/Kolkata") == [
        "2026-05-04T11:15:00Z",  # intervals ignore the zone
        "2026-05-04T12:15:00Z",
    ]


def test_start_and_end_bound_the_fires() -> None:
    bounded = {"every": "10m", "startAt": "2026-05-04T10:25:00Z", "endAt": "2026-05-04T11:00:00Z"}
    assert fires("2026-05-04T09:00:00Z", 10, **bounded) == [
        "2026-05-04T10:30:00Z",
        "2026-05-04T10:40:00Z",
        "2026-05-04T10:50:00Z",
        "2026-05-04T11:00:00Z",
    ]


def test_jitter_is_the_same_for_the_same_fire_and_stays_below_the_bound() -> None:
    fire = at("2026-05-04T10:00:00Z")
    delays = [jitter("uid-1", fire + datetime.timedelta(minutes=i), 30) for i in range(200)]
    assert delays[0] == jitter("uid-1", fire, 30)
    assert all(datetime.timedelta(0) <= d < datetime.timedelta(seconds=30) for d in delays)
    assert len(set(delays)) > 150, "fires of one schedule spread over the window"
    assert jitter("uid-1", fire, 0) == datetime.timedelta(0)


def test_a_fire_names_its_run_the_same_way_every_time() -> None:
    fire = at("2026-05-04T10:00:00Z")
    assert run_id("uid-1", fire) == run_id("uid-1", fire.astimezone(datetime.timezone(datetime.timedelta(hours=2))))
    assert run_id("uid-1", fire) != run_id("uid-2", fire) != run_id("uid-1", fire + datetime.timedelta(seconds=1))


@pytest.mark.parametrize(
    ("policy", "active", "buffered", "action"),
    [
        (OverlapPolicy.SKIP, 0, 0, Action.START),
        (OverlapPolicy.SKIP, 1, 0, Action.SKIP),
        (OverlapPolicy.FORBID, 1, 0, Action.SKIP),
        (OverlapPolicy.BUFFER_ONE, 1, 0, Action.BUFFER),
        (OverlapPolicy.BUFFER_ONE, 1, 1, Action.SKIP),
        (OverlapPolicy.BUFFER_ALL, 1, 5, Action.BUFFER),
        (OverlapPolicy.BUFFER_ALL, 0, 2, Action.BUFFER),  # waits behind those already waiting
        (OverlapPolicy.BUFFER_ALL, 1, MAX_BUFFERED, Action.SKIP),
        (OverlapPolicy.CANCEL_OTHER, 2, 0, Action.CANCEL_OTHERS_AND_BUFFER),
        (OverlapPolicy.CANCEL_OTHER, 2, 1, Action.SKIP),
        (OverlapPolicy.TERMINATE_OTHER, 1, 0, Action.TERMINATE_OTHERS_AND_START),
        (OverlapPolicy.REPLACE, 1, 0, Action.TERMINATE_OTHERS_AND_START),
        (OverlapPolicy.ALLOW_ALL, 3, 0, Action.START),
        (OverlapPolicy.ALLOW, 3, 0, Action.START),
    ],
)
def test_the_overlap_policy_decides_what_a_fire_does(
    policy: OverlapPolicy, active: int, buffered: int, action: Action
) -> None:
    assert overlap_action(policy, active, buffered) is action


def test_due_fires_are_those_whose_time_has_come_in_order() -> None:
    calendar = calendar_of(spec(every="2s"))
    due = due_fires(calendar, at("2026-05-04T10:00:00Z"), at("2026-05-04T10:00:05Z"), 60)
    assert due.fires == [at("2026-05-04T10:00:00Z"), at("2026-05-04T10:00:02Z"), at("2026-05-04T10:00:04Z")]
    assert due.missed == 0 and due.next_fire == at("2026-05-04T10:00:06Z")


def test_a_fire_with_jitter_is_due_only_once_its_delay_has_passed() -> None:
    calendar = calendar_of(spec(every="1m"))
    delay = datetime.timedelta(seconds=20)
    early = due_fires(calendar, at("2026-05-04T10:00:00Z"), at("2026-05-04T10:00:10Z"), 60, lambda _: delay, delay)
    late = due_fires(calendar, at("2026-05-04T10:00:00Z"), at("2026-05-04T10:00:20Z"), 60, lambda _: delay, delay)
    assert early.fires == [] and late.fires == [at("2026-05-04T10:00:00Z")]


def test_after_an_outage_fires_inside_the_window_are_caught_up_and_older_ones_missed() -> None:
    calendar = calendar_of(spec(every="10s"))
    # Down from 10:00:00 to 10:05:00, with a 30 s window: 10:04:30 ... 10:05:00 start, the 27 before are missed.
    due = due_fires(calendar, at("2026-05-04T10:00:00Z"), at("2026-05-04T10:05:00Z"), 30)
    assert due.fires == [at(f"2026-05-04T10:04:{s}Z") for s in ("30", "40", "50")] + [at("2026-05-04T10:05:00Z")]
    assert due.missed == 27 and due.missed_range == (at("2026-05-04T10:00:00Z"), at("2026-05-04T10:04:30Z"))
    assert due.next_fire == at("2026-05-04T10:05:10Z")


def test_a_cron_catch_up_counts_what_it_missed_too() -> None:
    calendar = calendar_of(spec(cron=["*/5 * * * *"]))
    due = due_fires(calendar, at("2026-05-04T09:00:00Z"), at("2026-05-04T10:01:00Z"), 600)
    # The window reaches back to 09:51: 09:00 ... 09:50 are missed, 09:55 and 10:00 start.
    assert due.missed == 11 and due.fires == [at("2026-05-04T09:55:00Z"), at("2026-05-04T10:00:00Z")]


def test_a_long_catch_up_goes_on_over_several_passes() -> None:
    calendar = calendar_of(spec(every="1s"))
    due = due_fires(calendar, at("2026-05-04T10:00:00Z"), at("2026-05-04T10:10:00Z"), 3600, limit=100)
    assert len(due.fires) == 100 and due.next_fire == at("2026-05-04T10:01:40Z")


def test_a_schedule_past_its_end_has_no_next_fire() -> None:
    calendar = calendar_of(spec(every="1m", endAt="2026-05-04T10:01:00Z"))
    due = due_fires(calendar, at("2026-05-04T10:00:00Z"), at("2026-05-04T10:05:00Z"), 3600)
    assert due.fires == [at("2026-05-04T10:00:00Z"), at("2026-05-04T10:01:00Z")] and due.next_fire is None


def test_a_backfill_lists_the_fires_of_its_range_up_to_a_limit() -> None:
    calendar = calendar_of(spec(cron=["0 * * * *"]))
    found = backfill_fires(calendar, at("2026-05-01T00:00:00Z"), at("2026-05-01T03:00:00Z"), 100)
    assert found == [at(f"2026-05-01T0{h}:00:00Z") for h in range(4)]
    assert len(backfill_fires(calendar, at("2026-01-01T00:00:00Z"), at("2026-12-31T00:00:00Z"), 50)) == 50


def test_kubernetes_and_argo_policy_names_read_as_temporal_ones() -> None:
    assert [p.effective() for p in (OverlapPolicy.FORBID, OverlapPolicy.REPLACE, OverlapPolicy.ALLOW)] == [
        OverlapPolicy.SKIP,
        OverlapPolicy.TERMINATE_OTHER,
        OverlapPolicy.ALLOW_ALL,
    ]
