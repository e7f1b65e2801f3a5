"""`sluiceway schedules list|get|next|trigger|pause|resume|backfill`: the
Schedules of a namespace through the operator's API.

`next NAME` prints the upcoming fire times, in UTC and in the schedule's time
zone; `backfill NAME --from T --to T` fires the times of a past range, each
once. Exit codes as for every command: 0 done, 2 bad input, 3 not found,
4 refused, 5 the API cannot be reached."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.common import OUTPUT, connected, run
from sluiceway.cli.config import Connection

app = typer.Typer(help="Read, trigger, pause, resume and backfill Schedules.", no_args_is_help=True)

NAME = Annotated[str, typer.Argument(help="The Schedule (metadata.name)", metavar="NAME")]
FMT = output.Format


class OverlapPolicy(StrEnum):
    SKIP = "Skip"
    BUFFER_ONE = "BufferOne"
    BUFFER_ALL = "BufferAll"
    CANCEL_OTHER = "CancelOther"
    TERMINATE_OTHER = "TerminateOther"
    ALLOW_ALL = "AllowAll"


OVERLAP = Annotated[
    OverlapPolicy | None, typer.Option("--overlap-policy", help="Override the schedule's overlap policy")
]


def _path(conn: Connection, *rest: str) -> tuple[str, ...]:
    return ("v1", "ns", conn.namespace, "schedules", *rest)


def _dash(value: object) -> str:
    return "-" if value in (None, "", []) else str(value)


COLUMNS: list[output.Column] = [
    ("NAME", lambda s: str(s.get("name"))),
    ("WORKFLOW", lambda s: _dash((s.get("spec") or {}).get("workflow"))),
    ("NEXT", lambda s: _dash((s.get("nextFireTimes") or [None])[0])),
    ("LAST", lambda s: _dash(s.get("lastFireTime"))),
    ("ACTIVE", lambda s: str(s.get("activeRuns", 0))),
    ("SUSPENDED", lambda s: str(bool(s.get("suspended"))).lower()),
    ("STARTED", lambda s: str(s.get("runsStarted", 0))),
    ("MISSED", lambda s: str(s.get("missed", 0))),
    ("SKIPPED", lambda s: str(s.get("skipped", 0))),
]


def get_lines(schedule: dict[str, Any]) -> list[str]:
    spec = schedule.get("spec") or {}
    when = f"every {spec['every']}" if spec.get("every") else "cron " + ", ".join(spec.get("cron") or [])
    lines = [
        f"schedule {schedule.get('name')}: {when} ({spec.get('timezone', 'UTC')}), workflow {spec.get('workflow')}",
        f"  overlap policy {spec.get('overlapPolicy', 'Skip')}, catch-up window "
        f"{spec.get('catchupWindowSeconds', 60)} s" + (", suspended" if schedule.get("suspended") else ""),
        f"  runs started {schedule.get('runsStarted', 0)}, active {schedule.get('activeRuns', 0)}, "
        f"waiting {schedule.get('buffered', 0)}, skipped {schedule.get('skipped', 0)}, "
        f"missed {schedule.get('missed', 0)}",
        f"  next: {', '.join(schedule.get('nextFireTimes') or []) or 'none'}",
    ]
    recent = schedule.get("recent") or []
    if recent:
        lines.append("  recent fires:")
        lines += [fire_line(f, "    ") for f in recent]
    return lines


def fire_line(fire: dict[str, Any], indent: str = "") -> str:
    run_part = f" run {fire['runId']}" if fire.get("runId") else ""
    reason = f" ({fire['reason']})" if fire.get("reason") else ""
    return f"{indent}{fire.get('fireTime')} {fire.get('kind')}: {fire.get('outcome')}{run_part}{reason}"


def next_lines(schedule: dict[str, Any]) -> list[str]:
    """Each upcoming fire in UTC, and in the schedule's zone when it has one."""
    spec = schedule.get("spec") or {}
    name = spec.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    times = schedule.get("nextFireTimes") or []
    if not times:
        return [
            f"schedule {schedule.get('name')} has no upcoming fire"
            + (" (suspended)" if schedule.get("suspended") else "")
        ]
    lines = []
    for text in times:
        instant = datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        local = instant.astimezone(zone)
        lines.append(f"{text}" + ("" if name == "UTC" else f"   {local:%Y-%m-%d %H:%M:%S %Z} ({name})"))
    return lines


