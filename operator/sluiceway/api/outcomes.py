"""The execution plane's refusals as HTTP answers, in one place: every route
that calls a command maps what it refused here, and the web UI shows the
same status and body on its error page."""

from __future__ import annotations

from typing import Any

from sluiceway.api.errors import ApiError, invalid
from sluiceway.api.payloads import PAYLOAD_TOO_LARGE
from sluiceway.plane.outcomes import (
    InvalidOverrides,
    InvalidStart,
    LimitExceeded,
    Oversized,
    QueueFull,
    QuotaExceeded,
    Refusal,
    Refused,
    Refusing,
    RequestReused,
    WorkflowNotFound,
)
from sluiceway.plane.waiting import TooManyWaiters


def too_many_waiters(refusal: TooManyWaiters) -> ApiError:
    error = ApiError(
        429,
        "TOO_MANY_WAITERS",
        refusal.message,
        control="maxRunWaiters",
        limit=refusal.limit,
        retryAfterSeconds=refusal.retry_after_seconds,
    )
    error.headers = {"Retry-After": str(refusal.retry_after_seconds)}
    return error


# A quota is a rate the caller may retry later (429); a workflow's own cap is a conflict (409).
_GATE_STATUS = {QuotaExceeded: 429, LimitExceeded: 409}


def too_large(found: Oversized) -> ApiError:
    return ApiError(413, PAYLOAD_TOO_LARGE, found.message, **found.details())


def error_of(refusal: Refusing) -> ApiError:
    """The answer to a refusal: its status code, error code and fields."""
    if isinstance(refusal, Oversized):
        return too_large(refusal)
    if isinstance(refusal, Refused):
        return _refused(refusal)
    if isinstance(refusal, QuotaExceeded | LimitExceeded):
        status = _GATE_STATUS[type(refusal)]
        return ApiError(status, refusal.code, refusal.message, control=refusal.control, **refusal.details())
    if isinstance(refusal, QueueFull):
        return ApiError(
            429,
            "QUEUE_FULL",
            f"the run holds {refusal.current} messages nobody took yet (at most {refusal.limit})",
            control="messagesPerRun",
            limit=refusal.limit,
            current=refusal.current,
            retryAfterSeconds=5,
        )
    return _start_error(refusal)


def _refused(refusal: Refused) -> ApiError:
    if refusal.reason is Refusal.NOT_FOUND:
        return ApiError(404, "NOT_FOUND", refusal.message)
    if refusal.reason is Refusal.UNKNOWN_TASK:
        return invalid("taskReferenceName", refusal.message)
    return ApiError(409, refusal.reason.value, refusal.message)


def _start_error(refusal: WorkflowNotFound | InvalidOverrides | InvalidStart | RequestReused) -> ApiError:
    if isinstance(refusal, WorkflowNotFound):
        return ApiError(404, "WORKFLOW_NOT_FOUND", refusal.message)
    if isinstance(refusal, InvalidOverrides):
        return invalid(refusal.field, refusal.message)
    if isinstance(refusal, InvalidStart):
        fields = [{"field": p.field, "message": p.message} for p in refusal.problems]
        return ApiError(422, "INVALID_REQUEST", refusal.message, fields=fields)
    return ApiError(
        409,
        "IDEMPOTENCY_KEY_REUSED",
        refusal.message,
        executionId=refusal.execution_id,
        fields=[{"field": "requestId", "message": refusal.message}],
    )


def answer(refusal: Refusing) -> dict[str, Any]:
    """A refusal as one item of a batch answer: its code and body."""
    error = error_of(refusal)
    return {"code": error.status, **error.body}
