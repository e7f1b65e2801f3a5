"""The policy advisor: what the reference documents say is never right in a
set of definitions, found without a cluster (`sluiceway lint`) and on the live
objects (the `PolicyWarnings` condition, the definitions page).

Pure: objects in, findings out. Each rule is one function over the whole set,
so rules that relate objects (a TaskDefinition's semaphore and the Semaphore
that declares it, a Workflow's timeout and its tasks' retries, a Schedule's
fire rate and the rate limits it meets) see them together. A rule that needs
an object the set does not hold says nothing: offline, that object may well
exist in another folder, and a false warning teaches people to ignore the tool.
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from sluiceway.controls.backoff import jitter_band
from sluiceway.controls.calendar import Calendar, CalendarError
from sluiceway.controls.policy import resolve
from sluiceway.controls.schedules import calendar_of
from sluiceway.model import GROUP
from sluiceway.model.common import kube_time
from sluiceway.model.quota import QuotaSpec
from sluiceway.model.schedule import ScheduleSpec
from sluiceway.model.semaphore import SemaphoreSpec
from sluiceway.model.taskdefinition import RetryKind, TaskDefinitionSpec
from sluiceway.model.workflow import Executor, TaskType, WorkflowSpec, WorkflowTask

# The seeds, as a finding names them (their files are in the repository's shared seeds).
_NODE_FLOW = "node-flow Execution controls"
_TASKQ = "TaskQ Retry system"
_HARVEST = "Harvest Reliability knobs"


class Kind(StrEnum):
    """The kinds the advisor reads; any other object (a Deployment, a WorkflowRun) is not its business."""

    TASK_DEFINITION = "TaskDefinition"
    WORKFLOW = "Workflow"
    SEMAPHORE = "Semaphore"
    QUOTA = "Quota"
    SCHEDULE = "Schedule"


AdvisedSpec = TaskDefinitionSpec | WorkflowSpec | SemaphoreSpec | QuotaSpec | ScheduleSpec

SPECS: dict[Kind, type[AdvisedSpec]] = {
    Kind.TASK_DEFINITION: TaskDefinitionSpec,
    Kind.WORKFLOW: WorkflowSpec,
    Kind.SEMAPHORE: SemaphoreSpec,
    Kind.QUOTA: QuotaSpec,
    Kind.SCHEDULE: ScheduleSpec,
}


class Severity(StrEnum):
    WARNING = "warning"  # valid, and never what its author meant
    ERROR = "error"  # not an object the operator would accept


@dataclass(frozen=True)
class Rule:
    """One rule of the references, in the project's words, with where it is written."""

    id: str
    says: str
    source: str

    def quoted(self) -> str:
        return f"{self.says} ({self.source})"


