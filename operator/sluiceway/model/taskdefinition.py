"""TaskDefinition: the policy of one task type (retries, timeouts, gates).

Field names, ranges and defaults are those of the node-flow execution-controls
reference. Fields that an operator-wide default may supply (the retry policy and
`startToCloseTimeout`) are `None` when unset, so the precedence
workflow task > TaskDefinition > operator default > built-in can be resolved;
their built-in defaults are stated in the descriptions and applied in
`sluiceway.controls.policy`.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field

from sluiceway.model.common import EngineName, Spec, Status


class RetryLogic(StrEnum):
    FIXED = "FIXED"
    LINEAR_BACKOFF = "LINEAR_BACKOFF"
    EXPONENTIAL_BACKOFF = "EXPONENTIAL_BACKOFF"


class TimeoutPolicy(StrEnum):
    TIME_OUT_WF = "TIME_OUT_WF"
    RETRY = "RETRY"
    ALERT_ONLY = "ALERT_ONLY"


_SECONDS = "Seconds; 0 arms no timer."


class TaskDefinitionSpec(Spec):
    """The policy of one task type: retries, timeouts and the gates applied at dequeue."""

    name: EngineName | None = Field(
        None,
        description="Task type name used by workflows and workers. Defaults to metadata.name; "
        "set it for names Kubernetes cannot hold, such as `export_report`.",
    )
    description: str = Field("", max_length=4096)

    # Retries ---------------------------------------------------------------
    retry_count: int | None = Field(
        None, ge=0, le=100,
        description="Attempts after the first; 0 runs once. Default 3.",
    )
    retry_logic: RetryLogic | None = Field(
        None, description="FIXED, LINEAR_BACKOFF or EXPONENTIAL_BACKOFF. Default EXPONENTIAL_BACKOFF.",
    )
    retry_delay_seconds: float | None = Field(
        None, ge=0, le=31_536_000, description="The base delay in seconds. Default 1.",
    )
    backoff_scale_factor: float | None = Field(
        None, ge=1, le=100, description="Growth factor of the two backoff shapes. Default 2.",
    )
    max_retry_delay_seconds: float | None = Field(
        None, ge=0, le=31_536_000,
        description="Hard ceiling on any computed delay, applied before and after jitter. Default 3600.",
    )
    jitter: float | None = Field(
        None, ge=0, le=1, description="Proportional randomisation of the delay (0.2 is ±20%). Default 0.2.",
    )
    retry_budget: float | None = Field(
        None, ge=0, le=1,
        description="Maximum share of the last 300 s of executions that may be retries; "
        "never trips under 20 executions; 1 disables. Default 0.3.",
    )
    non_retryable_errors: list[str] | None = Field(
        None, max_length=100,
        description="Substrings of a failure reason that must never be retried.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )

    # Timeouts --------------------------------------------------------------
    schedule_to_start_timeout: int = Field(
        0, ge=0, le=31_536_000, description=f"Enqueued until leased: a starved queue. {_SECONDS}",
    )
    start_to_close_timeout: int | None = Field(
        None, ge=0, le=31_536_000,
        description=f"Leased until terminal: a slow or wedged worker. {_SECONDS} Default 0.",
    )
    timeout_seconds: int = Field(
        0, ge=0, le=31_536_000, description=f"Scheduled through to terminal: the total budget of one attempt. {_SECONDS}",
    )
    heartbeat_timeout: int = Field(
        0, ge=0, le=31_536_000, description=f"Longest gap between heartbeats of a leased task. {_SECONDS}",
    )
    schedule_to_close_timeout: int = Field(
        0, ge=0, le=31_536_000,
        description="Deadline across all attempts and backoff sleeps; a retry that would land past it "
        f"fails the task with DeadlineExceeded. {_SECONDS}",
    )
    response_timeout_seconds: int = Field(
        3600, ge=1, le=31_536_000, description="Lease duration; a heartbeat renews it. Default 3600.",
    )
    poll_timeout_seconds: int = Field(
        30, ge=0, le=300, description="How long the server may hold a worker's poll open. Default 30.",
    )
    timeout_policy: TimeoutPolicy = Field(
        TimeoutPolicy.TIME_OUT_WF,
        description="What a missed task deadline means: TIME_OUT_WF (default), RETRY or ALERT_ONLY.",
    )

    # Gates -----------------------------------------------------------------
    concurrent_exec_limit: int = Field(
        0, ge=0, le=1_000_000,
        description="Cap on in-flight tasks of this type across every run, enforced at dequeue; 0 is unlimited.",
    )
    rate_limit_per_frequency: int = Field(
        0, ge=0, le=100_000_000,
        description="Dispatches allowed per fixed window of rateLimitFrequencySeconds; 0 is unlimited.",
    )
    rate_limit_frequency_seconds: int = Field(
        1, ge=1, le=86_400, description="Size of the fixed rate-limit window in seconds. Default 1.",
    )
    semaphores: list[EngineName] = Field(
        default_factory=list, max_length=16,
        description="Named semaphores a lease must acquire, all or nothing. An unconfigured one gates nothing.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    model_config = ConfigDict(**Spec.model_config, json_schema_extra={"x-kubernetes-validations": [
        {
            "rule": "!has(self.maxRetryDelaySeconds) || !has(self.retryDelaySeconds)"
            " || self.maxRetryDelaySeconds >= self.retryDelaySeconds",
            "message": "maxRetryDelaySeconds must be at least retryDelaySeconds",
            "fieldPath": ".maxRetryDelaySeconds",
        },
        {
            "rule": "!has(self.startToCloseTimeout) || !has(self.timeoutSeconds) || self.timeoutSeconds == 0"
            " || self.startToCloseTimeout <= self.timeoutSeconds",
            "message": "startToCloseTimeout cannot exceed timeoutSeconds, the total budget",
            "fieldPath": ".startToCloseTimeout",
        },
        {
            "rule": "!has(self.scheduleToStartTimeout) || !has(self.timeoutSeconds) || self.timeoutSeconds == 0"
            " || self.scheduleToStartTimeout <= self.timeoutSeconds",
            "message": "scheduleToStartTimeout cannot exceed timeoutSeconds, the total budget",
            "fieldPath": ".scheduleToStartTimeout",
        },
        {
            "rule": "!has(self.nonRetryableErrors) || self.nonRetryableErrors.all(e, size(e) > 0 && size(e) <= 1024)",
            "message": "nonRetryableErrors entries must be non-empty strings of at most 1024 characters",
            "fieldPath": ".nonRetryableErrors",
        },
    ]})


class TaskDefinitionStatus(Status):
    task_type: str | None = Field(None, description="The task type name the engine uses.")
    ready: int | None = Field(None, description="Tasks queued and ready to lease.")
    in_flight: int | None = Field(None, description="Tasks leased to workers.")
    delayed: int | None = Field(None, description="Tasks waiting out a retry backoff.")
    pollers: list[Poller] | None = None


class Poller(Spec):
    worker_id: str
    last_poll_time: str


TaskDefinitionStatus.model_rebuild()
