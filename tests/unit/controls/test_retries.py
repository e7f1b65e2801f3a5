"""Whether a failed attempt is retried: every status x timeoutPolicy, the
non-retryable substrings, attempts, the budget edges and the deadline."""

from __future__ import annotations

import datetime
from random import Random

import pytest

from sluiceway.controls.budget import BudgetWindow, budget_spent
from sluiceway.controls.policy import OperatorDefaults, RetryPolicy, TaskPolicy, Timeouts, resolve
from sluiceway.controls.retries import FailedAttempt, GiveUp, GiveUpCause, Retry, decide
from sluiceway.model.execution import DelaySource, TaskStatus
from sluiceway.model.taskdefinition import RetryKind, RetryLogic, TaskDefinitionSpec, TimeoutPolicy
from sluiceway.model.workflow import WorkflowTask

NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)
RNG = Random(7)


def policy(
    timeout_policy: TimeoutPolicy = TimeoutPolicy.TIME_OUT_WF, optional: bool = False, **retry: object
) -> TaskPolicy:
    return TaskPolicy(
        retry=RetryPolicy(**retry),
        timeouts=Timeouts(policy=timeout_policy),  # type: ignore[arg-type]
        optional=optional,
    )


@pytest.mark.parametrize(
    ("status", "timeout_policy", "retried", "outcome"),
    [
        (TaskStatus.FAILED, TimeoutPolicy.TIME_OUT_WF, True, None),
        (TaskStatus.FAILED, TimeoutPolicy.RETRY, True, None),
        (TaskStatus.FAILED, TimeoutPolicy.ALERT_ONLY, True, None),
        (TaskStatus.TIMED_OUT, TimeoutPolicy.TIME_OUT_WF, False, TaskStatus.TIMED_OUT),
        (TaskStatus.TIMED_OUT, TimeoutPolicy.RETRY, True, None),
        (TaskStatus.FAILED_WITH_TERMINAL_ERROR, TimeoutPolicy.TIME_OUT_WF, False, TaskStatus.FAILED),
        (TaskStatus.FAILED_WITH_TERMINAL_ERROR, TimeoutPolicy.RETRY, False, TaskStatus.FAILED),
        (TaskStatus.FAILED_WITH_TERMINAL_ERROR, TimeoutPolicy.ALERT_ONLY, False, TaskStatus.FAILED),
    ],
)
def test_status_and_timeout_policy(
    status: TaskStatus, timeout_policy: TimeoutPolicy, retried: bool, outcome: TaskStatus | None
) -> None:
    decision = decide(
        FailedAttempt(status, "boom", attempt=1), policy(timeout_policy, retry_count=3), BudgetWindow(), NOW, RNG
    )
    assert isinstance(decision, Retry) is retried
    if outcome is not None:
        assert isinstance(decision, GiveUp) and decision.outcome is outcome and decision.fails_run()


def test_terminal_error_ignores_retry_count() -> None:
    decision = decide(
        FailedAttempt(TaskStatus.FAILED_WITH_TERMINAL_ERROR, "bad input", 1),
        policy(retry_count=100),
        BudgetWindow(),
        NOW,
        RNG,
    )
    assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.TERMINAL


@pytest.mark.parametrize(
    ("reason", "retried"),
    [
        ("Stripe error: card_declined (do_not_honor)", False),
        ("INVALID_ARGUMENT: amount", False),
        ("card_decline", True),  # not the whole entry
        ("Card_Declined", True),  # substrings are case-sensitive
        ("UNAVAILABLE", True),
    ],
)
def test_non_retryable_errors_are_substrings_of_the_reason(reason: str, retried: bool) -> None:
    decision = decide(
        FailedAttempt(TaskStatus.FAILED, reason, 1),
        policy(non_retryable_errors=("card_declined", "INVALID_ARGUMENT")),
        BudgetWindow(),
        NOW,
        RNG,
    )
    assert isinstance(decision, Retry) is retried
    if not retried:
        assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.NON_RETRYABLE


@pytest.mark.parametrize(("attempt", "retried"), [(1, True), (3, True), (4, False)])
def test_retry_count_is_attempts_after_the_first(attempt: int, retried: bool) -> None:
    decision = decide(FailedAttempt(TaskStatus.FAILED, "x", attempt), policy(retry_count=3), BudgetWindow(), NOW, RNG)
    assert isinstance(decision, Retry) is retried


