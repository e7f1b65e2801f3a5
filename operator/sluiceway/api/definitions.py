"""The reference's REST surface for definitions: task definitions,
semaphores and quotas in its JSON shapes.

Writes create or update the custom resource through the Kubernetes API with
the caller's authority (their bearer token), never the operator's, and answer
once the operator has reconciled it: a caller following the reference's curl
examples gets exactly what a kubectl user gets, and the cluster stays the one
source of definitions. Reads come from the reconciled store."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from sluiceway.api.access import Names
from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import requires, writes_as_caller
from sluiceway.api.params import NAME, NAMESPACE
from sluiceway.api.services import Services, services
from sluiceway.kubeapi.client import KubeClient, KubeError
from sluiceway.model import API_VERSION
from sluiceway.model.common import INT32_MAX, EngineName, kube_name_for
from sluiceway.model.quota import QuotaSpec
from sluiceway.model.resources import QUOTA, SEMAPHORE, TASK_DEFINITION, ResourceKind
from sluiceway.model.semaphore import SemaphoreSpec
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.store import definitions, diagnostics, workflows

router = APIRouter(prefix="/v1/ns/{namespace}", tags=["definitions"], responses=INVALID)
RECONCILE_WAIT_SECONDS = 10.0
QUOTA_OBJECT = "default"


# Every definition write can meet these, besides an invalid body.
WRITE_OUTCOMES: dict[int | str, dict[str, Any]] = {
    202: {"description": "Accepted, not reconciled yet"},
    401: refusal("No Kubernetes identity to write with"),
    403: refusal("Kubernetes RBAC does not let the caller write this object"),
    404: refusal("No such namespace"),
    409: refusal("Another object owns this name"),
    422: refusal("Invalid: the API, the API server or the operator refused it; the message names the field"),
    503: refusal("Kubernetes is unreachable or failing, or this process runs without it: the reason says which"),
}


class TaskDefinitionBody(TaskDefinitionSpec):
    """A task definition in the reference's JSON shape: its name, then the policy."""

    name: EngineName = Field(description="The task type.")


class SemaphoreBody(SemaphoreSpec):
    """`{"permits": 4}`."""


def caller(request: Request, svc: Services) -> KubeClient:
    """A Kubernetes client acting as the caller."""
    if svc.kube is None:  # a deployment without Kubernetes: nothing the caller can fix
        raise ApiError(503, "NO_KUBERNETES", "this process has no Kubernetes API to write definitions to")
    identity = getattr(request.state, "identity", None)
    token = getattr(identity, "token", None)
    if token:
        return svc.kube.with_token(token)
    impersonate = getattr(identity, "impersonate", None)
    if impersonate:
        return svc.kube.impersonating(*impersonate)
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return svc.kube.with_token(header[7:].strip())
    if not svc.authenticate:
        return svc.kube  # local development without authentication
    raise ApiError(401, "UNAUTHENTICATED", "writing definitions needs a Kubernetes identity: send a bearer token")


