"""What every command shares: the connection options (added to each command,
so they go anywhere on the line, as with kubectl), running its async body,
and turning a failure into one line on stderr and its exit code."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import sys
import typing
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from sluiceway.cli import output
from sluiceway.cli.client import CommandError, ExitCode, get_resource
from sluiceway.cli.config import Connection, Flags, resolve
from sluiceway.model.common import DNS_SUBDOMAIN_PATTERN

T = TypeVar("T")

OUTPUT = Annotated[
    output.Format,
    typer.Option("--output", "-o", help="table, wide, json, yaml, or name (ids only)", case_sensitive=False),
]

_CONNECTION = [
    inspect.Parameter(
        "namespace",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                "--namespace",
                "-n",
                help="Namespace ($SLUICEWAY_NAMESPACE, else the kubeconfig context's, else default)",
                rich_help_panel="Connection",
            ),
        ],
    ),
    inspect.Parameter(
        "server",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                "--server",
                "--url",
                help="Sluiceway API URL ($SLUICEWAY_URL, else the kubeconfig context's sluiceway.dev/server "
                "extension, else http://127.0.0.1:8080)",
                rich_help_panel="Connection",
            ),
        ],
    ),
    inspect.Parameter(
        "token",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None, typer.Option(help="Bearer token ($SLUICEWAY_TOKEN)", rich_help_panel="Connection")
        ],
    ),
    inspect.Parameter(
        "token_file",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(help="File holding a bearer token ($SLUICEWAY_TOKEN_FILE)", rich_help_panel="Connection"),
        ],
    ),
    inspect.Parameter(
        "api_key",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(help="API key, sent as X-API-Key ($SLUICEWAY_API_KEY)", rich_help_panel="Connection"),
        ],
    ),
    inspect.Parameter(
        "kubeconfig",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None, typer.Option(help="Kubeconfig file ($KUBECONFIG)", rich_help_panel="Connection")
        ],
    ),
    inspect.Parameter(
        "context",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[str | None, typer.Option(help="Kubeconfig context to use", rich_help_panel="Connection")],
    ),
    inspect.Parameter(
        "request_timeout",
        inspect.Parameter.KEYWORD_ONLY,
        default=10.0,
        annotation=Annotated[
            float,
            typer.Option(
                "--request-timeout", help="Seconds to wait for each API request", rich_help_panel="Connection"
            ),
        ],
    ),
]
_NAMES = [p.name for p in _CONNECTION]


def connected(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the connection options; it receives `conn: Connection`."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)  # in the command's module: its names resolve
    own = [
        p.replace(annotation=hints.get(name, p.annotation))
        for name, p in signature.parameters.items()
        if name != "conn"
    ]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in _NAMES}
        flags = Flags(
            server=given["server"],
            namespace=given["namespace"],
            token=given["token"],
            token_file=given["token_file"],
            api_key=given["api_key"],
            kubeconfig=given["kubeconfig"],
            context=given["context"],
            timeout=given["request_timeout"],
        )
        try:
            conn = resolve(flags)
            # A refusal raised before the command's async body (its flags read, a file parsed) exits as
            # one raised inside it does: its code and one line, never a traceback.
            return command(*args, conn=conn, **kwargs)
        except CommandError as error:
            fail(error)

    parameters = [*own, *_CONNECTION]
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def fail(error: CommandError) -> NoReturn:
    output.note(f"sluiceway: {error}")
    raise typer.Exit(int(error.code))


def run(body: Awaitable[T]) -> T:
    """Run a command's async body; a CommandError exits with its code, Ctrl-C with 130."""
    try:
        return asyncio.run(body)  # type: ignore[arg-type]
    except CommandError as error:
        fail(error)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


WORKFLOW_RUN_KINDS = frozenset({"workflowrun", "workflowruns", "wfr", "run", "workflowrun.sluiceway.dev"})
OBJECT_NAME = re.compile(DNS_SUBDOMAIN_PATTERN)


async def run_id(text: str, conn: Connection) -> str:
    """A run given as its id, or as `workflowrun/<name>` (also wfr/, run/),
    read from the Kubernetes API for its executionId."""
    kind, slash, name = text.strip().partition("/")
    if not slash:
        try:
            return str(uuid.UUID(kind))
        except ValueError:
            raise CommandError(
                f"{text!r} is not a run id: expected a UUID or workflowrun/<name>", ExitCode.USAGE
            ) from None
    if kind.lower() not in WORKFLOW_RUN_KINDS or not OBJECT_NAME.fullmatch(name):
        raise CommandError(f"{text!r} is not a run: expected a UUID or workflowrun/<name>", ExitCode.USAGE)
    obj = await get_resource("workflowruns", conn.namespace, name, conn.kubeconfig)
    if obj is None:
        raise CommandError(f"no WorkflowRun {name} in namespace {conn.namespace}", ExitCode.NOT_FOUND)
    execution = (obj.get("status") or {}).get("executionId")
    if not execution:
        phase = (obj.get("status") or {}).get("phase") or "not started"
        raise CommandError(f"WorkflowRun {name} has no run ({phase})", ExitCode.NOT_FOUND)
    return str(execution)


def json_value(text: str) -> Any:
    """A value written on the command line: JSON when it parses (12, true,
    {"a": 1}), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def json_object(text: str | None, file: Path | None, what: str) -> dict[str, Any] | None:
    """A JSON object from a flag (`--input '{...}'`) or a file (`-` for stdin)."""
    if text is not None and file is not None:
        raise CommandError(f"give {what} as JSON or as a file, not both", ExitCode.USAGE)
    if file is not None:
        text = sys.stdin.read() if str(file) == "-" else _read(file)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise CommandError(f"{what} is not JSON: {error}", ExitCode.USAGE) from None
    if not isinstance(value, dict):
        raise CommandError(f"{what} must be a JSON object", ExitCode.USAGE)
    return value


def _read(file: Path) -> str:
    try:
        return file.read_text()
    except OSError as error:
        raise CommandError(f"cannot read {file}: {error.strerror}", ExitCode.USAGE) from None


def pairs(values: list[str], what: str) -> dict[str, Any]:
    """`key=value` pairs, each value as `json_value` reads it."""
    found: dict[str, Any] = {}
    for item in values:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise CommandError(f"{what} {item!r}: expected key=value", ExitCode.USAGE)
        found[key] = json_value(value)
    return found


def complete_workflows(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of workflow names, asked of the API the command line
    would use; nothing when it cannot be reached quickly."""
    given = ctx.params
    flags = Flags(
        server=given.get("server"),
        namespace=given.get("namespace"),
        token=given.get("token"),
        token_file=given.get("token_file"),
        api_key=given.get("api_key"),
        kubeconfig=given.get("kubeconfig"),
        context=given.get("context"),
        timeout=2.0,
    )
    try:
        conn = resolve(flags)
        found = asyncio.run(conn.api.request("GET", "v1", "ns", conn.namespace, "metadata", "workflow"))
    except (CommandError, OSError, ValueError):
        return []
    names = [str(w.get("name", "")) for w in found if isinstance(w, dict)] if isinstance(found, list) else []
    return [name for name in names if name.startswith(incomplete)]
