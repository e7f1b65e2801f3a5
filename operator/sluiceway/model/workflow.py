"""Workflow: a definition of tasks and their order, plus the run-level gates.

Runs pin the definition version (the object's `metadata.generation`) they
started with. Inside a workflow task only `retryCount` and `optional` override
the TaskDefinition: policy belongs on the definition, so `retryLogic` and
friends written here are dropped, as the reference says.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationError, model_validator

from sluiceway.model.attributes import MAX_DECLARED, SearchAttribute
from sluiceway.model.common import EngineName, SecretKeyRef, SetOf, Spec, Status
from sluiceway.model.container import ContainerSpec

REF_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$"
TaskReference = Annotated[str, Field(pattern=REF_PATTERN)]
# A task reference as a run holds it: the workflow's, or one a dynamic fork
# spawned from it (`resize__3`).
RUN_REF_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,127}(__[0-9]{1,9})?$"
ParameterName = Annotated[str, Field(min_length=1, max_length=256)]

# A DO_WHILE runs at most this many iterations, whatever it asks: every pass of
# the decider reads the rows a run keeps, and a loop that keeps all of 10,000
# iterations already makes each pass read tens of thousands (keepLastN bounds it).
MAX_ITERATIONS = 10_000
# PULL_WORKFLOW_MESSAGES hands over at most this many messages at once.
MAX_BATCH_SIZE = 1000


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
    DO_WHILE = "DO_WHILE"
    WAIT_FOR_WEBHOOK = "WAIT_FOR_WEBHOOK"
    HUMAN = "HUMAN"
    PULL_WORKFLOW_MESSAGES = "PULL_WORKFLOW_MESSAGES"
    GRPC = "GRPC"
    WEBHOOK = "WEBHOOK"
    CONTINUE_AS_NEW = "CONTINUE_AS_NEW"
    CONTAINER = "CONTAINER"

    def executor(self) -> Executor:
        return _EXECUTORS.get(self, Executor.ENGINE)

    def waits_for_signal(self) -> bool:
        """An engine task that a reported result may end (as a leased task's
        result ends its attempt): a WAIT, which its timer or a signal ends.
        The other waiting types are ended only by their own intake (a
        verified webhook, a person's decision, a run's messages)."""
        return self is TaskType.WAIT

    def waits(self) -> bool:
        """Never dispatched: it waits for a timer, a webhook, a person or a
        message. Only `timeoutSeconds` applies to it, as the reference says:
        the deadlines of dispatch and execution would fire while it
        legitimately waits."""
        return self in _WAITING

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
    TaskType.GRPC: Executor.SYSTEM,
    TaskType.WEBHOOK: Executor.SYSTEM,
    TaskType.CONTAINER: Executor.SYSTEM,
}
_WAITING = frozenset({TaskType.WAIT, TaskType.WAIT_FOR_WEBHOOK, TaskType.HUMAN, TaskType.PULL_WORKFLOW_MESSAGES})


class EvaluatorType(StrEnum):
    VALUE_PARAM = "value-param"
    CEL = "cel"


class SubWorkflowParam(Spec):
    name: EngineName
    version: int | None = Field(None, ge=1, description="Pinned version; the latest when unset.")


_METADATA_KEY = r"^[a-z0-9][a-z0-9_.-]{0,127}$"
_TARGET = r"^[A-Za-z0-9_.:\[\]-]{1,253}:[0-9]{1,5}$"


class GrpcTls(Spec):
    """TLS toward the gRPC server. Without `caSecretRef` the system's trusted roots apply."""

    ca_secret_ref: SecretKeyRef | None = Field(None, description="PEM CA bundle that signs the server's certificate.")
    cert_secret_ref: SecretKeyRef | None = Field(None, description="PEM client certificate, for mutual TLS.")
    key_secret_ref: SecretKeyRef | None = Field(None, description="PEM client key, with certSecretRef.")
    server_name: str | None = Field(
        None, min_length=1, max_length=253, description="The name to verify the server's certificate against."
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.certSecretRef) == has(self.keySecretRef)",
                    "message": "certSecretRef and keySecretRef go together",
                }
            ]
        },
    )

    @model_validator(mode="after")
    def _pair(self) -> GrpcTls:
        if (self.cert_secret_ref is None) != (self.key_secret_ref is None):
            raise ValueError("certSecretRef and keySecretRef go together")
        return self


