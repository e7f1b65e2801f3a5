"""Schedules over REST: read them, write and delete them through the
Kubernetes API as the caller (like the other definitions), pause and resume
them (their `spec.suspend`, written the same way), trigger one now, and
backfill a past range. Triggers and backfills act on the store directly:
they start runs, which is not a definition change."""

from __future__ import annotations

import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from sluiceway.api.access import Names
from sluiceway.api.actors import actor_of
from sluiceway.api.definitions import WRITE_OUTCOMES, caller, kube_error, write_resource
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import requires, writes_as_caller
from sluiceway.api.params import NAME, NAMESPACE
from sluiceway.api.services import Services, services
from sluiceway.controls.calendar import CalendarError
from sluiceway.controls.schedules import calendar_of
from sluiceway.kubeapi.client import KubeError
from sluiceway.model.common import Spec
from sluiceway.model.resources import SCHEDULE
from sluiceway.model.schedule import MAX_BACKFILL_FIRES, UPCOMING, OverlapPolicy, ScheduleSpec
from sluiceway.plane import schedules as firing
from sluiceway.store import schedules

router = APIRouter(prefix="/v1/ns/{namespace}/schedules", tags=["schedules"], responses=INVALID)
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: refusal("No such schedule")}


class TriggerRequest(Spec):
    overlap_policy: OverlapPolicy | None = Field(None, description="Overrides the schedule's for this fire.")


# A backfill instant as the handler takes it: from 1970, with a time zone
# (pydantic reads naive and older ones too, so the check is by hand).
BACKFILL_INSTANT: dict[str, Any] = {"pattern": r"^(19[7-9][0-9]|[2-9][0-9]{3})-.*([Zz]|[+-][0-9]{2}:[0-9]{2})$"}


class BackfillRequest(Spec):
    start_time: datetime.datetime = Field(
        description="The first fire time to fill, inclusive: an ISO 8601 instant from 1970, with a time zone.",
        json_schema_extra=BACKFILL_INSTANT,
    )
    end_time: datetime.datetime = Field(
        description="The last fire time to fill, inclusive: not before startTime, not after now (else 422 "
        f"naming endTime); the range holds at most {MAX_BACKFILL_FIRES} of the schedule's fires.",
        json_schema_extra=BACKFILL_INSTANT,
    )
    overlap_policy: OverlapPolicy | None = Field(
        None, description="Overrides the schedule's for these fires (AllowAll starts them all at once)."
    )


async def _state(svc: Services, namespace: str, name: str, recent: int | None = None) -> schedules.ScheduleState:
    async with svc.pool.acquire() as conn:
        found = await schedules.states(conn, namespace, name, recent)
    if not found:
        raise ApiError(404, "NOT_FOUND", f"no schedule {name} in namespace {namespace}")
    return found[0]


@router.get("", summary="Every schedule of the namespace", dependencies=[requires("list", "schedules")])
async def list_schedules(namespace: NAMESPACE, svc: Services = Depends(services)) -> list[dict[str, Any]]:
    async with svc.pool.acquire() as conn:
        found = await schedules.states(conn, namespace, recent=1)
    return [firing.schedule_view(s) for s in found]


@router.get(
    "/{name}",
    summary="One schedule: its spec, next fires, counters and recent fires",
    responses=_NOT_FOUND,
    dependencies=[requires("get", "schedules", Names.PATH)],
)
async def get_schedule(
    namespace: NAMESPACE,
    name: NAME,
    upcoming_count: int = Query(UPCOMING, alias="upcoming", ge=1, le=100, description="Next fire times to list."),
    svc: Services = Depends(services),
) -> dict[str, Any]:
    return firing.schedule_view(await _state(svc, namespace, name), upcoming_count)