def backfill_lines(body: dict[str, Any]) -> list[str]:
    lines = [f"{body.get('started', 0)} runs started, {body.get('alreadyFired', 0)} fire times already fired"]
    return lines + [fire_line(f, "  ") for f in body.get("fires") or []]


def _text(lines: list[str]) -> Callable[[], Text]:
    """Plain lines for the table format (Text: no markup is read into them)."""
    return lambda: Text("\n".join(lines))


@app.command("list")
@connected
def list_schedules(conn: Connection, fmt: OUTPUT = FMT.TABLE) -> None:
    """List the Schedules: next and last fire, active runs, counters."""
    body = run(conn.api.request("GET", *_path(conn)))
    schedules = list(body or [])
    output.emit(schedules, fmt, lambda: output.table(schedules, COLUMNS), [str(s.get("name")) for s in schedules])
    if not schedules and fmt in (FMT.TABLE, FMT.WIDE):
        output.note("no schedules found")


@app.command("get")
@connected
def get_schedule(conn: Connection, name: NAME, fmt: OUTPUT = FMT.TABLE) -> None:
    """Show a Schedule, its counters and its recent fires."""
    body = run(conn.api.get(*_path(conn, name)))
    output.emit(body, fmt, _text(get_lines(body)), [name])


@app.command("next")
@connected
def next_fires(
    conn: Connection,
    name: NAME,
    count: Annotated[int, typer.Option("--count", min=1, max=100, help="How many fire times")] = 5,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Print the next fire times, in UTC and in the schedule's time zone."""
    body = run(conn.api.get(*_path(conn, name), params={"upcoming": count}))
    output.emit(body, fmt, _text(next_lines(body)), body.get("nextFireTimes") or [])


@app.command("trigger")
@connected
def trigger(conn: Connection, name: NAME, overlap_policy: OVERLAP = None, fmt: OUTPUT = FMT.TABLE) -> None:
    """Fire the schedule now (under its overlap policy, or the one given)."""
    policy = {"overlapPolicy": overlap_policy.value} if overlap_policy else {}
    body = run(conn.api.post(*_path(conn, name, "trigger"), body=policy))
    output.emit(body, fmt, _text([fire_line(body)]), [str(body.get("runId") or "")])


def _suspend(conn: Connection, name: str, action: str, fmt: output.Format) -> None:
    body = run(conn.api.post(*_path(conn, name, action)))
    done = "paused" if action == "pause" else "resumed"
    output.emit(body, fmt, _text([f"schedule {name} {done}"]), [name])


@app.command("pause")
@connected
def pause(conn: Connection, name: NAME, fmt: OUTPUT = FMT.TABLE) -> None:
    """Suspend the schedule (spec.suspend, written through Kubernetes as you)."""
    _suspend(conn, name, "pause", fmt)


@app.command("resume")
@connected
def resume(conn: Connection, name: NAME, fmt: OUTPUT = FMT.TABLE) -> None:
    """Resume a suspended schedule."""
    _suspend(conn, name, "resume", fmt)


@app.command("backfill")
@connected
def backfill(
    conn: Connection,
    name: NAME,
    start: Annotated[str, typer.Option("--from", help="The first fire time to fill (ISO 8601)")],
    end: Annotated[str, typer.Option("--to", help="The last fire time to fill (ISO 8601, not in the future)")],
    overlap_policy: OVERLAP = None,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Fire each time of a past range once (a time already fired is not fired again)."""
    policy = {"overlapPolicy": overlap_policy.value} if overlap_policy else {}
    body = run(conn.api.post(*_path(conn, name, "backfill"), body={"startTime": start, "endTime": end, **policy}))
    output.emit(body, fmt, _text(backfill_lines(body)), [str(f.get("runId")) for f in body.get("fires") or []])
