"""The bound on a whole request body (SLUICEWAY_MAX_REQUEST_BYTES), counted as
the bytes arrive, so a 40 MB body is refused (413) without being held in
memory. Each value inside a body is measured by the execution plane against
its namespace's payload limit (SLUICEWAY_MAX_PAYLOAD_BYTES, lowered by a
Quota's `maxPayloadBytes`): `sluiceway.controls.payloads`."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"


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
