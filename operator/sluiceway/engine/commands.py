"""What the decider asks the store to do. Each is applied inside the same
transaction as the rest of one decision."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from sluiceway.controls.policy import Timeouts
from sluiceway.controls.priority import DEFAULT as DEFAULT_PRIORITY
from sluiceway.controls.timeouts import Deadlines
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import TaskType


@dataclass(frozen=True)
class ScheduleTask:
    """A new attempt row: queued for workers (SCHEDULED), or IN_PROGRESS for
    tasks that wait (WAIT) or run a child workflow."""

    ref: str
    type: TaskType
    name: str
    attempt: int
    input: dict[str, Any]
    status: TaskStatus
    available_at: datetime.datetime
    deadlines: Deadlines
    first_scheduled_at: datetime.datetime
    timeouts: Timeouts = field(default_factory=Timeouts)  # the policy this attempt runs under, kept on its row
    # A first attempt of an indefinite task: its deadline is the insert's now()
    # plus this many seconds (the database's clock), if earlier than deadlines.
    time_budget: int = 0
    loop: str | None = None  # the DO_WHILE and iteration this task belongs to
    iteration: int | None = None
    priority: int = DEFAULT_PRIORITY  # its place in its queue (controls.priority)


@dataclass(frozen=True)
class RecordTask:
    """A task the decider ran itself (fork, join, switch, inline, terminate),
    or one it keeps running (a DO_WHILE, IN_PROGRESS until its loop ends)."""

    ref: str
    type: TaskType
    name: str
    attempt: int
    status: TaskStatus
    input: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    loop: str | None = None
    iteration: int | None = None


@dataclass(frozen=True)
class UpdateTask:
    task_id: str
    status: TaskStatus
    reason: str
    output: dict[str, Any] | None = None  # replaces the output when set (a DO_WHILE's progress)


@dataclass(frozen=True)
class PruneIterations:
    """Delete the task rows of a DO_WHILE's iterations before `before`: its
    keepLastN. The loop's own output keeps their summary."""

    loop: str
    before: int


@dataclass(frozen=True)
class DecideAgain:
    """Wake the decider for this run once this decision is applied: a loop of
    engine tasks advances a bounded number of iterations per pass."""


@dataclass(frozen=True)
class StartChild:
    """Start the child run of a SUB_WORKFLOW task, linked to that task."""

    parent_ref: str
    workflow: str
    version: int | None
    input: dict[str, Any]


@dataclass(frozen=True)
class ArmRunTimeout:
    at: datetime.datetime


@dataclass(frozen=True)
class ArmChainDeadline:
    """The first run of a chain: its deadline, which every link carries verbatim."""

    at: datetime.datetime


@dataclass(frozen=True)
class FinishRun:
    """End the run: cancel what is still active and terminate its child runs.
    What else follows from its end comes as the commands below, applied only
    if the run did end."""

    status: RunStatus
    reason: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    failed_task_id: str | None = None
    by_chain_deadline: bool = False  # TIMED_OUT by the chain's deadline rather than the run's own


@dataclass(frozen=True)
class NotifyParent:
    """The run was a SUB_WORKFLOW's child: end that task in the parent run
    with this outcome, and wake the parent."""

    parent_run_id: str
    parent_task_id: str
    status: TaskStatus
    output: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class AdmitNext:
    """The run held a slot of its key under `rateLimitConfig`: admit the
    oldest runs waiting on that key while the limit leaves room."""

    workflow: str
    key: str
    limit: int


@dataclass(frozen=True)
class StartFailureWorkflow:
    """The run failed or timed out and names a `failureWorkflow`: start it on this input."""

    workflow: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ContinueAsNew:
    """The run ended by continuing as new: start the next link of its chain,
    with this id and input, carrying the chain's id and deadline."""

    workflow: str
    input: dict[str, Any]
    run_id: str
    chain_id: str
    chain_deadline_at: datetime.datetime | None


@dataclass(frozen=True)
class Quarantine:
    """The run could not be decided for a reason nothing foresaw (a stored
    row or spec the decider cannot read). It is set aside, alone, until an
    operator terminates or releases it; no other command comes with it."""

    reason: str


@dataclass(frozen=True)
class Hold:
    """Work that could run but a gate holds (for "why is my task not running?")."""

    ref: str
    control: str
    detail: str


# What follows from a run's end, beyond ending it.
Consequence = NotifyParent | AdmitNext | StartFailureWorkflow | ContinueAsNew
Command = (
    ScheduleTask
    | RecordTask
    | UpdateTask
    | PruneIterations
    | DecideAgain
    | StartChild
    | ArmRunTimeout
    | ArmChainDeadline
    | FinishRun
    | Consequence
    | Quarantine
)


@dataclass(frozen=True)
class Decision:
    commands: list[Command]
    holds: list[Hold] = field(default_factory=list)
    # Task types whose policy the snapshot lacked (a dynamic fork's children):
    # the store loads them and decides again rather than apply this decision.
    needs: frozenset[str] = frozenset()

    def finish(self) -> FinishRun | None:
        return next((c for c in self.commands if isinstance(c, FinishRun)), None)

    def quarantine(self) -> Quarantine | None:
        return next((c for c in self.commands if isinstance(c, Quarantine)), None)
