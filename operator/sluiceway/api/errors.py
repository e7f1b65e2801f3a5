"""One error shape for every refusal: `{"error", "message", ...}`, plus the
field list for invalid input and the `control` for a limit."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": error, "message": message, **extra}


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) if parts else "body"


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(error.body, status_code=error.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        fields = [{"field": _field(tuple(e["loc"])), "message": e["msg"]} for e in error.errors()]
        message = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
        return JSONResponse({"error": "INVALID_REQUEST", "message": message, "fields": fields}, status_code=422)
