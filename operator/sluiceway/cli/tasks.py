"""`sluiceway tasks list`: task attempts, newest first, by status, task type,
engine type, workflow, worker, run and reference name."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sluiceway.cli import output
from sluiceway.cli.common import OUTPUT, connected, run, run_id
from sluiceway.cli.config import Connection

app = typer.Typer(help="Find task attempts.", no_args_is_help=True)

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
