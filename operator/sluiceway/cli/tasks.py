"""`sluiceway tasks list`: task attempts, newest first, by status, task type,
worker, run and reference name."""

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


@app.command("list")
@connected
def list_tasks(
    conn: Connection,
    status: Annotated[list[str] | None, typer.Option("--status", "-s", help="SCHEDULED, FAILED, ...")] = None,
    task_type: Annotated[str | None, typer.Option("--type", "-t", help="Of this task type")] = None,
    worker: Annotated[str | None, typer.Option("--worker", help="Leased by this worker id")] = None,
    of_run: Annotated[str | None, typer.Option("--run", help="Of this run (id or workflowrun/NAME)")] = None,
    ref: Annotated[str | None, typer.Option("--ref", help="With this reference name")] = None,
    limit: Annotated[int, typer.Option(help="Tasks per page (at most 500)")] = 50,
    fmt: OUTPUT = output.Format.TABLE,
) -> None:
    """List task attempts, newest first."""

    async def fetch() -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        for key, value in (("taskType", task_type), ("workerId", worker), ("referenceName", ref)):
            if value is not None:
                params[key] = value
        if status:
            params["status"] = status
        if of_run is not None:
            params["executionId"] = await run_id(of_run, conn)
        return await conn.api.get("v1", "ns", conn.namespace, "tasks", params=params)

    body = run(fetch())
    output.emit(body, fmt, lambda: output.table(body["items"], COLUMNS), [t["taskId"] for t in body["items"]])
    if not body["items"] and fmt in (output.Format.TABLE, output.Format.WIDE):
        output.note("no tasks found")
