"""`sluiceway logs RUN`: what the run's tasks logged, kept by the server
after their workers are gone. `-f` follows until the run ends."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.common import connected, run, run_id
from sluiceway.cli.config import Connection
from sluiceway.cli.runs import RUN_ARG, TERMINAL

LEVEL_STYLES = {"DEBUG": "dim", "WARNING": "yellow", "ERROR": "red", "CRITICAL": "bold red"}


def line(entry: dict[str, Any], timestamps: bool) -> Text:
    """`[ref#attempt] LEVEL message`, the time first when asked."""
    parts: list[tuple[str, str] | str] = []
    if timestamps:
        parts.append((f"{entry.get('loggedAt') or entry['at']} ", "dim"))
    parts.append((f"[{entry['referenceName']}#{entry['attempt']}] ", "cyan"))
    level = entry.get("level", "INFO")
    parts.append((f"{level} ", LEVEL_STYLES.get(level, "")))
    parts.append(entry["message"])
    return Text.assemble(*parts)


def logs(
    ref: RUN_ARG,
    conn: Connection,
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task reference (every attempt)")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until the run ends")] = False,
    timestamps: Annotated[bool, typer.Option("--timestamps", help="Show when each line was logged")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line")] = False,
    interval: Annotated[float, typer.Option(help="With -f: seconds between two looks")] = 1.0,
) -> None:
    """Print what a run's tasks logged (the SDK ships what handlers log)."""
    out = output.console()

    def show(entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            if as_json:
                out.out(json.dumps(entry, ensure_ascii=False), highlight=False)
            else:
                output.print_lines(line(entry, timestamps), out)

    async def body() -> bool:
        execution = await run_id(ref, conn)
        path = ("v1", "ns", conn.namespace, "executions", execution, "logs")
        after, truncated, ended = 0, False, False
        while True:
            params: dict[str, Any] = {"after": after, "limit": 1000}
            if task:
                params["task"] = task
            page = await conn.api.get(*path, params=params)
            show(page["lines"])
            after = page.get("nextAfter") or after
            truncated = truncated or bool(page.get("truncated"))
            if len(page["lines"]) >= 1000:
                continue  # more is waiting: no pause
            if not follow or ended:
                return truncated
            state = await conn.api.get(*path[:-1], params={"include_tasks": "false"})
            # Logs are stored before the result that ends their task: one more
            # read after the run ended has every line.
            ended = state["status"] in TERMINAL
            if not ended:
                await asyncio.sleep(interval)

    if run(body()) and not as_json:
        output.note("some task logged more than the server keeps: its later lines were dropped")


def register(app: typer.Typer) -> None:
    app.command("logs")(connected(logs))
