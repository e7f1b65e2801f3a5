"""The UI's actions: on one run (pause, resume, terminate, retry, rerun,
send a message), on many (bulk), and a person's decision on a HUMAN task.

Each is the execution plane's command the matching API route calls
(`sluiceway.plane`), after the same access check, as the viewer: limited and
audited the same way, so the UI can do nothing the API would refuse. Actions
are POSTs behind a confirmation page that says what will happen (for bulk
actions: to how many runs), and answer with a redirect back to a shareable
URL."""

from __future__ import annotations

import datetime
import json
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.datastructures import QueryParams

from sluiceway.api.errors import ApiError
from sluiceway.api.outcomes import error_of
from sluiceway.api.services import Services, services_of
from sluiceway.model.execution import MAX_OPERATION_REASON
from sluiceway.plane import human
from sluiceway.plane import runs as operations
from sluiceway.plane.audit import ANONYMOUS, Actor
from sluiceway.ui import session
from sluiceway.ui.base import (
    BULK_LIMIT,
    TASK_REF,
    UiRoute,
    form_of,
    matching_ids,
    one,
    page_context,
    render,
    run_key,
    run_query,
)
from sluiceway.ui.session import Viewer

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


# An action is the plane's command the API route of the same name calls, as
# the viewer (the audit trail names them), on one run, with the form's fields.
Action = Callable[[Services, Actor, str, str, dict[str, list[str]]], Awaitable[str]]


def _actor(viewer: Viewer) -> Actor:
    identity = viewer.identity
    return ANONYMOUS if identity is None else Actor(identity.user, identity.via, identity.key)


def _done(outcome: object) -> str:
    """What an action did, or the refusal the API would answer, raised."""
    if isinstance(outcome, operations.Done):
        return outcome.message or outcome.status.value
    if isinstance(outcome, operations.MessageQueued):
        return f"message {outcome.id} " + ("handed to a waiting task" if outcome.delivered else "queued")
    raise error_of(outcome)  # type: ignore[arg-type]  # every other outcome is a refusal


