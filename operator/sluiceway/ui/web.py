"""The UI's pages and actions, served by the operator under /ui.

Every page reads through the store functions the API reads through, and every
action calls the function the matching API route calls, after the same access
check, so the UI can do nothing the API would refuse. Actions are POSTs behind
a confirmation page that says what will happen (for bulk actions: to how many
runs), and answer with a redirect back to a shareable URL."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import jinja2
import yaml
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from sluiceway import __version__
from sluiceway.api import executions as runs_api
from sluiceway.api import schedules as schedules_api
from sluiceway.api import tasks as tasks_api
from sluiceway.api.errors import ApiError
from sluiceway.api.paging import Order
from sluiceway.api.services import Services, services_of
from sluiceway.controls.why import Reason, explain, explain_task
from sluiceway.model.common import ENGINE_NAME_PATTERN
from sluiceway.model.execution import PauseRequest, RerunRequest, RunStatus, TaskStatus, TerminateRequest
from sluiceway.model.workflow import TaskType
from sluiceway.observability import metrics
from sluiceway.store import diagnostics, executions, human, logs, overview, schedules, workflows
from sluiceway.store.definitions import list_task_definitions
from sluiceway.ui import gantt, rungraph, session, views
from sluiceway.ui.session import LoginNeeded, Viewer
from sluiceway.ui.statuses import is_failure, shown

HERE = Path(__file__).parent
PAGE_SIZE = 50
GROUP_PAGE = 100
BULK_LIMIT = 1000  # runs one bulk action may touch
WHY_TASKS = 10  # active tasks whose reasons a run page explains; the rest are counted
_ENGINE_NAME = re.compile(ENGINE_NAME_PATTERN)
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,127}(__[0-9]{1,9})?$")

templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.globals.update(
    shown=shown,
    when=views.when,
    duration=views.duration,
    between=views.between,
    pretty=views.pretty,
    query=views.query,
    quote=quote,
    asdict=dataclasses.asdict,
    version=__version__,
)


class UiRoute(APIRoute):
    """Refusals as pages, not JSON: a 4xx page naming what was wrong, or the
    login form when there is no accepted token."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginNeeded as needed:
                if request.method == "GET" and request.url.path != "/ui/login":
                    target = quote(str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""))
                    return RedirectResponse(f"/ui/login?next={target}&why={quote(str(needed))}", status_code=303)
                return render(request, "login.html", {"problem": str(needed), "next": "/ui"}, status=401)
            except ApiError as error:
                context = {"status": error.status, "error": error.body}
                return render(request, "error.html", context, status=error.status)

        return handle


router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


def install(app: FastAPI) -> None:
    """Serve the UI at /ui on this application."""
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    csrf = session.csrf_token(request)
    body = templates.get_template(name).render(
        request=request,
        csrf=csrf,
        path=request.url.path,
        params=_params(request),
        partial=request.headers.get("hx-request") == "true",
        **{"namespaces": [], "namespace": None, "viewer": None, **context},
    )
    response = HTMLResponse(body, status_code=status)
    if request.cookies.get(session.CSRF_COOKIE) != csrf:
        secure = request.url.scheme == "https"
        response.set_cookie(
            session.CSRF_COOKIE, csrf, httponly=True, samesite="strict", secure=secure, path=session.COOKIE_PATH
        )
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    return response


def _params(request: Request) -> dict[str, list[str]]:
    return {k: request.query_params.getlist(k) for k in request.query_params}


def _namespace(namespace: str) -> str:
    if not _NAMESPACE.fullmatch(namespace):
        raise ApiError(404, "NOT_FOUND", f"{namespace[:64]!r} is not a namespace name")
    return namespace


def _run_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ApiError(404, "NOT_FOUND", f"{text[:64]!r} is not a run id") from None


async def _form(request: Request) -> dict[str, list[str]]:
    body = await request.body()
    if len(body) > 256_000:
        raise ApiError(413, "TOO_LARGE", "the form is too large")
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    session.check_csrf(request, form)
    return form


