"""What the worker SDK sends is clamped to the API's documented bounds."""

from __future__ import annotations

import math

import pytest

from sluiceway.model.execution import MAX_DELAY_SECONDS, MAX_REASON, TaskResult
from sluiceway.worker.runner import RESULT_LINGER, RETRY_CAP_SECONDS, Task, Worker, _backoff, _Registration, _result

TASK = Task("6f1c1b7e-52d4-4c3e-9a43-0d4b1f1e2a10", 3, "charge", "run-1", "c", 1, {})


@pytest.mark.parametrize(
    ("sent", "expected"),
    [(999_999_999, MAX_DELAY_SECONDS), (math.inf, MAX_DELAY_SECONDS), (-5, 0.0), (math.nan, 0.0), (2.5, 2.5)],
)
def test_delays_are_clamped_to_the_api_bound(sent: float, expected: float) -> None:
    snooze = _result(TASK, "IN_PROGRESS", callbackAfterSeconds=sent).body
    retry = _result(TASK, "FAILED", reason="429", retryAfterSeconds=sent).body
    assert snooze["callbackAfterSeconds"] == expected and retry["retryAfterSeconds"] == expected
    TaskResult.model_validate(snooze)  # the server's own model accepts what the SDK sends
    TaskResult.model_validate(retry)


def test_a_long_reason_is_truncated_with_a_marker() -> None:
    body = _result(TASK, "FAILED", reason="x" * 100_000).body
    assert len(body["reason"]) == MAX_REASON and body["reason"].endswith("x [truncated]")
    assert _result(TASK, "FAILED", reason="short").body["reason"] == "short"


@pytest.mark.parametrize("output", [{"when": object()}, {"big": 2**70}])
def test_an_output_that_is_not_json_becomes_a_failure_saying_so(output: dict[str, object]) -> None:
    body = _result(TASK, "COMPLETED", output=output).body
    assert body["status"] == "FAILED" and body["reason"].startswith("the output is not JSON")
    assert "output" not in body and body["taskId"] == TASK.task_id and body["epoch"] == 3


def test_backoff_grows_exponentially_with_jitter_under_a_cap() -> None:
    for attempt in range(200):
        ceiling = min(RETRY_CAP_SECONDS, 0.2 * 2.0 ** min(attempt, 32))
        delays = [_backoff(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len({_backoff(3) for _ in range(20)}) > 1, "no jitter"


async def _noop(task: Task) -> None:
    return None


def test_a_result_that_frees_a_slot_is_sent_without_lingering_for_others() -> None:
    """The slot stays idle until the result's request leases its next task:
    it goes after one turn of the loop. Other results linger for company,
    and an explicit linger applies to every result."""
    freeing = _result(TASK, "COMPLETED")
    freeing.slot = _Registration("charge", _noop, 4, None)
    alone = _result(TASK, "COMPLETED")
    worker = Worker()
    assert worker._linger(freeing) == 0.0 and worker._linger(alone) == RESULT_LINGER > 0
    assert Worker(result_linger=0.005)._linger(freeing) == 0.005