INVALID = Rule("invalid-spec", "the object must parse as its CRD's schema says", "the CRD")
WORKER_SCHEDULE_TO_START = Rule(
    "worker-schedule-to-start",
    "set scheduleToStartTimeout on anything a worker runs: it alone tells 'no workers on this queue' "
    "from 'the worker is slow', and without it a starved queue hangs silently",
    f"{_NODE_FLOW}, Choosing values, rule 1",
)
RETRIES_OUTLIVE_TIMEOUT = Rule(
    "retries-outlive-workflow-timeout",
    "a whole-run timeout ends the run TIMED_OUT when it fires, whatever retries are left; "
    "retry delays follow the backoff formula, the cap applied before and after jitter",
    f"{_NODE_FLOW}, Workflow timeout and The delay formula",
)
SLA_AT_TIMEOUT = Rule(
    "sla-at-timeout",
    "a soft SLA below the hard timeout pages first; at or above it the timeout fires first "
    "and the SLA signal never can",
    f"{_HARVEST}, Soft SLA",
)
UNDECLARED_SEMAPHORE = Rule(
    "undeclared-semaphore",
    "an unconfigured semaphore gates nothing: listing it is a no-op until its permits are set",
    f"{_NODE_FLOW}, Named semaphores",
)
GATE_NEVER_ADMITS = Rule(
    "gate-never-admits",
    "when several gates apply the most restrictive wins, the allowance being their minimum: "
    "a gate whose ceiling is 0 admits nothing, ever",
    f"{_NODE_FLOW}, Combining them",
)
QUOTA_NEVER_ADMITS = Rule(
    "quota-never-admits",
    "a namespace quota is checked when a run starts (or a definition or schedule is registered) "
    "and exceeding it refuses the request with a 429; a limit of 0 refuses every one",
    f"{_NODE_FLOW}, Namespace quotas",
)
WINDOW_WITHOUT_FIRE = Rule(
    "window-without-fire",
    "a schedule fires at its cron or interval times, none before startAt and none after endAt: "
    "a window that holds no fire time starts nothing",
    "Schedule spec (startAt, endAt); Harvest Reliability knobs, Cron / interval schedules",
)
INDEFINITE_WITHOUT_BUDGET = Rule(
    "indefinite-without-budget",
    "an indefinite retry has no attempt ceiling: its only stopping condition is the schedule-to-close "
    "deadline, and with neither it nor a time budget the task retries without any time limit",
    f"{_TASKQ}, Retry kinds, indefinite",
)
TIME_BUDGET_IGNORED = Rule(
    "time-budget-ignored",
    "a time budget is only active for the indefinite kind; on another kind it is ignored",
    f"{_TASKQ}, RetryPolicy field reference, time_budget",
)
TASK_RATE_BELOW_FIRE_RATE = Rule(
    "rate-below-fire-rate",
    "a task rate limit bounds throughput to N dispatches per window, and finishing a task does not "
    "refill it: work arriving faster than that only queues",
    f"{_NODE_FLOW}, Task rate limit",
)
QUOTA_RATE_BELOW_FIRE_RATE = Rule(
    "quota-below-fire-rate",
    "maxExecutionsPerMinute is checked when a run starts, and a start over it is refused with a 429",
    f"{_NODE_FLOW}, Namespace quotas",
)

RULES: tuple[Rule, ...] = (
    INVALID,
    WORKER_SCHEDULE_TO_START,
    RETRIES_OUTLIVE_TIMEOUT,
    SLA_AT_TIMEOUT,
    UNDECLARED_SEMAPHORE,
    GATE_NEVER_ADMITS,
    QUOTA_NEVER_ADMITS,
    WINDOW_WITHOUT_FIRE,
    INDEFINITE_WITHOUT_BUDGET,
    TIME_BUDGET_IGNORED,
    TASK_RATE_BELOW_FIRE_RATE,
    QUOTA_RATE_BELOW_FIRE_RATE,
)


@dataclass(frozen=True)
class Finding:
    """One thing wrong with one object: the field, the rule, what was found.
    `source` is where the object was read from (a file), when it was."""

    kind: str
    name: str
    field: str
    rule: str
    message: str
    severity: Severity = Severity.WARNING
    source: str = ""

    def to_wire(self) -> dict[str, str]:
        return {
            "source": self.source,
            "kind": self.kind,
            "name": self.name,
            "field": self.field,
            "rule": self.rule,
            "severity": self.severity.value,
            "message": self.message,
        }


@dataclass(frozen=True)
class Declared:
    """One parsed object: its kind, `metadata.name` and namespace (None when
    the manifest leaves it to `kubectl apply -n`), and its spec."""

    kind: Kind
    name: str
    namespace: str | None
    spec: AdvisedSpec
    source: str = ""

    @property
    def engine_name(self) -> str:
        """The name other objects refer to it by: `spec.name`, else `metadata.name`."""
        named = getattr(self.spec, "name", None)
        return named if isinstance(named, str) and named else self.name

    def finding(self, rule: Rule, field: str, found: str, severity: Severity = Severity.WARNING) -> Finding:
        return Finding(
            self.kind.value, self.name, field, rule.id, f"{found}. Rule: {rule.quoted()}", severity, self.source
        )


# -- reading objects -------------------------------------------------------------------


def is_ours(document: Mapping[str, Any]) -> bool:
    """A Sluiceway object of a kind the advisor reads."""
    api_version = str(document.get("apiVersion") or "")
    return api_version.split("/")[0] == GROUP and document.get("kind") in set(Kind)