def _one(form: dict[str, list[str]], key: str, default: str = "") -> str:
    return (form.get(key) or [default])[0]


async def _visible_namespaces(request: Request, viewer: Viewer) -> list[str]:
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        found = await overview.namespaces(conn)
    return [ns for ns in found if await session.may(request, viewer, "list", "workflowruns", ns)]


async def _page_context(request: Request, namespace: str, verb: str, resource: str) -> dict[str, Any]:
    viewer = await session.viewer_of(request)
    _namespace(namespace)
    await session.require(request, viewer, verb, resource, namespace)
    namespaces = await _visible_namespaces(request, viewer)
    if namespace not in namespaces:
        namespaces = sorted([*namespaces, namespace])
    return {"viewer": viewer, "namespace": namespace, "namespaces": namespaces}


# -- sign in -------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def home(request: Request, ns: str = "") -> Response:
    if ns:
        return RedirectResponse(f"/ui/ns/{_namespace(ns)}/runs", status_code=303)
    viewer = await session.viewer_of(request)
    namespaces = await _visible_namespaces(request, viewer)
    if len(namespaces) == 1:
        return RedirectResponse(f"/ui/ns/{namespaces[0]}/runs", status_code=303)
    return render(request, "home.html", {"viewer": viewer, "namespaces": namespaces})


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "/ui", why: str = "") -> Response:
    return render(request, "login.html", {"problem": why, "next": _local(next)})


