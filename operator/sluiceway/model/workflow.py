"""Workflow: a definition of tasks and their order, plus the run-level gates.

Runs pin the definition version (the object's `metadata.generation`) they
started with. Inside a workflow task only `retryCount` and `optional` override
the TaskDefinition: policy belongs on the definition, so `retryLogic` and
friends written here are dropped, as the reference says.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, model_validator

from sluiceway.model.attributes import MAX_DECLARED, SearchAttribute
from sluiceway.model.common import EngineName, SetOf, Spec, Status

REF_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$"
TaskReference = Annotated[str, Field(pattern=REF_PATTERN)]
ParameterName = Annotated[str, Field(min_length=1, max_length=256)]


class Executor(StrEnum):
    """Who runs a task. Stored on every task row when it is inserted, so that
    SQL selects by it and no list of task types is written anywhere else."""

    WORKER = "worker"  # leased by worker pods over the task protocol
    SYSTEM = "system"  # leased and run by the operator's own system-task runner
    ENGINE = "engine"  # decided by the engine itself (control flow, waits, child runs); never leased

    def leases(self) -> bool:
        """Worker and system tasks are leased, fenced by an epoch, and count
        against maxConcurrentTasks; engine tasks are none of these."""
        return self is not Executor.ENGINE


class TaskType(StrEnum):
    SIMPLE = "SIMPLE"
    FORK_JOIN = "FORK_JOIN"
    FORK_JOIN_DYNAMIC = "FORK_JOIN_DYNAMIC"
    JOIN = "JOIN"
    SWITCH = "SWITCH"
    WAIT = "WAIT"
    INLINE = "INLINE"
    TERMINATE = "TERMINATE"
    SUB_WORKFLOW = "SUB_WORKFLOW"
    HTTP = "HTTP"
    HTTP_POLL = "HTTP_POLL"

    def executor(self) -> Executor:
        return _EXECUTORS.get(self, Executor.ENGINE)

    def waits_for_signal(self) -> bool:
        """An engine task that a reported result may end (as a leased task's
        result ends its attempt): a WAIT, which its timer or a signal ends."""
        return self is TaskType.WAIT

    def polls(self) -> bool:
        """A system task that goes back to its queue between polls (a snooze,
        as a worker may ask for with callbackAfterSeconds)."""
        return self is TaskType.HTTP_POLL

    def counts_in_retry_budget(self) -> bool:
        """Its attempts count in its task type's retry-budget window: work
        that runs somewhere else (a leased task, a child run)."""
        return self.executor().leases() or self is TaskType.SUB_WORKFLOW


# Every type not listed is run by the engine.
_EXECUTORS = {
    TaskType.SIMPLE: Executor.WORKER,
    TaskType.HTTP: Executor.SYSTEM,
    TaskType.HTTP_POLL: Executor.SYSTEM,
}


class EvaluatorType(StrEnum):
    VALUE_PARAM = "value-param"
    CEL = "cel"


class SubWorkflowParam(Spec):
    name: EngineName
    version: int | None = Field(None, ge=1, description="Pinned version; the latest when unset.")


class WorkflowTask(Spec):
    name: EngineName = Field(description="The task type for SIMPLE tasks; a label for system tasks.")
    task_reference_name: str = Field(
        pattern=REF_PATTERN,
        description="Unique within the workflow; outputs are read as ${ref.output.x}.",
    )
    type: TaskType = TaskType.SIMPLE
    description: str = Field("", max_length=1024)
    input_parameters: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    optional: bool = Field(False, description="Absorb the failure after retries: COMPLETED_WITH_ERRORS.")
    retry_count: int | None = Field(None, ge=0, le=100, description="Overrides the TaskDefinition's retryCount.")
    # FORK_JOIN
    fork_tasks: list[list[WorkflowTask]] | None = None
    # JOIN
    join_on: SetOf[TaskReference] | None = Field(
        None, max_length=1000, description="References of the tasks to wait for, each listed once."
    )
    # SWITCH
    evaluator_type: EvaluatorType | None = None
    expression: str | None = Field(None, max_length=4096)
    decision_cases: dict[str, list[WorkflowTask]] | None = None
    default_case: list[WorkflowTask] | None = None
    # SUB_WORKFLOW
    sub_workflow_param: SubWorkflowParam | None = None

    @model_validator(mode="after")
    def _shape_matches_type(self) -> WorkflowTask:
        t = self.type
        if t is TaskType.FORK_JOIN and not self.fork_tasks:
            raise ValueError(f"{self.task_reference_name}: FORK_JOIN needs forkTasks")
        if t is TaskType.SWITCH:
            if not self.expression:
                raise ValueError(f"{self.task_reference_name}: SWITCH needs an expression")
            if self.decision_cases is None and self.default_case is None:
                raise ValueError(f"{self.task_reference_name}: SWITCH needs decisionCases or defaultCase")
        if t is TaskType.SUB_WORKFLOW and self.sub_workflow_param is None:
            raise ValueError(f"{self.task_reference_name}: SUB_WORKFLOW needs subWorkflowParam")
        if t is TaskType.INLINE:
            evaluator = self.input_parameters.get("evaluatorType", "cel")
            if evaluator != "cel":
                raise ValueError(
                    f"{self.task_reference_name}: INLINE evaluatorType {evaluator!r} is not supported; use 'cel'"
                )
            if not isinstance(self.input_parameters.get("expression"), str):
                raise ValueError(f"{self.task_reference_name}: INLINE needs inputParameters.expression")
        return self

    def children(self) -> list[list[WorkflowTask]]:
        """Every nested task list, in declaration order."""
        lists: list[list[WorkflowTask]] = list(self.fork_tasks or [])
        lists.extend((self.decision_cases or {}).values())
        if self.default_case:
            lists.append(self.default_case)
        return lists


class RateLimitConfig(Spec):
    rate_limit_key: str = Field(
        min_length=1,
        max_length=1024,
        description="An expression such as ${workflow.input.tenantId}; runs sharing the resolved key are limited.",
    )
    concurrent_exec_limit: int = Field(ge=1, le=1_000_000, description="Runs per key at once.")


class WorkflowTimeoutPolicy(StrEnum):
    TIME_OUT_WF = "TIME_OUT_WF"
    ALERT_ONLY = "ALERT_ONLY"


class ActiveRunsPolicy(StrEnum):
    """What deleting a Workflow does to its active runs."""

    FINISH = "Finish"
    TERMINATE = "Terminate"


MAX_RETENTION_SECONDS = 10 * 31_536_000


class Retention(Spec):
    """How long finished runs are kept, with their tasks and logs, before they are deleted."""

    seconds: int | None = Field(
        None,
        ge=0,
        le=MAX_RETENTION_SECONDS,
        description="Seconds after a run ends; 0 keeps runs for ever. Unset: the operator's default "
        "(SLUICEWAY_RETENTION, 30 days unless set).",
    )
    failed_seconds: int | None = Field(
        None,
        ge=0,
        le=MAX_RETENTION_SECONDS,
        description="For runs that FAILED, TIMED_OUT or were TERMINATED, if they should be kept longer "
        "(or shorter); `seconds` when unset.",
    )


class WorkflowSpec(Spec):
    """A workflow definition: tasks and their order, and the run-level gates."""

    name: EngineName | None = Field(
        None,
        description="Workflow name used to start runs. Defaults to metadata.name.",
    )
    description: str = Field("", max_length=4096)
    tasks: list[WorkflowTask] = Field(min_length=1, max_length=1000)
    input_parameters: SetOf[ParameterName] = Field(
        default_factory=list, max_length=1000, description="Documented input names, each listed once."
    )
    output_parameters: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    timeout_seconds: int = Field(0, ge=0, le=31_536_000, description="Whole-run deadline; 0 is none.")
    timeout_policy: WorkflowTimeoutPolicy = Field(
        WorkflowTimeoutPolicy.TIME_OUT_WF,
        description="Accepted and stored, not consulted: a whole-run timeout always ends the run.",
    )
    failure_workflow: EngineName | None = Field(
        None,
        description="Started on failure or timeout with the failed run's id and reason.",
    )
    max_concurrent_tasks: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Scheduled worker tasks inside one run; 0 is unlimited.",
    )
    max_concurrent_executions: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Runs of this workflow at once; over it a start is refused. 0 is unlimited.",
    )
    rate_limit_config: RateLimitConfig | None = None
    sla_seconds: int = Field(
        0,
        ge=0,
        le=31_536_000,
        description="Soft SLA: a run past it is flagged and counted, nothing more.",
    )
    search_attributes: list[SearchAttribute] = Field(
        default_factory=list,
        max_length=MAX_DECLARED,
        description="Typed attributes runs are found by (`sluiceway runs list --search-attr tenant=acme`).",
    )
    retention: Retention | None = Field(None, description="How long finished runs are kept.")
    active_runs_policy: ActiveRunsPolicy = Field(
        ActiveRunsPolicy.FINISH,
        description="On deletion of the Workflow: let active runs Finish (default) or Terminate them.",
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.slaSeconds) || !has(self.timeoutSeconds) || self.slaSeconds == 0"
                    " || self.timeoutSeconds == 0 || self.slaSeconds <= self.timeoutSeconds",
                    "message": "slaSeconds must not exceed timeoutSeconds: the hard timeout would always fire first",
                    "fieldPath": ".slaSeconds",
                }
            ]
        },
    )

    @model_validator(mode="after")
    def _references_are_unique(self) -> WorkflowSpec:
        seen: set[str] = set()
        for task in iter_tasks(self.tasks):
            if task.task_reference_name in seen:
                raise ValueError(f"taskReferenceName {task.task_reference_name!r} is used twice")
            seen.add(task.task_reference_name)
        names = [a.name for a in self.search_attributes]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"searchAttributes: {', '.join(repeated)} declared more than once")
        return self

    def attribute(self, name: str) -> SearchAttribute | None:
        return next((a for a in self.search_attributes if a.name == name), None)


def iter_tasks(tasks: list[WorkflowTask]) -> list[WorkflowTask]:
    """Every task of a graph, depth first, in declaration order."""
    found: list[WorkflowTask] = []
    for task in tasks:
        found.append(task)
        for child in task.children():
            found.extend(iter_tasks(child))
    return found


class WorkflowStatus(Status):
    workflow_name: str | None = None
    version: int | None = Field(None, description="The version new runs start on.")
    active_runs: int | None = None
