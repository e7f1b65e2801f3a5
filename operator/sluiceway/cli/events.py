"""`sluiceway events list|get|send`: the events published in a namespace,
what each Trigger did with them, and publishing one, through the operator's
API. Exit codes as for every command: 0 done, 2 bad input, 3 not found,
4 refused, 5 the API cannot be reached."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.client import CommandError
from sluiceway.cli.common import OUTPUT, connected, fail, json_object, run
from sluiceway.cli.config import Connection

app = typer.Typer(help="List published events and what their Triggers did; publish one.", no_args_is_help=True)

FMT = output.Format


def _path(conn: Connection, *rest: str) -> tuple[str, ...]:
    return ("v1", "ns", conn.namespace, "events", *rest)


def _runs(event: dict[str, Any]) -> str:
    runs = [str(o["runId"]) for o in event.get("outcomes") or [] if o.get("runId")]
    return ", ".join(runs) or "-"


COLUMNS: list[output.Column] = [
    ("ID", lambda e: str(e.get("id"))),
    ("EVENT", lambda e: str(e.get("event"))),
    ("RECEIVED", lambda e: str(e.get("receivedAt"))),
    ("OUTCOME", lambda e: str(e.get("outcome"))),
    ("RUNS", _runs),
]


def outcome_line(outcome: dict[str, Any], indent: str = "  ") -> str:
    """One Trigger's outcome for people: `trigger orders: started run <id>`."""
    text = f"{indent}trigger {outcome.get('trigger')}: {outcome.get('outcome')}"
    if outcome.get("runId"):
        text += f" run {outcome['runId']}"
    if outcome.get("field"):
        text += f" ({outcome['field']}: {outcome.get('reason')})"
    elif outcome.get("reason"):
        text += f" ({outcome['reason']})"
    return text


def event_lines(event: dict[str, Any]) -> list[str]:
    lines = [
        f"event {event.get('event')} {event.get('id')}: {event.get('outcome')}",
        f"  event id {event.get('eventId')}, from {event.get('source')}, received {event.get('receivedAt')}",
    ]
    outcomes = event.get("outcomes") or []
    return lines + ([outcome_line(o) for o in outcomes] or ["  no Trigger listens to this event"])


def _text(lines: list[str]) -> Callable[[], Text]:
    return lambda: Text("\n".join(lines))


@app.command("list")
@connected
def list_events(
    conn: Connection,
    event: Annotated[str | None, typer.Option("--event", "-e", help="Only events of this name")] = None,
    outcome: Annotated[
        str | None,
        typer.Option(
            "--outcome",
            help="Only events with this outcome: started, duplicate, filtered, refused, invalid or unmatched",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500, help="How many, newest first")] = 50,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """List the events published in the namespace, newest first, with what their Triggers did."""
    params: dict[str, Any] = {"limit": limit}
    if event:
        params["event"] = event
    if outcome:
        params["outcome"] = outcome
    body = run(conn.api.get(*_path(conn), params=params))
    items = list(body.get("items") or [])
    output.emit(items, fmt, lambda: output.table(items, COLUMNS), [str(e.get("id")) for e in items])
    if not items and fmt in (FMT.TABLE, FMT.WIDE):
        output.note("no events found")


@app.command("get")
@connected
def get_event(
    conn: Connection,
    event_id: Annotated[str, typer.Argument(help="The event's id, as listed", metavar="ID")],
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Show one event: where it came from and what each Trigger did with it."""
    body = run(conn.api.get(*_path(conn, event_id)))
    output.emit(body, fmt, _text(event_lines(body)), [event_id])


@app.command("send")
@connected
def send(
    conn: Connection,
    name: Annotated[str, typer.Argument(help="The event's name", metavar="EVENT")],
    payload_json: Annotated[str | None, typer.Option("--payload", "-p", help="The payload, a JSON object")] = None,
    payload_file: Annotated[
        Path | None, typer.Option("--payload-file", "-f", help="The payload from a file (- is stdin)")
    ] = None,
    event_id: Annotated[
        str | None, typer.Option("--id", help="The event's id, which runs are deduplicated by (else a hash)")
    ] = None,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Publish an event: start the runs of the namespace's Triggers of EVENT."""
    try:
        payload = json_object(payload_json, payload_file, "--payload") or {}
    except CommandError as error:  # bad input exits 2 with its message, not a traceback
        fail(error)
    headers = {"X-Sluiceway-Event-Id": event_id} if event_id else None
    body = run(conn.api.post(*_path(conn, name), body=payload, headers=headers))
    output.emit(body, fmt, _text(event_lines(body)), [str(body.get("id"))])
