"""Whether a failed attempt is retried, and after how long.

The order of the checks is the reference's: a terminal error is never retried;
a timeout only under `timeoutPolicy: RETRY`; a `nonRetryableErrors` substring
stops it; then the retry kind, attempts, the retry budget and the
`scheduleToCloseTimeout` deadline. An `optional` task that gives up is
absorbed as COMPLETED_WITH_ERRORS and the run carries on.

Retry kinds (the TaskQ reference): `transient` spends `retryCount`;
`indefinite` has no attempt ceiling and is outside the retry budget, so only
its deadline ends it; `nonRetryable` gives up at once. A failure's own verdict
(a worker's classifier) overrides the definition's kind.

Deferrals: the curve is jittered; an explicit delay never is. A delay a
classifier read from a server (`hint`) is clamped by the operator-wide
ceiling; one the handler asked for (`signal`, RetryAfter) is gated only by
the deadline. Both are floored at one second. A retry that would land past
the deadline fails with DeadlineExceeded.

A worker lost mid-attempt (no heartbeat, lease expired) is retried on the same
curve with its jitter drawn from (task id, attempt), so a fleet-wide reclaim
spreads out instead of coming due at one instant, and deciding it twice
gives the same delay.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from enum import StrEnum
from random import Random

from sluiceway.controls.backoff import delay_at, retry_delay, unit_of
from sluiceway.controls.budget import BudgetWindow, budget_spent
from sluiceway.controls.policy import MIN_DEFERRAL_SECONDS, TaskPolicy
from sluiceway.model.execution import DelaySource, TaskStatus
from sluiceway.model.taskdefinition import RetryKind, TimeoutPolicy

# How the sweeper names an attempt whose worker went away (controls.timeouts).
WORKER_LOST = "WorkerLost:"


class GiveUpCause(StrEnum):
    TERMINAL = "terminalError"
    TIMED_OUT = "timeoutPolicy"
    NON_RETRYABLE = "nonRetryableErrors"
    EXHAUSTED = "retryCount"
    BUDGET = "retryBudget"
    DEADLINE = "scheduleToCloseTimeout"
    KIND = "retryKind"


@dataclass(frozen=True)
class FailedAttempt:
    status: TaskStatus
    reason: str
    attempt: int  # 1-based
    retry_after_seconds: float | None = None  # an exact delay the worker asked for
    schedule_to_close_at: datetime.datetime | None = None
    kind: RetryKind | None = None  # this failure's own verdict, over the definition's kind
    delay_source: DelaySource = DelaySource.HINT
    task_id: str = ""  # with the attempt, seeds the jitter of a lost worker's retry

    def worker_lost(self) -> bool:
        return self.status is TaskStatus.FAILED and self.reason.startswith(WORKER_LOST)


@dataclass(frozen=True)
class Retry:
    delay_seconds: float


@dataclass(frozen=True)
class GiveUp:
    outcome: TaskStatus  # the task's final status (COMPLETED_WITH_ERRORS when optional)
    cause: GiveUpCause
    message: str

    def fails_run(self) -> bool:
        return self.outcome is not TaskStatus.COMPLETED_WITH_ERRORS


def _give_up(policy: TaskPolicy, status: TaskStatus, cause: GiveUpCause, message: str) -> GiveUp:
    outcome = TaskStatus.COMPLETED_WITH_ERRORS if policy.optional else status
    return GiveUp(outcome, cause, message)


def decide(
    failed: FailedAttempt, policy: TaskPolicy, budget: BudgetWindow, now: datetime.datetime, rng: Random
) -> Retry | GiveUp:
    retry = policy.retry
    if failed.status is TaskStatus.FAILED_WITH_TERMINAL_ERROR:
        return _give_up(policy, TaskStatus.FAILED, GiveUpCause.TERMINAL, "terminal error: never retried")
    if failed.status is TaskStatus.TIMED_OUT and policy.timeouts.policy is not TimeoutPolicy.RETRY:
        return _give_up(
            policy,
            TaskStatus.TIMED_OUT,
            GiveUpCause.TIMED_OUT,
            "timed out under timeoutPolicy TIME_OUT_WF: a timeout buys no retry",
        )
    if failed.status is TaskStatus.FAILED:
        matched = next((e for e in retry.non_retryable_errors if e and e in failed.reason), None)
        if matched is not None:
            return _give_up(
                policy,
                TaskStatus.FAILED,
                GiveUpCause.NON_RETRYABLE,
                f"reason matches nonRetryableErrors entry {matched!r}",
            )
    kind = failed.kind or retry.kind
    if kind is RetryKind.NON_RETRYABLE:
        return _give_up(policy, failed.status, GiveUpCause.KIND, "retryKind nonRetryable: the first failure is final")
    if kind.has_ceiling():
        if failed.attempt > retry.retry_count:
            return _give_up(
                policy, failed.status, GiveUpCause.EXHAUSTED, f"retries exhausted: retryCount {retry.retry_count}"
            )
        if budget_spent(budget, retry.retry_budget):
            return _give_up(
                policy,
                failed.status,
                GiveUpCause.BUDGET,
                f"retry budget spent: {budget.retries}/{budget.executions} executions in the last "
                f"{budget.window_seconds:.0f} s were retries (retryBudget {retry.retry_budget})",
            )
    delay = next_delay(failed, policy, rng)
    if failed.schedule_to_close_at is not None:
        due = now + datetime.timedelta(seconds=delay)
        if due > failed.schedule_to_close_at:
            return _give_up(
                policy,
                TaskStatus.FAILED,
                GiveUpCause.DEADLINE,
                "DeadlineExceeded: the next retry would land past scheduleToCloseTimeout",
            )
    return Retry(delay)


def next_delay(failed: FailedAttempt, policy: TaskPolicy, rng: Random) -> float:
    """Seconds until the retry: an explicit delay exactly, else the jittered curve."""
    retry = policy.retry
    explicit = failed.retry_after_seconds
    if explicit is not None and math.isfinite(explicit):
        if failed.delay_source is DelaySource.HINT:
            explicit = min(explicit, retry.max_retry_backoff_seconds)
        return max(explicit, MIN_DEFERRAL_SECONDS)
    if failed.worker_lost():
        return delay_at(retry, failed.attempt, unit_of(f"{failed.task_id}:{failed.attempt}"))
    return retry_delay(retry, failed.attempt, rng)