def declared(document: Mapping[str, Any], source: str = "") -> Declared | list[Finding]:
    """The object parsed, or the errors that keep it from parsing, each naming
    its field. Only for objects `is_ours` accepts."""
    kind = Kind(str(document.get("kind")))
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        return [
            Finding(kind.value, "", "metadata.name", INVALID.id, "metadata.name is required", Severity.ERROR, source)
        ]
    spec = document.get("spec")
    if not isinstance(spec, Mapping):
        message = "spec is required and must be a mapping"
        return [Finding(kind.value, name, "spec", INVALID.id, message, Severity.ERROR, source)]
    try:
        parsed = SPECS[kind].model_validate(dict(spec))
    except ValidationError as error:
        return [
            Finding(kind.value, name, field, INVALID.id, message, Severity.ERROR, source)
            for field, message in field_errors(error)
        ]
    return Declared(kind, name, namespace if isinstance(namespace, str) else None, parsed, source)


def field_errors(error: ValidationError, root: str = "spec") -> list[tuple[str, str]]:
    """(field, message) for each error of `error`, the field as written in the
    manifest: `spec.tasks[0].retryCount`."""
    found = []
    for item in error.errors():
        path = root + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"])
        found.append((path, f"{path}: {item['msg']}"))
    return found


# -- the advisor -----------------------------------------------------------------------


def advise(objects: Sequence[Declared], *, semaphores_known: bool = True) -> list[Finding]:
    """Every finding over `objects`, in the order of the rules.

    `semaphores_known`: the set holds every Semaphore its TaskDefinitions may
    name (a folder of manifests, a namespace's stored Semaphores); when False,
    a semaphore missing from it is not reported."""
    found: list[Finding] = []
    for rule in _RULES:
        found.extend(rule(objects))
    if semaphores_known:
        found.extend(undeclared_semaphores(objects))
    order = {rule.id: index for index, rule in enumerate(RULES)}
    return sorted(found, key=lambda f: (f.source, f.kind, f.name, order.get(f.rule, 0)))


def _of(objects: Iterable[Declared], kind: Kind) -> Iterator[Declared]:
    return (o for o in objects if o.kind is kind)


def _together(a: Declared, b: Declared) -> bool:
    """In one namespace, as far as the manifests say (an unset namespace is the one applied to)."""
    return a.namespace is None or b.namespace is None or a.namespace == b.namespace


def _task_definition(objects: Sequence[Declared], near: Declared, task_type: str) -> TaskDefinitionSpec | None:
    for candidate in _of(objects, Kind.TASK_DEFINITION):
        if candidate.engine_name == task_type and _together(candidate, near):
            assert isinstance(candidate.spec, TaskDefinitionSpec)
            return candidate.spec
    return None


