"""The UI's pages, served by the operator under /ui: the runs list, a run
(its graph, timeline, why and task panel), task attempts, gates,
definitions and schedules. Every page reads what the API reads, after the
same access check; the actions are `ui/actions.py`."""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
import uuid
from typing import Any
from urllib.parse import quote

import yaml
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from sluiceway.api import views as api_views
from sluiceway.api.errors import ApiError
from sluiceway.api.services import services_of
from sluiceway.controls import advice
from sluiceway.controls.gates import GateState, SemaphoreState, closed, window_start
from sluiceway.controls.policy import Gates
from sluiceway.controls.why import Reason, explain, explain_task
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import TaskType
from sluiceway.plane import archived, finding
from sluiceway.plane.finding import Order
from sluiceway.plane.schedules import schedule_view
from sluiceway.store import diagnostics, logs, overview, schedules, workflows
from sluiceway.store.archives import ArchivedRun, ArchiveError
from sluiceway.store.definitions import StoredDefinition, list_task_definitions
from sluiceway.store.runs import get_run, task_attempts
from sluiceway.store.tenancy import tenant_rules
from sluiceway.ui import actions, gantt, rungraph, session
from sluiceway.ui.base import (
    ENGINE_NAME,
    GROUP_PAGE,
    HERE,
    PAGE_SIZE,
    TASK_REF,
    WHY_TASKS,
    UiRoute,
    form_of,
    namespace_name,
    one,
    page_context,
    render,
    run_key,
    run_query,
    visible_namespaces,
)
from sluiceway.ui.statuses import is_failure

router = APIRouter(prefix="/ui", route_class=UiRoute, include_in_schema=False)


def install(app: FastAPI) -> None:
    """Serve the UI at /ui on this application."""
    app.include_router(router)
    app.include_router(actions.router)
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")


# -- sign in -------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def home(request: Request, ns: str = "") -> Response:
    if ns:
        return RedirectResponse(f"/ui/ns/{namespace_name(ns)}/runs", status_code=303)
    viewer = await session.viewer_of(request)
    namespaces = await visible_namespaces(request, viewer)
    if len(namespaces) == 1:
        return RedirectResponse(f"/ui/ns/{namespaces[0]}/runs", status_code=303)
    return render(request, "home.html", {"viewer": viewer, "namespaces": namespaces})


@router.get("/login", response_class=HTMLResponse)
async def loginform_of(request: Request, next: str = "/ui", why: str = "") -> Response:
    return render(request, "login.html", {"problem": why, "next": _local(next)})


def _local(target: str) -> str:
    """Only paths of this UI: a login must not redirect to another site."""
    return target if target.startswith("/ui") and not target.startswith("//") else "/ui"


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await form_of(request)
    token, target = one(form, "token").strip(), _local(one(form, "next", "/ui"))
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
    await form_of(request)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(session.TOKEN_COOKIE, path=session.COOKIE_PATH)
    return response


# -- runs ------------------------------------------------------------------------


@router.get("/ns/{namespace}/runs", response_class=HTMLResponse)
async def runs(request: Request, namespace: str) -> Response:
    context = await page_context(request, namespace, "list", "workflowruns")
    svc = services_of(request)
    now = datetime.datetime.now(datetime.UTC)
    query = run_query(request.query_params, now)
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
    context = await page_context(request, namespace, "get", "workflowruns")
    svc = services_of(request)
    run_id = run_key(execution_id)
    now = datetime.datetime.now(datetime.UTC)
    q = request.query_params
    expanded = frozenset(q.getlist("expand"))
    # One snapshot for every read: a decision committed between two of them
    # would show the header of one moment and the graph or the why of another.
    async with svc.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        run = await get_run(conn, namespace, str(run_id))
        if run is not None:
            attempts = await overview.attempts(conn, run.id)
            version = await workflows.find_version(conn, namespace, run.workflow_name, run.workflow_version)
            facts = await diagnostics.run_facts(conn, namespace, run_id, svc.plane.policies, limit=WHY_TASKS)
    gone: ArchivedRun | None = None
    if run is None:  # purged: the page of the run as it was archived, read only
        gone = await _archived(request, namespace, str(run_id))
        run, facts = gone.run, None
        attempts = [overview.AttemptRow(**{f: getattr(t, f) for f in _ATTEMPT_FIELDS}) for t in gone.tasks]
        async with svc.pool.acquire() as conn:  # its version's graph, if the version is still stored
            version = await workflows.find_version(conn, namespace, run.workflow_name, run.workflow_version)
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
        "may_act": gone is None and await session.may(request, context["viewer"], "update", "workflowruns", namespace),
        "is_failure": is_failure,
        "archived": gone,
    }


_ATTEMPT_FIELDS = [f.name for f in dataclasses.fields(overview.AttemptRow)]


async def _archived(request: Request, namespace: str, run_id: str) -> ArchivedRun:
    """A run retention deleted, from the archive (the API's answer: 404 when in neither)."""
    try:
        found = await archived.archived_run(services_of(request).plane, namespace, run_id)
    except ArchiveError as error:
        raise ApiError(404, "NOT_FOUND", f"run {run_id} was archived, but {error}") from error
    if found is None:
        raise ApiError(404, "NOT_FOUND", f"no run {run_id} in namespace {namespace}")
    return found


