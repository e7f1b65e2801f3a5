"""Statuses of runs and tasks, and the payloads of the execution API and the
worker protocol."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, SkipValidation, ValidationError

from sluiceway.model.attributes import ATTRIBUTE_NAMES, MAX_PER_RUN, AttributeName
from sluiceway.model.common import INT32_MAX, EngineName, Epoch, SetOf, Spec, Uuid
from sluiceway.model.taskdefinition import RetryKind
from sluiceway.model.workflow import REF_PATTERN, RUN_REF_PATTERN

TaskId = Annotated[Uuid, Field(description="A task id, as leased")]
# What one result or heartbeat may ask: a year, the longest timer the store arms.
MAX_DELAY_SECONDS = 31_536_000
MAX_BATCH = 1000
MAX_REASON = 8192


class RunStatus(StrEnum):
    """PAUSED is a running run that schedules nothing new: stored as RUNNING
    with a pause time, shown as PAUSED."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    TERMINATED = "TERMINATED"

    def is_terminal(self) -> bool:
        return self not in (RunStatus.RUNNING, RunStatus.PAUSED)

    def is_failure(self) -> bool:
        """Ended without completing: what retry takes up again."""
        return self in (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.TERMINATED)


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


MAX_SLA_SECONDS = 31_536_000
# Printable, no spaces: keys are written in headers and logs.
REQUEST_ID_PATTERN = r"^[\x21-\x7e]{1,256}$"
RequestId = Annotated[
    str,
    Field(
        pattern=REQUEST_ID_PATTERN,
        description="Idempotency key: a start retried with the same key (within the idempotency window, "
        "24 hours unless SLUICEWAY_IDEMPOTENCY_WINDOW says otherwise) returns the run the first one created. "
        "Also accepted as the `Idempotency-Key` header.",
    ),
]
SearchAttributes = Annotated[
    dict[AttributeName, Any],
    Field(
        max_length=MAX_PER_RUN,
        description="Values of the attributes the workflow declares, by name: an undeclared name, or a value "
        "that does not fit its declared type, is refused (422 naming it).",
        json_schema_extra=ATTRIBUTE_NAMES,
    ),
]


class TaskOverride(Spec):
    """What one start may change about one task of its run: the highest
    precedence, above the workflow task and the TaskDefinition, within the
    same bounds."""

    retry_count: int | None = Field(None, ge=0, le=100, description="Attempts after the first, for this run.")
    start_to_close_timeout: int | None = Field(
        None, ge=0, le=31_536_000, description="Seconds from lease to result, for this run; 0 arms no timer."
    )


TaskReferenceKey = Annotated[str, Field(pattern=REF_PATTERN)]
TASK_REFERENCE_KEYS: dict[str, Any] = {"propertyNames": {"pattern": REF_PATTERN}}  # as ATTRIBUTE_NAMES
MAX_TASK_OVERRIDES = 100


class StartRequest(Spec):
    name: EngineName = Field(description="The workflow to run.")
    version: int | None = Field(None, ge=1, le=INT32_MAX, description="Pinned version; the latest when unset.")
    input: dict[str, Any] = Field(default_factory=dict)
    correlation_id: str | None = Field(None, max_length=256)
    request_id: RequestId | None = None
    search_attributes: SearchAttributes = Field(default_factory=dict)
    sla_seconds: int | None = Field(
        None,
        ge=0,
        le=MAX_SLA_SECONDS,
        description="This run's soft SLA, overriding the workflow's slaSeconds (0: none), clamped down to its "
        "timeoutSeconds.",
    )
    task_overrides: dict[TaskReferenceKey, TaskOverride] = Field(
        default_factory=dict,
        max_length=MAX_TASK_OVERRIDES,
        description="Per task reference: retryCount and startToCloseTimeout for this run only (a DO_WHILE's inner "
        "reference covers every iteration; a FORK_JOIN_DYNAMIC's covers its branches). References the workflow "
        "does not have are refused (422 naming them).",
        json_schema_extra=TASK_REFERENCE_KEYS,
    )
    priority: int | None = Field(
        None,
        ge=1,
        le=5,
        description="1 (most urgent) to 5: its tasks are leased before less urgent ones of their type that became "
        "ready up to a minute per level earlier (docs/priority.md). The workflow's priority (else 3) when unset.",
    )