# What the API server says when the input, not the server, is at fault but its
# status is a 5xx: a server-side apply patch it cannot type (duplicates in a
# set list, say) and an object too large for etcd.
_INPUT_FAULTS_AS_5XX = ("failed to create typed patch object", "request is too large")
_PASSED_THROUGH = {401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT"}


def kube_error(error: KubeError) -> ApiError:
    """The caller's answer for a Kubernetes refusal: a 4xx naming the field
    when the input caused it, a 503 with the reason only when Kubernetes
    itself failed."""
    if error.status in (400, 413, 422) or (
        error.status >= 500 and any(fault in error.message for fault in _INPUT_FAULTS_AS_5XX)
    ):
        fields = [{"field": field or "body", "message": message} for field, message in error.causes]
        return ApiError(
            422, "INVALID_REQUEST", error.message, fields=fields or [{"field": "body", "message": error.message}]
        )
    if error.status in _PASSED_THROUGH:
        return ApiError(error.status, _PASSED_THROUGH[error.status], error.message)
    return ApiError(
        503, "KUBERNETES_UNAVAILABLE", f"the Kubernetes API failed ({error.status or 'no answer'}): {error.message}"
    )


async def write_resource(
    kube: KubeClient, kind: ResourceKind, namespace: str, name: str, spec: dict[str, Any]
) -> dict[str, Any]:
    manifest = {
        "apiVersion": API_VERSION,
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    try:
        applied = await kube.apply(kind.plural, namespace, name, manifest)
    except KubeError as error:
        raise kube_error(error) from error
    generation = applied["metadata"]["generation"]
    deadline = time.monotonic() + RECONCILE_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            current = await kube.get(kind.plural, namespace, name)
        except KubeError as error:
            raise kube_error(error) from error
        status = (current or {}).get("status", {})
        if status.get("observedGeneration") == generation and status.get("conditions"):
            return dict(current or {})
        await asyncio.sleep(0.1)
    return applied


def _answer(obj: dict[str, Any], shape: dict[str, Any]) -> JSONResponse:
    """200 with the reconciled object's shape; 409 if it was refused (a name
    conflict); 202 if the operator has not reconciled it yet."""
    status = obj.get("status", {})
    ready = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), None)
    body = {**shape, "resource": obj["metadata"]["name"]}
    if ready is None:
        return JSONResponse({**body, "status": "Pending"}, status_code=202)
    body["status"] = {
        "ready": ready["status"] == "True",
        "reason": ready.get("reason"),
        "message": ready.get("message"),
    }
    if ready["status"] != "True":
        code = 409 if ready.get("reason") == "NameConflict" else 422
        return JSONResponse({"error": ready.get("reason"), "message": ready.get("message"), **body}, status_code=code)
    return JSONResponse(body)


