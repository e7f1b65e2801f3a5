"""`sluiceway runs ...`: find runs, watch them, and operate them.

RUN is a run id, or `workflowrun/<name>` for a run started by a WorkflowRun.
Exit codes: 0 done; 1 the run ended FAILED, TIMED_OUT or TERMINATED (with
--wait or --watch, and `watch`); 2 bad input; 3 not found; 4 refused (the
run is not in a state for it, a limit, RBAC); 5 the API cannot be reached."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.client import CommandError, ExitCode
from sluiceway.cli.common import OUTPUT, complete_workflows, connected, json_object, pairs, run, run_id
from sluiceway.cli.config import Connection
from sluiceway.controls.durations import parse_duration

app = typer.Typer(help="Find, watch and operate runs.", no_args_is_help=True)

TERMINAL = ("COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED")
RUN_ARG = Annotated[str, typer.Argument(help="A run id, or workflowrun/<name>", metavar="RUN")]
FMT = output.Format


def _path(conn: Connection, *rest: str) -> tuple[str, ...]:
    return ("v1", "ns", conn.namespace, "executions", *rest)


def since(text: str | None, what: str, now: datetime.datetime | None = None) -> str | None:
    """An instant for the API from `24h` (that long ago) or an ISO 8601 time."""
    if text is None:
        return None
    now = now or datetime.datetime.now(datetime.UTC)
    try:
        return (now - datetime.timedelta(seconds=parse_duration(text))).isoformat()
    except ValueError:
        pass
    try:
        instant = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"{what} {text!r}: use a duration (24h, 30m) or an ISO 8601 time", ExitCode.USAGE) from None
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=datetime.UTC)
    return instant.isoformat()


def _attributes(row: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((row.get("searchAttributes") or {}).items()))


RUN_COLUMNS: list[output.Column] = [
    ("ID", lambda r: r["id"]),
    ("WORKFLOW", lambda r: r["workflowName"]),
    ("STATUS", lambda r: output.status(r["status"])),
    ("STARTED", lambda r: output.age(r.get("startTime"))),
    ("DURATION", lambda r: output.elapsed(r.get("startTime"), r.get("endTime"))),
]
WIDE_COLUMNS: list[output.Column] = [
    *RUN_COLUMNS,
    ("VERSION", lambda r: str(r.get("workflowVersion", ""))),
    ("PRIORITY", lambda r: str(r.get("priority", ""))),
    ("CORRELATION", lambda r: r.get("correlationId") or ""),
    ("WORKFLOWRUN", lambda r: r.get("workflowRun") or ""),
    ("ATTRIBUTES", _attributes),
    ("REASON", lambda r: (r.get("reasonForIncompletion") or "")[:80]),
]


@app.command("list")
@connected
def list_runs(
    conn: Connection,
    workflow: Annotated[
        str | None,
        typer.Option("--workflow", "-w", help="Runs of this workflow", autocompletion=complete_workflows),
    ] = None,
    version: Annotated[int | None, typer.Option(help="Of this workflow version")] = None,
    status: Annotated[
        list[str] | None, typer.Option("--status", "-s", help="RUNNING, PAUSED, COMPLETED, FAILED, ... (repeat)")
    ] = None,
    started_since: Annotated[
        str | None, typer.Option("--since", help="Started since: a duration ago (24h) or a time")
    ] = None,
    started_until: Annotated[
        str | None, typer.Option("--until", help="Started before: a duration ago or a time")
    ] = None,
    ended_since: Annotated[str | None, typer.Option("--ended-since", help="Ended since")] = None,
    ended_until: Annotated[str | None, typer.Option("--ended-until", help="Ended before")] = None,
    correlation_id: Annotated[str | None, typer.Option("--correlation-id")] = None,
    parent: Annotated[str | None, typer.Option(help="Child runs of this run")] = None,
    workflow_run: Annotated[str | None, typer.Option("--workflow-run", help="Started by this WorkflowRun")] = None,
    awaiting_admission: Annotated[bool, typer.Option("--awaiting-admission", help="Waiting for admission")] = False,
    sla_breached: Annotated[bool, typer.Option("--sla-breached", help="Past their SLA")] = False,
    search_attr: Annotated[
        list[str] | None,
        typer.Option("--search-attr", "-a", help="tenant=acme, amount>=100, 'tenant in (acme, globex)' (repeat)"),
    ] = None,
    limit: Annotated[int, typer.Option(help="Runs per page (at most 500)")] = 50,
    all_pages: Annotated[bool, typer.Option("--all", help="Follow every page")] = False,
    cursor: Annotated[str | None, typer.Option(help="Continue after a page (its nextCursor)")] = None,
    oldest_first: Annotated[bool, typer.Option("--oldest-first", help="Oldest first")] = False,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """List and search runs, newest first. Every filter narrows the list."""
    params: dict[str, Any] = {"limit": limit, "order": "oldest" if oldest_first else "newest"}
    optional = {
        "workflow": workflow,
        "version": version,
        "startedAfter": since(started_since, "--since"),
        "startedBefore": since(started_until, "--until"),
        "endedAfter": since(ended_since, "--ended-since"),
        "endedBefore": since(ended_until, "--ended-until"),
        "correlationId": correlation_id,
        "parent": parent,
        "workflowRun": workflow_run,
        "cursor": cursor,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    if status:
        params["status"] = status
    if search_attr:
        params["searchAttribute"] = search_attr
    if awaiting_admission:
        params["awaitingAdmission"] = "true"
    if sla_breached:
        params["slaBreached"] = "true"

    async def fetch() -> tuple[list[dict[str, Any]], str | None]:
        items: list[dict[str, Any]] = []
        page: dict[str, Any] = {"nextCursor": cursor}
        while True:
            page = await conn.api.get(*_path(conn), params=params)
            items += page["items"]
            if not all_pages or not page.get("nextCursor"):
                return items, page.get("nextCursor")
            params["cursor"] = page["nextCursor"]

    items, more = run(fetch())
    body = {"items": items, "nextCursor": more}
    columns = WIDE_COLUMNS if fmt is FMT.WIDE else RUN_COLUMNS
    output.emit(body, fmt, lambda: output.table(items, columns), [i["id"] for i in items])
    if fmt in (FMT.TABLE, FMT.WIDE):
        if not items:
            output.note("no runs found")
        elif more:
            output.note(f"more runs: add --cursor {more} (or --all)")


def _task_rows(run_body: dict[str, Any]) -> list[dict[str, Any]]:
    """The latest attempt of each task, in the order they were first scheduled."""
    latest: dict[str, dict[str, Any]] = {}
    for task in run_body.get("tasks") or []:
        if task.get("superseded"):
            continue
        ref = task["referenceName"]
        if ref not in latest or task["attempt"] > latest[ref]["attempt"]:
            latest[ref] = task
    return list(latest.values())


TASK_COLUMNS: list[output.Column] = [
    ("TASK", lambda t: t["referenceName"]),
    ("TYPE", lambda t: t["taskType"] if t["type"] == "SIMPLE" else t["type"]),
    ("STATUS", lambda t: output.status(t["status"])),
    ("ATTEMPT", lambda t: str(t["attempt"])),
    ("WORKER", lambda t: t.get("workerId") or ""),
    ("TIME", lambda t: output.elapsed(t.get("startedAt"), t.get("endedAt")) if t.get("startedAt") else ""),
    ("REASON", lambda t: (t.get("reason") or "").splitlines()[0][:80] if t.get("reason") else ""),
]


def describe(body: dict[str, Any]) -> Group:
    """`runs get` as a table: the run's facts, then its tasks."""
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold", width=14)  # one width whatever rows a run has: output stays comparable
    facts.add_column()
    rows: list[tuple[str, str | Text]] = [
        ("Run", body["id"]),
        ("Workflow", f"{body['workflowName']} v{body['workflowVersion']}"),
        ("Status", output.status(body["status"])),
        ("Started", body.get("startTime") or ""),
        ("Ended", body.get("endTime") or ""),
        ("Duration", output.elapsed(body.get("startTime"), body.get("endTime"))),
        ("Priority", str(body.get("priority", 3))),
    ]
    optional = [
        ("Reason", body.get("reasonForIncompletion")),
        ("Correlation", body.get("correlationId")),
        ("WorkflowRun", body.get("workflowRun")),
        ("Parent", body.get("parentWorkflowId")),
        ("Restarted from", body.get("restartedFrom")),
        ("Paused at", body.get("pausedAt")),
        ("Pause reason", body.get("pauseReason")),
        ("Deadline", body.get("deadline")),
        ("SLA deadline", body.get("slaDeadline")),
        ("SLA breached", body.get("slaBreachedAt")),
        ("Retries", str(body["retries"]) if body.get("retries") else None),
        ("Attributes", _attributes(body) or None),
        ("Expires", body.get("expiresAt")),
        ("Quarantined", body.get("quarantineReason")),
        ("Archived", "yes: retention deleted it, this is its archived history" if body.get("archived") else None),
    ]
    rows += [(k, v) for k, v in optional if v]
    for key, value in rows:
        if value:
            facts.add_row(key, value)
    tasks = _task_rows(body)
    return Group(facts, Text(""), output.table(tasks, TASK_COLUMNS) if tasks else Text("no tasks yet"))


