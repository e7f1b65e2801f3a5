"""The effective policy of one task: the precedence chain
workflow task > TaskDefinition > operator default > built-in.

Only the retry policy and `startToCloseTimeout` have operator-wide defaults
(the fleet-wide floor of the Harvest reference); everything else comes from the
TaskDefinition or its built-in default."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

from sluiceway.model.taskdefinition import RetryKind, RetryLogic, TaskDefinitionSpec, TimeoutPolicy
from sluiceway.model.workflow import WorkflowTask

# Cross-retry ceiling on any delay, whatever a policy or a worker asks for
# (TaskQ's max_retry_backoff): a misconfigured cap or a hostile Retry-After
# header cannot strand a task for a year.
DEFAULT_MAX_RETRY_BACKOFF_SECONDS = 24 * 3600.0
# The shortest deferral an explicit delay buys (TaskQ's MIN_DEFERRAL_INTERVAL):
# a Retry-After of 0 or 0.2 s must not turn the retry loop into a busy loop.
MIN_DEFERRAL_SECONDS = 1.0

T = TypeVar("T")


@dataclass(frozen=True)
class OperatorDefaults:
    """Operator-wide defaults; None means "use the built-in"."""

    retry_count: int | None = None
    retry_logic: RetryLogic | None = None
    retry_delay_seconds: float | None = None
    backoff_scale_factor: float | None = None
    max_retry_delay_seconds: float | None = None
    jitter: float | None = None
    retry_budget: float | None = None
    start_to_close_timeout: int | None = None
    max_retry_backoff_seconds: float = DEFAULT_MAX_RETRY_BACKOFF_SECONDS
    max_chain_timeout_seconds: int | None = None  # caps every chainTimeoutSeconds, and is the default of those unset


@dataclass(frozen=True)
class RetryPolicy:
    retry_count: int = 3
    retry_logic: RetryLogic = RetryLogic.EXPONENTIAL_BACKOFF
    retry_delay_seconds: float = 1.0
    backoff_scale_factor: float = 2.0
    max_retry_delay_seconds: float = 3600.0
    jitter: float = 0.2
    retry_budget: float = 0.3
    non_retryable_errors: tuple[str, ...] = ()
    max_retry_backoff_seconds: float = DEFAULT_MAX_RETRY_BACKOFF_SECONDS
    kind: RetryKind = RetryKind.TRANSIENT
    time_budget_seconds: int = 0  # indefinite only: deadline = first scheduling + budget; 0 is none

    def deadline_budget(self) -> int:
        """Seconds the task's deadline is from its first scheduling by its
        time budget (0: none): only an indefinite kind has one."""
        return self.time_budget_seconds if self.kind is RetryKind.INDEFINITE else 0


@dataclass(frozen=True)
class Timeouts:
    schedule_to_start: int = 0
    start_to_close: int = 0
    timeout_seconds: int = 0
    heartbeat: int = 0
    schedule_to_close: int = 0
    response_timeout: int = 3600
    poll_timeout: int = 30
    policy: TimeoutPolicy = TimeoutPolicy.TIME_OUT_WF


@dataclass(frozen=True)
class Gates:
    concurrent_exec_limit: int = 0
    rate_limit_per_frequency: int = 0
    rate_limit_frequency_seconds: int = 1
    semaphores: tuple[str, ...] = ()

    def any(self) -> bool:
        return bool(self.concurrent_exec_limit or self.rate_limit_per_frequency or self.semaphores)


@dataclass(frozen=True)
class TaskPolicy:
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeouts: Timeouts = field(default_factory=Timeouts)
    gates: Gates = field(default_factory=Gates)
    optional: bool = False

    def for_task(self, task: WorkflowTask | None) -> TaskPolicy:
        """This task type's policy as one workflow task runs it: only its
        `retryCount` and `optional` override the TaskDefinition."""
        if task is None:
            return self
        retry = self.retry if task.retry_count is None else replace(self.retry, retry_count=task.retry_count)
        return replace(self, retry=retry, optional=task.optional)

    def overridden(self, retry_count: int | None, start_to_close: int | None) -> TaskPolicy:
        """A start's per-task overrides on top: the highest precedence."""
        policy = self
        if retry_count is not None:
            policy = replace(policy, retry=replace(policy.retry, retry_count=retry_count))
        if start_to_close is not None:
            policy = replace(policy, timeouts=replace(policy.timeouts, start_to_close=start_to_close))
        return policy


def _layered(*values: T | None, builtin: T) -> T:
    """The first value set, highest precedence first, else the built-in."""
    for value in values:
        if value is not None:
            return value
    return builtin


def resolve(
    definition: TaskDefinitionSpec | None,
    defaults: OperatorDefaults = OperatorDefaults(),
    task: WorkflowTask | None = None,
) -> TaskPolicy:
    """The effective policy for one task; `definition` is None for a task type
    nobody defined (it runs on the operator defaults and built-ins). Resolved
    once per task type and shared (store.policies); `task` applies one
    workflow task's overrides on top, as TaskPolicy.for_task does."""
    spec = definition or TaskDefinitionSpec()
    builtin = RetryPolicy()
    retry = RetryPolicy(
        retry_count=_layered(spec.retry_count, defaults.retry_count, builtin=builtin.retry_count),
        retry_logic=_layered(spec.retry_logic, defaults.retry_logic, builtin=builtin.retry_logic),
        retry_delay_seconds=_layered(
            spec.retry_delay_seconds, defaults.retry_delay_seconds, builtin=builtin.retry_delay_seconds
        ),
        backoff_scale_factor=_layered(
            spec.backoff_scale_factor, defaults.backoff_scale_factor, builtin=builtin.backoff_scale_factor
        ),
        max_retry_delay_seconds=_layered(
            spec.max_retry_delay_seconds, defaults.max_retry_delay_seconds, builtin=builtin.max_retry_delay_seconds
        ),
        jitter=_layered(spec.jitter, defaults.jitter, builtin=builtin.jitter),
        retry_budget=_layered(spec.retry_budget, defaults.retry_budget, builtin=builtin.retry_budget),
        non_retryable_errors=tuple(spec.non_retryable_errors or ()),
        max_retry_backoff_seconds=defaults.max_retry_backoff_seconds,
        kind=spec.retry_kind or RetryKind.TRANSIENT,
        time_budget_seconds=spec.time_budget_seconds or 0,
    )
    timeouts = Timeouts(
        schedule_to_start=spec.schedule_to_start_timeout,
        start_to_close=_layered(spec.start_to_close_timeout, defaults.start_to_close_timeout, builtin=0),
        timeout_seconds=spec.timeout_seconds,
        heartbeat=spec.heartbeat_timeout,
        schedule_to_close=spec.schedule_to_close_timeout,
        response_timeout=spec.response_timeout_seconds,
        poll_timeout=spec.poll_timeout_seconds,
        policy=spec.timeout_policy,
    )
    gates = Gates(
        concurrent_exec_limit=spec.concurrent_exec_limit,
        rate_limit_per_frequency=spec.rate_limit_per_frequency,
        rate_limit_frequency_seconds=spec.rate_limit_frequency_seconds,
        semaphores=tuple(spec.semaphores),
    )
    return TaskPolicy(retry=retry, timeouts=timeouts, gates=gates).for_task(task)
