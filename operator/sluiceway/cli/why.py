"""`sluiceway why TARGET`: why is this run (or task) not further along?

TARGET is a run id (a UUID), `task/<uuid>`, or `workflowrun/<name>` (also
`wfr/<name>`, `run/<name>`), read from the Kubernetes API for its executionId.
The answer comes from the operator's API: one line per reason, blocking ones
(`✗`) first, informational ones (`·`) after, each naming its control.

Exit codes: 0 nothing blocks (the run is over, or every reason is
informational), 1 at least one blocking reason, 2 usage error, not found, or
an API that cannot be reached. Settings come from flags or the environment:
SLUICEWAY_URL, SLUICEWAY_NAMESPACE, SLUICEWAY_TOKEN, SLUICEWAY_TOKEN_FILE,
SLUICEWAY_API_KEY, KUBECONFIG."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from sluiceway.cli.client import DEFAULT_URL, Api, CommandError, Credentials, get_resource, kubeconfig_namespace

BLOCKING = "✗"
INFORMATIONAL = "·"
WORKFLOW_RUN_KINDS = frozenset({"workflowrun", "workflowruns", "wfr", "run", "workflowrun.sluiceway.dev"})
TASK_KINDS = frozenset({"task", "tasks"})
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
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
        raise CommandError(f"no WorkflowRun {name} in namespace {namespace}")
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="run id (UUID), task/<uuid>, or workflowrun/<name> (also wfr/, run/)")
    parser.add_argument(
        "-n", "--namespace", help="namespace ($SLUICEWAY_NAMESPACE, else the kubeconfig context's, else default)"
    )
    parser.add_argument("--url", help=f"API base URL ($SLUICEWAY_URL, else {DEFAULT_URL})")
    parser.add_argument("--token", help="bearer token ($SLUICEWAY_TOKEN)")
    parser.add_argument("--token-file", help="file holding a bearer token ($SLUICEWAY_TOKEN_FILE)")
    parser.add_argument("--api-key", help="API key, sent as X-API-Key ($SLUICEWAY_API_KEY)")
    parser.add_argument("--kubeconfig", help="kubeconfig for workflowrun/ targets ($KUBECONFIG)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the API (default 10)")


def _namespace(args: argparse.Namespace) -> str:
    return args.namespace or os.environ.get("SLUICEWAY_NAMESPACE") or kubeconfig_namespace(args.kubeconfig) or "default"


def _credentials(args: argparse.Namespace) -> Credentials:
    """Flags win over the environment as a whole: `--token` is not overridden
    by a SLUICEWAY_TOKEN_FILE left in the shell."""
    if args.token or args.token_file or args.api_key:
        return Credentials(args.token, args.token_file, args.api_key)
    env = os.environ.get
    return Credentials(env("SLUICEWAY_TOKEN"), env("SLUICEWAY_TOKEN_FILE"), env("SLUICEWAY_API_KEY"))


def _api(args: argparse.Namespace) -> Api:
    credentials = _credentials(args)
    return Api(args.url or os.environ.get("SLUICEWAY_URL") or DEFAULT_URL, credentials, args.timeout)


def run(args: argparse.Namespace) -> int:
    try:
        target = parse_target(args.target)
        found = asyncio.run(answer(target, _namespace(args), _api(args), args.kubeconfig))
    except (TargetError, CommandError) as error:
        print(f"sluiceway why: {error}", file=sys.stderr)
        return 2
    print(json.dumps(found.body, indent=2) if args.output == "json" else "\n".join(found.lines))
    return found.code
