"""Statuses of runs and tasks, and the payloads of the execution API and the
worker protocol."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, model_validator

from sluiceway.model.common import EngineName, Spec

TaskId = Annotated[
    str,
    Field(
        pattern=r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$",
        description="A task id, as leased",
    ),
]


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    TERMINATED = "TERMINATED"

    def is_terminal(self) -> bool:
        return self is not RunStatus.RUNNING


class TaskStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    COMPLETED_WITH_ERRORS = "COMPLETED_WITH_ERRORS"
    FAILED = "FAILED"
    FAILED_WITH_TERMINAL_ERROR = "FAILED_WITH_TERMINAL_ERROR"
    TIMED_OUT = "TIMED_OUT"
    CANCELED = "CANCELED"
    SKIPPED = "SKIPPED"

    def is_terminal(self) -> bool:
        return self not in (TaskStatus.SCHEDULED, TaskStatus.IN_PROGRESS)

    def is_successful(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.COMPLETED_WITH_ERRORS, TaskStatus.SKIPPED)

    def is_failure(self) -> bool:
        return self in (TaskStatus.FAILED, TaskStatus.FAILED_WITH_TERMINAL_ERROR, TaskStatus.TIMED_OUT)


# --- Starting runs ------------------------------------------------------------


class StartRequest(Spec):
    name: EngineName = Field(description="The workflow to run.")
    version: int | None = Field(None, ge=1, description="Pinned version; the latest when unset.")
    input: dict[str, Any] = Field(default_factory=dict)
    correlation_id: str | None = Field(None, max_length=256)


class StartResponse(Spec):
    id: str
    status: RunStatus
    awaiting_admission: bool = False


class TerminateRequest(Spec):
    reason: str = Field("terminated by request", max_length=1024)


# --- The worker protocol ------------------------------------------------------


class PollRequest(Spec):
    task_types: list[EngineName] = Field(min_length=1, max_length=64, description="Queues to lease from.")
    worker_id: str = Field(min_length=1, max_length=256, description="Stable identity of the polling worker.")
    count: int = Field(1, ge=1, le=1000, description="Most tasks to lease in one response.")
    poll_timeout_seconds: float | None = Field(
        None,
        ge=0,
        le=300,
        description="How long to hold the poll open when nothing is ready; the task type's "
        "pollTimeoutSeconds (default 30) when unset.",
    )


class LeasedTask(Spec):
    task_id: str
    epoch: int = Field(description="Fences this lease: results and heartbeats must carry it.")
    task_type: str
    execution_id: str
    reference_name: str
    attempt: int
    input: dict[str, Any]
    response_timeout_seconds: int
    heartbeat_timeout_seconds: int
    start_to_close_timeout_seconds: int


class PollResponse(Spec):
    tasks: list[LeasedTask]


class ResultStatus(StrEnum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_WITH_TERMINAL_ERROR = "FAILED_WITH_TERMINAL_ERROR"
    IN_PROGRESS = "IN_PROGRESS"


class TaskResult(Spec):
    task_id: TaskId
    epoch: int
    status: ResultStatus
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field("", max_length=8192, description="Why it failed; matched against nonRetryableErrors.")
    retry_after_seconds: float | None = Field(
        None,
        ge=0,
        description="FAILED only: retry after exactly this delay (a server's Retry-After), "
        "still spending an attempt; clamped by the operator's maxRetryBackoff.",
    )
    callback_after_seconds: float | None = Field(
        None,
        ge=0,
        le=31_536_000,
        description="IN_PROGRESS only: snooze; hand the task back and lease it again after this delay "
        "without spending an attempt.",
    )


class ResultBatch(Spec):
    results: list[TaskResult] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _one_result_per_task(self) -> ResultBatch:
        _refuse_duplicates([r.task_id for r in self.results])
        return self


class ItemOutcome(Spec):
    task_id: str
    code: int = Field(description="200 accepted, 404 unknown task, 409 stale epoch or task no longer leased.")
    error: str | None = None


class ResultBatchResponse(Spec):
    results: list[ItemOutcome]


class Heartbeat(Spec):
    task_id: TaskId
    epoch: int


class HeartbeatBatch(Spec):
    heartbeats: list[Heartbeat] = Field(min_length=1, max_length=1000)

    @model_validator(mode="after")
    def _one_beat_per_task(self) -> HeartbeatBatch:
        _refuse_duplicates([b.task_id for b in self.heartbeats])
        return self


def _refuse_duplicates(task_ids: list[str]) -> None:
    seen: set[str] = set()
    for task_id in task_ids:
        if task_id in seen:
            raise ValueError(f"taskId {task_id} appears more than once in one batch")
        seen.add(task_id)


# --- Reading runs -------------------------------------------------------------


class TaskView(Spec):
    task_id: str
    reference_name: str
    task_type: str
    type: str
    status: str
    attempt: int
    reason: str = ""
    worker_id: str | None = None
    scheduled_at: str
    available_at: str
    started_at: str | None = None
    ended_at: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    sub_workflow_id: str | None = None


class ExecutionView(Spec):
    id: str
    namespace: str
    workflow_name: str
    workflow_version: int
    status: RunStatus
    awaiting_admission: bool
    reason_for_incompletion: str = ""
    correlation_id: str | None = None
    parent_workflow_id: str | None = None
    workflow_run: str | None = Field(None, description="The WorkflowRun object that started it, if any.")
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    start_time: str
    end_time: str | None = None
    sla_breached_at: str | None = None
    tasks: list[TaskView] = Field(default_factory=list)
