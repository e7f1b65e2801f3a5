"""One error shape for every refusal: `{"error", "message", ...}`, plus the
field list for invalid input and the `control` for a limit. Every error the
HTTP stack itself raises (a body that is not JSON, an unknown route) is
answered in the same shape, and the shape is documented in the OpenAPI
document, so a client needs one parser for every refusal.

A backing service that is down (PostgreSQL restarting, a session cut, the
network refusing) is a 503 with Retry-After, not a 500: nothing is wrong with
the request, and a client that retries it will succeed."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from sluiceway.model.execution import FieldError, dotted
from sluiceway.plane.errors import Invalid
from sluiceway.store.errors import StoreUnavailable


class ApiError(Exception):
    def __init__(self, status: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": error, "message": message, **extra}
        self.headers: dict[str, str] | None = None  # Retry-After, for a refusal the caller may simply retry


class ErrorBody(BaseModel):
    """Every refusal. A limit adds its `control` and the refusal's own fields
    (a quota: `quota`, `limit`, `current`, `retryAfterSeconds`)."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(description="A stable code: INVALID_REQUEST, NOT_FOUND, STALE_LEASE, LIMIT_EXCEEDED, ...")
    message: str = Field(description="What went wrong, naming the field or the control.")
    fields: list[FieldError] | None = Field(None, description="INVALID_REQUEST: every invalid field.")


def invalid(field: str, message: str) -> ApiError:
    """A 422 naming the field."""
    return ApiError(422, "INVALID_REQUEST", f"{field}: {message}", fields=[{"field": field, "message": message}])


def refusal(description: str) -> dict[str, Any]:
    """An OpenAPI `responses` entry for a refusal in the common shape."""
    return {"model": ErrorBody, "description": description}


# Every route that takes input can refuse it.
INVALID: dict[int | str, dict[str, Any]] = {422: refusal("Invalid request: `fields` names every invalid field")}

_CODES = {
    400: "INVALID_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    413: "PAYLOAD_TOO_LARGE",
}

RETRY_AFTER_SECONDS = 1


def unavailable(what: str, error: Exception) -> JSONResponse:
    cause = error.__cause__ or error  # "ConnectionRefusedError" says more than "StoreUnavailable"
    return JSONResponse(
        {"error": "UNAVAILABLE", "message": f"{what} is unavailable ({type(cause).__name__}); retry"},
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def _field(loc: tuple[Any, ...]) -> str:
    return dotted(tuple(p for p in loc if p != "body")) or "body"


def invalid_request(fields: list[dict[str, str]]) -> JSONResponse:
    message = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
    return JSONResponse({"error": "INVALID_REQUEST", "message": message, "fields": fields}, status_code=422)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse(error.body, status_code=error.status, headers=error.headers)

    # A filter or cursor the plane could not read.
    @app.exception_handler(Invalid)
    async def invalid_field(_: Request, error: Invalid) -> JSONResponse:
        return invalid_request([{"field": error.field, "message": error.message}])

    @app.exception_handler(OSError)
    async def connection_failed(_: Request, error: OSError) -> JSONResponse:
        return unavailable("a backing service", error)

    # The database is restarting, cut this session, or has no room: the request may be retried as it is.
    @app.exception_handler(StoreUnavailable)
    async def database_unavailable(_: Request, error: StoreUnavailable) -> JSONResponse:
        return unavailable("the database", error)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return invalid_request([{"field": _field(tuple(e["loc"])), "message": e["msg"]} for e in error.errors()])

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        if error.status_code == 400:  # FastAPI's "error parsing the body": bytes that are not JSON
            return invalid_request([{"field": "body", "message": f"not a JSON document: {error.detail}"}])
        code = _CODES.get(error.status_code, "HTTP_ERROR")
        return JSONResponse(
            {"error": code, "message": str(error.detail)}, status_code=error.status_code, headers=error.headers
        )
