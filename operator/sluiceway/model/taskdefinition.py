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
from typing import Annotated

from pydantic import ConfigDict, Field, field_validator, model_validator

from sluiceway.model.common import EngineName, SetOf, Spec, Status


class RetryLogic(StrEnum):
    FIXED = "FIXED"
    LINEAR_BACKOFF = "LINEAR_BACKOFF"
    EXPONENTIAL_BACKOFF = "EXPONENTIAL_BACKOFF"


class RetryKind(StrEnum):
    """How failures are retried (the TaskQ reference's retry kinds)."""

    TRANSIENT = "transient"  # up to retryCount retries
    INDEFINITE = "indefinite"  # no attempt ceiling: only the deadline ends it
    NON_RETRYABLE = "nonRetryable"  # the first failure is final

    def has_ceiling(self) -> bool:
        return self is not RetryKind.INDEFINITE


class TimeoutPolicy(StrEnum):
    TIME_OUT_WF = "TIME_OUT_WF"
    RETRY = "RETRY"
    ALERT_ONLY = "ALERT_ONLY"


_SECONDS = "Seconds; 0 arms no timer."

# Kubernetes' own shapes, so a bad value is refused by `kubectl apply`, not by
# the Deployment the operator writes later.
_ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[str, Field(pattern=_QUANTITY, max_length=64)]
ResourceName = Annotated[str, Field(min_length=1, max_length=253)]
Argument = Annotated[str, Field(max_length=32_768)]
ErrorPattern = Annotated[str, Field(min_length=1, max_length=1024)]


class EnvVar(Spec):
    """One environment variable of the worker container."""

    name: str = Field(
        pattern=_ENV_NAME,
        min_length=1,
        max_length=256,
        description="Variable name; a name the operator injects (SLUICEWAY_URL, ...) overrides it.",
    )
    value: str = Field("", max_length=32_768, description="Literal value. Default empty.")


class WorkerResources(Spec):
    """Compute resources of the worker container, as in a Pod's `resources`."""

    requests: dict[ResourceName, Quantity] | None = Field(
        None,
        max_length=32,
        description="Minimum resources, e.g. {cpu: 250m, memory: 256Mi}. Quantities are strings.",
    )
    limits: dict[ResourceName, Quantity] | None = Field(
        None,
        max_length=32,
        description="Maximum resources, e.g. {memory: 512Mi}. Quantities are strings.",
    )


class WorkerAutoscaling(Spec):
    """Replicas follow queue depth, bounded by the gates of the task type (docs/worker-pods.md)."""

    min_replicas: int = Field(
        1,
        ge=0,
        le=1000,
        description="Fewest replicas, even with an empty queue; 0 scales to zero. Default 1.",
    )
    max_replicas: int = Field(
        ge=1,
        le=1000,
        description="Most replicas: at least minReplicas (else 422 naming maxReplicas). "
        "The operator also never runs more than the gates can admit: "
        "ceil(concurrentExecLimit / concurrency) and ceil(smallest semaphore's permits / concurrency).",
    )
    target_tasks_per_replica: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Ready plus in-flight tasks one replica should take; desired replicas are "
        "ceil((ready + inFlight) / targetTasksPerReplica). Default: concurrency.",
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.minReplicas) || self.maxReplicas >= self.minReplicas",
                    "message": "maxReplicas must be at least minReplicas",
                    "fieldPath": ".maxReplicas",
                },
            ]
        },
    )

    @model_validator(mode="after")
    def _bounds(self) -> WorkerAutoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError("maxReplicas must be at least minReplicas")
        return self


