"""WorkflowRun: the kubectl front door to one execution. Creating it starts a
run in PostgreSQL; the operator mirrors progress into its status, coalesced."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field

from sluiceway.model.attributes import MAX_PER_RUN, AttributeName
from sluiceway.model.common import EngineName, Spec, Status
from sluiceway.model.execution import MAX_TASK_OVERRIDES, TaskOverride, TaskReferenceKey
from sluiceway.model.workflow import MAX_RETENTION_SECONDS, RUN_REF_PATTERN


class RunPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    PAUSED = "Paused"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"
    TERMINATED = "Terminated"
    REFUSED = "Refused"

    def is_terminal(self) -> bool:
        return self not in (RunPhase.PENDING, RunPhase.RUNNING, RunPhase.PAUSED)


class RunRetry(Spec):
    """Ask for one retry: the operator acts once per generation, when the
    run has ended without completing, and reports the outcome in
    `status.retry`."""

    generation: int = Field(ge=1, le=1_000_000, description="Raise it to ask for another retry.")
    from_task: str | None = Field(
        None,
        pattern=RUN_REF_PATTERN,
        description="Rerun from this task (it and every task after it start afresh) instead of retrying "
        "the failed tasks; this also reruns a completed run.",
    )
    input: dict[str, Any] | None = Field(
        None,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="With fromTask: merged over that task's resolved inputParameters.",
    )


class WorkflowRunSpec(Spec):
    """One execution of a Workflow, started by creating this object."""

    workflow: EngineName = Field(description="Name of the Workflow to run (its spec.name or metadata.name).")
    version: int | None = Field(None, ge=1, description="Pinned Workflow version; the latest when unset.")
    input: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    correlation_id: str | None = Field(None, max_length=256)
    search_attributes: dict[AttributeName, Any] = Field(
        default_factory=dict,
        max_length=MAX_PER_RUN,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="Values of the attributes the workflow declares; the object's labels are added as keywords.",
    )
    sla_seconds: int | None = Field(
        None, ge=0, le=31_536_000, description="This run's soft SLA (0: none); the workflow's when unset."
    )
    priority: int | None = Field(
        None, ge=1, le=5, description="1 (most urgent) to 5; the workflow's (else 3) when unset (docs/priority.md)."
    )
    paused: bool = Field(False, description="True pauses the run, false resumes it.")
    retry: RunRetry | None = None
    ttl_seconds_after_finished: int | None = Field(
        None,
        ge=0,
        le=MAX_RETENTION_SECONDS,
        description="Delete this object, and the run's history, this long after the run ends.",
    )
    task_overrides: dict[TaskReferenceKey, TaskOverride] | None = Field(
        None,
        max_length=MAX_TASK_OVERRIDES,
        description="Per task reference: retryCount and startToCloseTimeout for this run only, the highest "
        "precedence. A reference the workflow does not have refuses the run (phase Failed).",
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": " && ".join(
                        f"(has(self.{f}) == has(oldSelf.{f}) && (!has(self.{f}) || self.{f} == oldSelf.{f}))"
                        for f in ("workflow", "version", "input", "correlationId", "searchAttributes", "slaSeconds")
                    ),
                    "message": "only paused, retry and ttlSecondsAfterFinished may change: create a new "
                    "WorkflowRun to run something else",
                }
            ]
        },
    )


class RetryStatus(Spec):
    generation: int
    outcome: str = Field(description="Retried, or Refused (the message says why: the run had not ended, ...).")
    message: str = ""
    time: str | None = None


class TaskCounts(Spec):
    scheduled: int = 0
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    total: int = 0


# The API server's answer to a status write older than the one it holds.
STALE_MIRROR = "mirrorSeq must not decrease: a newer status of this run is already written"


class WorkflowRunStatus(Status):
    phase: RunPhase | None = None
    execution_id: str | None = None
    workflow_version: int | None = None
    awaiting_admission: bool | None = None
    reason_for_incompletion: str | None = None
    control: str | None = Field(None, description="The control that refused or holds the run.")
    refusal: dict[str, Any] | None = Field(
        None,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="The refusal body: {quota, limit, current, retryAfterSeconds} for a quota.",
    )
    tasks: TaskCounts | None = None
    start_time: str | None = None
    end_time: str | None = None
    iterations: dict[str, int] | None = Field(
        None, description="Each running or finished DO_WHILE by reference: the iteration it is on (or ended at)."
    )
    quarantined_at: str | None = Field(
        None,
        description="Set while the decider cannot evaluate the run: it is set aside (control quarantine, the "
        "reason in reasonForIncompletion) until it is deleted or terminated, or released by forcing an evaluation.",
    )
    output: dict[str, Any] | None = Field(None, json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})
    paused_at: str | None = None
    sla_breached_at: str | None = None
    retry: RetryStatus | None = Field(None, description="What the operator did with the last spec.retry.")
    mirror_seq: int | None = Field(
        None,
        ge=0,
        description="The version of the run this status shows. It never goes back, so a replica that lost its "
        "leadership while paused cannot overwrite a newer status with an older one.",
    )

    # A transition rule (evaluated by the API server against the stored object)
    # fences the status mirror: a write carrying an older mirrorSeq is refused.
    model_config = ConfigDict(
        **Status.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(oldSelf.mirrorSeq) || (has(self.mirrorSeq) && self.mirrorSeq >= oldSelf.mirrorSeq)",
                    "message": STALE_MIRROR,
                    "fieldPath": ".mirrorSeq",
                },
            ]
        },
    )


class RetryOutcome(StrEnum):
    RETRIED = "Retried"
    REFUSED = "Refused"
