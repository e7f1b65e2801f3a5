"""`sluiceway why TARGET`: why is this run (or task) not further along?

TARGET is a run id (a UUID), `task/<uuid>`, or `workflowrun/<name>` (also
`wfr/<name>`, `run/<name>`), read from the Kubernetes API for its executionId.
The answer comes from the operator's API: one line per reason, blocking ones
(`✗`) first, informational ones (`·`) after, each naming its control.

Exit codes: 0 nothing blocks (the run is over, or every reason is
informational), 1 at least one blocking reason, 2 usage error, 3 not found,
5 an API that cannot be reached. Settings come from flags, the environment
or the kubeconfig context, as for every command (docs/cli.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer
from rich.text import Text

from sluiceway.cli import output
from sluiceway.cli.client import Api, CommandError, ExitCode, get_resource
from sluiceway.cli.common import OBJECT_NAME, OUTPUT, WORKFLOW_RUN_KINDS, connected, fail, run
from sluiceway.cli.config import Connection

BLOCKING = "✗"
INFORMATIONAL = "·"
TASK_KINDS = frozenset({"task", "tasks"})
USAGE = "expected a run id (UUID), task/<uuid> or workflowrun/<name>"


class TargetError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    kind: Literal["run", "task", "workflowrun"]
    name: str


@dataclass(frozen=True)
class Answer:
    lines: list[str]
    code: int
    body: dict[str, Any]


def _uuid(text: str, what: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError as error:
        raise TargetError(f"{text!r} is not {what}: {USAGE}") from error


def parse_target(text: str) -> Target:
    kind, slash, name = text.strip().partition("/")
    if not slash:
        return Target("run", _uuid(kind, "a run id"))
    if kind.lower() in TASK_KINDS:
        return Target("task", _uuid(name, "a task id"))
    if kind.lower() in WORKFLOW_RUN_KINDS:
        if not OBJECT_NAME.fullmatch(name):
            raise TargetError(f"{name!r} is not a WorkflowRun name (lowercase letters, digits, '-' and '.')")
        return Target("workflowrun", name)
    raise TargetError(f"unknown target kind {kind!r}: {USAGE}")


def _blocking(reasons: list[dict[str, Any]]) -> bool:
    return any(bool(r.get("blocking", True)) for r in reasons)


def reason_lines(reasons: list[dict[str, Any]]) -> list[str]:
    """One line per reason: mark, control (aligned), then the message, with
    the task's reference name in front when the message does not start with it."""
    width = max((len(str(r.get("control", ""))) for r in reasons), default=0)
    lines = []
    for reason in reasons:
        mark = BLOCKING if reason.get("blocking", True) else INFORMATIONAL
        message, ref = str(reason.get("message", "")), reason.get("referenceName")
        if ref and not message.startswith(str(ref)):
            message = f"{ref}: {message}"
        lines.append(f"{mark} {str(reason.get('control', '')):<{width}}  {message}".rstrip())
    return lines


def run_answer(body: dict[str, Any]) -> Answer:
    reasons = list(body.get("reasons") or [])
    head = f"run {body.get('executionId')} ({body.get('workflow')}) is {body.get('status')}"
    if body.get("awaitingAdmission"):
        head += ", awaiting admission"
    if body.get("quarantined"):
        head += ", quarantined"
    return Answer([head, *reason_lines(reasons)], 1 if _blocking(reasons) else 0, body)


def task_answer(body: dict[str, Any]) -> Answer:
    reasons = list(body.get("reasons") or [])
    head = f"task {body.get('taskId')} of run {body.get('executionId')}"
    return Answer([head, *reason_lines(reasons)], 1 if _blocking(reasons) else 0, body)


def workflow_run_answer(name: str, namespace: str, obj: dict[str, Any] | None) -> str | Answer:
    """The run id behind a WorkflowRun, or the answer when it has none."""
    if obj is None:
        raise CommandError(f"no WorkflowRun {name} in namespace {namespace}", ExitCode.NOT_FOUND)
    status: dict[str, Any] = obj.get("status") or {}
    if status.get("executionId"):
        return str(status["executionId"])
    phase = status.get("phase")
    body = {"workflowRun": name, "namespace": namespace, "status": status}
    if not phase:
        return Answer(
            [
                f"workflowrun {name} has no run yet",
                f"{BLOCKING} operator  the operator has not started this WorkflowRun yet: is it running "
                f"and watching namespace {namespace}?",
            ],
            1,
            body,
        )
    reason = status.get("reasonForIncompletion") or _condition_message(status) or "no reason given"
    if phase == "Pending":
        return Answer([f"workflowrun {name} is Pending", f"{BLOCKING} pending  {reason}"], 1, body)
    control = status.get("control") or str(phase).lower()
    return Answer(
        [f"workflowrun {name} is {phase}; no run was started", f"{INFORMATIONAL} {control}  {reason}"], 0, body
    )


def _condition_message(status: dict[str, Any]) -> str | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("message"):
            return str(condition["message"])
    return None


async def answer(target: Target, namespace: str, api: Api, kubeconfig: str | None) -> Answer:
    if target.kind == "workflowrun":
        obj = await get_resource("workflowruns", namespace, target.name, kubeconfig)
        resolved = workflow_run_answer(target.name, namespace, obj)
        if isinstance(resolved, Answer):
            return resolved
        target = Target("run", resolved)
    if target.kind == "task":
        return task_answer(await api.get("v1", "ns", namespace, "tasks", target.name, "why"))
    return run_answer(await api.get("v1", "ns", namespace, "executions", target.name, "why"))


def why(
    text: Annotated[
        str, typer.Argument(help="A run id, task/<uuid>, or workflowrun/<name> (also wfr/, run/)", metavar="TARGET")
    ],
    conn: Connection,
    fmt: OUTPUT = output.Format.TABLE,
) -> None:
    """Why is this run (or task) not further along? One line per reason,
    blocking ones (✗) first, each naming its control. Exits 1 when something
    blocks it, 0 otherwise."""
    try:
        parsed = parse_target(text)
    except TargetError as error:
        fail(CommandError(str(error), ExitCode.USAGE))
    found = run(answer(parsed, conn.namespace, conn.api, conn.kubeconfig))
    output.emit(found.body, fmt, lambda: Text("\n".join(found.lines)), [found.body.get("executionId", "")])
    raise typer.Exit(found.code)


def register(app: typer.Typer) -> None:
    app.command("why")(connected(why))
