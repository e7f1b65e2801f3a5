"""The custom resources: their names and the models of spec and status."""

from __future__ import annotations

from dataclasses import dataclass

from sluiceway.model.common import Spec, Status
from sluiceway.model.quota import QuotaSpec, QuotaStatus
from sluiceway.model.schedule import ScheduleSpec, ScheduleStatus
from sluiceway.model.semaphore import SemaphoreSpec, SemaphoreStatus
from sluiceway.model.taskdefinition import TaskDefinitionSpec, TaskDefinitionStatus
from sluiceway.model.trigger import TriggerSpec, TriggerStatus
from sluiceway.model.webhook import WebhookSpec, WebhookStatus
from sluiceway.model.workflow import WorkflowSpec, WorkflowStatus
from sluiceway.model.workflowrun import WorkflowRunSpec, WorkflowRunStatus

CATEGORY = "sluiceway"


@dataclass(frozen=True)
class ResourceKind:
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    spec: type[Spec]
    status: type[Status]


TASK_DEFINITION = ResourceKind(
    "TaskDefinition",
    "taskdefinitions",
    "taskdefinition",
    ("td", "taskdef"),
    TaskDefinitionSpec,
    TaskDefinitionStatus,
)
WORKFLOW = ResourceKind("Workflow", "workflows", "workflow", ("wf",), WorkflowSpec, WorkflowStatus)
WORKFLOW_RUN = ResourceKind(
    "WorkflowRun",
    "workflowruns",
    "workflowrun",
    ("wfr", "run"),
    WorkflowRunSpec,
    WorkflowRunStatus,
)
SEMAPHORE = ResourceKind("Semaphore", "semaphores", "semaphore", ("sem",), SemaphoreSpec, SemaphoreStatus)
QUOTA = ResourceKind("Quota", "quotas", "quota", ("swquota",), QuotaSpec, QuotaStatus)
WEBHOOK = ResourceKind("Webhook", "webhooks", "webhook", ("wh",), WebhookSpec, WebhookStatus)

SCHEDULE = ResourceKind("Schedule", "schedules", "schedule", ("sched", "swsched"), ScheduleSpec, ScheduleStatus)
TRIGGER = ResourceKind("Trigger", "triggers", "trigger", ("swtrigger",), TriggerSpec, TriggerStatus)

ALL_KINDS: tuple[ResourceKind, ...] = (
    TASK_DEFINITION,
    WORKFLOW,
    WORKFLOW_RUN,
    SEMAPHORE,
    QUOTA,
    SCHEDULE,
    WEBHOOK,
    TRIGGER,
)
