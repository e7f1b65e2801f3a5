"""A span per HTTP request (installed only when tracing is on), continuing
the caller's trace when it sends a W3C `traceparent`."""

from __future__ import annotations

from typing import Any

from opentelemetry import propagate
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sluiceway.observability import tracing


class RequestSpans:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        method: str = scope["method"]
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with tracing.tracer().start_as_current_span(
            method, context=propagate.extract(headers), kind=SpanKind.SERVER
        ) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                # The route's template, never the path: ids stay out of span names.
                route: Any = scope.get("route")
                template = getattr(route, "path", None)
                if template:
                    span.update_name(f"{method} {template}")
                    span.set_attribute("http.route", template)
                span.set_attribute("http.request.method", method)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
