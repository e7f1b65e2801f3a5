"""Events over REST: publish one (`POST .../events/{event}`), which starts
the runs of the namespace's Triggers of that event, and read what happened
to each event published, newest first, for the event retention.

Publishing needs the right to start runs (`create workflowruns`): it does
start them, each through the same Quota and gate checks as any start. A
Trigger's refusal is an outcome recorded with the event, answered with 202
like every other outcome: the sender reads what happened, and retries the
same event id later if it wants the run."""

from __future__ import annotations

import base64
import binascii
import datetime
import uuid
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from sluiceway.api.actors import actor_of
from sluiceway.api.errors import INVALID, ApiError, invalid, refusal
from sluiceway.api.guards import requires
from sluiceway.api.outcomes import error_of
from sluiceway.api.params import NAME, NAMESPACE, cursor_query
from sluiceway.api.services import Services, services
from sluiceway.model.common import ENGINE_NAME_PATTERN, unstorable
from sluiceway.plane import events as publishing
from sluiceway.store import events

router = APIRouter(prefix="/v1/ns/{namespace}/events", tags=["events"], responses=INVALID)

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def _payload(body: bytes) -> Any:
    """The body as one JSON value (the request's own size limit bounds it); empty is `{}`."""
    try:
        payload = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError as error:
        raise invalid("body", f"not JSON: {error}") from error
    problem = unstorable(payload)
    if problem:
        raise invalid("body", problem)
    return payload


@router.post(
    "/{name}",
    status_code=202,
    summary="Publish an event: start the runs of the namespace's Triggers of that event",
    responses={
        202: {
            "description": "The event as recorded: `{id, event, eventId, outcome, outcomes}`, one outcome per "
            "Trigger (started, duplicate, filtered, refused, invalid), or `unmatched` when none listens"
        },
        413: refusal("The payload is larger than the namespace's payload limit: {field, size, limit, limitSource}"),
    },
    dependencies=[requires("create", "workflowruns")],
)
async def publish(
    namespace: NAMESPACE, name: NAME, request: Request, svc: Services = Depends(services)
) -> JSONResponse:
    """The body is the event's payload: any JSON value. Its id, which runs
    are deduplicated by unless a Trigger says otherwise, is the
    `X-Sluiceway-Event-Id` (or `Idempotency-Key`) header, else a hash of the body."""
    payload = _payload(await request.body())
    headers = {k.lower(): v for k, v in request.headers.items()}
    outcome = await publishing.publish(svc.plane, actor_of(request), namespace, name, payload, headers, "api")
    if not isinstance(outcome, publishing.Published):
        raise error_of(outcome)
    return JSONResponse(publishing.event_view(outcome.event), status_code=202)


def encode_cursor(event: events.EventRecord) -> str:
    text = f"{event.received_at.isoformat()}|{event.id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime.datetime, uuid.UUID]:
    """The last event of the previous page; a 422 naming `cursor` for anything `encode_cursor` did not write."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, last = text.partition("|")
        found = datetime.datetime.fromisoformat(at), uuid.UUID(last)
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise invalid("cursor", "not a cursor this API returned: pass `nextCursor` from the previous page") from error
    if found[0].tzinfo is None:
        raise invalid("cursor", "not a cursor this API returned: pass `nextCursor` from the previous page")
    return found


@router.get(
    "",
    summary="The events published in the namespace, newest first",
    dependencies=[requires("list", "triggers")],
)
async def list_events(
    namespace: NAMESPACE,
    event: Annotated[
        str | None, Query(pattern=ENGINE_NAME_PATTERN, max_length=253, description="Only events of this name")
    ] = None,
    outcome: Annotated[
        str | None,
        Query(
            pattern="^(" + "|".join(publishing.OUTCOMES) + ")$",
            description="Only events for which some Trigger had this outcome (or `unmatched`: none listened)",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, cursor_query(256)] = None,
    svc: Services = Depends(services),
) -> dict[str, Any]:
    after = decode_cursor(cursor) if cursor is not None else None
    async with svc.pool.acquire() as conn:
        found = await events.page(conn, namespace, limit + 1, after, event, outcome)
    more = len(found) > limit
    shown = found[:limit]
    return {
        "items": [publishing.event_view(e) for e in shown],
        "nextCursor": encode_cursor(shown[-1]) if more else None,
    }


@router.get(
    "/{event_record_id}",
    summary="One published event: its payload and what each Trigger did with it",
    responses={404: refusal("No such event (or older than the event retention)")},
    dependencies=[requires("get", "triggers")],
)
async def get_event(
    namespace: NAMESPACE, event_record_id: uuid.UUID, svc: Services = Depends(services)
) -> dict[str, Any]:
    async with svc.pool.acquire() as conn:
        found = await events.get(conn, namespace, event_record_id)
    if found is None:
        raise ApiError(404, "NOT_FOUND", f"no event {event_record_id} in namespace {namespace}")
    return publishing.event_view(found, with_payload=True)