@app.command("get")
@connected
def get_run(conn: Connection, ref: RUN_ARG, fmt: OUTPUT = FMT.TABLE) -> None:
    """Show a run and its tasks."""

    async def fetch() -> dict[str, Any]:
        return await conn.api.get(*_path(conn, await run_id(ref, conn)))

    body = run(fetch())
    output.emit(body, fmt, lambda: describe(body), [body["id"]])


# -- watching ----------------------------------------------------------------------


def progress(body: dict[str, Any], now: datetime.datetime | None = None) -> Group:
    """The live view of `watch`: a head line, a progress bar and every task."""
    tasks = _task_rows(body)
    done = sum(1 for t in tasks if t["status"] not in ("SCHEDULED", "IN_PROGRESS"))
    head = Text.assemble(
        (f"run {body['id']} ", ""),
        (f"({body['workflowName']} v{body['workflowVersion']}) ", "dim"),
        output.status(body["status"]),
        f"  {output.elapsed(body.get('startTime'), body.get('endTime'), now)}",
    )
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(len(tasks), 1), completed=done, width=40), Text(f"{done}/{len(tasks)} tasks"))
    parts: list[Any] = [head, bar]
    if body.get("reasonForIncompletion"):
        parts.append(Text(body["reasonForIncompletion"], style="red"))
    parts.append(output.table(tasks, TASK_COLUMNS) if tasks else Text("no tasks yet", style="dim"))
    return Group(*parts)


