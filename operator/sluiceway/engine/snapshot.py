"""What the decider sees of one run."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluiceway.controls.budget import BudgetWindow
from sluiceway.controls.policy import OperatorDefaults, TaskPolicy
from sluiceway.controls.priority import DEFAULT as DEFAULT_PRIORITY
from sluiceway.model.execution import DelaySource, RunStatus, TaskOverride, TaskStatus
from sluiceway.model.taskdefinition import RetryKind
from sluiceway.model.workflow import TaskType, WorkflowSpec


@dataclass(frozen=True)
class TaskRow:
    """The latest attempt of one task reference."""

    id: str
    ref: str
    type: TaskType
    name: str
    status: TaskStatus
    attempt: int
    input: Mapping[str, Any] = field(default_factory=dict)
    output: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""
    retry_after_seconds: float | None = None
    schedule_to_close_at: datetime.datetime | None = None
    first_scheduled_at: datetime.datetime | None = None
    retry_kind: RetryKind | None = None  # the verdict the failing worker gave
    delay_source: DelaySource = DelaySource.HINT
    loop: str | None = None  # the DO_WHILE and iteration it belongs to
    iteration: int | None = None


@dataclass(frozen=True)
class RunLinks:
    """What ties a run to others, which its end must tell or release."""

    id: str
    workflow_name: str
    parent_run_id: str | None = None  # set with parent_task_id for a SUB_WORKFLOW's child
    parent_task_id: str | None = None
    admission_key: str | None = None  # its key under rateLimitConfig, if any
    awaiting_admission: bool = False
    admission_limit: int | None = None  # rateLimitConfig.concurrentExecLimit; None when unknown
    failure_workflow: str | None = None


@dataclass(frozen=True)
class RunSnapshot:
    id: str
    namespace: str
    workflow_name: str
    version: int
    workflow: WorkflowSpec
    status: RunStatus
    input: Mapping[str, Any]
    tasks: Mapping[str, TaskRow]  # by reference name
    correlation_id: str | None = None
    evaluated: bool = False  # has the first evaluation happened?
    timeout_at: datetime.datetime | None = None
    terminate_requested: str | None = None
    awaiting_admission: bool = False
    policies: Mapping[str, TaskPolicy] = field(default_factory=dict)  # by task type, resolved once (store.policies)
    defaults: OperatorDefaults = field(default_factory=OperatorDefaults)  # for a type not in `policies`
    budgets: Mapping[str, BudgetWindow] = field(default_factory=dict)  # by task type
    parent_run_id: str | None = None
    parent_task_id: str | None = None
    admission_key: str | None = None
    paused: bool = False  # schedules nothing new while set; only a terminate request acts
    # Retry and rerun start tasks afresh: a ref's attempts up to this number are
    # history, invisible to the walk, and its next attempt is numbered after them.
    superseded: Mapping[str, int] = field(default_factory=dict)
    input_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # rerun's new input, by ref
    task_overrides: Mapping[str, TaskOverride] = field(default_factory=dict)  # the start's, by task reference
    chain_id: str | None = None  # the chain's first run; None (or its own id) for a first run
    previous_run_id: str | None = None  # the run this one continues as new, if any
    chain_deadline_at: datetime.datetime | None = None  # the chain's absolute deadline: never moved by a pause
    priority: int = DEFAULT_PRIORITY  # the run's (controls.priority): its tasks' unless one sets its own

    def links(self) -> RunLinks:
        config = self.workflow.rate_limit_config
        return RunLinks(
            id=self.id,
            workflow_name=self.workflow_name,
            parent_run_id=self.parent_run_id,
            parent_task_id=self.parent_task_id,
            admission_key=self.admission_key,
            awaiting_admission=self.awaiting_admission,
            admission_limit=config.concurrent_exec_limit if config else None,
            failure_workflow=self.workflow.failure_workflow,
        )
