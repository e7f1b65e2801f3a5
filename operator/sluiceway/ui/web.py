"""The UI's pages and actions, served by the operator under /ui.

Every page reads what the API reads, and every action is the execution
plane's command the matching API route calls (`sluiceway.plane`), after the
same access check, as the viewer: limited and audited the same way, so the UI
can do nothing the API would refuse. Actions are POSTs behind a confirmation
page that says what will happen (for bulk actions: to how many runs), and
answer with a redirect back to a shareable URL."""

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
from starlette.datastructures import QueryParams

from sluiceway import __version__
from sluiceway.api import views as api_views
from sluiceway.api.errors import ApiError
from sluiceway.api.outcomes import error_of
from sluiceway.api.services import Services, services_of
from sluiceway.controls.gates import GateState, SemaphoreState, closed, window_start
from sluiceway.controls.policy import Gates
from sluiceway.controls.why import Reason, explain, explain_task
from sluiceway.model.common import DNS_LABEL_PATTERN, ENGINE_NAME_PATTERN
from sluiceway.model.execution import MAX_OPERATION_REASON, RunStatus, TaskStatus
from sluiceway.model.workflow import RUN_REF_PATTERN, TaskType
from sluiceway.plane import finding, human
from sluiceway.plane import runs as operations
from sluiceway.plane.audit import ANONYMOUS, Actor
from sluiceway.plane.errors import Invalid
from sluiceway.plane.finding import Order
from sluiceway.plane.schedules import schedule_view
from sluiceway.store import diagnostics, logs, overview, schedules, workflows
from sluiceway.store.definitions import list_task_definitions
from sluiceway.store.runs import get_run, task_attempts
from sluiceway.store.tenancy import tenant_rules
from sluiceway.ui import gantt, rungraph, session, views
from sluiceway.ui.session import LoginNeeded, Viewer
from sluiceway.ui.statuses import is_failure, shown

HERE = Path(__file__).parent
PAGE_SIZE = 50
GROUP_PAGE = 100
BULK_LIMIT = 1000  # runs one bulk action may touch
WHY_TASKS = 10  # active tasks whose reasons a run page explains; the rest are counted
_ENGINE_NAME = re.compile(ENGINE_NAME_PATTERN)
_NAMESPACE = re.compile(DNS_LABEL_PATTERN)
_REF = re.compile(RUN_REF_PATTERN)

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
            except Invalid as invalid:
                body = {"error": "INVALID_REQUEST", "message": str(invalid)}
                return render(request, "error.html", {"status": 422, "error": body}, status=422)

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


def _run_query(query: QueryParams, now: datetime.datetime) -> finding.RunQuery:
    """The runs list's query string as the plane's run filter."""
    workflow = query.get("workflow") or None
    if workflow is not None and not _ENGINE_NAME.fullmatch(workflow):
        raise ApiError(422, "INVALID_REQUEST", f"workflow: {workflow[:64]!r} is not a workflow name")
    flags = {"yes": True, "no": False}
    attributes = [line.strip() for text in query.getlist("attr") for line in text.splitlines() if line.strip()]
    return finding.RunQuery(
        workflow=workflow,
        status=query.getlist("status"),
        started_after=query.get("startedAfter") or views.started_after(query.get("since"), now),
        started_before=query.get("startedBefore") or None,
        awaiting_admission=flags.get(query.get("awaitingAdmission", "")),
        sla_breached=flags.get(query.get("slaBreached", "")),
        search_attributes=attributes,
        parent=query.get("parent") or None,
        restarted_from=query.get("restartedFrom") or None,
    )


async def _matching_ids(svc: Services, namespace: str, query: finding.RunQuery, limit: int) -> tuple[list[str], bool]:
    """The ids of up to `limit` runs matching the filter, and whether more match."""
    found: list[str] = []
    cursor = None
    while len(found) <= limit:
        page = await finding.find_runs(svc.plane, namespace, query, limit=200, cursor=cursor)
        found.extend(row.id for row in page.rows)
        if page.next is None:
            break
        cursor = finding.encode_cursor(page.next, Order.NEWEST)
    return found[:limit], len(found) > limit


@router.get("/ns/{namespace}/runs", response_class=HTMLResponse)
async def runs(request: Request, namespace: str) -> Response:
    context = await _page_context(request, namespace, "list", "workflowruns")
    svc = services_of(request)
    now = datetime.datetime.now(datetime.UTC)
    query = _run_query(request.query_params, now)
    cursor = request.query_params.get("cursor") or None
    found = await finding.find_runs(svc.plane, namespace, query, limit=PAGE_SIZE, cursor=cursor)
    page = api_views.run_page(found, Order.NEWEST)
    async with svc.pool.acquire() as conn:
        counts = await overview.status_counts(conn, namespace, query.workflow)
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
        run = await get_run(conn, namespace, str(run_id))
        if run is None:
            raise ApiError(404, "NOT_FOUND", f"no run {run_id} in namespace {namespace}")
        attempts = await overview.attempts(conn, run.id)
        version = await workflows.find_version(conn, namespace, run.workflow_name, run.workflow_version)
        facts = await diagnostics.run_facts(conn, namespace, run_id, svc.plane.policies, limit=WHY_TASKS)
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
        attempts = await task_attempts(conn, run_id, ref)
        facts = await diagnostics.run_facts(conn, namespace, uuid.UUID(run_id), svc.plane.policies, ref=ref)
        found = await logs.read(conn, uuid.UUID(run_id), after=0, limit=200, ref=ref, cap=svc.plane.log_cap_bytes)
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
        run = await get_run(conn, namespace, run_id)
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
    reason = (_one(form, "reason") or "terminated from the UI")[:MAX_OPERATION_REASON]
    return _done(await operations.terminate(svc.plane, actor, namespace, run_id, reason))