def _local(target: str) -> str:
    """Only paths of this UI: a login must not redirect to another site."""
    return target if target.startswith("/ui") and not target.startswith("//") else "/ui"


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await _form(request)
    token, target = _one(form, "token").strip(), _local(_one(form, "next", "/ui"))
    svc = services_of(request)
    if not svc.authenticate:
        return RedirectResponse(target, status_code=303)
    if svc.authenticator is None or not token:
        return render(request, "login.html", {"problem": "paste a Kubernetes token", "next": target}, status=401)
    try:
        await svc.authenticator.identify({"authorization": f"Bearer {token}"})
    except ApiError as error:
        return render(request, "login.html", {"problem": error.body["message"], "next": target}, status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        session.TOKEN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=session.COOKIE_PATH,
        max_age=8 * 3600,
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    await _form(request)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(session.TOKEN_COOKIE, path=session.COOKIE_PATH)
    return response


# -- runs ------------------------------------------------------------------------


def _filter_args(request: Request, now: datetime.datetime) -> dict[str, Any]:
    """The runs list's query string as the API's list_runs arguments."""
    q = request.query_params
    workflow = q.get("workflow") or None
    if workflow is not None and not _ENGINE_NAME.fullmatch(workflow):
        raise ApiError(422, "INVALID_REQUEST", f"workflow: {workflow[:64]!r} is not a workflow name")
    flags = {"yes": True, "no": False}
    attributes = [line.strip() for text in q.getlist("attr") for line in text.splitlines() if line.strip()]
    return {
        "workflow": workflow,
        "status": q.getlist("status") or None,
        "started_after": q.get("startedAfter") or views.started_after(q.get("since"), now),
        "started_before": q.get("startedBefore") or None,
        "awaiting_admission": flags.get(q.get("awaitingAdmission", "")),
        "sla_breached": flags.get(q.get("slaBreached", "")),
        "search_attribute": attributes or None,
        "parent": q.get("parent") or None,
        "restarted_from": q.get("restartedFrom") or None,
    }


async def _matching_ids(svc: Services, namespace: str, args: dict[str, Any], limit: int) -> tuple[list[str], bool]:
    """The ids of up to `limit` runs matching the filter, and whether more match."""
    found: list[str] = []
    cursor = None
    while len(found) <= limit:
        page = await runs_api.list_runs(namespace, **args, limit=200, cursor=cursor, svc=svc)
        found.extend(item.id for item in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found[:limit], len(found) > limit


@router.get("/ns/{namespace}/runs", response_class=HTMLResponse)
async def runs(request: Request, namespace: str) -> Response:
    context = await _page_context(request, namespace, "list", "workflowruns")
    svc = services_of(request)
    now = datetime.datetime.now(datetime.UTC)
    args = _filter_args(request, now)
    cursor = request.query_params.get("cursor") or None
    page = await runs_api.list_runs(namespace, **args, limit=PAGE_SIZE, cursor=cursor, svc=svc)
    async with svc.pool.acquire() as conn:
        counts = await overview.status_counts(conn, namespace, args["workflow"])
        names = [w.name for w in await workflows.list_workflows(conn, namespace)]
    return render(
        request,
        "runs.html",
        {
            **context,
            "page": page,
            "counts": counts,
            "statuses": [s.value for s in RunStatus],
            "workflows": names,
            "now": now,
            "may_act": await session.may(request, context["viewer"], "update", "workflowruns", namespace),
        },
    )


async def _run_page(request: Request, namespace: str, execution_id: str) -> dict[str, Any]:
    context = await _page_context(request, namespace, "get", "workflowruns")
    svc = services_of(request)
    run_id = _run_id(execution_id)
    now = datetime.datetime.now(datetime.UTC)
    q = request.query_params
    expanded = frozenset(q.getlist("expand"))
    # One snapshot for every read: a decision committed between two of them
    # would show the header of one moment and the graph or the why of another.
    async with svc.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        run = await executions.get_run(conn, namespace, str(run_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {run_id} in namespace {namespace}")
        attempts = await overview.attempts(conn, run.id)
        version = await workflows.find_version(conn, namespace, run.workflow_name, run.workflow_version)
        facts = await diagnostics.run_facts(conn, namespace, run_id, svc.policies, limit=WHY_TASKS)
    latest: dict[str, rungraph.Latest] = {}
    for a in attempts:
        latest[a.ref] = rungraph.Latest(a.ref, a.type, a.name, a.status, a.attempt)
    spec = version.spec if version else None
    graph = rungraph.build(spec.tasks if spec else None, latest, expanded=expanded)
    groups = {n.parent for n in graph.nodes.values() if n.is_group and n.parent}
    timeline = gantt.timeline(
        [
            gantt.Attempt(a.ref, a.attempt, a.status, a.created_at, a.available_at, a.leased_at, a.ended_at)
            for a in attempts
        ],
        run.created_at,
        run.ended_at,
        now,
        folded=frozenset(g for g in groups if g),
    )
    group = q.get("group")
    members: list[rungraph.Latest] = []
    group_page = max(int(q.get("gpage", "0") or 0) if (q.get("gpage") or "0").isdigit() else 0, 0)
    if group:
        status_filter = q.get("gstatus") or None
        members = [
            row
            for ref, row in latest.items()
            if rungraph.spawned_base(ref) == group and _status_matches(row.status, status_filter)
        ]
        members.sort(key=lambda r: int(r.ref.rsplit("__", 1)[1]))
    reasons = explain(facts) if facts else []
    active = sum(1 for row in latest.values() if row.status in ("SCHEDULED", "IN_PROGRESS"))
    return {
        **context,
        "run": run,
        "graph": graph,
        "timeline": timeline,
        "now": now,
        "reasons": reasons,
        "unexplained": max(active - WHY_TASKS, 0) if facts and facts.tasks else 0,
        "group": group,
        "group_members": members[group_page * GROUP_PAGE : (group_page + 1) * GROUP_PAGE],
        "group_total": len(members),
        "group_page": group_page,
        "group_pages": max((len(members) + GROUP_PAGE - 1) // GROUP_PAGE, 1),
        "failed": run.status.is_failure() if isinstance(run.status, RunStatus) else False,
        "refs": [ref for ref in latest],
        "may_act": await session.may(request, context["viewer"], "update", "workflowruns", namespace),
        "is_failure": is_failure,
    }


def _status_matches(status: str, wanted: str | None) -> bool:
    """FAILED stands for every way of failing (terminal, timed out, ...)."""
    return wanted is None or status == wanted or (wanted == "FAILED" and is_failure(status))


@router.get("/ns/{namespace}/runs/{execution_id}", response_class=HTMLResponse)
async def run_page(request: Request, namespace: str, execution_id: str) -> Response:
    started = time.perf_counter()
    context = await _run_page(request, namespace, execution_id)
    task = request.query_params.get("task")
    if task:
        context.update(await _task_panel(request, namespace, context["run"].id, task))
    context["task"] = task
    context["render_seconds"] = time.perf_counter() - started
    return render(request, "run.html", context)


async def _task_panel(request: Request, namespace: str, run_id: str, ref: str) -> dict[str, Any]:
    if not _REF.fullmatch(ref):
        raise ApiError(422, "INVALID_REQUEST", f"task: {ref[:64]!r} is not a task reference")
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        attempts = await executions.task_attempts(conn, run_id, ref)
        facts = await diagnostics.run_facts(conn, namespace, uuid.UUID(run_id), svc.policies, ref=ref)
        found = await logs.read(conn, uuid.UUID(run_id), after=0, limit=200, ref=ref, cap=svc.log_cap_bytes)
    why: list[Reason] = []
    if facts is not None:
        active = [t for t in facts.tasks if t.ref == ref]
        why = [r for t in active for r in explain_task(t)]
    return {"task_ref": ref, "attempts": attempts, "why": why, "logs": found}


@router.get("/ns/{namespace}/runs/{execution_id}/tasks/{ref}", response_class=HTMLResponse)
async def task_panel(request: Request, namespace: str, execution_id: str, ref: str) -> Response:
    if request.headers.get("hx-request") != "true":  # a link opened on its own: the whole page
        return RedirectResponse(f"/ui/ns/{namespace}/runs/{execution_id}?task={quote(ref)}#task", status_code=303)
    context = await _page_context(request, namespace, "get", "workflowruns")
    run_id = str(_run_id(execution_id))
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        run = await executions.get_run(conn, namespace, run_id)
    if run is None:
        raise ApiError(404, "NOT_FOUND", f"no run {run_id} in namespace {namespace}")
    context.update(await _task_panel(request, namespace, run_id, ref))
    context.update(
        run=run,
        now=datetime.datetime.now(datetime.UTC),
        may_act=await session.may(request, context["viewer"], "update", "workflowruns", namespace),
    )
    return render(request, "task_panel.html", context)


# -- actions ----------------------------------------------------------------------

# An action gets the page's request (its identity is the viewer's: the audit
# trail names them), the services, the run and the form.
Action = Callable[[Request, Services, str, uuid.UUID, dict[str, list[str]]], Awaitable[str]]


async def _terminate(
    caller: Request, svc: Services, namespace: str, run_id: uuid.UUID, form: dict[str, list[str]]
) -> str:
    reason = _one(form, "reason") or "terminated from the UI"
    await runs_api.terminate(namespace, run_id, caller, TerminateRequest(reason=reason[:1024]), svc=svc)
    return "terminating"


async def _pause(caller: Request, svc: Services, namespace: str, run_id: uuid.UUID, form: dict[str, list[str]]) -> str:
    request = PauseRequest(reason=_one(form, "reason")[:1024])
    return (await runs_api.pause(namespace, run_id, caller, request, svc=svc)).message


async def _resume(caller: Request, svc: Services, namespace: str, run_id: uuid.UUID, form: dict[str, list[str]]) -> str:
    return (await runs_api.resume(namespace, run_id, caller, svc=svc)).message


async def _retry(caller: Request, svc: Services, namespace: str, run_id: uuid.UUID, form: dict[str, list[str]]) -> str:
    return (await runs_api.retry(namespace, run_id, caller, svc=svc)).message


async def _rerun(caller: Request, svc: Services, namespace: str, run_id: uuid.UUID, form: dict[str, list[str]]) -> str:
    ref = _one(form, "task")
    if not _REF.fullmatch(ref):
        raise ApiError(422, "INVALID_REQUEST", f"task: {ref[:64]!r} is not a task reference")
    request = RerunRequest(task_reference_name=ref)
    return (await runs_api.rerun(namespace, run_id, request, caller, svc=svc)).message


def _json_body(text: str, caller: Request) -> Request:
    """A request whose body is `text`, for the API route that reads its body as the message."""
    body = text.encode()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "headers": [],
        "path": "/",
        "query_string": b"",
        "app": caller.scope.get("app"),  # services_of reads the app
        "state": {"identity": getattr(caller.state, "identity", None)},  # the audit trail names the viewer
    }
    return Request(scope, receive)


async def _send(caller: Request, svc: Services, namespace: str, run_id: uuid.UUID, form: dict[str, list[str]]) -> str:
    answer = await runs_api.send_message(namespace, run_id, _json_body(_one(form, "message"), caller), svc=svc)
    found = json.loads(bytes(answer.body))
    return f"message {found['id']} " + ("handed to a waiting task" if found["delivered"] else "queued")


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
    context = await _page_context(request, namespace, "update", "workflowruns")
    run_id = _run_id(execution_id)
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
    form = await _form(request)
    context = await _page_context(request, namespace, "update", "workflowruns")
    run_id = _run_id(execution_id)
    request.state.identity = context["viewer"].identity  # the API's routes audit as the viewer
    try:
        message = await act(request, services_of(request), namespace, run_id, form)
    except ApiError as error:
        context.update(status=error.status, error=error.body, back=f"/ui/ns/{namespace}/runs/{run_id}")
        return render(request, "error.html", context, status=error.status)
    return RedirectResponse(f"/ui/ns/{namespace}/runs/{run_id}?done={quote(action + ': ' + message)}", status_code=303)


@router.post("/ns/{namespace}/bulk", response_class=HTMLResponse)
async def bulk_confirm(request: Request, namespace: str) -> Response:
    """The confirmation of a bulk action: the runs selected, or those the
    filter matches (up to BULK_LIMIT), counted."""
    form = await _form(request)
    context = await _page_context(request, namespace, "update", "workflowruns")
    action = _one(form, "action")
    _action(action)
    if action in ("rerun", "message"):
        raise ApiError(422, "INVALID_REQUEST", f"action: {action} is for one run; open the run")
    more = False
    if _one(form, "scope") == "filter":
        query = _one(form, "filter").lstrip("?")
        scope = Request({**request.scope, "query_string": query.encode()}, request.receive)
        ids, more = await _matching_ids(
            services_of(request), namespace, _filter_args(scope, datetime.datetime.now(datetime.UTC)), BULK_LIMIT
        )
    else:
        ids = [str(_run_id(text)) for text in form.get("id", [])][:BULK_LIMIT]
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
            "back": f"/ui/ns/{namespace}/runs"
            + ("?" + _one(form, "filter").lstrip("?") if _one(form, "filter") else ""),
            "more": more,
        },
    )


@router.post("/ns/{namespace}/bulk/{action}", response_class=HTMLResponse)
async def bulk_action(request: Request, namespace: str, action: str) -> Response:
    act = _action(action)
    form = await _form(request)
    context = await _page_context(request, namespace, "update", "workflowruns")
    outcomes: dict[str, list[str]] = {}
    svc = services_of(request)
    request.state.identity = context["viewer"].identity  # the API's routes audit as the viewer
    for text in form.get("id", [])[:BULK_LIMIT]:
        run_id = _run_id(text)
        try:
            await act(request, svc, namespace, run_id, form)
            outcomes.setdefault("done", []).append(str(run_id))
        except ApiError as error:
            outcomes.setdefault(
                str(error.body["message"]) if error.status == 404 else str(error.body["error"]), []
            ).append(str(run_id))
    return render(request, "bulk_done.html", {**context, "action": action, "outcomes": outcomes})


@router.get("/ns/{namespace}/tasks", response_class=HTMLResponse)
async def tasks(request: Request, namespace: str) -> Response:
    """Task attempts, filtered and paged as the API's task list is: what a
    queue holds back, what a worker ran, the HUMAN inbox."""
    context = await _page_context(request, namespace, "list", "workflowruns")
    q = request.query_params
    kind = q.get("type") or None
    if kind is not None and kind not in TaskType.__members__:
        raise ApiError(422, "INVALID_REQUEST", f"type: {kind[:32]!r} is not a task type")
    for name in ("taskType", "workflow"):
        if q.get(name) and not _ENGINE_NAME.fullmatch(q[name]):
            raise ApiError(422, "INVALID_REQUEST", f"{name}: {q[name][:64]!r} is not a name")
    order = Order.OLDEST if q.get("order") == "oldest" else Order.NEWEST
    page = await tasks_api.list_tasks(
        namespace,
        status=q.getlist("status") or None,
        task_type=q.get("taskType") or None,
        worker_id=q.get("workerId") or None,
        type=TaskType(kind) if kind else None,
        workflow=q.get("workflow") or None,
        limit=PAGE_SIZE,
        cursor=q.get("cursor") or None,
        order=order,
        svc=services_of(request),
    )
    return render(request, "tasks.html", {**context, "page": page, "statuses": [s.value for s in TaskStatus]})


# -- HUMAN tasks ----------------------------------------------------------------------


async def _human_task(request: Request, namespace: str, task_id: str) -> human.WaitingTask:
    try:
        key = uuid.UUID(task_id)
    except ValueError:
        raise ApiError(404, "NOT_FOUND", f"{task_id[:64]!r} is not a task id") from None
    async with services_of(request).pool.acquire() as conn:
        task = await human.find(conn, namespace, key)
    if task is None:
        raise ApiError(404, "NOT_FOUND", f"no task {key} in namespace {namespace}")
    if task.type != TaskType.HUMAN.value:
        raise ApiError(409, "NOT_A_HUMAN_TASK", f"task {key} is a {task.type} task, not HUMAN")
    return task


@router.get("/ns/{namespace}/human/{task_id}", response_class=HTMLResponse)
async def decide_form(request: Request, namespace: str, task_id: str) -> Response:
    """The confirmation of a person's decision: the task's input, and the
    output to complete it with (or the reason to reject it)."""
    context = await _page_context(request, namespace, "get", "workflowruns")
    task = await _human_task(request, namespace, task_id)
    await session.require(request, context["viewer"], "update", "workflowruns", namespace, task.workflow_name)
    return render(request, "human.html", {**context, "task": task, "output": "{}", "problem": ""})


@router.post("/ns/{namespace}/human/{task_id}", response_class=HTMLResponse)
async def decide(request: Request, namespace: str, task_id: str) -> Response:
    """Complete or reject a waiting HUMAN task, as the API's complete and
    reject do: the same rule (update on the runs of its workflow), the same
    store function, recorded with who decided."""
    form = await _form(request)
    context = await _page_context(request, namespace, "get", "workflowruns")
    task = await _human_task(request, namespace, task_id)
    viewer: Viewer = context["viewer"]
    await session.require(request, viewer, "update", "workflowruns", namespace, task.workflow_name)
    decision, text, reason = _one(form, "decision"), _one(form, "output", "{}"), _one(form, "reason").strip()
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
    who = viewer.identity.user if viewer.identity else "anonymous (authentication is off)"
    status, why = (
        ("COMPLETED", "") if decision == "complete" else ("FAILED_WITH_TERMINAL_ERROR", f"rejected by {who}: {reason}")
    )
    async with services_of(request).pool.acquire() as conn, conn.transaction():
        settled = await human.settle(conn, namespace, uuid.UUID(task.id), status, output or {}, why[:4096], who)
    if not settled:
        raise ApiError(409, "NOT_WAITING", f"task {task.id} is {task.status}: it no longer waits for a person")
    metrics.HUMAN_DECISIONS.labels(status).inc()
    done = quote(f"{task.ref}: {decision}d by {who}")
    return RedirectResponse(f"/ui/ns/{namespace}/runs/{task.execution_id}?task={quote(task.ref)}&done={done}", 303)


# -- gates, definitions -------------------------------------------------------------


@router.get("/ns/{namespace}/gates", response_class=HTMLResponse)
async def gates(request: Request, namespace: str) -> Response:
    context = await _page_context(request, namespace, "list", "taskdefinitions")
    svc = services_of(request)
    may_semaphores = await session.may(request, context["viewer"], "get", "semaphores", namespace)
    may_quotas = await session.may(request, context["viewer"], "get", "quotas", namespace)
    async with svc.pool.acquire() as conn:
        queues = await diagnostics.queues(conn, namespace)
        pollers = await diagnostics.workers(conn, namespace)
        definitions = await list_task_definitions(conn, namespace)
        names = {q.name for q in queues} | {d.name for d in definitions}
        policies = await svc.policies.of(conn, namespace, names)
        semaphores = await diagnostics.semaphores(conn, namespace) if may_semaphores else []
        holders = {s.name: await diagnostics.holders(conn, namespace, s.name) for s in semaphores}
        windows = await overview.rate_windows(conn, namespace)
        keys = await overview.admission_keys(conn, namespace)
        quotas = await diagnostics.quota_rows(conn, namespace) if may_quotas else []
        usage = await diagnostics.usage(conn, namespace)
    by_queue = {q.name: q for q in queues}
    caps = [
        {"name": name, "gates": policies[name].gates, "queue": by_queue.get(name), "window": windows.get(name)}
        for name in sorted(names)
        if policies[name].gates.any()
    ]
    return render(
        request,
        "gates.html",
        {
            **context,
            "queues": queues,
            "pollers": pollers,
            "caps": caps,
            "semaphores": semaphores,
            "holders": holders,
            "keys": keys,
            "quotas": quotas,
            "usage": usage,
            "may_semaphores": may_semaphores,
            "may_quotas": may_quotas,
            "now": datetime.datetime.now(datetime.UTC),
        },
    )


@router.get("/ns/{namespace}/definitions", response_class=HTMLResponse)
async def definitions(request: Request, namespace: str) -> Response:
    context = await _page_context(request, namespace, "list", "taskdefinitions")
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        tasks = await list_task_definitions(conn, namespace)
        policies = await svc.policies.of(conn, namespace, {d.name for d in tasks})
        live = await workflows.list_workflows(conn, namespace)
    return render(
        request,
        "definitions.html",
        {**context, "tasks": tasks, "policies": policies, "workflows": live, "yaml": _yaml},
    )


@router.get("/ns/{namespace}/schedules", response_class=HTMLResponse)
async def schedule_list(request: Request, namespace: str) -> Response:
    context = await _page_context(request, namespace, "list", "schedules")
    async with services_of(request).pool.acquire() as conn:
        found = await schedules.states(conn, namespace, recent=5)
    shown_schedules = [{"state": s, "view": schedules_api.schedule_view(s, 5)} for s in found]
    return render(request, "schedules.html", {**context, "schedules": shown_schedules, "yaml": _yaml})


@router.get("/ns/{namespace}/workflows/{name}", response_class=HTMLResponse)
async def workflow(request: Request, namespace: str, name: str) -> Response:
    context = await _page_context(request, namespace, "get", "workflows")
    if not _ENGINE_NAME.fullmatch(name):
        raise ApiError(404, "NOT_FOUND", f"{name[:64]!r} is not a workflow name")
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        found = await overview.versions(conn, namespace, name)
    if not found:
        raise ApiError(404, "NOT_FOUND", f"no workflow {name} in namespace {namespace}")
    return render(request, "workflow.html", {**context, "name": name, "versions": found, "yaml": _yaml})


def _yaml(value: Any) -> str:
    plain = json.loads(json.dumps(value, default=str))  # enums and instants as the API writes them
    return yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, allow_unicode=True)