class GrpcMetadataFromSecret(Spec):
    name: str = Field(pattern=_METADATA_KEY, description="The metadata key (lower case), e.g. `authorization`.")
    secret_ref: SecretKeyRef


class GrpcCall(Spec):
    """A unary gRPC call made by the operator (type GRPC). The request is
    `inputParameters.request` (JSON, mapped onto the method's input message);
    literal metadata is `inputParameters.metadata`."""

    target: str = Field(pattern=_TARGET, description="host:port of the server.")
    service: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_.]{0,252}$",
        description="Fully qualified service name, e.g. `shop.Inventory`; the circuit breaker is keyed by it.",
    )
    method: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", description="Method name, e.g. `Reserve`.")
    deadline_seconds: float = Field(30.0, gt=0, le=3600, description="Deadline of the call. Default 30.")
    tls: GrpcTls | None = Field(None, description="Use TLS; plaintext when unset.")
    metadata_from: list[GrpcMetadataFromSecret] | None = Field(
        None,
        max_length=16,
        description="Metadata read from Secrets labelled sluiceway.dev/secret=true, e.g. a bearer token.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    descriptor_set: str | None = Field(
        None,
        max_length=1_048_576,
        description="A base64 FileDescriptorSet (protoc --descriptor_set_out --include_imports) describing "
        "the service; without it the server's reflection service is asked.",
    )


class WebhookSigning(Spec):
    """How an outgoing WEBHOOK call is signed: HMAC-SHA256 over `timestamp.body`."""

    secret_ref: SecretKeyRef = Field(description="The shared secret, in a Secret labelled sluiceway.dev/secret=true.")


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
    priority: int | None = Field(
        None, ge=1, le=5, description="This task's priority, 1 (most urgent) to 5, over its run's (docs/priority.md)."
    )
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
    # DO_WHILE
    loop_condition: str | None = Field(
        None,
        max_length=4096,
        description="DO_WHILE: CEL checked after each iteration; the loop goes on while it is true. In scope: "
        "`iteration` (1-based), `tasks` (this iteration's tasks by reference), `items`, `item`, `input`, `workflow`.",
    )
    loop_over: list[WorkflowTask] | None = Field(
        None, max_length=100, description="DO_WHILE: the tasks of one iteration, addressed as `ref__N`."
    )
    max_iterations: int | None = Field(
        None,
        ge=1,
        le=MAX_ITERATIONS,
        description=f"DO_WHILE (required): most iterations; reaching it with the condition still true fails the "
        f"task. At most {MAX_ITERATIONS}.",
    )
    keep_last_n: int | None = Field(
        None,
        ge=1,
        le=MAX_ITERATIONS,
        description="DO_WHILE: keep the task rows of the last N iterations only; older ones are summarized in "
        "the loop's output. Default: keep all.",
    )
    # WAIT_FOR_WEBHOOK
    webhook: EngineName | None = Field(
        None,
        description="WAIT_FOR_WEBHOOK (required): the Webhook whose calls may complete it; "
        "`inputParameters.matches` says which calls.",
    )
    # PULL_WORKFLOW_MESSAGES
    batch_size: int | None = Field(
        None, ge=1, le=MAX_BATCH_SIZE, description="PULL_WORKFLOW_MESSAGES: most messages handed over. Default 1."
    )
    # GRPC
    grpc: GrpcCall | None = Field(None, description="GRPC (required): the call to make.")
    # WEBHOOK
    signing: WebhookSigning | None = Field(None, description="WEBHOOK (required): how the callback is signed.")
    # CONTAINER
    container: ContainerSpec | None = Field(
        None, description="CONTAINER (required): the image to run, one pod per attempt (docs/tasks/container.md)."
    )

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.type) || self.type != 'DO_WHILE'"
                    " || (has(self.loopOver) && size(self.loopOver) > 0 && has(self.maxIterations))",
                    "message": "a DO_WHILE needs loopOver and maxIterations",
                },
                {
                    "rule": "!has(self.keepLastN) || !has(self.maxIterations) || self.keepLastN <= self.maxIterations",
                    "message": "keepLastN cannot exceed maxIterations",
                    "fieldPath": ".keepLastN",
                },
                {
                    "rule": "!has(self.type) || self.type != 'WAIT_FOR_WEBHOOK' || has(self.webhook)",
                    "message": "a WAIT_FOR_WEBHOOK names its webhook",
                },
                {
                    "rule": "!has(self.type) || self.type != 'GRPC' || has(self.grpc)",
                    "message": "a GRPC task needs grpc",
                },
                {
                    "rule": "!has(self.type) || self.type != 'WEBHOOK' || has(self.signing)",
                    "message": "a WEBHOOK task needs signing",
                },
                {
                    "rule": "!has(self.type) || self.type != 'CONTAINER' || has(self.container)",
                    "message": "a CONTAINER task needs container",
                },
            ]
        },
    )

    @model_validator(mode="after")
    def _shape_matches_type(self) -> WorkflowTask:
        t = self.type
        self._new_shapes()
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

    def _new_shapes(self) -> None:
        ref, t = self.task_reference_name, self.type
        if t is TaskType.DO_WHILE:
            if not self.loop_over or self.max_iterations is None:
                raise ValueError(f"{ref}: a DO_WHILE needs loopOver and maxIterations")
            if self.keep_last_n is not None and self.keep_last_n > self.max_iterations:
                raise ValueError(f"{ref}: keepLastN cannot exceed maxIterations")
        if t is TaskType.WAIT_FOR_WEBHOOK and self.webhook is None:
            raise ValueError(f"{ref}: a WAIT_FOR_WEBHOOK names its webhook")
        if t is TaskType.GRPC and self.grpc is None:
            raise ValueError(f"{ref}: a GRPC task needs grpc")
        if t is TaskType.WEBHOOK and self.signing is None:
            raise ValueError(f"{ref}: a WEBHOOK task needs signing")
        if t is TaskType.CONTAINER and self.container is None:
            raise ValueError(f"{ref}: a CONTAINER task needs container")

    def children(self) -> list[list[WorkflowTask]]:
        """Every nested task list, in declaration order."""
        lists: list[list[WorkflowTask]] = list(self.fork_tasks or [])
        lists.extend((self.decision_cases or {}).values())
        if self.default_case:
            lists.append(self.default_case)
        if self.loop_over:
            lists.append(self.loop_over)
        return lists