class StartResponse(Spec):
    id: str
    status: RunStatus
    awaiting_admission: bool = False
    created: bool = Field(True, description="False when a retried start (same requestId) found its run.")
    restarted_from: str | None = None


class StartBatch(Spec):
    """Many starts in one request, each validated and judged on its own."""

    starts: list[SkipValidation[StartRequest]] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description="Each start is validated on its own: an invalid one gets a 422 outcome, the others start.",
    )
    deferred = frozenset({"starts"})


class StartItemOutcome(Spec):
    """One start of a batch: `code` as the single start would have answered."""

    code: int = Field(
        description="201 started; 200 a retried start (same requestId) found its run; 404 no such workflow; "
        "409 LIMIT_EXCEEDED or IDEMPOTENCY_KEY_REUSED; 413 the input is over the payload limit; 422 the item is "
        "invalid (`fields` names each field); 429 a namespace quota. Anything but 200 and 201 started nothing."
    )
    id: str | None = None
    status: RunStatus | None = None
    awaiting_admission: bool | None = None
    created: bool | None = None
    error: str | None = Field(
        None,
        description="The refusal's code; the item carries the single start's whole error body (a quota's `quota`, "
        "`limit`, `current`, `retryAfterSeconds`, ...).",
    )
    message: str | None = None
    fields: list[FieldError] | None = None


class StartBatchResponse(Spec):
    starts: list[StartItemOutcome] = Field(description="One outcome per start, in the order sent.")


# Why a person paused or terminated a run: for people, so a paragraph at most.
MAX_OPERATION_REASON = 1024


class PauseRequest(Spec):
    reason: str = Field("", max_length=MAX_OPERATION_REASON, description="Why; shown by `why` and in the run.")


class RerunRequest(Spec):
    task_reference_name: str = Field(
        pattern=RUN_REF_PATTERN,
        description="Run again from this task: it and every task after it start afresh; the others keep their outputs.",
    )
    input: dict[str, Any] | None = Field(
        None, description="Merged over the task's resolved inputParameters when it starts again."
    )


class RestartRequest(Spec):
    input: dict[str, Any] | None = Field(None, description="The new run's input; the old run's when unset.")
    latest_version: bool = Field(False, description="Run the workflow's latest version, not the old run's.")
    request_id: RequestId | None = None


class OperationResponse(Spec):
    id: str
    status: RunStatus
    message: str = ""


class TerminateRequest(Spec):
    reason: str = Field("terminated by request", max_length=MAX_OPERATION_REASON)


# --- The worker protocol ------------------------------------------------------


class PollRequest(Spec):
    task_types: SetOf[EngineName] = Field(min_length=1, max_length=64, description="Queues to lease from, each once.")
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
    traceparent: str | None = Field(
        None,
        description="W3C trace context of this attempt, when the operator exports traces: a worker's spans "
        "continue it, joining the run's trace.",
    )


class PollResponse(Spec):
    tasks: list[LeasedTask]