def changes(before: dict[str, str], body: dict[str, Any]) -> list[str]:
    """Lines saying what changed since `before` (ref -> status), for a watch that is not on a terminal."""
    lines = []
    for task in _task_rows(body):
        key = f"{task['status']}#{task['attempt']}"
        if before.get(task["referenceName"]) != key:
            before[task["referenceName"]] = key
            lines.append(f"{task['referenceName']} {task['status']} (attempt {task['attempt']})")
    if before.get("") != body["status"]:
        before[""] = body["status"]
        reason = f": {body['reasonForIncompletion']}" if body.get("reasonForIncompletion") else ""
        lines.append(f"run {body['id']} {body['status']}{reason}")
    return lines


async def follow(conn: Connection, execution: str, interval: float, live: bool) -> dict[str, Any]:
    """Poll the run until it ends, showing it as it goes; return its last state."""
    body = await conn.api.get(*_path(conn, execution))
    if live:
        with Live(progress(body), console=output.console(), refresh_per_second=4, transient=False) as view:
            while body["status"] not in TERMINAL:
                await asyncio.sleep(interval)
                body = await conn.api.get(*_path(conn, execution))
                view.update(progress(body))
        return body
    seen: dict[str, str] = {}
    out = output.console()
    while True:
        for line in changes(seen, body):
            out.out(line, highlight=False)
        if body["status"] in TERMINAL:
            return body
        await asyncio.sleep(interval)
        body = await conn.api.get(*_path(conn, execution))


def outcome_code(status: str) -> int:
    return int(ExitCode.OK if status == "COMPLETED" else ExitCode.UNSUCCESSFUL)


@app.command("watch")
@connected
def watch(
    conn: Connection,
    ref: RUN_ARG,
    interval: Annotated[float, typer.Option(help="Seconds between two looks")] = 1.0,
) -> None:
    """Watch a run until it ends: a progress bar and every task's state on a
    terminal, one line per change otherwise. Exits 0 when it completes, 1
    when it fails, times out or is terminated."""

    async def body() -> dict[str, Any]:
        return await follow(conn, await run_id(ref, conn), interval, sys.stdout.isatty())

    raise typer.Exit(outcome_code(run(body())["status"]))


# -- starting and operating ----------------------------------------------------------