class RateLimitConfig(Spec):
    rate_limit_key: str = Field(
        min_length=1,
        max_length=1024,
        description="An expression such as ${workflow.input.tenantId}; runs sharing the resolved key are limited.",
    )
    concurrent_exec_limit: int = Field(ge=1, le=1_000_000, description="Runs per key at once.")

    @classmethod
    def limit_in(cls, raw: Any) -> int | None:
        """The concurrentExecLimit of a stored rateLimitConfig, read through
        this model even when the rest of its Workflow no longer parses; None
        when there is none, or it does not parse either."""
        try:
            return cls.model_validate(raw).concurrent_exec_limit if raw is not None else None
        except ValidationError:
            return None


MAX_CHAIN_TIMEOUT_SECONDS = 10 * 31_536_000


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
    priority: int | None = Field(
        None,
        ge=1,
        le=5,
        description="The priority of its runs that set none, 1 (most urgent) to 5; 3 when unset. A run's tasks are "
        "leased before less urgent ones of their type that became ready up to a minute per level earlier.",
    )
    search_attributes: list[SearchAttribute] = Field(
        default_factory=list,
        max_length=MAX_DECLARED,
        description="Typed attributes runs are found by (`sluiceway runs list --search-attr tenant=acme`).",
    )
    retention: Retention | None = Field(None, description="How long finished runs are kept.")
    chain_timeout_seconds: int = Field(
        0,
        ge=0,
        le=MAX_CHAIN_TIMEOUT_SECONDS,
        description="Whole-chain deadline across CONTINUE_AS_NEW links, from the chain's first run, never moved by "
        "a pause: past it the running link ends TIMED_OUT. 0 is none (SLUICEWAY_MAX_CHAIN_TIMEOUT caps it, and "
        "applies when it is 0).",
    )
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

    # A spec is immutable and parsed once per version (store.workflows caches
    # it), while the decider walks it on every pass of every run: what the walk
    # derives from the graph alone is kept on the spec.
    @functools.cached_property
    def all_tasks(self) -> tuple[WorkflowTask, ...]:
        """iter_tasks(self.tasks), computed once."""
        return tuple(iter_tasks(self.tasks))

    @functools.cached_property
    def loop_members(self) -> dict[str, frozenset[str]]:
        """Each DO_WHILE's reference -> the references of every task inside it."""
        return {
            t.task_reference_name: frozenset(c.task_reference_name for c in iter_tasks(list(t.loop_over or [])))
            for t in self.all_tasks
            if t.type is TaskType.DO_WHILE
        }


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