class ResultStatus(StrEnum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_WITH_TERMINAL_ERROR = "FAILED_WITH_TERMINAL_ERROR"
    IN_PROGRESS = "IN_PROGRESS"
    # A graceful shutdown hands the task back: the attempt is spent (the next
    # lease is a new attempt number) and the task's interruptCount goes up.
    INTERRUPTED = "INTERRUPTED"


class DelaySource(StrEnum):
    """Where a FAILED result's `retryAfterSeconds` came from."""

    HINT = "hint"  # a classifier read it (a server's Retry-After): clamped by maxRetryBackoff
    SIGNAL = "signal"  # the handler asked for exactly this delay: only scheduleToCloseTimeout gates it


MAX_LOG_LINE = 8192  # characters of one log line; longer ones are cut, and say so
MAX_LOG_LINES = 1000  # lines one result or heartbeat carries; more are cut, and say so
_CUT = " [line truncated]"


def _cut_line(text: str) -> str:
    return text if len(text) <= MAX_LOG_LINE else text[: MAX_LOG_LINE - len(_CUT)] + _CUT


class LogLine(Spec):
    """One line a handler logged. Lines too long are cut rather than refused:
    a log must never cost a result."""

    at: str | None = Field(None, max_length=64, description="When the worker logged it (its clock), ISO 8601.")
    level: str = Field("INFO", max_length=16)
    message: Annotated[str, AfterValidator(_cut_line)] = ""


def _cut_lines(lines: list[LogLine]) -> list[LogLine]:
    if len(lines) <= MAX_LOG_LINES:
        return lines
    dropped = len(lines) - MAX_LOG_LINES + 1
    return [*lines[: MAX_LOG_LINES - 1], LogLine(level="WARNING", message=f"[{dropped} log lines dropped]")]


LogLines = Annotated[
    list[LogLine],
    AfterValidator(_cut_lines),
    Field(description="Lines logged since the last report, oldest first; stored bounded per task."),
]


class ResultReport(Spec):
    """What a result says of its task: every field but which task it is."""

    epoch: Epoch
    status: ResultStatus
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field("", max_length=MAX_REASON, description="Why it failed; matched against nonRetryableErrors.")
    retry_after_seconds: float | None = Field(
        None,
        ge=0,
        le=MAX_DELAY_SECONDS,
        description="FAILED only: retry after exactly this delay (never jittered), still spending an attempt, "
        "and at least 1 s. As a `hint` (default: a server's Retry-After) it is clamped by the operator's "
        "maxRetryBackoff; as a `signal` only scheduleToCloseTimeout gates it.",
    )
    retry_after_source: DelaySource = Field(
        DelaySource.HINT, description="What `retryAfterSeconds` is: a classifier's `hint` or the handler's `signal`."
    )
    retry_kind: RetryKind | None = Field(
        None,
        description="FAILED only: this failure's verdict, overriding the TaskDefinition's retryKind: `indefinite` "
        "retries with no attempt ceiling until the task's deadline; `nonRetryable` is final; `transient` "
        "spends retryCount.",
    )
    callback_after_seconds: float | None = Field(
        None,
        ge=0,
        le=MAX_DELAY_SECONDS,
        description="IN_PROGRESS only: snooze; hand the task back and lease it again after this delay "
        "without spending an attempt.",
    )
    search_attributes: SearchAttributes = Field(
        default_factory=dict, description="Upsert these declared attributes of the task's run."
    )
    logs: LogLines = Field(default_factory=list)


class TaskResult(ResultReport):
    task_id: TaskId


class SingleResult(ResultReport):
    """The result of the task its path names."""

    task_id: TaskId | None = Field(None, description="May be left out: the path names the task. If sent, the same.")

    def for_task(self, task_id: str) -> TaskResult:
        return TaskResult(task_id=task_id, **{name: getattr(self, name) for name in ResultReport.model_fields})


class Heartbeat(Spec):
    task_id: TaskId
    epoch: Epoch
    logs: LogLines = Field(default_factory=list)


class FieldError(Spec):
    field: str = Field(description="The offending field, dotted (`callbackAfterSeconds`, `output.x`).")
    message: str


class ItemOutcome(Spec):
    task_id: str | None = Field(description="The item's taskId as sent; null when it sent none.")
    code: int = Field(
        description="200 accepted; 404 unknown task; 409 stale epoch or task no longer leased; "
        "422 the item itself is invalid (the message names the field) and changed nothing."
    )
    error: str | None = None
    fields: list[FieldError] | None = Field(None, description="422 only: every invalid field of the item.")


class ResultBatchResponse(Spec):
    results: list[ItemOutcome] = Field(description="One outcome per result, in the order sent.")
    tasks: list[LeasedTask] | None = Field(None, description="What `next` leased (absent when not asked).")


class HeartbeatBatchResponse(Spec):
    alive: list[str] = Field(description="Leases renewed.")
    gone: list[str] = Field(
        description="Tasks no longer leased under that epoch (completed elsewhere, timed out, canceled): "
        "stop working on them."
    )
    errors: list[ItemOutcome] = Field(
        default_factory=list, description="Heartbeats refused as invalid (code 422), in the order sent."
    )


# The batches are validated item by item, so one bad item cannot cost the good
# ones: the envelope (an object with a list of at most MAX_BATCH items) is
# checked with the request, each item by `checked_items`. The schema still
# documents the items' shape; `SkipValidation` only defers their check.
class NextLease(Spec):
    """Lease more tasks in the same round trip as the results: the slots those
    results free go straight back to the worker that freed them."""

    worker_id: str = Field(min_length=1, max_length=256, description="Stable identity of the worker.")
    counts: dict[EngineName, Annotated[int, Field(ge=1, le=MAX_BATCH)]] = Field(
        min_length=1,
        max_length=64,
        description="Most tasks to lease per task type, within each type's gates; never waits for one.",
    )


class ResultBatch(Spec):
    results: list[SkipValidation[TaskResult]] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description="Each result is validated on its own: an invalid one gets a 422 outcome, the others apply.",
    )
    next: NextLease | None = Field(
        None,
        description="Lease up to these counts once the results are applied; the leases come back in `tasks`. "
        "Requires `poll` on those task types.",
    )
    deferred = frozenset({"results"})