@router.post(
    "/metadata/task-definitions",
    summary="Create or update a task definition",
    operation_id="put_task_definition",
    responses=WRITE_OUTCOMES,
    dependencies=[writes_as_caller],
)
async def put_task_definition(
    namespace: NAMESPACE, body: TaskDefinitionBody, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    resource = kube_name_for(body.name)
    spec = body.to_wire()
    if body.name == resource:
        spec.pop("name")
    obj = await write_resource(caller(request, svc), TASK_DEFINITION, namespace, resource, spec)
    return _answer(obj, body.to_wire())


@router.get(
    "/metadata/task-definitions",
    summary="Every task definition of the namespace",
    dependencies=[requires("get", "taskdefinitions")],
)
async def list_task_definitions(namespace: NAMESPACE, svc: Services = Depends(services)) -> list[dict[str, Any]]:
    async with svc.pool.acquire() as conn:
        found = await definitions.list_task_definitions(conn, namespace)
    return [{**d.spec, "name": d.name, "resource": d.resource_name, "generation": d.generation} for d in found]


@router.get(
    "/metadata/task-definitions/{name}",
    summary="One task definition",
    responses={404: refusal("No such task type")},
    dependencies=[requires("get", "taskdefinitions", Names.PATH)],
)
async def get_task_definition(namespace: NAMESPACE, name: NAME, svc: Services = Depends(services)) -> dict[str, Any]:
    async with svc.pool.acquire() as conn:
        found = await definitions.get_task_definition(conn, namespace, name)
    if found is None:
        raise ApiError(404, "NOT_FOUND", f"no task definition {name} in namespace {namespace}")
    return {**found.spec, "name": found.name, "resource": found.resource_name, "generation": found.generation}


@router.put(
    "/semaphores/{name}",
    summary="Create or resize a semaphore",
    operation_id="put_semaphore",
    responses=WRITE_OUTCOMES,
    dependencies=[writes_as_caller],
)
async def put_semaphore(
    namespace: NAMESPACE, name: NAME, body: SemaphoreBody, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    resource = kube_name_for(name)
    spec: dict[str, Any] = {"permits": body.permits}
    if name != resource:
        spec["name"] = name
    obj = await write_resource(caller(request, svc), SEMAPHORE, namespace, resource, spec)
    return _answer(obj, {"name": name, "permits": body.permits})


@router.put(
    "/quotas",
    summary="Set the namespace's quotas",
    operation_id="put_quotas",
    responses=WRITE_OUTCOMES,
    dependencies=[writes_as_caller],
)
async def put_quotas(
    namespace: NAMESPACE, body: QuotaSpec, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    obj = await write_resource(caller(request, svc), QUOTA, namespace, QUOTA_OBJECT, body.to_wire())
    return _answer(obj, body.to_wire())


@router.get("/quotas", summary="The namespace's quotas and current usage", dependencies=[requires("get", "quotas")])
async def get_quotas(namespace: NAMESPACE, svc: Services = Depends(services)) -> dict[str, Any]:
    async with svc.pool.acquire() as conn:
        rows = await diagnostics.quota_rows(conn, namespace)
        used = await diagnostics.usage(conn, namespace)

    def tightest(values: list[int | None]) -> int | None:
        present = [v for v in values if v is not None]
        return min(present) if present else None  # every Quota applies: the lowest limit binds

    return {
        "maxConcurrentExecutions": tightest([r.max_concurrent_executions for r in rows]),
        "maxExecutionsPerMinute": tightest([r.max_executions_per_minute for r in rows]),
        "maxWorkflowDefinitions": tightest([r.max_workflow_definitions for r in rows]),
        "maxSchedules": tightest([r.max_schedules for r in rows]),
        "used": {
            "concurrentExecutions": used.concurrent_executions,
            "executionsThisMinute": used.executions_this_minute,
            "workflowDefinitions": used.workflow_definitions,
            "schedules": used.schedules,
        },
        "quotas": [
            {
                "name": r.name,
                "maxConcurrentExecutions": r.max_concurrent_executions,
                "maxExecutionsPerMinute": r.max_executions_per_minute,
                "maxWorkflowDefinitions": r.max_workflow_definitions,
                "maxSchedules": r.max_schedules,
            }
            for r in rows
        ],
    }


@router.get(
    "/metadata/workflow",
    summary="Every workflow of the namespace, at the version new runs start on",
    operation_id="list_workflows",
    dependencies=[requires("list", "workflows")],
)
async def list_workflows(namespace: NAMESPACE, svc: Services = Depends(services)) -> list[dict[str, Any]]:
    async with svc.pool.acquire() as conn:
        found = await workflows.list_workflows(conn, namespace)
    return [
        {
            "name": w.name,
            "resource": w.resource_name,
            "version": w.version,
            "description": w.spec.get("description", ""),
            "tasks": len(w.spec.get("tasks") or []),
            "searchAttributes": w.spec.get("searchAttributes") or [],
        }
        for w in found
    ]


@router.get(
    "/metadata/workflow/{name}",
    summary="One workflow's definition: the live version, or a pinned one",
    operation_id="get_workflow",
    responses={404: refusal("No such workflow (or version)")},
    dependencies=[requires("get", "workflows")],
)
async def get_workflow(
    namespace: NAMESPACE,
    name: NAME,
    version: Annotated[
        int | None, Query(ge=1, le=INT32_MAX, description="A pinned version; the live one when unset.")
    ] = None,
    svc: Services = Depends(services),
) -> dict[str, Any]:
    """A version stays readable while runs pin it, even after its Workflow is deleted."""
    async with svc.pool.acquire() as conn:
        found = await workflows.find_version(conn, namespace, name, version)
        resource = await workflows.resource_of(conn, namespace, name)
    if found is None:
        pinned = f" version {version}" if version is not None else ""
        raise ApiError(404, "NOT_FOUND", f"no workflow {name}{pinned} in namespace {namespace}")
    return {"name": name, "resource": resource, "version": found.version, "spec": found.spec}
