"""`sluiceway tasks list|complete|reject`: task attempts, newest first, by
status, task type, engine type, workflow, worker, run and reference name; and
a person's decision on a HUMAN task (`complete` or `reject`), recorded with
who made it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.client import CommandError, ExitCode
from sluiceway.cli.common import OUTPUT, connected, fail, json_object, run, run_id
from sluiceway.cli.config import Connection

app = typer.Typer(help="Find task attempts; complete or reject HUMAN tasks.", no_args_is_help=True)

COLUMNS: list[output.Column] = [
    ("TASK ID", lambda t: t["taskId"]),
    ("RUN", lambda t: t["executionId"]),
    ("TASK", lambda t: t["referenceName"]),
    ("TYPE", lambda t: t["taskType"]),
    ("STATUS", lambda t: output.status(t["status"])),
    ("ATTEMPT", lambda t: str(t["attempt"])),
    ("WORKER", lambda t: t.get("workerId") or ""),
    ("STARTED", lambda t: output.age(t.get("startedAt"))),
]
RUN_ARG = Annotated[str, typer.Argument(help="A run id, or workflowrun/<name>", metavar="RUN")]
REF_ARG = Annotated[str, typer.Argument(help="The HUMAN task's reference name in that run", metavar="REF")]


def _tasks(conn: Connection, *rest: str) -> tuple[str, ...]:
    return ("v1", "ns", conn.namespace, "tasks", *rest)


@app.command("list")
@connected
def list_tasks(
    conn: Connection,
    status: Annotated[list[str] | None, typer.Option("--status", "-s", help="SCHEDULED, FAILED, ...")] = None,
    task_type: Annotated[str | None, typer.Option("--type", "-t", help="Of this task type")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Of this engine type: HUMAN, SIMPLE, HTTP, ...")] = None,
    workflow: Annotated[str | None, typer.Option("--workflow", "-w", help="Of runs of this workflow")] = None,
    worker: Annotated[str | None, typer.Option("--worker", help="Leased by this worker id")] = None,
    of_run: Annotated[str | None, typer.Option("--run", help="Of this run (id or workflowrun/NAME)")] = None,
    ref: Annotated[str | None, typer.Option("--ref", help="With this reference name")] = None,
    oldest: Annotated[bool, typer.Option("--oldest", help="Oldest first (the longest waiting)")] = False,
    limit: Annotated[int, typer.Option(help="Tasks per page (at most 500)")] = 50,
    fmt: OUTPUT = output.Format.TABLE,
) -> None:
    """List task attempts, newest first. The HUMAN inbox:
    `sluiceway tasks list --kind HUMAN --status IN_PROGRESS --oldest`."""

    async def fetch() -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        given = (
            ("taskType", task_type),
            ("type", kind.upper() if kind else None),
            ("workflow", workflow),
            ("workerId", worker),
            ("referenceName", ref),
        )
        params.update({key: value for key, value in given if value is not None})
        if status:
            params["status"] = status
        if oldest:
            params["order"] = "oldest"
        if of_run is not None:
            params["executionId"] = await run_id(of_run, conn)
        return await conn.api.get(*_tasks(conn), params=params)

    body = run(fetch())
    output.emit(body, fmt, lambda: output.table(body["items"], COLUMNS), [t["taskId"] for t in body["items"]])
    if not body["items"] and fmt in (output.Format.TABLE, output.Format.WIDE):
        output.note("no tasks found")


async def waiting_human_task(conn: Connection, run_ref: str, ref: str) -> str:
    """The id of the HUMAN task `ref` of a run that waits for a person."""
    params: dict[str, str | int] = {
        "executionId": await run_id(run_ref, conn),
        "referenceName": ref,
        "type": "HUMAN",
        "limit": 1,
    }
    found = (await conn.api.get(*_tasks(conn), params=params))["items"]
    if not found:
        raise CommandError(f"run {run_ref} has no HUMAN task {ref!r}", ExitCode.NOT_FOUND)
    latest = found[0]  # newest first: the latest attempt
    if latest["status"] != "IN_PROGRESS":
        raise CommandError(
            f"task {ref} of run {run_ref} is {latest['status']}: it no longer waits for a person", ExitCode.REFUSED
        )
    return str(latest["taskId"])


def _decide(conn: Connection, run_ref: str, ref: str, action: str, body: dict[str, Any], fmt: output.Format) -> None:
    async def send() -> dict[str, Any]:
        task_id = await waiting_human_task(conn, run_ref, ref)
        return await conn.api.post(*_tasks(conn, task_id, action), body=body)

    task = run(send())
    line = f"task {ref} of run {task['executionId']} {task['status']} by {task.get('completedBy') or 'unknown'}"
    output.emit(task, fmt, lambda: Text(line), [str(task["taskId"])])


# The task's output is the person's answer (`-o` is the output format, as everywhere).
ANSWER = Annotated[str | None, typer.Option("--answer", "-a", help="The task's output, as a JSON object")]
ANSWER_FILE = Annotated[Path | None, typer.Option("--answer-file", help="The task's output from a file (- stdin)")]


@app.command("complete")
@connected
def complete(
    conn: Connection,
    run_ref: RUN_ARG,
    ref: REF_ARG,
    answer: ANSWER = None,
    answer_file: ANSWER_FILE = None,
    fmt: OUTPUT = output.Format.TABLE,
) -> None:
    """Complete a HUMAN task with its output (the person's answer): the run goes on."""
    try:
        given = json_object(answer, answer_file, "--answer")
    except CommandError as error:
        fail(error)
    _decide(conn, run_ref, ref, "complete", {"output": given or {}}, fmt)


@app.command("reject")
@connected
def reject(
    conn: Connection,
    run_ref: RUN_ARG,
    ref: REF_ARG,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why: becomes the task's reason")],
    fmt: OUTPUT = output.Format.TABLE,
) -> None:
    """Reject a HUMAN task: it fails with the reason, and so does the run (unless the task is optional)."""
    _decide(conn, run_ref, ref, "reject", {"reason": reason}, fmt)
