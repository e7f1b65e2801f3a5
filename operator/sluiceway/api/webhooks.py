"""Webhook intake: `POST /v1/ns/{namespace}/webhooks/{name}`.

Called by third parties (a payment provider, GitHub, another Sluiceway),
which hold no Kubernetes token: the route is exempt from the bearer-token
middleware and verifies each call against its Webhook's secret instead
(HMAC signature or token, see `sluiceway.controls.webhooks`). Only a verified
call is parsed and matched; an unknown endpoint is 404 and an unverified call
401, and neither leaves anything behind. A verified call completes, in one
transaction, every WAIT_FOR_WEBHOOK task waiting on the endpoint whose
`matches` accept it, with the payload as the task's output."""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from sluiceway.api.errors import INVALID, ApiError, refusal
from sluiceway.api.guards import verified_by_signature
from sluiceway.api.outcomes import error_of
from sluiceway.api.params import NAME, NAMESPACE
from sluiceway.api.services import Services, services
from sluiceway.controls import webhooks as verification
from sluiceway.kubeapi.secrets import SecretUnavailable
from sluiceway.model.common import unstorable
from sluiceway.model.webhook import WebhookSpec
from sluiceway.observability import metrics
from sluiceway.plane import events, webhooks

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/ns/{namespace}/webhooks", tags=["webhooks"], responses=INVALID)

_NOT_VERIFIED = "the call's signature was not verified"


async def _body(request: Request, limit: int) -> bytes:
    """The body, read no further than `limit` bytes (413 beyond)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", f"body: larger than this webhook's maxPayloadBytes {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", f"body: larger than this webhook's maxPayloadBytes {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


def _payload(body: bytes) -> Any:
    try:
        payload = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError as error:
        raise ApiError(
            422, "INVALID_REQUEST", f"body: not JSON: {error}", fields=[{"field": "body", "message": "not JSON"}]
        ) from error
    problem = unstorable(payload)
    if problem:
        raise ApiError(422, "INVALID_REQUEST", f"body: {problem}", fields=[{"field": "body", "message": problem}])
    return payload


async def _verified(svc: Services, namespace: str, name: str, spec: WebhookSpec, request: Request, body: bytes) -> None:
    config = spec.hmac or spec.token
    assert config is not None  # the model requires one
    if svc.secrets is None:
        problem = "this operator reads no Secrets (no Kubernetes API)"
    else:
        try:
            secret = await svc.secrets.value(namespace, config.secret_ref)
        except SecretUnavailable as error:
            problem = str(error)
        else:
            headers = {k.lower(): v for k, v in request.headers.items()}
            problem = verification.verify(spec, secret, headers, body, time.time()) or ""
    if problem:
        log.warning("webhook %s/%s: call refused: %s", namespace, name, problem)
        metrics.WEBHOOK_CALLS.labels("refused").inc()
        raise ApiError(401, "UNAUTHENTICATED", _NOT_VERIFIED)


@router.post(
    "/{name}",
    summary="Deliver a webhook call (verified by its signature, not a token)",
    responses={
        200: {
            "description": "`{matched, tasks}`: the waiting tasks this call completed (possibly none); and, when "
            "the Webhook names an `event`, `event`: the event as published, with what each Trigger did"
        },
        401: refusal("The signature or token does not verify: nothing was read further or stored"),
        404: refusal("No Webhook of that name in this namespace"),
        413: refusal("The body is larger than the Webhook's maxPayloadBytes or the namespace's payload limit"),
    },
    dependencies=[verified_by_signature],
)
async def deliver(
    namespace: NAMESPACE, name: NAME, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    """A call a third party makes. It needs no Kubernetes credential: it is
    verified against the Webhook's secret (HMAC of the body with a timestamp,
    GitHub's or Stripe's signature header, or a token header)."""
    spec = await webhooks.endpoint(svc.plane, namespace, name)
    if spec is None:
        raise ApiError(404, "NOT_FOUND", f"no webhook {name} in namespace {namespace}")
    body = await _body(request, spec.max_payload_bytes)
    await _verified(svc, namespace, name, spec, request, body)
    headers = {k.lower(): v for k, v in request.headers.items()}
    payload = _payload(body)
    completed = await webhooks.deliver(svc.plane, namespace, name, payload, headers)
    if not isinstance(completed, list):
        raise error_of(completed)
    answer: dict[str, Any] = {
        "matched": len(completed),
        "tasks": [{"taskId": t.task_id, "executionId": t.execution_id, "referenceName": t.ref} for t in completed],
    }
    if spec.event is not None:
        source = f"webhook {name}"
        token = frozenset({spec.token.header.lower()}) if spec.token is not None else frozenset()
        published = await events.publish(
            svc.plane, webhooks.signed_by(name), namespace, spec.event, payload, headers, source, token
        )
        if not isinstance(published, events.Published):
            raise error_of(published)
        answer["event"] = events.event_view(published.event)
    return JSONResponse(answer)
