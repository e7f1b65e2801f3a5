"""A refused start is domain facts in the store; only the API turns it into a
status code and the error document of the reference."""

from __future__ import annotations

from sluiceway.api.outcomes import error_of as start_error
from sluiceway.store.admission import LimitExceeded, QuotaExceeded
from sluiceway.store.executions import WorkflowNotFound


def test_a_quota_is_a_429_with_the_reference_body() -> None:
    error = start_error(QuotaExceeded("team-limits", "maxConcurrentExecutions", 3, 3, 5))
    assert error.status == 429
    assert error.body == {
        "error": "QUOTA_EXCEEDED",
        "message": "quota team-limits: maxConcurrentExecutions 3 reached (3 now); retry in 5 s",
        "control": "quota:team-limits",
        "quota": "team-limits",
        "field": "maxConcurrentExecutions",
        "limit": 3,
        "current": 3,
        "retryAfterSeconds": 5,
    }


def test_max_concurrent_executions_is_a_409_limit_exceeded() -> None:
    error = start_error(LimitExceeded("nightly", 1, 1))
    assert error.status == 409
    assert error.body == {
        "error": "LIMIT_EXCEEDED",
        "message": "LIMIT_EXCEEDED: workflow nightly already has 1 of maxConcurrentExecutions 1 runs",
        "control": "maxConcurrentExecutions",
        "limit": 1,
        "current": 1,
    }


def test_an_unknown_workflow_is_a_404() -> None:
    error = start_error(WorkflowNotFound("nope", 3))
    assert (error.status, error.body["error"]) == (404, "WORKFLOW_NOT_FOUND")
    assert error.body["message"] == "workflow nope version 3 not found"
