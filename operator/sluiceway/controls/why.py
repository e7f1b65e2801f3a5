"""Why is my task not running? Facts about a run go in; ranked reasons come
out, each naming its control and its numbers, like Kueue's pending reasons but
in one answer. Pure: the store gathers the facts, and controls.gates says
which gates hold and how each one's sentence reads (its table, `GATES`)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluiceway.controls import webhooks
from sluiceway.controls.gates import (
    MAX_CONCURRENT_TASKS,
    RATE_LIMIT_CONFIG,
    SEMAPHORE,
    GateHold,
    GateState,
    Held,
    SemaphoreState,
    closed,
    spoken_seconds,
)
from sluiceway.controls.policy import Gates
from sluiceway.controls.priority import DEFAULT as DEFAULT_PRIORITY
from sluiceway.model.workflow import Executor, TaskType

# `why` counts the ready tasks ahead of a task up to this many.
AHEAD_COUNTED = 10_001


@dataclass(frozen=True)
class TaskFacts:
    task_id: str
    ref: str
    type: str
    name: str
    status: str
    attempt: int
    seconds_until_available: float  # <= 0: leasable now
    priority: int = DEFAULT_PRIORITY
    ahead: int | None = None  # ready tasks of its queue leased before it (at most AHEAD_COUNTED); None: not ready
    # What the estimate of its lease goes by: its type's recent tasks (store.diagnostics, RECENT_SAMPLE).
    recent_lease_rate: float | None = None  # leases a second over the last minute; None: none seen
    mean_hold_seconds: float | None = None  # how long a recent task of its type held its lease
    worker_id: str | None = None
    seconds_leased: float | None = None
    seconds_since_heartbeat: float | None = None
    gates: Gates = field(default_factory=Gates)
    in_flight: int = 0
    window_used: int = 0
    seconds_to_next_window: float = 0.0
    semaphores: list[SemaphoreState] = field(default_factory=list)
    semaphore_holders: dict[str, list[str]] = field(default_factory=dict)
    recent_pollers: int = 0
    seconds_since_last_poll: float | None = None
    queue_ready: int = 0
    # What waiting tasks and loops are about.
    input: Mapping[str, Any] = field(default_factory=dict)
    output: Mapping[str, Any] = field(default_factory=dict)
    scheduled_at: datetime.datetime | None = None
    seconds_until_timeout: float | None = None  # timeoutSeconds, if armed
    iteration: int | None = None  # the DO_WHILE iteration the task belongs to
    max_iterations: int | None = None  # of the DO_WHILE this task is
    keep_last_n: int | None = None
    webhook_defined: bool = True  # WAIT_FOR_WEBHOOK: does its Webhook exist?
    queued_messages: int = 0  # PULL_WORKFLOW_MESSAGES: messages nobody took yet
    snooze_count: int = 0
    interrupt_count: int = 0
    previous_reason: str = ""  # why the attempt before this one failed

    def gate_state(self) -> GateState:
        return GateState(self.in_flight, self.window_used, self.seconds_to_next_window, self.semaphores)


@dataclass(frozen=True)
class RunFacts:
    execution_id: str
    workflow: str
    status: str
    reason: str = ""
    awaiting_admission: bool = False
    admission_key: str | None = None
    admission_limit: int = 0
    admission_holders: list[str] = field(default_factory=list)
    max_concurrent_tasks: int = 0
    active_worker_tasks: int = 0
    active_tasks: int = 0  # all of them; `tasks` may hold only the first few (a fan-out of thousands)
    tasks: list[TaskFacts] = field(default_factory=list)
    quarantine_reason: str | None = None  # set while the decider passes the run over
    paused: bool = False
    pause_reason: str = ""
    seconds_paused: float = 0.0


@dataclass(frozen=True)
class Reason:
    control: str
    message: str
    task_id: str | None = None
    ref: str | None = None
    blocking: bool = True  # False: informational (the task is running, or the run is over)


def _executor(task: TaskFacts) -> Executor:
    try:
        return TaskType(task.type).executor()
    except ValueError:  # a type this version does not know: nobody here polls for it
        return Executor.ENGINE


def _since(task: TaskFacts) -> str:
    """` since 10:02:03Z`, and the timeout ahead when one is armed."""
    since = f" since {task.scheduled_at.astimezone(datetime.UTC):%H:%M:%SZ}" if task.scheduled_at else ""
    if task.seconds_until_timeout is not None:
        since += f"; timeoutSeconds ends the wait in {spoken_seconds(max(task.seconds_until_timeout, 0.0))}"
    return since


def _iteration(task: TaskFacts) -> str:
    return f" (iteration {task.iteration})" if task.iteration is not None else ""


def _waiting(task: TaskFacts) -> Reason | None:
    """A task that waits for the world: non-blocking unless nothing can end its wait."""

    def reason(control: str, message: str, blocking: bool = False) -> Reason:
        return Reason(control, message, task.task_id, task.ref, blocking)

    if task.type == "WAIT":
        return reason("wait", f"{task.ref} is waiting (a WAIT task){_since(task)}")
    if task.type == "SUB_WORKFLOW":
        return reason("subWorkflow", f"{task.ref} waits for its child run")
    if task.type == "WAIT_FOR_WEBHOOK":
        name = str(task.input.get("webhook", ""))
        if not task.webhook_defined:
            return reason(
                "webhook",
                f"{task.ref} waits for webhook {name}, which does not exist in this namespace: no call can end "
                f"the wait{_since(task)}",
                blocking=True,
            )
        matching = webhooks.describe(task.input.get("matches"))
        return reason("webhook", f"waiting for webhook {name} matching {matching}{_since(task)}")
    if task.type == "HUMAN":
        return reason(
            "human",
            f"{task.ref} waits for a person to complete or reject it{_since(task)} "
            f"(POST .../tasks/{task.task_id}/complete or /reject)",
        )
    if task.type == "PULL_WORKFLOW_MESSAGES":
        return reason(
            "messages",
            f"{task.ref} waits for messages (batchSize {task.input.get('batchSize', 1)}, "
            f"{task.queued_messages} queued){_since(task)} (POST .../executions/<id>/messages)",
        )
    if task.type == "DO_WHILE":
        bound = f" of at most {task.max_iterations}" if task.max_iterations else ""
        kept = f", keeping the last {task.keep_last_n}" if task.keep_last_n else ""
        return reason("loop", f"{task.ref} is on iteration {task.output.get('iteration', 1)}{bound}{kept}")
    return None


def explain_task(task: TaskFacts) -> list[Reason]:
    """Reasons for one active task, most telling first."""

    def reason(control: str, message: str, blocking: bool = True) -> Reason:
        return Reason(control, message, task.task_id, task.ref, blocking)

    if task.status == "IN_PROGRESS":
        waiting = _waiting(task)
        if waiting is not None:
            return [waiting]
        beat = (
            f", last heartbeat {spoken_seconds(task.seconds_since_heartbeat)} ago"
            if task.seconds_since_heartbeat is not None
            else ""
        )
        return [
            reason(
                "running",
                f"{task.ref} ({task.name}){_iteration(task)} attempt {task.attempt} is leased to "
                f"{task.worker_id} for {spoken_seconds(task.seconds_leased or 0)}{beat}",
                blocking=False,
            )
        ]
    if task.seconds_until_available > 0:
        control = "snooze" if task.snooze_count > 0 or task.attempt == 1 else "retryBackoff"
        if control == "snooze":
            what = f"it was snoozed ({task.snooze_count} times)" if task.snooze_count else "it was snoozed"
        else:
            after = f" after: {task.previous_reason[:200]}" if task.previous_reason else ""
            what = f"attempt {task.attempt} waits out its retry backoff{after}"
        return [
            reason(
                control,
                f"{task.ref} ({task.name}){_iteration(task)}: {what}; leasable in "
                f"{spoken_seconds(task.seconds_until_available)}",
            )
        ]
    found = [reason(hold.control, _held(task, hold)) for hold in closed(task.gates, task.gate_state())]
    if _executor(task) is Executor.WORKER and task.recent_pollers == 0:
        last = (
            f"last poll {spoken_seconds(task.seconds_since_last_poll)} ago"
            if task.seconds_since_last_poll is not None
            else "never polled"
        )
        found.append(
            reason(
                "noWorkers",
                f"nobody is polling queue {task.name} ({last}): a fleet problem, often a "
                f"namespace or task-type mismatch",
            )
        )
    if not found:
        found.append(
            reason(
                "queued",
                f"{task.ref} ({task.name}) is ready at priority {task.priority}, {_ahead(task)}, and "
                f"waits for a worker to lease it ({task.recent_pollers} polling)",
            )
        )
    if task.ahead is not None and _executor(task) is Executor.WORKER:
        found.append(reason("estimate", f"{task.ref}: {estimate(task)}", blocking=False))
    return found


def estimate(task: TaskFacts) -> str:
    """When a ready task should be leased, from its place in its queue and the
    slowest of what serves that queue: its rate window (exact: tokens per
    window), its cap and semaphores (slots over how long a recent task held
    one), or, ungated, its type's lease rate over the last minute. Says
    `unknown` rather than guess when a number it needs was never seen."""
    position = task.ahead or 0
    if task.recent_pollers == 0:
        return "lease time unknown: nobody polls its queue"
    bounds: list[tuple[float, str]] = []
    gates = task.gates
    if gates.rate_limit_per_frequency:
        bounds.append(_by_window(task, position))
    slots = [(f"concurrentExecLimit {gates.concurrent_exec_limit}", gates.concurrent_exec_limit, task.in_flight)]
    slots = [s for s in slots if s[1]] + [(f"semaphore {s.name}", s.permits, s.held) for s in task.semaphores]
    for name, limit, used in slots:
        if limit <= 0:
            return f"no lease while {name} allows none"
        if task.mean_hold_seconds is None:
            return f"lease time unknown: no task of {task.name} finished lately, to tell how long one holds {name}"
        bounds.append(_by_slots(position, limit, used, task.mean_hold_seconds, name))
    if not bounds:
        if not task.recent_lease_rate:
            return f"lease time unknown: no task of {task.name} was leased in the last minute to measure a rate by"
        rate = task.recent_lease_rate
        bounds.append((position / rate, f"{task.name}'s {rate:.2g} leases a second over the last minute"))
    seconds, binding = max(bounds)
    when = "now" if seconds < 1 else f"in about {spoken_seconds(seconds)}"
    return f"estimated lease {when}, {position} ahead of it, bound by {binding}"


def _by_window(task: TaskFacts, position: int) -> tuple[float, str]:
    per, window = task.gates.rate_limit_per_frequency, task.gates.rate_limit_frequency_seconds
    left = max(per - task.window_used, 0)
    seconds = 0.0 if position < left else task.seconds_to_next_window + ((position - left) // per) * window
    return seconds, f"rateLimit {per} per {window} s"


def _by_slots(position: int, limit: int, used: int, hold: float, name: str) -> tuple[float, str]:
    free = max(limit - used, 0)
    seconds = 0.0 if position < free else ((position - free) // limit + 1) * hold
    return seconds, f"{name} at {hold:.2g} s a task"


def _ahead(task: TaskFacts) -> str:
    """Where it stands: `12 of 40 ready tasks of its queue go first`."""
    if task.ahead is None:
        return f"{task.queue_ready} in its queue"
    first = f"more than {AHEAD_COUNTED - 1:,}" if task.ahead >= AHEAD_COUNTED else f"{task.ahead:,}"
    return f"{first} of {task.queue_ready:,} ready tasks of its queue go first (docs/priority.md)"


def _held(task: TaskFacts, hold: GateHold) -> str:
    """A closed dequeue gate's sentence; a semaphore's names the tasks that hold its permits."""
    holders = task.semaphore_holders.get(hold.name, []) if hold.gate is SEMAPHORE else []
    return hold.sentence(Held(task.name, holders))


def explain(run: RunFacts) -> list[Reason]:
    """Every reason the run is not further along, blocking ones first."""
    if run.status != "RUNNING":
        suffix = f": {run.reason}" if run.reason else ""
        return [Reason("finished", f"run {run.execution_id} is {run.status}{suffix}", blocking=False)]
    if run.quarantine_reason is not None:
        return [
            Reason(
                "quarantine",
                f"run {run.execution_id} is quarantined: the decider cannot evaluate it ({run.quarantine_reason}). "
                "It stays as it is until it is terminated (POST .../terminate), or released once the cause is "
                f"fixed by forcing an evaluation (POST .../executions/{run.execution_id}/decide)",
            )
        ]
    if run.paused:
        why = f": {run.pause_reason}" if run.pause_reason else ""
        return [
            Reason(
                "paused",
                f"run {run.execution_id} is paused (for {spoken_seconds(run.seconds_paused)}){why}; nothing new is "
                f"scheduled and its clocks are stopped until it is resumed (sluiceway runs resume "
                f"{run.execution_id}, or POST .../executions/{run.execution_id}/resume)",
            )
        ]
    if run.awaiting_admission:
        key = GateHold(RATE_LIMIT_CONFIG, len(run.admission_holders), run.admission_limit)
        held = Held(f"{run.workflow} key {run.admission_key!r}", run.admission_holders)
        return [Reason(key.control, key.sentence(held))]
    reasons: list[Reason] = []
    for task in run.tasks:
        reasons.extend(explain_task(task))
    if run.max_concurrent_tasks and run.active_worker_tasks >= run.max_concurrent_tasks:
        cap = GateHold(MAX_CONCURRENT_TASKS, run.active_worker_tasks, run.max_concurrent_tasks)
        reasons.append(Reason(cap.control, cap.sentence(Held(run.workflow))))
    if not reasons:
        reasons.append(
            Reason(
                "decider",
                "no task is active: if this persists, force an evaluation with "
                f"POST .../executions/{run.execution_id}/decide",
                blocking=True,
            )
        )
    return sorted(reasons, key=lambda r: not r.blocking)
