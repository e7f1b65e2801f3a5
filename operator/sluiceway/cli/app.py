"""The `sluiceway` command line for people and scripts: find, watch and
operate runs, read their logs, ask why one is stuck, decide HUMAN tasks,
list definitions, read and fire Schedules, lint manifests offline. The same commands run as
`kubectl sluiceway ...`. The composition root
(`sluiceway.runtime.main`) adds the commands that run parts of the system
(`operator`, `worker`, `up`, `crds`, `schema`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from sluiceway import __version__
from sluiceway.cli import admin, definitions, events, lint, logs, output, runs, schedules, tasks, why
from sluiceway.cli.client import CommandError
from sluiceway.cli.common import fail
from sluiceway.cli.config import write_server

HELP = """Sluiceway: workflows on Kubernetes, every execution control on the server.

The API address, namespace and credentials come from flags, else SLUICEWAY_URL,
SLUICEWAY_NAMESPACE and SLUICEWAY_TOKEN / SLUICEWAY_TOKEN_FILE / SLUICEWAY_API_KEY,
else the kubeconfig context (`sluiceway config set-server URL` names the API there).

Exit codes: 0 ok, 1 the run ended unsuccessfully (or `why` found it blocked),
2 bad input, 3 not found, 4 refused (conflict, limit, permission), 5 unreachable."""


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sluiceway {__version__}")
        raise typer.Exit()


def root(
    no_color: Annotated[bool, typer.Option("--no-color", help="Never colour the output (also NO_COLOR)")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit")
    ] = False,
) -> None:
    if no_color:
        output.disable_color()


config = typer.Typer(help="Where the command line finds the Sluiceway API.", no_args_is_help=True)


@config.command("set-server")
def set_server(
    url: Annotated[str, typer.Argument(help="The Sluiceway API, e.g. https://sluiceway.example.com")],
    context: Annotated[str | None, typer.Option(help="The kubeconfig context (the current one when unset)")] = None,
    kubeconfig: Annotated[
        str | None, typer.Option(help="The kubeconfig file ($KUBECONFIG, else ~/.kube/config)")
    ] = None,
) -> None:
    """Name the Sluiceway API in a kubeconfig context, so commands find it (and
    send it the context's token) without flags."""
    path = Path(kubeconfig or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or Path.home() / ".kube/config")
    try:
        name = write_server(path, url, context)
    except CommandError as error:
        fail(error)
    output.note(f"context {name} now names the Sluiceway API {url}")


def build(name: str = "sluiceway") -> typer.Typer:
    app = typer.Typer(
        name=name,
        help=HELP,
        no_args_is_help=True,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
    )
    app.callback()(root)
    app.add_typer(runs.app, name="runs")
    app.add_typer(tasks.app, name="tasks")
    logs.register(app)
    why.register(app)
    app.add_typer(definitions.app, name="definitions")
    app.add_typer(schedules.app, name="schedules")
    lint.register(app)
    app.add_typer(events.app, name="events")
    app.add_typer(config, name="config")
    app.add_typer(admin.app, name="admin")
    return app