WAIT = Annotated[bool, typer.Option("--wait", help="Wait until the run ends; exit 1 unless it completes")]
WATCH = Annotated[bool, typer.Option("--watch", help="Watch the run until it ends (as `runs watch`)")]


def _finish(
    conn: Connection, execution: str, body: dict[str, Any], fmt: output.Format, wait: bool, watching: bool, said: str
) -> None:
    """Print what an operation did; then wait or watch the run if asked."""
    output.emit(body, fmt, lambda: Text(said), [execution])
    if not (wait or watching):
        return
    final = run(
        follow(conn, execution, 1.0, watching and sys.stdout.isatty()) if watching else _until_done(conn, execution)
    )
    if wait and not watching and fmt in (FMT.TABLE, FMT.WIDE):
        output.note(f"run {execution} {final['status']}")
    raise typer.Exit(outcome_code(final["status"]))


# One server-side wait (the API's bound): a longer run is waited for again.
_SERVER_WAIT_SECONDS = 60


async def _until_done(conn: Connection, execution: str) -> dict[str, Any]:
    """Wait on the server (`GET ...?wait=60s`), which answers when the run
    ends, and again while it runs on. A server that answers a wait at once
    (one without `wait`) or has too many waiters is asked again after a
    second, as this command always polled."""
    api = dataclasses.replace(conn.api, timeout=max(conn.api.timeout, _SERVER_WAIT_SECONDS + 30))
    params = {"include_tasks": "false", "wait": f"{_SERVER_WAIT_SECONDS}s"}
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time()
        try:
            body = await api.get(*_path(conn, execution), params=params)
        except CommandError as error:
            if not (isinstance(error.body, dict) and error.body.get("error") == "TOO_MANY_WAITERS"):
                raise
            body = {"status": "RUNNING"}
        if body["status"] in TERMINAL:
            return body
        await asyncio.sleep(max(0.0, 1.0 - (loop.time() - asked)))