def test_retry_count_zero_runs_once() -> None:
    decision = decide(FailedAttempt(TaskStatus.FAILED, "x", 1), policy(retry_count=0), BudgetWindow(), NOW, RNG)
    assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.EXHAUSTED


def test_an_optional_task_is_absorbed_after_its_retries() -> None:
    p = policy(optional=True, retry_count=1)
    assert isinstance(decide(FailedAttempt(TaskStatus.FAILED, "x", 1), p, BudgetWindow(), NOW, RNG), Retry)
    final = decide(FailedAttempt(TaskStatus.FAILED, "x", 2), p, BudgetWindow(), NOW, RNG)
    assert isinstance(final, GiveUp)
    assert final.outcome is TaskStatus.COMPLETED_WITH_ERRORS and not final.fails_run()


@pytest.mark.parametrize(
    ("executions", "retries", "budget", "spent"),
    [
        (19, 19, 0.3, False),  # under 20 executions never trips: a tiny sample lies
        (20, 7, 0.3, True),  # 0.35 > 0.3
        (20, 6, 0.3, False),  # exactly at the ratio is not over it
        (20, 20, 1.0, False),  # 1 disables
        (100, 31, 0.3, True),
        (100, 30, 0.3, False),
        (20, 1, 0.0, True),
        (20, 0, 0.0, False),
    ],
)
def test_budget_edges(executions: int, retries: int, budget: float, spent: bool) -> None:
    assert budget_spent(BudgetWindow(executions, retries), budget) is spent


def test_a_spent_budget_fails_fast_although_attempts_remain() -> None:
    decision = decide(
        FailedAttempt(TaskStatus.FAILED, "x", 1),
        policy(retry_count=10, retry_budget=0.3),
        BudgetWindow(executions=40, retries=20),
        NOW,
        RNG,
    )
    assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.BUDGET
    assert "20/40" in decision.message


def test_retry_after_is_honored_exactly_and_clamped_by_the_ceiling() -> None:
    p = policy(jitter=0.5, max_retry_backoff_seconds=120)
    exact = decide(FailedAttempt(TaskStatus.FAILED, "429", 1, retry_after_seconds=17.5), p, BudgetWindow(), NOW, RNG)
    assert exact == Retry(17.5)
    clamped = decide(FailedAttempt(TaskStatus.FAILED, "429", 1, retry_after_seconds=1e20), p, BudgetWindow(), NOW, RNG)
    assert clamped == Retry(120)


@pytest.mark.parametrize(("deadline_in", "retried"), [(100, True), (5, False)])
def test_a_retry_landing_past_schedule_to_close_is_deadline_exceeded(deadline_in: int, retried: bool) -> None:
    deadline = NOW + datetime.timedelta(seconds=deadline_in)
    p = policy(retry_logic=RetryLogic.FIXED, retry_delay_seconds=10, jitter=0)
    decision = decide(
        FailedAttempt(TaskStatus.FAILED, "x", 1, schedule_to_close_at=deadline), p, BudgetWindow(), NOW, RNG
    )
    assert isinstance(decision, Retry) is retried
    if not retried:
        assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.DEADLINE
        assert decision.message.startswith("DeadlineExceeded")


def test_precedence_task_over_definition_over_operator_over_builtin() -> None:
    defaults = OperatorDefaults(retry_count=7, retry_delay_seconds=3, start_to_close_timeout=30)
    definition = TaskDefinitionSpec.model_validate({"retryCount": 5})
    task = WorkflowTask.model_validate({"name": "t", "taskReferenceName": "t", "retryCount": 1})
    assert resolve(definition, defaults, task).retry.retry_count == 1
    assert resolve(definition, defaults, None).retry.retry_count == 5
    assert resolve(TaskDefinitionSpec(), defaults).retry.retry_count == 7
    assert resolve(None).retry.retry_count == 3
    assert resolve(definition, defaults).retry.retry_delay_seconds == 3
    assert resolve(definition, defaults).timeouts.start_to_close == 30
    own = TaskDefinitionSpec.model_validate({"startToCloseTimeout": 0})
    assert resolve(own, defaults).timeouts.start_to_close == 0, "an explicit 0 is a choice, not unset"


# -- seed 002: retry kinds and deferrals -------------------------------------------


LATER = NOW + datetime.timedelta(hours=1)


