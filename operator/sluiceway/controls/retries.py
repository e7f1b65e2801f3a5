"""Whether a failed attempt is retried, and after how long.

The order of the checks is the reference's: a terminal error is never retried;
a timeout only under `timeoutPolicy: RETRY`; a `nonRetryableErrors` substring
stops it; then attempts, the retry budget and the `scheduleToCloseTimeout`
deadline. An `optional` task that gives up is absorbed as
COMPLETED_WITH_ERRORS and the run carries on.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from enum import StrEnum
from random import Random

from sluiceway.controls.backoff import retry_delay
from sluiceway.controls.budget import BudgetWindow, budget_spent
from sluiceway.controls.policy import TaskPolicy
from sluiceway.model.execution import TaskStatus
from sluiceway.model.taskdefinition import TimeoutPolicy


class GiveUpCause(StrEnum):
    TERMINAL = "terminalError"
    TIMED_OUT = "timeoutPolicy"
    NON_RETRYABLE = "nonRetryableErrors"
    EXHAUSTED = "retryCount"
    BUDGET = "retryBudget"
    DEADLINE = "scheduleToCloseTimeout"


@dataclass(frozen=True)
class FailedAttempt:
    status: TaskStatus
    reason: str
    attempt: int  # 1-based
    retry_after_seconds: float | None = None  # an exact delay the worker asked for
    schedule_to_close_at: datetime.datetime | None = None


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
    if failed.retry_after_seconds is not None and math.isfinite(failed.retry_after_seconds):
        # An explicit delay is honored exactly (no jitter), under the operator-wide ceiling.
        delay = min(max(failed.retry_after_seconds, 0.0), retry.max_retry_backoff_seconds)
    else:
        delay = retry_delay(retry, failed.attempt, rng)
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
