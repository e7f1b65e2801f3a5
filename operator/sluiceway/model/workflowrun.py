"""WorkflowRun: the kubectl front door to one execution. Creating it starts a
run in PostgreSQL; the operator mirrors progress into its status, coalesced."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field

from sluiceway.model.common import EngineName, Spec, Status
from sluiceway.model.execution import MAX_TASK_OVERRIDES, TaskOverride, TaskReferenceKey


class RunPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"
    TERMINATED = "Terminated"
    REFUSED = "Refused"

    def is_terminal(self) -> bool:
        return self not in (RunPhase.PENDING, RunPhase.RUNNING)


class WorkflowRunSpec(Spec):
    """One execution of a Workflow, started by creating this object."""

    workflow: EngineName = Field(description="Name of the Workflow to run (its spec.name or metadata.name).")
    version: int | None = Field(None, ge=1, description="Pinned Workflow version; the latest when unset.")
    input: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    correlation_id: str | None = Field(None, max_length=256)
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
                {"rule": "self == oldSelf", "message": "spec is immutable: create a new WorkflowRun to run again"}
            ]
        },
    )


class TaskCounts(Spec):
    scheduled: int = 0
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    total: int = 0


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