class HeartbeatBatch(Spec):
    heartbeats: list[SkipValidation[Heartbeat]] = Field(
        min_length=1,
        max_length=MAX_BATCH,
        description="Each heartbeat is validated on its own: an invalid one is listed in `errors`.",
    )
    deferred = frozenset({"heartbeats"})


Item = TypeVar("Item", TaskResult, Heartbeat)


def sent_task_id(raw: Any) -> str | None:
    """The taskId an item carries as sent, if it carries a string."""
    sent = raw.get("taskId") if isinstance(raw, dict) else None
    return sent if isinstance(sent, str) else None


def checked_items(model: type[Item], items: list[Any]) -> list[Item | ItemOutcome]:
    """Each raw item parsed, or its 422 outcome naming the fields. A task id
    sent twice is refused from its second appearance on: one batch, one
    outcome per task."""
    checked: list[Item | ItemOutcome] = []
    seen: set[str] = set()
    for raw in items:
        sent_id = sent_task_id(raw)
        try:
            item = model.model_validate(raw)
        except ValidationError as error:
            checked.append(invalid_item(sent_id, error))
            continue
        if item.task_id in seen:
            duplicate = FieldError(field="taskId", message=f"{item.task_id} appears more than once in this batch")
            checked.append(
                ItemOutcome(task_id=sent_id, code=422, error=f"taskId: {duplicate.message}", fields=[duplicate])
            )
            continue
        seen.add(item.task_id)
        checked.append(item)
    return checked


def invalid_item(task_id: str | None, error: ValidationError) -> ItemOutcome:
    fields = [FieldError(field=dotted(e["loc"]) or "item", message=printable(e["msg"])) for e in error.errors()]
    return ItemOutcome(
        task_id=task_id, code=422, error="; ".join(f"{f.field}: {f.message}" for f in fields), fields=fields
    )