class WorkerPodsSpec(Spec):
    """A Deployment of worker pods for this task type, run by the operator."""

    image: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="Container image of the worker. Default: the operator's SLUICEWAY_WORKER_IMAGE.",
    )
    command: list[Argument] | None = Field(
        None,
        max_length=256,
        description="Entrypoint override; unset runs the image's own entrypoint.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    args: list[Argument] | None = Field(
        None,
        max_length=256,
        description="Arguments to the entrypoint, e.g. [worker, app.workers, --concurrency, '4'].",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    replicas: int = Field(
        1,
        ge=0,
        le=1000,
        description="Number of worker pods when autoscaling is not set (ignored when it is). Default 1.",
    )
    env: list[EnvVar] | None = Field(
        None,
        max_length=256,
        description="Extra environment variables of the worker container, unique by name (else 422 naming env).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    resources: WorkerResources | None = Field(
        None,
        description="CPU and memory requests and limits of the worker container.",
    )
    service_account_name: str = Field(
        "default",
        pattern=_DNS_SUBDOMAIN,
        min_length=1,
        max_length=253,
        description="ServiceAccount the pods run as; its projected token is the worker's credential. "
        "Default `default`.",
    )
    concurrency: int = Field(
        1,
        ge=1,
        le=10_000,
        description="Tasks one pod runs at once; autoscaling divides the gate ceilings by it. Default 1.",
    )
    autoscaling: WorkerAutoscaling | None = Field(
        None,
        description="Scale replicas by queue depth between minReplicas and maxReplicas.",
    )

    @field_validator("env")
    @classmethod
    def _unique_names(cls, env: list[EnvVar] | None) -> list[EnvVar] | None:
        names = [e.name for e in env or ()]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate environment variable names: {', '.join(duplicates)}")
        return env

    def target_tasks_per_replica(self) -> int:
        """Tasks per replica the autoscaler aims at: its own setting, else `concurrency`."""
        if self.autoscaling is not None and self.autoscaling.target_tasks_per_replica is not None:
            return self.autoscaling.target_tasks_per_replica
        return self.concurrency


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
        None,
        ge=0,
        le=100,
        description="Attempts after the first; 0 runs once. Default 3.",
    )
    retry_logic: RetryLogic | None = Field(
        None,
        description="FIXED, LINEAR_BACKOFF or EXPONENTIAL_BACKOFF. Default EXPONENTIAL_BACKOFF.",
    )
    retry_delay_seconds: float | None = Field(
        None,
        ge=0,
        le=31_536_000,
        description="The base delay in seconds. Default 1.",
    )
    backoff_scale_factor: float | None = Field(
        None,
        ge=1,
        le=100,
        description="Growth factor of the two backoff shapes. Default 2.",
    )
    max_retry_delay_seconds: float | None = Field(
        None,
        ge=0,
        le=31_536_000,
        description="Hard ceiling on any computed delay, applied before and after jitter. Default 3600.",
    )
    jitter: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Proportional randomisation of the delay (0.2 is ±20%). Default 0.2.",
    )
    retry_budget: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Maximum share of the last 300 s of executions that may be retries; "
        "never trips under 20 executions; 1 disables. Default 0.3.",
    )
    non_retryable_errors: SetOf[ErrorPattern] | None = Field(
        None,
        max_length=100,
        description="Substrings of a failure reason that must never be retried, each listed once.",
    )
    retry_kind: RetryKind | None = Field(
        None,
        description="transient (default): at most retryCount retries. indefinite: retry on the backoff curve with "
        "no attempt ceiling (and outside the retry budget) until scheduleToCloseTimeout or timeBudgetSeconds. "
        "nonRetryable: the first failure is final.",
    )
    time_budget_seconds: int | None = Field(
        None,
        ge=1,
        le=31_536_000,
        description="indefinite only: the task's deadline is its first scheduling plus this budget, computed by "
        "the database when the task is inserted (the earlier of it and scheduleToCloseTimeout wins).",
    )

    # Timeouts --------------------------------------------------------------
    schedule_to_start_timeout: int = Field(
        0,
        ge=0,
        le=31_536_000,
        description=f"Enqueued until leased: a starved queue. {_SECONDS}",
    )
    start_to_close_timeout: int | None = Field(
        None,
        ge=0,
        le=31_536_000,
        description=f"Leased until terminal: a slow or wedged worker. {_SECONDS} Default 0.",
    )
    timeout_seconds: int = Field(
        0,
        ge=0,
        le=31_536_000,
        description=f"Scheduled through to terminal: the total budget of one attempt. {_SECONDS}",
    )
    heartbeat_timeout: int = Field(
        0,
        ge=0,
        le=31_536_000,
        description=f"Longest gap between heartbeats of a leased task. {_SECONDS}",
    )
    schedule_to_close_timeout: int = Field(
        0,
        ge=0,
        le=31_536_000,
        description="Deadline across all attempts and backoff sleeps; a retry that would land past it "
        f"fails the task with DeadlineExceeded. {_SECONDS}",
    )
    response_timeout_seconds: int = Field(
        3600,
        ge=1,
        le=31_536_000,
        description="Lease duration; a heartbeat renews it. Default 3600.",
    )
    poll_timeout_seconds: int = Field(
        30,
        ge=0,
        le=300,
        description="How long the server may hold a worker's poll open. Default 30.",
    )
    timeout_policy: TimeoutPolicy = Field(
        TimeoutPolicy.TIME_OUT_WF,
        description="What a missed task deadline means: TIME_OUT_WF (default), RETRY or ALERT_ONLY.",
    )

    # Gates -----------------------------------------------------------------
    concurrent_exec_limit: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Cap on in-flight tasks of this type across every run, enforced at dequeue; 0 is unlimited.",
    )
    rate_limit_per_frequency: int = Field(
        0,
        ge=0,
        le=100_000_000,
        description="Dispatches allowed per fixed window of rateLimitFrequencySeconds; 0 is unlimited.",
    )
    rate_limit_frequency_seconds: int = Field(
        1,
        ge=1,
        le=86_400,
        description="Size of the fixed rate-limit window in seconds. Default 1.",
    )
    semaphores: SetOf[EngineName] = Field(
        default_factory=list,
        max_length=16,
        description="Named semaphores a lease must acquire, all or nothing, each listed once. "
        "An unconfigured one gates nothing.",
    )

    # Worker pods ------------------------------------------------------------
    workers: WorkerPodsSpec | None = Field(
        None,
        description="Worker pods the operator runs for this task type, as a Deployment it owns.",
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
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
            ]
        },
    )


class TaskDefinitionStatus(Status):
    task_type: str | None = Field(None, description="The task type name the engine uses.")
    ready: int | None = Field(None, description="Tasks queued and ready to lease.")
    in_flight: int | None = Field(None, description="Tasks leased to workers.")
    delayed: int | None = Field(None, description="Tasks waiting out a retry backoff.")
    pollers: list[Poller] | None = None
    workers: WorkersStatus | None = Field(None, description="The worker Deployment, when spec.workers is set.")


class WorkersStatus(Spec):
    deployment: str | None = Field(None, description="Name of the worker Deployment.")
    image: str | None = Field(None, description="Image the worker pods run.")
    desired_replicas: int | None = Field(None, description="Replicas the operator asks for.")
    replicas: int | None = Field(None, description="Pods of the Deployment.")
    updated_replicas: int | None = Field(None, description="Pods on the current pod template.")
    ready_replicas: int | None = Field(None, description="Pods ready.")


class Poller(Spec):
    worker_id: str
    last_poll_time: str


TaskDefinitionStatus.model_rebuild()