def worker_tasks_without_schedule_to_start(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Choosing values, rule 1: set
    scheduleToStartTimeout on anything a worker runs. A TaskDefinition is taken
    for a worker's unless every task of the set that uses it is run by the
    operator (an HTTP or GRPC task named after it)."""
    workflows = list(_of(objects, Kind.WORKFLOW))
    for definition in _of(objects, Kind.TASK_DEFINITION):
        spec = definition.spec
        assert isinstance(spec, TaskDefinitionSpec)
        if spec.schedule_to_start_timeout:
            continue
        users = [
            task
            for workflow in workflows
            if _together(workflow, definition) and isinstance(workflow.spec, WorkflowSpec)
            for task in workflow.spec.all_tasks
            if task.name == definition.engine_name
        ]
        if users and all(task.type.executor() is not Executor.WORKER for task in users) and spec.workers is None:
            continue
        yield definition.finding(
            WORKER_SCHEDULE_TO_START,
            "spec.scheduleToStartTimeout",
            f"task type {definition.engine_name} is run by workers and has no scheduleToStartTimeout",
        )


def retries_outliving_the_workflow_timeout(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Workflow timeout and The delay formula:
    a run's timeout ends it whatever retries remain, so retries whose shortest
    possible delays (the bottom of each jitter band) already add up to the
    timeout can never run. Needs the task's TaskDefinition in the set."""
    for workflow in _of(objects, Kind.WORKFLOW):
        spec = workflow.spec
        assert isinstance(spec, WorkflowSpec)
        if not spec.timeout_seconds:
            continue
        for task in spec.all_tasks:
            definition = _task_definition(objects, workflow, task.name) if task.type.executor().leases() else None
            if definition is None:
                continue
            retry = resolve(definition, task=task).retry
            if retry.kind is not RetryKind.TRANSIENT:
                continue
            waited = 0.0
            for attempt in range(1, retry.retry_count + 1):
                waited += jitter_band(retry, attempt)[0]
                if waited >= spec.timeout_seconds:
                    never = retry.retry_count - attempt + 1
                    field = "spec.timeoutSeconds"
                    yield workflow.finding(
                        RETRIES_OUTLIVE_TIMEOUT,
                        field,
                        f"task {task.task_reference_name} ({task.name}) waits at least {_seconds(waited)} in backoff "
                        f"before retry {attempt} of {retry.retry_count}, and the run times out after "
                        f"{spec.timeout_seconds} s: its last {never} retr{'y' if never == 1 else 'ies'} can never run",
                    )
                    break


def sla_at_or_above_the_timeout(objects: Sequence[Declared]) -> Iterator[Finding]:
    """Harvest Reliability knobs, Soft SLA: sla < execution_timeout pages
    first; at or above it the hard timeout fires first. (The CRD refuses an
    SLA above the timeout; an equal one is accepted, and as useless.)"""
    for workflow in _of(objects, Kind.WORKFLOW):
        spec = workflow.spec
        assert isinstance(spec, WorkflowSpec)
        if spec.sla_seconds and spec.timeout_seconds and spec.sla_seconds >= spec.timeout_seconds:
            yield workflow.finding(
                SLA_AT_TIMEOUT,
                "spec.slaSeconds",
                f"slaSeconds {spec.sla_seconds} is not below timeoutSeconds {spec.timeout_seconds}",
            )


def undeclared_semaphores(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Named semaphores: an unconfigured
    semaphore gates nothing, so a TaskDefinition naming one that no Semaphore
    declares is not limited the way its author thinks."""
    semaphores = list(_of(objects, Kind.SEMAPHORE))
    for definition in _of(objects, Kind.TASK_DEFINITION):
        spec = definition.spec
        assert isinstance(spec, TaskDefinitionSpec)
        for index, name in enumerate(spec.semaphores):
            if not any(s.engine_name == name and _together(s, definition) for s in semaphores):
                yield definition.finding(
                    UNDECLARED_SEMAPHORE,
                    f"spec.semaphores[{index}]",
                    f"semaphore {name} is declared by no Semaphore, so it limits nothing",
                )


def gates_that_never_admit(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Combining them: the allowance is the
    minimum across the gates, so a Semaphore of 0 permits stops every task type
    that holds it. (A concurrentExecLimit or a rate limit of 0 means unlimited.)"""
    for semaphore in _of(objects, Kind.SEMAPHORE):
        spec = semaphore.spec
        assert isinstance(spec, SemaphoreSpec)
        if spec.permits:
            continue
        holders = sorted(
            d.engine_name
            for d in _of(objects, Kind.TASK_DEFINITION)
            if isinstance(d.spec, TaskDefinitionSpec) and semaphore.engine_name in d.spec.semaphores
        )
        held_by = f": {', '.join(holders)} will never be leased" if holders else ""
        yield semaphore.finding(
            GATE_NEVER_ADMITS, "spec.permits", f"semaphore {semaphore.engine_name} has 0 permits{held_by}"
        )


_QUOTA_LIMITS = (
    ("max_concurrent_executions", "maxConcurrentExecutions", "no run can start in the namespace"),
    ("max_executions_per_minute", "maxExecutionsPerMinute", "no run can start in the namespace"),
    ("max_workflow_definitions", "maxWorkflowDefinitions", "no Workflow can be registered in the namespace"),
    ("max_schedules", "maxSchedules", "no Schedule can be registered in the namespace"),
)


def quotas_that_never_admit(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Namespace quotas: exceeding a quota
    refuses the request; a limit of 0 refuses every one (an absent limit is unlimited)."""
    for quota in _of(objects, Kind.QUOTA):
        for attribute, field, effect in _QUOTA_LIMITS:
            if getattr(quota.spec, attribute) == 0:
                yield quota.finding(QUOTA_NEVER_ADMITS, f"spec.{field}", f"{field} is 0: {effect}")


def windows_without_a_fire(objects: Sequence[Declared]) -> Iterator[Finding]:
    """A Schedule's startAt..endAt window that holds none of its fire times
    (a window shorter than its interval, or between two cron times) is a gate
    that never admits a run."""
    for schedule in _of(objects, Kind.SCHEDULE):
        spec = schedule.spec
        assert isinstance(spec, ScheduleSpec)
        calendar = _calendar(spec)
        if calendar is None or calendar.start is None or calendar.end is None:
            continue
        if not calendar.between(calendar.start, calendar.end, 1):
            yield schedule.finding(
                WINDOW_WITHOUT_FIRE,
                "spec.endAt",
                f"no fire time falls between startAt {kube_time(calendar.start)} and endAt {kube_time(calendar.end)}: "
                "it never starts a run",
            )


def retry_kinds_without_a_stop(objects: Sequence[Declared]) -> Iterator[Finding]:
    """TaskQ Retry system, Retry kinds (indefinite) and the time_budget field:
    an indefinite retry needs a deadline (scheduleToCloseTimeout or
    timeBudgetSeconds), and a time budget on any other kind is ignored."""
    for definition in _of(objects, Kind.TASK_DEFINITION):
        spec = definition.spec
        assert isinstance(spec, TaskDefinitionSpec)
        indefinite = spec.retry_kind is RetryKind.INDEFINITE
        if indefinite and not spec.schedule_to_close_timeout and not spec.time_budget_seconds:
            yield definition.finding(
                INDEFINITE_WITHOUT_BUDGET,
                "spec.timeBudgetSeconds",
                "retryKind indefinite with neither timeBudgetSeconds nor scheduleToCloseTimeout: "
                "a failing task is retried for ever",
            )
        if spec.time_budget_seconds and not indefinite:
            kind = (spec.retry_kind or RetryKind.TRANSIENT).value
            yield definition.finding(
                TIME_BUDGET_IGNORED,
                "spec.timeBudgetSeconds",
                f"timeBudgetSeconds is set but retryKind is {kind}: it is ignored",
            )


def rate_limits_below_the_fire_rate(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Task rate limit: a Schedule whose runs
    bring a task type more work per second than its rate limit dispatches
    builds a queue that only grows. Counts only the tasks every run has (not a
    SWITCH's branches, a loop's body once), and needs the Workflow and the
    TaskDefinition in the set."""
    for schedule in _of(objects, Kind.SCHEDULE):
        spec = schedule.spec
        assert isinstance(spec, ScheduleSpec)
        rate = _fires_per_second(spec)
        workflow = _workflow(objects, schedule, spec.workflow)
        if rate is None or workflow is None:
            continue
        uses = Counter(task.name for task in _certain_tasks(workflow.tasks) if task.type.executor().leases())
        for task_type, count in sorted(uses.items()):
            definition = _task_definition(objects, schedule, task_type)
            if definition is None or not definition.rate_limit_per_frequency:
                continue
            allowed = definition.rate_limit_per_frequency / definition.rate_limit_frequency_seconds
            if rate * count > allowed:
                window = definition.rate_limit_frequency_seconds
                yield schedule.finding(
                    TASK_RATE_BELOW_FIRE_RATE,
                    "spec.every" if spec.every is not None else "spec.cron",
                    f"its runs bring {_per(rate * count * window)} {task_type} tasks per {window} s, above that "
                    f"task type's rateLimitPerFrequency of {definition.rate_limit_per_frequency}",
                )


def quotas_below_the_fire_rate(objects: Sequence[Declared]) -> Iterator[Finding]:
    """node-flow Execution controls, Namespace quotas: the Schedules of a
    namespace that start more runs a minute, on average, than its Quota's
    maxExecutionsPerMinute have fires refused."""
    schedules = [s for s in _of(objects, Kind.SCHEDULE) if isinstance(s.spec, ScheduleSpec) and not s.spec.suspend]
    for quota in _of(objects, Kind.QUOTA):
        spec = quota.spec
        assert isinstance(spec, QuotaSpec)
        if not spec.max_executions_per_minute:
            continue
        rates = {
            s.name: rate
            for s in schedules
            if _together(s, quota) and isinstance(s.spec, ScheduleSpec)
            for rate in [_fires_per_second(s.spec)]
            if rate is not None
        }
        per_minute = sum(rates.values()) * 60
        if per_minute > spec.max_executions_per_minute:
            which = (
                f"Schedules {', '.join(sorted(rates))} start"
                if len(rates) > 1
                else f"Schedule {next(iter(rates))} starts"
            )
            yield quota.finding(
                QUOTA_RATE_BELOW_FIRE_RATE,
                "spec.maxExecutionsPerMinute",
                f"{which} {_per(per_minute)} runs a minute on average, above maxExecutionsPerMinute "
                f"{spec.max_executions_per_minute}",
            )


def invalid_calendars(objects: Sequence[Declared]) -> Iterator[Finding]:
    """A Schedule whose cron, interval or time zone does not parse (the CRD
    cannot check it; the operator reports it as InvalidSpec)."""
    for schedule in _of(objects, Kind.SCHEDULE):
        assert isinstance(schedule.spec, ScheduleSpec)
        try:
            calendar_of(schedule.spec)
        except CalendarError as error:
            field = str(error).split(":")[0]
            yield schedule.finding(INVALID, f"spec.{field}", str(error), Severity.ERROR)


_RULES: tuple[Callable[[Sequence[Declared]], Iterator[Finding]], ...] = (
    invalid_calendars,
    worker_tasks_without_schedule_to_start,
    retries_outliving_the_workflow_timeout,
    sla_at_or_above_the_timeout,
    gates_that_never_admit,
    quotas_that_never_admit,
    windows_without_a_fire,
    retry_kinds_without_a_stop,
    rate_limits_below_the_fire_rate,
    quotas_below_the_fire_rate,
)


# -- helpers ---------------------------------------------------------------------------

# Fire rates are measured over one week from a fixed instant (a Monday), not
# from now: the advisor reads no clock, and a week holds every weekly cron.
_MEASURED_FROM = datetime.datetime(2026, 1, 5, tzinfo=datetime.UTC)
_MEASURED_OVER = datetime.timedelta(days=7)
_MOST_FIRES_COUNTED = 200_000


def _calendar(spec: ScheduleSpec) -> Calendar | None:
    try:
        return calendar_of(spec)
    except CalendarError:
        return None  # reported by invalid_calendars


def _fires_per_second(spec: ScheduleSpec) -> float | None:
    """The schedule's average fire rate over a week, its startAt/endAt aside
    (the rate it fires at while it fires); None when suspended or unreadable."""
    calendar = _calendar(spec)
    if calendar is None or spec.suspend:
        return None
    unbounded = replace(calendar, start=None, end=None)
    fires = unbounded.count_between(_MEASURED_FROM, _MEASURED_FROM + _MEASURED_OVER, _MOST_FIRES_COUNTED)
    return fires / _MEASURED_OVER.total_seconds()


def _workflow(objects: Sequence[Declared], near: Declared, name: str) -> WorkflowSpec | None:
    for candidate in _of(objects, Kind.WORKFLOW):
        if candidate.engine_name == name and _together(candidate, near):
            assert isinstance(candidate.spec, WorkflowSpec)
            return candidate.spec
    return None


def _certain_tasks(tasks: Sequence[WorkflowTask]) -> Iterator[WorkflowTask]:
    """The tasks every run schedules at least once: all branches of a fork and
    a loop's body, never a SWITCH's cases."""
    for task in tasks:
        yield task
        if task.type is TaskType.FORK_JOIN:
            for branch in task.fork_tasks or []:
                yield from _certain_tasks(branch)
        elif task.type is TaskType.DO_WHILE:
            yield from _certain_tasks(task.loop_over or [])


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _per(value: float) -> str:
    """A rate for people: whole when it is, else to two significant places."""
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:.2g}"