async def _pause(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    reason = _one(form, "reason")[:MAX_OPERATION_REASON]
    return _done(await operations.pause(svc.plane, actor, namespace, run_id, reason))


async def _resume(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    return _done(await operations.resume(svc.plane, actor, namespace, run_id))


async def _retry(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    return _done(await operations.retry(svc.plane, actor, namespace, run_id))


async def _rerun(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    ref = _one(form, "task")
    if not _REF.fullmatch(ref):
        raise ApiError(422, "INVALID_REQUEST", f"task: {ref[:64]!r} is not a task reference")
    return _done(await operations.rerun(svc.plane, actor, namespace, run_id, ref))


async def _send(svc: Services, actor: Actor, namespace: str, run_id: str, form: dict[str, list[str]]) -> str:
    text = _one(form, "message")
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
    form = await _form(request)
    context = await _page_context(request, namespace, "update", "workflowruns")
    action = _one(form, "action")
    _action(action)
    if action in ("rerun", "message"):
        raise ApiError(422, "INVALID_REQUEST", f"action: {action} is for one run; open the run")
    more = False
    if _one(form, "scope") == "filter":
        query = _run_query(QueryParams(_one(form, "filter").lstrip("?")), datetime.datetime.now(datetime.UTC))
        ids, more = await _matching_ids(services_of(request), namespace, query, BULK_LIMIT)
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
    actor = _actor(context["viewer"])
    for text in form.get("id", [])[:BULK_LIMIT]:
        run_id = _run_id(text)
        try:
            await act(svc, actor, namespace, str(run_id), form)
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
    query = finding.TaskQuery(
        status=q.getlist("status"),
        task_type=q.get("taskType") or None,
        worker_id=q.get("workerId") or None,
        type=kind,
        workflow=q.get("workflow") or None,
    )
    found = await finding.find_tasks(
        services_of(request).plane, namespace, query, limit=PAGE_SIZE, cursor=q.get("cursor") or None, order=order
    )
    page = api_views.task_page(found, order)
    return render(request, "tasks.html", {**context, "page": page, "statuses": [s.value for s in TaskStatus]})


# -- HUMAN tasks ----------------------------------------------------------------------


async def _human_task(request: Request, namespace: str, task_id: str) -> human.WaitingTask:
    found = await human.human_task(services_of(request).plane, namespace, task_id)
    if not isinstance(found, human.WaitingTask):
        raise error_of(found)
    return found


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
        policies = await svc.plane.policies.of(conn, namespace, names)
        semaphores = await diagnostics.semaphores(conn, namespace) if may_semaphores else []
        holders = {s.name: await diagnostics.holders(conn, namespace, s.name) for s in semaphores}
        windows = await overview.rate_windows(conn, namespace)
        keys = await overview.admission_keys(conn, namespace)
        quotas = await diagnostics.quota_rows(conn, namespace) if may_quotas else []
        payload_limits = dict((await tenant_rules(conn, namespace)).payload_limits) if may_quotas else {}
        usage = await diagnostics.usage(conn, namespace)
    by_queue = {q.name: q for q in queues}
    now = datetime.datetime.now(datetime.UTC)
    caps = [
        _gated_type(name, policies[name].gates, by_queue.get(name), windows.get(name), semaphores, now)
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
            "payload_limits": payload_limits,
            "usage": usage,
            "may_semaphores": may_semaphores,
            "may_quotas": may_quotas,
            "now": now,
        },
    )


def _gated_type(
    name: str,
    gates: Gates,
    queue: diagnostics.Queue | None,
    window: overview.RateWindow | None,
    semaphores: list[SemaphoreState],
    now: datetime.datetime,
) -> dict[str, Any]:
    """One gated task type of the gates page: its use of each gate, and the
    gates closed now (controls.gates, from the page's own counts), which hold
    back its ready tasks. A rate window that is not the current one spent
    nothing of it. Semaphores the viewer may not read are left out: what
    they hold back is not said."""
    current = window
    if window is not None and window.window_start.timestamp() < window_start(
        now.timestamp(), gates.rate_limit_frequency_seconds
    ):
        current = None
    state = GateState(
        in_flight=queue.in_flight if queue else 0,
        window_used=current.used if current else 0,
        semaphores=[s for s in semaphores if s.name in gates.semaphores],
    )
    return {
        "name": name,
        "gates": gates,
        "queue": queue,
        "window": current,
        "ready": queue.ready if queue else 0,
        "holds": closed(gates, state),
    }


@router.get("/ns/{namespace}/definitions", response_class=HTMLResponse)
async def definitions(request: Request, namespace: str) -> Response:
    context = await _page_context(request, namespace, "list", "taskdefinitions")
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        tasks = await list_task_definitions(conn, namespace)
        policies = await svc.plane.policies.of(conn, namespace, {d.name for d in tasks})
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
    shown_schedules = [{"state": s, "view": schedule_view(s, 5)} for s in found]
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
