"""Payload limits at the edge: every value a tenant sends is measured before
anything is stored, and one over its namespace's limit is refused with 413
naming the field and the limit (`sluiceway.controls.payloads`).

Two bounds: the whole request body (SLUICEWAY_MAX_REQUEST_BYTES, counted as
the bytes arrive, so a 40 MB body is refused without being held in memory),
and each value inside it (SLUICEWAY_MAX_PAYLOAD_BYTES, lowered by a Quota's
`maxPayloadBytes`), counted as the bytes of its compact JSON: what the store
would keep."""

from __future__ import annotations

import json
from typing import Any

import orjson
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sluiceway.api.errors import ApiError
from sluiceway.api.services import Services
from sluiceway.controls.payloads import Oversized, PayloadLimit, oversized, payload_limit

PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # orjson holds integers to 64 bits; the models refuse larger ones, but never guess
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def limit_of(svc: Services, namespace: str) -> PayloadLimit:
    rules = await svc.tenants.of(svc.pool, namespace)
    return payload_limit(svc.max_payload_bytes, rules.payload_limits)


def too_large(found: Oversized) -> ApiError:
    return ApiError(413, PAYLOAD_TOO_LARGE, found.message, **found.details())


def refuse_oversized(field: str, value: Any, limit: PayloadLimit) -> None:
    """413 when `value` is larger than `limit`."""
    found = oversized(field, json_size(value), limit)
    if found is not None:
        raise too_large(found)


async def check_payload(svc: Services, namespace: str, field: str, value: Any) -> None:
    """413 when `value` is larger than the namespace's limit (no query for None)."""
    if value is not None:
        refuse_oversized(field, value, await limit_of(svc, namespace))


class BodyTooLarge(HTTPException):
    """Raised from inside the body's reading: an HTTPException, so FastAPI's
    body parsing lets it through (it turns other errors into 400) and the
    application's handler answers it in the common shape."""

    def __init__(self, limit: int) -> None:
        message = f"body: larger than {limit} bytes (SLUICEWAY_MAX_REQUEST_BYTES); send large data by reference"
        super().__init__(413, message)


class RequestSizeLimit:
    """Refuses (413) a request whose body is larger than `limit` bytes: at
    once when Content-Length says so, else as soon as the bytes read pass it,
    before the route parses anything."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _refusal(self) -> JSONResponse:
        message = str(BodyTooLarge(self.limit).detail)
        return JSONResponse({"error": PAYLOAD_TOO_LARGE, "message": message}, status_code=413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refusal()(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if started:
                raise
            await self._refusal()(scope, receive, send)
