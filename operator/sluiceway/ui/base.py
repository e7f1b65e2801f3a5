"""What the UI's pages and actions share: the templates, the route class
that answers refusals as pages, rendering, and reading what a request names
(a namespace, a run, a form, the runs filter)."""

from __future__ import annotations

import dataclasses
import datetime
import re
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import jinja2
from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from starlette.datastructures import QueryParams

from sluiceway import __version__
from sluiceway.api.errors import ApiError
from sluiceway.api.services import Services, services_of
from sluiceway.model.common import DNS_LABEL_PATTERN, ENGINE_NAME_PATTERN
from sluiceway.model.workflow import RUN_REF_PATTERN
from sluiceway.plane import finding
from sluiceway.plane.errors import Invalid
from sluiceway.plane.finding import Order
from sluiceway.store import overview
from sluiceway.ui import session, views
from sluiceway.ui.session import LoginNeeded, Viewer
from sluiceway.ui.statuses import shown

HERE = Path(__file__).parent
PAGE_SIZE = 50
GROUP_PAGE = 100
BULK_LIMIT = 1000  # runs one bulk action may touch
WHY_TASKS = 10  # active tasks whose reasons a run page explains; the rest are counted
ENGINE_NAME = re.compile(ENGINE_NAME_PATTERN)
NAMESPACE_NAME = re.compile(DNS_LABEL_PATTERN)
TASK_REF = re.compile(RUN_REF_PATTERN)

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


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    csrf = session.csrf_token(request)
    body = templates.get_template(name).render(
        request=request,
        csrf=csrf,
        path=request.url.path,
        params=params_of(request),
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


def params_of(request: Request) -> dict[str, list[str]]:
    return {k: request.query_params.getlist(k) for k in request.query_params}


def namespace_name(namespace: str) -> str:
    if not NAMESPACE_NAME.fullmatch(namespace):
        raise ApiError(404, "NOT_FOUND", f"{namespace[:64]!r} is not a namespace name")
    return namespace


def run_key(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ApiError(404, "NOT_FOUND", f"{text[:64]!r} is not a run id") from None


async def form_of(request: Request) -> dict[str, list[str]]:
    body = await request.body()
    if len(body) > 256_000:
        raise ApiError(413, "TOO_LARGE", "the form is too large")
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    session.check_csrf(request, form)
    return form


def one(form: dict[str, list[str]], key: str, default: str = "") -> str:
    return (form.get(key) or [default])[0]


async def visible_namespaces(request: Request, viewer: Viewer) -> list[str]:
    svc = services_of(request)
    async with svc.pool.acquire() as conn:
        found = await overview.namespaces(conn)
    return [ns for ns in found if await session.may(request, viewer, "list", "workflowruns", ns)]


async def page_context(request: Request, namespace: str, verb: str, resource: str) -> dict[str, Any]:
    viewer = await session.viewer_of(request)
    namespace_name(namespace)
    await session.require(request, viewer, verb, resource, namespace)
    namespaces = await visible_namespaces(request, viewer)
    if namespace not in namespaces:
        namespaces = sorted([*namespaces, namespace])
    return {"viewer": viewer, "namespace": namespace, "namespaces": namespaces}


def run_query(query: QueryParams, now: datetime.datetime) -> finding.RunQuery:
    """The runs list's query string as the plane's run filter."""
    workflow = query.get("workflow") or None
    if workflow is not None and not ENGINE_NAME.fullmatch(workflow):
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


async def matching_ids(svc: Services, namespace: str, query: finding.RunQuery, limit: int) -> tuple[list[str], bool]:
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