async def _terminate(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    reason = (one(form, "reason") or "terminated from the UI")[:MAX_OPERATION_REASON]
    return _done(await operations.terminate(svc.plane, actor, namespace, run_id, reason))


async def _pause(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    reason = one(form, "reason")[:MAX_OPERATION_REASON]
    return _done(await operations.pause(svc.plane, actor, namespace, run_id, reason))


async def _resume(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    return _done(await operations.resume(svc.plane, actor, namespace, run_id))


async def _retry(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    return _done(await operations.retry(svc.plane, actor, namespace, run_id))


async def _rerun(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    ref = one(form, "task")
    if not TASK_REF.fullmatch(ref):
        raise ApiError(422, "INVALID_REQUEST", f"task: {ref[:64]!r} is not a task reference")
    return _done(await operations.rerun(svc.plane, actor, namespace, run_id, ref))


async def _send(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    text = one(form, "message")
    try:
        message = json.loads(text)
    except ValueError as error:
        raise ApiError(422, "INVALID_REQUEST", f"message: not JSON ({error})") from None
    return _done(await operations.send_message(svc.plane, actor, namespace, run_id, message))


ACTIONS: dict[str, tuple[Action, str]] = {
    "terminate": (_terminate, "Terminate"),
    "pause": (_pause, "Pause"),
    "resume": (_resume, "Resume"),
    "retry": (_retry, "Retry from the failed tasks"),
    "rerun": (_rerun, "Rerun from a task"),
    "message": (_send, "Send a message"),
}
WHAT_ACTIONS_DO = {
    "terminate": "The run ends as TERMINATED; tasks in flight are canceled. It can be retried afterwards.",
    "pause": "Nothing new is scheduled and the run's clocks stop; leased tasks finish.",
    "resume": "Held tasks are queued again; the deadline and SLA move by the time paused.",
    "retry": "Failed, timed-out and canceled tasks start again; completed tasks keep their output.",
    "rerun": "The task and everything after it start afresh; the others keep their outputs.",
    "message": "The message (any JSON value) joins the run's queue; a PULL_WORKFLOW_MESSAGES task takes it.",
}


def _action(name: str) -> Action:
    if name not in ACTIONS:
        raise ApiError(404, "NOT_FOUND", f"no action {name[:32]!r}: one of {', '.join(ACTIONS)}")
    return ACTIONS[name][0]


@router.get("/ns/{namespace}/runs/{execution_id}/{action}", response_class=HTMLResponse)
async def confirm_action(request: Request, namespace: str, execution_id: str, action: str) -> Response:
    _action(action)
    context = await page_context(request, namespace, "update", "workflowruns")
    run_id = run_key(execution_id)
    task = request.query_params.get("task", "")
    return render(
        request,
        "confirm.html",
        {
            **context,
            "action": action,
            "title": ACTIONS[action][1],
            "explain": WHAT_ACTIONS_DO[action],
            "ids": [str(run_id)],
            "task": task,
            "target": f"/ui/ns/{namespace}/runs/{run_id}/{action}",
            "back": f"/ui/ns/{namespace}/runs/{run_id}",
            "more": False,
        },
    )


@router.post("/ns/{namespace}/runs/{execution_id}/{action}")
async def do_action(request: Request, namespace: str, execution_id: str, action: str) -> Response:
    act = _action(action)
    form = await form_of(request)
    context = await page_context(request, namespace, "update", "workflowruns")
    run_id = run_key(execution_id)
    try:
        message = await act(services_of(request), _actor(context["viewer"]), namespace, str(run_id), form)
    except ApiError as error:
        context.update(status=error.status, error=error.body, back=f"/ui/ns/{namespace}/runs/{run_id}")
        return render(request, "error.html", context, status=error.status)
    return RedirectResponse(f"/ui/ns/{namespace}/runs/{run_id}?done={quote(action + ': ' + message)}", status_code=303)


@router.post("/ns/{namespace}/bulk", response_class=HTMLResponse)
async def bulk_confirm(request: Request, namespace: str) -> Response:
    """The confirmation of a bulk action: the runs selected, or those the
    filter matches (up to BULK_LIMIT), counted."""
    form = await form_of(request)
    context = await page_context(request, namespace, "update", "workflowruns")
    action = one(form, "action")
    _action(action)
    if action in ("rerun", "message"):
        raise ApiError(422, "INVALID_REQUEST", f"action: {action} is for one run; open the run")
    more = False
    if one(form, "scope") == "filter":
        query = run_query(QueryParams(one(form, "filter").lstrip("?")), datetime.datetime.now(datetime.UTC))
        ids, more = await matching_ids(services_of(request), namespace, query, BULK_LIMIT)
    else:
        ids = [str(run_key(text)) for text in form.get("id", [])][:BULK_LIMIT]
    return render(
        request,
        "confirm.html",
        {
            **context,
            "action": action,
            "title": ACTIONS[action][1],
            "explain": WHAT_ACTIONS_DO[action],
            "ids": ids,
            "task": "",
            "target": f"/ui/ns/{namespace}/bulk/{action}",
            "back": f"/ui/ns/{namespace}/runs" + ("?" + one(form, "filter").lstrip("?") if one(form, "filter") else ""),
            "more": more,
        },
    )


@router.post("/ns/{namespace}/bulk/{action}", response_class=HTMLResponse)
async def bulk_action(request: Request, namespace: str, action: str) -> Response:
    act = _action(action)
    form = await form_of(request)
    context = await page_context(request, namespace, "update", "workflowruns")
    outcomes: dict[str, list[str]] = {}
    svc = services_of(request)
    actor = _actor(context["viewer"])
    for text in form.get("id", [])[:BULK_LIMIT]:
        run_id = run_key(text)
        try:
            await act(svc, actor, namespace, str(run_id), form)
            outcomes.setdefault("done", []).append(str(run_id))
        except ApiError as error:
            outcomes.setdefault(
                str(error.body["message"]) if error.status == 404 else str(error.body["error"]), []
            ).append(str(run_id))
    return render(request, "bulk_done.html", {**context, "action": action, "outcomes": outcomes})


# -- HUMAN tasks ----------------------------------------------------------------------


async def _human_task(request: Request, namespace: str, task_id: str) -> human.WaitingTask:
    found = await human.human_task(services_of(request).plane, namespace, task_id)
    if not isinstance(found, human.WaitingTask):
        raise error_of(found)
    return found


@router.get("/ns/{namespace}/human/{task_id}", response_class=HTMLResponse)
async def decideform_of(request: Request, namespace: str, task_id: str) -> Response:
    """The confirmation of a person's decision: the task's input, and the
    output to complete it with (or the reason to reject it)."""
    context = await page_context(request, namespace, "get", "workflowruns")
    task = await _human_task(request, namespace, task_id)
    await session.require(request, context["viewer"], "update", "workflowruns", namespace, task.workflow_name)
    return render(request, "human.html", {**context, "task": task, "output": "{}", "problem": ""})


@router.post("/ns/{namespace}/human/{task_id}", response_class=HTMLResponse)
async def decide(request: Request, namespace: str, task_id: str) -> Response:
    """Complete or reject a waiting HUMAN task, as the API's complete and
    reject do: the same rule (update on the runs of its workflow), the same
    store function, recorded with who decided."""
    form = await form_of(request)
    context = await page_context(request, namespace, "get", "workflowruns")
    task = await _human_task(request, namespace, task_id)
    viewer: Viewer = context["viewer"]
    await session.require(request, viewer, "update", "workflowruns", namespace, task.workflow_name)
    decision, text, reason = one(form, "decision"), one(form, "output", "{}"), one(form, "reason").strip()
    problem = ""
    try:
        output = json.loads(text or "{}")
    except ValueError as error:
        output, problem = None, f"output: not JSON ({error})"
    if not problem and not isinstance(output, dict):
        problem = 'output: must be a JSON object, such as {"approved": true}'
    if not problem and decision == "reject" and not reason:
        problem = "reason: say why it is rejected"
    if not problem and decision not in ("complete", "reject"):
        problem = "decision: complete or reject"
    if problem:
        return render(request, "human.html", {**context, "task": task, "output": text, "problem": problem}, status=422)
    actor = _actor(viewer)
    outcome = await human.decide(
        services_of(request).plane, actor, namespace, task, human.Decision(decision), output or {}, reason
    )
    if not isinstance(outcome, human.WaitingTask):
        refused = error_of(outcome)
        if refused.status == 413:  # the output is over the limit: the task still waits, show the form again
            context = {**context, "task": task, "output": text, "problem": refused.body["message"]}
            return render(request, "human.html", context, status=413)
        raise refused
    who = actor.user
    done = quote(f"{task.ref}: {decision}d by {who}")
    return RedirectResponse(f"/ui/ns/{namespace}/runs/{task.execution_id}?task={quote(task.ref)}&done={done}", 303)