def test_an_indefinite_kind_has_no_attempt_ceiling_and_no_budget() -> None:
    indefinite = policy(retry_count=0, kind=RetryKind.INDEFINITE, jitter=0)
    spent = BudgetWindow(executions=100, retries=90)
    decision = decide(FailedAttempt(TaskStatus.FAILED, "429", attempt=500), indefinite, spent, NOW, RNG)
    assert isinstance(decision, Retry) and decision.delay_seconds == 3600  # on the curve, at its cap


def test_only_the_deadline_ends_an_indefinite_task() -> None:
    indefinite = policy(kind=RetryKind.INDEFINITE, jitter=0)
    soon = NOW + datetime.timedelta(seconds=3)
    decision = decide(
        FailedAttempt(TaskStatus.FAILED, "429", 3, schedule_to_close_at=soon), indefinite, BudgetWindow(), NOW, RNG
    )
    assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.DEADLINE
    assert "DeadlineExceeded" in decision.message


def test_a_non_retryable_kind_gives_up_at_once() -> None:
    decision = decide(
        FailedAttempt(TaskStatus.FAILED, "x", 1),
        policy(retry_count=9, kind=RetryKind.NON_RETRYABLE),
        BudgetWindow(),
        NOW,
        RNG,
    )
    assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.KIND


@pytest.mark.parametrize(
    ("verdict", "attempt", "retried"),
    [
        (RetryKind.INDEFINITE, 9, True),  # a worker's 429 verdict: past retryCount 3, still retried
        (RetryKind.NON_RETRYABLE, 1, False),  # a worker's 404 verdict: final
        (RetryKind.TRANSIENT, 4, False),  # spends retryCount like the default
        (None, 4, False),
    ],
)
def test_a_failures_own_verdict_overrides_the_kind(verdict: RetryKind | None, attempt: int, retried: bool) -> None:
    failed = FailedAttempt(TaskStatus.FAILED, "x", attempt, kind=verdict)
    assert isinstance(decide(failed, policy(retry_count=3), BudgetWindow(), NOW, RNG), Retry) is retried


@pytest.mark.parametrize(
    ("delay", "source", "expected"),
    [
        (30.0, DelaySource.HINT, 30.0),  # exactly, no jitter
        (0.0, DelaySource.HINT, 1.0),  # floored at one second
        (0.2, DelaySource.SIGNAL, 1.0),
        (10**7, DelaySource.HINT, 86400.0),  # a hint is clamped by the operator's ceiling
        (10**7, DelaySource.SIGNAL, 10**7),  # a signal only by the deadline
    ],
)
def test_explicit_delays_are_exact_floored_and_clamped_by_their_source(
    delay: float, source: DelaySource, expected: float
) -> None:
    failed = FailedAttempt(TaskStatus.FAILED, "x", 1, retry_after_seconds=delay, delay_source=source)
    decision = decide(failed, policy(retry_count=3), BudgetWindow(), NOW, RNG)
    assert isinstance(decision, Retry) and decision.delay_seconds == expected


def test_a_signal_past_the_deadline_is_deadline_exceeded() -> None:
    failed = FailedAttempt(
        TaskStatus.FAILED, "x", 1, retry_after_seconds=7200, delay_source=DelaySource.SIGNAL, schedule_to_close_at=LATER
    )
    decision = decide(failed, policy(retry_count=3), BudgetWindow(), NOW, RNG)
    assert isinstance(decision, GiveUp) and decision.cause is GiveUpCause.DEADLINE


def test_a_lost_workers_retry_draws_its_jitter_from_task_and_attempt() -> None:
    lost = FailedAttempt(TaskStatus.FAILED, "WorkerLost: lease expired", 2, task_id="t-1")
    p = policy(retry_count=5, retry_delay_seconds=10)
    delays = {decide(lost, p, BudgetWindow(), NOW, Random(seed)).delay_seconds for seed in range(20)}  # type: ignore[union-attr]
    assert len(delays) == 1, "the same task and attempt: the same delay, whatever the random source"
    others = {
        decide(
            FailedAttempt(TaskStatus.FAILED, "WorkerLost: x", 2, task_id=f"t-{i}"), p, BudgetWindow(), NOW, RNG
        ).delay_seconds  # type: ignore[union-attr]
        for i in range(200)
    }
    assert len(others) > 150 and min(others) >= 16 and max(others) <= 24, "spread over the band of attempt 2"