@app.command("start")
@connected
def start(
    conn: Connection,
    workflow: Annotated[str, typer.Argument(help="The workflow to run", autocompletion=complete_workflows)],
    input_json: Annotated[str | None, typer.Option("--input", "-i", help="The input, as a JSON object")] = None,
    input_file: Annotated[
        Path | None, typer.Option("--input-file", "-f", help="The input from a file (- is stdin)")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="key=value input (JSON values parse)")
    ] = None,
    version: Annotated[int | None, typer.Option(help="Pin a version (the latest when unset)")] = None,
    correlation_id: Annotated[str | None, typer.Option("--correlation-id")] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="Idempotency key: a retry with it gets the same run")
    ] = None,
    search_attr: Annotated[
        list[str] | None, typer.Option("--search-attr", "-a", help="key=value search attribute (repeat)")
    ] = None,
    sla: Annotated[str | None, typer.Option(help="This run's SLA: seconds or a duration (0 for none)")] = None,
    priority: Annotated[
        int | None,
        typer.Option(min=1, max=5, help="1 (most urgent) to 5; the workflow's (else 3) when unset"),
    ] = None,
    wait: WAIT = False,
    watching: WATCH = False,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Start a run of a workflow."""
    given = json_object(input_json, input_file, "--input") or {}
    given.update(pairs(param or [], "--param"))
    body: dict[str, Any] = {"name": workflow, "input": given}
    asked = (("version", version), ("correlationId", correlation_id), ("requestId", request_id), ("priority", priority))
    for key, value in asked:
        if value is not None:
            body[key] = value
    if search_attr:
        body["searchAttributes"] = pairs(search_attr, "--search-attr")
    if sla is not None:
        body["slaSeconds"] = _seconds(sla, "--sla")
    answer = run(conn.api.post(*_path(conn), body=body))
    said = f"run {answer['id']} {'started' if answer.get('created', True) else 'already started'} ({answer['status']})"
    _finish(conn, answer["id"], answer, fmt, wait, watching, said)


def _seconds(text: str, what: str) -> int:
    try:
        return int(parse_duration(text))
    except ValueError as error:
        raise CommandError(f"{what}: {error}", ExitCode.USAGE) from None


def _operate(
    conn: Connection,
    ref: str,
    action: str,
    body: Any,
    fmt: output.Format,
    wait: bool,
    watching: bool,
    said: Callable[[dict[str, Any]], str],
) -> None:
    async def call() -> tuple[str, dict[str, Any]]:
        execution = await run_id(ref, conn)
        return execution, await conn.api.post(*_path(conn, execution, action), body=body)

    execution, answer = run(call())
    _finish(conn, answer.get("id", execution), answer, fmt, wait, watching, said(answer))


REASON = Annotated[str | None, typer.Option("--reason", help="Why; shown in the run and by `why`")]


@app.command("terminate")
@connected
def terminate(
    conn: Connection, ref: RUN_ARG, reason: REASON = None, wait: WAIT = False, fmt: OUTPUT = FMT.TABLE
) -> None:
    """Terminate a running (or paused) run: its active tasks are canceled."""
    body = {"reason": reason} if reason else None
    _operate(conn, ref, "terminate", body, fmt, wait, False, lambda a: f"run {a['id']} terminating")


@app.command("pause")
@connected
def pause(conn: Connection, ref: RUN_ARG, reason: REASON = None, fmt: OUTPUT = FMT.TABLE) -> None:
    """Pause a run: nothing new is scheduled and its clocks stop; leased tasks finish."""
    _operate(conn, ref, "pause", {"reason": reason or ""}, fmt, False, False, _done("paused"))


@app.command("resume")
@connected
def resume(
    conn: Connection, ref: RUN_ARG, wait: WAIT = False, watching: WATCH = False, fmt: OUTPUT = FMT.TABLE
) -> None:
    """Resume a paused run; its deadline and SLA move forward by the paused time."""
    _operate(conn, ref, "resume", None, fmt, wait, watching, _done("resumed"))


@app.command("retry")
@connected
def retry(conn: Connection, ref: RUN_ARG, wait: WAIT = False, watching: WATCH = False, fmt: OUTPUT = FMT.TABLE) -> None:
    """Retry a failed, timed-out or terminated run from the tasks that failed,
    keeping what completed."""
    _operate(conn, ref, "retry", None, fmt, wait, watching, _done("retried"))


@app.command("rerun")
@connected
def rerun(
    conn: Connection,
    ref: RUN_ARG,
    from_task: Annotated[str, typer.Option("--from-task", "-t", help="Run again from this task reference")],
    input_json: Annotated[str | None, typer.Option("--input", "-i", help="New input for that task (JSON)")] = None,
    input_file: Annotated[Path | None, typer.Option("--input-file", "-f")] = None,
    wait: WAIT = False,
    watching: WATCH = False,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Run a finished run again from one task (and everything after it),
    optionally with new input for that task."""
    body: dict[str, Any] = {"taskReferenceName": from_task}
    new_input = json_object(input_json, input_file, "--input")
    if new_input is not None:
        body["input"] = new_input
    _operate(conn, ref, "rerun", body, fmt, wait, watching, _done(f"rerun from {from_task}"))


@app.command("restart")
@connected
def restart(
    conn: Connection,
    ref: RUN_ARG,
    input_json: Annotated[
        str | None, typer.Option("--input", "-i", help="New input (the old run's when unset)")
    ] = None,
    input_file: Annotated[Path | None, typer.Option("--input-file", "-f")] = None,
    latest: Annotated[bool, typer.Option("--latest", help="Run the workflow's latest version")] = False,
    request_id: Annotated[str | None, typer.Option("--request-id", help="Idempotency key")] = None,
    wait: WAIT = False,
    watching: WATCH = False,
    fmt: OUTPUT = FMT.TABLE,
) -> None:
    """Start a finished run again from the beginning, as a new run linked to it."""
    body: dict[str, Any] = {"latestVersion": latest}
    new_input = json_object(input_json, input_file, "--input")
    if new_input is not None:
        body["input"] = new_input
    if request_id is not None:
        body["requestId"] = request_id
    _operate(
        conn,
        ref,
        "restart",
        body,
        fmt,
        wait,
        watching,
        lambda a: f"run {a['id']} started, restarting {a.get('restartedFrom')} ({a['status']})",
    )


def _done(what: str) -> Callable[[dict[str, Any]], str]:
    def said(answer: dict[str, Any]) -> str:
        message = answer.get("message") or ""
        if message in ("already paused", "not paused"):  # nothing to do: say so instead
            return f"run {answer['id']} {message} ({answer['status']})"
        note = f": {message}" if message else ""
        return f"run {answer['id']} {what} ({answer['status']}){note}"

    return said
