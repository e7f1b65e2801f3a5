"""What the decider sees of one run."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluiceway.controls.budget import BudgetWindow
from sluiceway.controls.policy import OperatorDefaults, TaskPolicy
from sluiceway.model.execution import RunStatus, TaskStatus
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