@router.put(
    "/{name}",
    summary="Create or update a schedule",
    operation_id="put_schedule",
    responses={**WRITE_OUTCOMES, 429: refusal("maxSchedules: {quota, limit, current, retryAfterSeconds}")},
    dependencies=[writes_as_caller],
)
async def put_schedule(
    namespace: NAMESPACE, name: NAME, body: ScheduleSpec, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    try:
        calendar_of(body)
    except CalendarError as error:
        field, _, message = str(error).partition(": ")
        raise ApiError(422, "INVALID_REQUEST", str(error), fields=[{"field": field, "message": message}]) from error
    obj = await write_resource(caller(request, svc), SCHEDULE, namespace, name, body.to_wire())
    status = obj.get("status", {})
    ready = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    shape = {"name": name, **body.to_wire(), "resource": obj["metadata"]["name"]}
    if ready is None:
        return JSONResponse({**shape, "status": "Pending"}, status_code=202)
    verdict = {"ready": ready["status"] == "True", "reason": ready.get("reason"), "message": ready.get("message")}
    if ready.get("reason") == "QuotaExceeded" and status.get("refusal"):
        return JSONResponse({**status["refusal"], "message": ready.get("message"), "status": verdict}, status_code=429)
    if ready["status"] != "True":
        return JSONResponse(
            {"error": ready.get("reason"), "message": ready.get("message"), **shape, "status": verdict},
            status_code=422,
        )
    return JSONResponse({**shape, "status": verdict})


@router.delete(
    "/{name}",
    summary="Delete a schedule; the runs it started go on",
    operation_id="delete_schedule",
    status_code=202,
    responses={**WRITE_OUTCOMES, 404: refusal("No such schedule")},
    dependencies=[writes_as_caller],
)
async def delete_schedule(
    namespace: NAMESPACE, name: NAME, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    try:
        deleted = await caller(request, svc).delete(SCHEDULE.plural, namespace, name)
    except KubeError as error:
        raise kube_error(error) from error
    if not deleted:
        raise ApiError(404, "NOT_FOUND", f"no schedule {name} in namespace {namespace}")
    return JSONResponse({"name": name, "status": "Deleting"}, status_code=202)


async def _suspend(request: Request, svc: Services, namespace: str, name: str, suspend: bool) -> JSONResponse:
    try:
        await caller(request, svc).merge_patch(SCHEDULE.plural, namespace, name, {"spec": {"suspend": suspend}})
    except KubeError as error:
        if error.status == 404:
            raise ApiError(404, "NOT_FOUND", f"no schedule {name} in namespace {namespace}") from error
        raise kube_error(error) from error
    return JSONResponse({"name": name, "suspend": suspend}, status_code=202)


@router.post(
    "/{name}/pause",
    summary="Pause a schedule: sets its spec.suspend, so nothing fires until it is resumed",
    operation_id="pause_schedule",
    status_code=202,
    responses=WRITE_OUTCOMES,
    dependencies=[writes_as_caller],
)
async def pause_schedule(
    namespace: NAMESPACE, name: NAME, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    return await _suspend(request, svc, namespace, name, True)


@router.post(
    "/{name}/resume",
    summary="Resume a schedule: clears spec.suspend; it goes on from now, without catching up the pause",
    operation_id="resume_schedule",
    status_code=202,
    responses=WRITE_OUTCOMES,
    dependencies=[writes_as_caller],
)
async def resume_schedule(
    namespace: NAMESPACE, name: NAME, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    return await _suspend(request, svc, namespace, name, False)


@router.post(
    "/{name}/trigger",
    summary="Fire now, under the overlap policy",
    operation_id="trigger_schedule",
    status_code=201,
    responses=_NOT_FOUND,
    dependencies=[requires("update", "schedules", Names.PATH)],
)
async def trigger_schedule(
    namespace: NAMESPACE,
    name: NAME,
    request: Request,
    body: TriggerRequest | None = None,
    svc: Services = Depends(services),
) -> dict[str, Any]:
    policy = body.overlap_policy if body else None
    try:
        fire = await firing.trigger(svc.plane, actor_of(request), namespace, name, policy)
    except firing.ScheduleNotFound as error:
        raise ApiError(404, "NOT_FOUND", str(error)) from error
    return firing.fire_view(fire)


@router.post(
    "/{name}/backfill",
    summary="Fire the schedule's times of a past range, each once, under the overlap policy",
    operation_id="backfill_schedule",
    status_code=201,
    responses=_NOT_FOUND,
    dependencies=[requires("update", "schedules", Names.PATH)],
)
async def backfill_schedule(
    namespace: NAMESPACE, name: NAME, body: BackfillRequest, request: Request, svc: Services = Depends(services)
) -> dict[str, Any]:
    for field, value in (("startTime", body.start_time), ("endTime", body.end_time)):
        problem = "give a time zone (Z or an offset)" if value.tzinfo is None else None
        if problem is None and value.year < 1970:
            problem = "must not be before 1970"
        if problem:
            raise ApiError(422, "INVALID_REQUEST", f"{field}: {problem}", fields=[{"field": field, "message": problem}])
    try:
        fires = await firing.backfill(
            svc.plane, actor_of(request), namespace, name, body.start_time, body.end_time, body.overlap_policy
        )
    except firing.ScheduleNotFound as error:
        raise ApiError(404, "NOT_FOUND", str(error)) from error
    except firing.BackfillError as error:
        field, _, message = str(error).partition(": ")
        raise ApiError(422, "INVALID_REQUEST", str(error), fields=[{"field": field, "message": message}]) from error
    return {
        "fires": [firing.fire_view(f) for f in fires],
        "started": sum(1 for f in fires if f.outcome == "started"),
        "alreadyFired": sum(1 for f in fires if f.outcome == "duplicate"),
    }