def _status_matches(status: str, wanted: str | None) -> bool:
    """FAILED stands for every way of failing (terminal, timed out, ...)."""
    return wanted is None or status == wanted or (wanted == "FAILED" and is_failure(status))


@router.get("/ns/{namespace}/runs/{execution_id}", response_class=HTMLResponse)
async def run_page(request: Request, namespace: str, execution_id: str) -> Response:
    started = time.perf_counter()
    context = await _run_page(request, namespace, execution_id)
    task = request.query_params.get("task")
    if task:
        context.update(await _task_panel(request, namespace, context["run"].id, task, context["archived"]))
    context["task"] = task
    context["render_seconds"] = time.perf_counter() - started
    return render(request, "run.html", context)


async def _task_panel(
    request: Request, namespace: str, run_id: str, ref: str, gone: ArchivedRun | None = None
) -> dict[str, Any]:
    if not TASK_REF.fullmatch(ref):
        raise ApiError(422, "INVALID_REQUEST", f"task: {ref[:64]!r} is not a task reference")
    svc = services_of(request)
    if gone is not None:  # archived: its attempts and lines as they were, nothing to explain
        attempts = sorted((t for t in gone.tasks if t.ref == ref), key=lambda t: t.attempt)
        lines = gone.logs_of(limit=200, ref=ref, cap=svc.plane.log_cap_bytes)
        return {"task_ref": ref, "attempts": attempts, "why": [], "logs": lines}
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
    context = await page_context(request, namespace, "get", "workflowruns")
    run_id = str(run_key(execution_id))
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        run = await get_run(conn, namespace, run_id)
    gone = await _archived(request, namespace, run_id) if run is None else None
    context.update(await _task_panel(request, namespace, run_id, ref, gone))
    context.update(
        run=run or (gone.run if gone else None),
        now=datetime.datetime.now(datetime.UTC),
        may_act=gone is None and await session.may(request, context["viewer"], "update", "workflowruns", namespace),
    )
    return render(request, "task_panel.html", context)


@router.get("/ns/{namespace}/tasks", response_class=HTMLResponse)
async def tasks(request: Request, namespace: str) -> Response:
    """Task attempts, filtered and paged as the API's task list is: what a
    queue holds back, what a worker ran, the HUMAN inbox."""
    context = await page_context(request, namespace, "list", "workflowruns")
    q = request.query_params
    kind = q.get("type") or None
    if kind is not None and kind not in TaskType.__members__:
        raise ApiError(422, "INVALID_REQUEST", f"type: {kind[:32]!r} is not a task type")
    for name in ("taskType", "workflow"):
        if q.get(name) and not ENGINE_NAME.fullmatch(q[name]):
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


# -- gates, definitions -------------------------------------------------------------


@router.get("/ns/{namespace}/gates", response_class=HTMLResponse)
async def gates(request: Request, namespace: str) -> Response:
    context = await page_context(request, namespace, "list", "taskdefinitions")
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
    context = await page_context(request, namespace, "list", "taskdefinitions")
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        tasks = await list_task_definitions(conn, namespace)
        policies = await svc.plane.policies.of(conn, namespace, {d.name for d in tasks})
        live = await workflows.list_workflows(conn, namespace)
    found = _advice(namespace, tasks, live)
    return render(
        request,
        "definitions.html",
        {**context, "tasks": tasks, "policies": policies, "workflows": live, "yaml": _yaml, "advice": found},
    )


def _advice(
    namespace: str, tasks: list[StoredDefinition], live: list[workflows.LiveWorkflow]
) -> dict[tuple[str, str], list[advice.Finding]]:
    """The policy advisor over the namespace's stored TaskDefinitions and
    Workflows together (read now, so never stale), by (kind, engine name). A
    stored spec that no longer parses is left out: its object's Ready says why."""
    stored = [(advice.Kind.TASK_DEFINITION, d.name, d.resource_name, d.spec) for d in tasks]
    stored += [(advice.Kind.WORKFLOW, w.name, w.resource_name, w.spec) for w in live]
    objects, names = [], {}
    for kind, name, resource_name, spec in stored:
        document = {"kind": kind.value, "metadata": {"name": resource_name}, "spec": spec}
        parsed = advice.declared(document)
        if isinstance(parsed, advice.Declared):
            objects.append(parsed)
            names[(kind.value, resource_name)] = name
    found: dict[tuple[str, str], list[advice.Finding]] = {}
    for advised in advice.advise(objects, semaphores_known=False):
        found.setdefault((advised.kind, names[(advised.kind, advised.name)]), []).append(advised)
    return found


@router.get("/ns/{namespace}/schedules", response_class=HTMLResponse)
async def schedule_list(request: Request, namespace: str) -> Response:
    context = await page_context(request, namespace, "list", "schedules")
    async with services_of(request).pool.acquire() as conn:
        found = await schedules.states(conn, namespace, recent=5)
    shown_schedules = [{"state": s, "view": schedule_view(s, 5)} for s in found]
    return render(request, "schedules.html", {**context, "schedules": shown_schedules, "yaml": _yaml})


@router.get("/ns/{namespace}/workflows/{name}", response_class=HTMLResponse)
async def workflow(request: Request, namespace: str, name: str) -> Response:
    context = await page_context(request, namespace, "get", "workflows")
    if not ENGINE_NAME.fullmatch(name):
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