def dotted(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: `results.0.taskId`."""
    return ".".join(printable(str(part)) for part in loc)


def printable(text: str) -> str:
    """`text`, or its JSON escape when it holds control characters or lone
    surrogates: a path or message can quote a key the client sent, and an
    error body must never be refused for what it quotes."""
    return text if text.isprintable() else json.dumps(text)[1:-1]


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
    superseded: bool = Field(False, description="A retry or rerun started this task afresh after this attempt.")
    loop: str | None = Field(None, description="The DO_WHILE this task belongs to, if any.")
    iteration: int | None = Field(None, description="Its iteration of that DO_WHILE, 1-based.")
    snooze_count: int = Field(0, description="Snoozes of this attempt: each handed the task back, attempt refunded.")
    interrupt_count: int = Field(0, description="Graceful worker shutdowns that handed this task back.")
    completed_by: str | None = Field(None, description="HUMAN: who completed or rejected it.")
    priority: int = Field(3, description="1 (most urgent) to 5 (docs/priority.md).")


class RunSummary(Spec):
    """A run as lists show it: narrow columns only, never input or output."""

    id: str
    workflow_name: str
    workflow_version: int
    status: RunStatus
    awaiting_admission: bool = False
    reason_for_incompletion: str = ""
    correlation_id: str | None = None
    parent_workflow_id: str | None = None
    workflow_run: str | None = Field(None, description="The WorkflowRun object that started it, if any.")
    start_time: str
    end_time: str | None = None
    paused_at: str | None = None
    sla_breached_at: str | None = None
    quarantined: bool = False
    search_attributes: dict[str, Any] = Field(default_factory=dict)
    priority: int = Field(3, description="1 (most urgent) to 5 (docs/priority.md).")


class RunPage(Spec):
    items: list[RunSummary]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; null on the last.")


class TaskSummary(Spec):
    task_id: str
    execution_id: str
    reference_name: str
    task_type: str
    type: str
    status: str
    attempt: int
    worker_id: str | None = None
    scheduled_at: str
    started_at: str | None = None
    ended_at: str | None = None
    reason: str = ""
    workflow_name: str | None = Field(None, description="The workflow of the task's run.")
    input: dict[str, Any] = Field(
        default_factory=dict, description="The task's input: for a HUMAN task, what the person decides on."
    )
    completed_by: str | None = Field(None, description="HUMAN: who completed or rejected it.")
    priority: int = Field(3, description="1 (most urgent) to 5 (docs/priority.md).")


class TaskPage(Spec):
    items: list[TaskSummary]
    next_cursor: str | None = None


class LogEntry(Spec):
    id: int = Field(description="Increasing: pass the last one seen as `after` to follow.")
    task_id: str
    reference_name: str
    attempt: int
    at: str = Field(description="When the server stored it.")
    logged_at: str | None = Field(None, description="When the worker logged it, by its clock.")
    level: str
    message: str


class LogPage(Spec):
    lines: list[LogEntry]
    next_after: int | None = Field(None, description="The `after` for the next request (null: no line yet).")
    truncated: bool = Field(False, description="A task logged more than is kept: its later lines were dropped.")


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
    restarted_from: str | None = Field(None, description="The run this one restarted.")
    request_id: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    start_time: str
    end_time: str | None = None
    search_attributes: dict[str, Any] = Field(default_factory=dict)
    paused_at: str | None = None
    pause_reason: str | None = None
    paused_seconds: float = Field(0, description="Time spent paused, in seconds, over the run's life.")
    deadline: str | None = Field(None, description="When timeoutSeconds ends the run (moved by pauses).")
    sla_seconds: int = 0
    sla_deadline: str | None = None
    sla_breached_at: str | None = None
    retries: int = Field(0, description="How many times the run was retried or rerun.")
    expires_at: str | None = Field(None, description="When retention deletes this finished run.")
    quarantined_at: str | None = Field(
        None,
        description="Set while the decider cannot evaluate this run: it is set aside, alone, until it is "
        "terminated or released by forcing an evaluation (POST .../decide).",
    )
    quarantine_reason: str | None = None
    schedule: str | None = Field(None, description="The Schedule that started it, if any.")
    chain_id: str | None = Field(None, description="Its continue-as-new chain: the id of the chain's first run.")
    previous_run_id: str | None = Field(None, description="The run it continues as new, if any.")
    next_run_id: str | None = Field(None, description="The run that continues it, once it continued as new.")
    chain_deadline: str | None = Field(None, description="The chain's deadline: set at its first run, never moved.")
    priority: int = Field(3, description="1 (most urgent) to 5 (docs/priority.md).")
    archived: bool = Field(
        False,
        description="Read back from the archive: retention deleted the run, after writing its history "
        "to the archive (docs/retention.md).",
    )
    tasks: list[TaskView] = Field(default_factory=list)


# --- Waiting tasks: people and messages ------------------------------------------

MAX_MESSAGE_BYTES = 64 * 1024
MAX_QUEUED_MESSAGES = 1000


class HumanCompletion(Spec):
    output: dict[str, Any] = Field(default_factory=dict, description="The task's output: the person's answer.")


class HumanRejection(Spec):
    reason: str = Field(min_length=1, max_length=MAX_REASON, description="Why; becomes the task's reason.")
    output: dict[str, Any] = Field(default_factory=dict)


class WaitingTaskView(Spec):
    task_id: str
    execution_id: str
    workflow_name: str
    reference_name: str
    type: str
    task_type: str
    status: str
    attempt: int
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    scheduled_at: str
    ended_at: str | None = None
    completed_by: str | None = None


class AuditEntry(Spec):
    id: int
    at: str
    actor: str = Field(description="The authenticated identity (a user name; an API key by its Secret's name).")
    via: str = Field(description="token, api-key, signature (webhooks) or anonymous (authentication off).")
    operation: str = Field(
        description="start, terminate, pause, resume, retry, rerun, restart, decide, message, complete, "
        "reject or webhook."
    )
    detail: dict[str, Any] = Field(default_factory=dict)


class AuditPage(Spec):
    entries: list[AuditEntry]
    next_after: int | None = Field(None, description="Pass as `after` for the next page; null at the end.")
