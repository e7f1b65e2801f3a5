"""`sluiceway definitions list|get`: the workflows and task definitions the
operator stored, as the API serves them (the Kubernetes objects are the
source: `kubectl get workflows,taskdefinitions` shows the same)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from sluiceway.cli import output
from sluiceway.cli.client import CommandError, ExitCode
from sluiceway.cli.common import OUTPUT, connected, run
from sluiceway.cli.config import Connection

app = typer.Typer(help="The workflows and task definitions runs use.", no_args_is_help=True)


class Kind(StrEnum):
    ALL = "all"
    WORKFLOW = "workflow"
    TASK = "task"


def _path(conn: Connection, *rest: str) -> tuple[str, ...]:
    return ("v1", "ns", conn.namespace, "metadata", *rest)


COLUMNS: list[output.Column] = [
    ("KIND", lambda d: d["kind"]),
    ("NAME", lambda d: d["name"]),
    ("VERSION", lambda d: str(d.get("version") or "")),
    ("RESOURCE", lambda d: d.get("resource") or ""),
    ("DETAIL", lambda d: d.get("detail") or ""),
]


def _workflow_row(w: dict[str, Any]) -> dict[str, Any]:
    attributes = ",".join(a.get("name", "") for a in w.get("searchAttributes") or [])
    detail = f"{w.get('tasks', 0)} tasks" + (f"; attributes {attributes}" if attributes else "")
    return {"kind": "Workflow", **w, "detail": detail}


def _task_row(t: dict[str, Any]) -> dict[str, Any]:
    limits = [f"{k}={t[k]}" for k in ("retryCount", "concurrentExecLimit", "rateLimitPerFrequency") if t.get(k)]
    return {
        "kind": "TaskDefinition",
        "name": t["name"],
        "version": t.get("generation"),
        "resource": t.get("resource"),
        "detail": ", ".join(limits),
    }


@app.command("list")
@connected
def list_definitions(
    conn: Connection,
    kind: Annotated[Kind, typer.Option("--kind", "-k", help="all, workflow or task")] = Kind.ALL,
    fmt: OUTPUT = output.Format.TABLE,
) -> None:
    """List workflows (at the version new runs start on) and task definitions."""

    async def fetch() -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {"workflows": [], "taskDefinitions": []}
        if kind in (Kind.ALL, Kind.WORKFLOW):
            found["workflows"] = list(await conn.api.request("GET", *_path(conn, "workflow")) or [])
        if kind in (Kind.ALL, Kind.TASK):
            found["taskDefinitions"] = list(await conn.api.request("GET", *_path(conn, "task-definitions")) or [])
        return found

    found = run(fetch())
    rows = [_workflow_row(w) for w in found["workflows"]] + [_task_row(t) for t in found["taskDefinitions"]]
    output.emit(found, fmt, lambda: output.table(rows, COLUMNS), [f"{r['kind'].lower()}/{r['name']}" for r in rows])
    if not rows and fmt in (output.Format.TABLE, output.Format.WIDE):
        output.note("no definitions found")


@app.command("get")
@connected
def get_definition(
    conn: Connection,
    name: Annotated[str, typer.Argument(help="A workflow or task type name; workflow/NAME or task/NAME to say which")],
    version: Annotated[int | None, typer.Option(help="A workflow version (the live one when unset)")] = None,
    fmt: OUTPUT = output.Format.YAML,
) -> None:
    """Show one definition (YAML unless -o says otherwise)."""
    kind, slash, bare = name.partition("/")
    wanted = kind.lower() if slash else None
    name = bare if slash else name
    if wanted not in (None, "workflow", "task", "taskdefinition"):
        raise typer.BadParameter(f"{kind!r}: use workflow/NAME or task/NAME")

    async def fetch() -> dict[str, Any]:
        if wanted in (None, "workflow"):
            try:
                params = {"version": version} if version is not None else None
                return {"kind": "Workflow", **await conn.api.get(*_path(conn, "workflow", name), params=params)}
            except CommandError as error:
                if error.code is not ExitCode.NOT_FOUND or wanted == "workflow":
                    raise
        try:
            return {"kind": "TaskDefinition", **await conn.api.get(*_path(conn, "task-definitions", name))}
        except CommandError as error:
            if error.code is ExitCode.NOT_FOUND:
                raise CommandError(
                    f"no workflow or task definition {name} in namespace {conn.namespace}", ExitCode.NOT_FOUND
                ) from None
            raise

    body = run(fetch())
    if fmt in (output.Format.TABLE, output.Format.WIDE):
        import yaml
        from rich.syntax import Syntax

        output.emit(
            body,
            fmt,
            lambda: Syntax(
                yaml.safe_dump(body, sort_keys=False).rstrip(), "yaml", theme="ansi_dark", background_color="default"
            ),
            [name],
        )
    else:
        output.emit(body, fmt, None, [f"{body['kind'].lower()}/{name}"])
