"""A pure, in-memory driver for the decider: it applies commands to a dict of
rows the way the store applies them to PostgreSQL, so whole workflows can be
walked in unit tests without IO. It is not a stand-in for the store in any
test that claims to test the store; those run on a real PostgreSQL."""

from __future__ import annotations

import datetime
from random import Random
from typing import Any

from sluiceway.controls.budget import BudgetWindow
from sluiceway.controls.policy import OperatorDefaults, resolve
from sluiceway.engine.commands import (
    AdmitNext,
    ArmChainDeadline,
    ArmRunTimeout,
    Consequence,
    ContinueAsNew,
    Decision,
    FinishRun,
    NotifyParent,
    PruneIterations,
    RecordTask,
    ScheduleTask,
    StartChild,
    StartFailureWorkflow,
    UpdateTask,
)
from sluiceway.engine.decider import Event, decide
from sluiceway.engine.reruns import Latest, rerun_scope, retry_scope
from sluiceway.engine.snapshot import RunSnapshot, TaskRow
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import WorkflowSpec

T0 = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)


class Simulation:
    def __init__(
        self,
        workflow: dict[str, Any],
        input: dict[str, Any] | None = None,
        definitions: dict[str, dict[str, Any]] | None = None,
        defaults: OperatorDefaults = OperatorDefaults(),
        seed: int = 1,
        previous_run_id: str | None = None,
        chain_id: str | None = None,
        chain_deadline_at: datetime.datetime | None = None,
    ) -> None:
        self.workflow = WorkflowSpec.model_validate(workflow)
        self.input = input or {}
        self.definitions = {k: TaskDefinitionSpec.model_validate(v) for k, v in (definitions or {}).items()}
        self.defaults = defaults
        self.rng = Random(seed)
        self.now = T0
        self.rows: dict[str, TaskRow] = {}
        self.history: list[TaskRow] = []
        self.scheduled: list[ScheduleTask] = []
        self.status = RunStatus.RUNNING
        self.finished: FinishRun | None = None
        self.consequences: list[Consequence] = []  # what followed from the run's end
        self.children: list[StartChild] = []
        self.evaluated = False
        self.timeout_at: datetime.datetime | None = None
        self.terminate_requested: str | None = None
        self.awaiting_admission = False
        self.budgets: dict[str, BudgetWindow] = {}
        self.decisions: list[Decision] = []
        self.paused = False
        self.superseded: dict[str, int] = {}
        self.input_overrides: dict[str, dict[str, Any]] = {}
        self.previous_run_id = previous_run_id
        self.chain_id = chain_id
        self.chain_deadline_at = chain_deadline_at
        self._ids = 0

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot(
            id="run-1",
            namespace="ns",
            workflow_name="wf",
            version=1,
            workflow=self.workflow,
            status=self.status,
            input=self.input,
            tasks=dict(self.rows),
            evaluated=self.evaluated,
            timeout_at=self.timeout_at,
            terminate_requested=self.terminate_requested,
            awaiting_admission=self.awaiting_admission,
            policies={name: resolve(spec, self.defaults) for name, spec in self.definitions.items()},
            defaults=self.defaults,
            budgets=self.budgets,
            paused=self.paused,
            superseded=dict(self.superseded),
            input_overrides=dict(self.input_overrides),
            chain_id=self.chain_id,
            previous_run_id=self.previous_run_id,
            chain_deadline_at=self.chain_deadline_at,
        )

    def _latest(self) -> dict[str, Latest]:
        return {
            ref: Latest(row.status, row.attempt)
            for ref, row in self.rows.items()
            if ref not in self.superseded or row.attempt > self.superseded[ref]
        }

    def _reopen(self, scope: dict[str, int]) -> None:
        """What the store does on retry and rerun: the run runs again, the scope is history."""
        self.superseded.update(scope)
        self.status, self.finished = RunStatus.RUNNING, None
        self.evaluated, self.timeout_at = False, None

    def retry(self) -> dict[str, int]:
        scope = retry_scope(self._latest())
        self._reopen(scope)
        return scope

    def rerun(self, ref: str, input: dict[str, Any] | None = None) -> dict[str, int]:
        scope = rerun_scope(self.workflow, ref, self._latest())
        if input is not None:
            self.input_overrides[ref] = input
        self._reopen(scope)
        return scope

    def step(self, event: Event = Event.TASK_UPDATED) -> Decision:
        decision = decide(self.snapshot(), event, self.now, self.rng)
        self.decisions.append(decision)
        self.evaluated = True
        for command in decision.commands:
            self._apply(command)
        return decision

    def settle(self, limit: int = 50) -> None:
        """Decide until nothing changes (what the decide queue converges to)."""
        for _ in range(limit):
            if not self.step().commands:
                return
        raise AssertionError("the decider did not settle")

    def _row_id(self) -> str:
        self._ids += 1
        return f"t{self._ids}"

    def _apply(self, command: object) -> None:
        if isinstance(command, ScheduleTask):
            self.scheduled.append(command)
            self._put(
                TaskRow(
                    self._row_id(),
                    command.ref,
                    command.type,
                    command.name,
                    command.status,
                    command.attempt,
                    command.input,
                    {},
                    "",
                    None,
                    command.deadlines.schedule_to_close,
                    command.first_scheduled_at,
                    loop=command.loop,
                    iteration=command.iteration,
                )
            )
        elif isinstance(command, RecordTask):
            self._put(
                TaskRow(
                    self._row_id(),
                    command.ref,
                    command.type,
                    command.name,
                    command.status,
                    command.attempt,
                    command.input,
                    command.output,
                    command.reason,
                    loop=command.loop,
                    iteration=command.iteration,
                )
            )
        elif isinstance(command, UpdateTask):
            row = next(r for r in self.rows.values() if r.id == command.task_id)
            output = row.output if command.output is None else command.output
            self._put(TaskRow(**{**row.__dict__, "status": command.status, "reason": command.reason, "output": output}))
        elif isinstance(command, PruneIterations):
            for ref, row in list(self.rows.items()):
                if row.loop == command.loop and row.iteration is not None and row.iteration < command.before:
                    del self.rows[ref]
        elif isinstance(command, ArmRunTimeout):
            self.timeout_at = command.at
        elif isinstance(command, ArmChainDeadline):
            self.chain_deadline_at = command.at
        elif isinstance(command, StartChild):
            self.children.append(command)
        elif isinstance(command, FinishRun):
            self.status, self.finished = command.status, command
            for _ref, row in list(self.rows.items()):
                if not row.status.is_terminal():
                    self._put(TaskRow(**{**row.__dict__, "status": TaskStatus.CANCELED}))
        elif isinstance(command, (NotifyParent, AdmitNext, StartFailureWorkflow, ContinueAsNew)):
            self.consequences.append(command)

    def failure_workflow(self) -> str | None:
        """The failure workflow the run's end started, if any."""
        return next((c.workflow for c in self.consequences if isinstance(c, StartFailureWorkflow)), None)

    def _put(self, row: TaskRow) -> None:
        self.rows[row.ref] = row
        self.history.append(row)

    def worker(
        self,
        ref: str,
        status: TaskStatus = TaskStatus.COMPLETED,
        output: dict[str, Any] | None = None,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        """A worker (or the sweeper) reports on the latest attempt of `ref`."""
        row = self.rows[ref]
        assert not row.status.is_terminal(), f"{ref} is already {row.status}"
        self._put(
            TaskRow(
                **{
                    **row.__dict__,
                    "status": status,
                    "output": output or {},
                    "reason": reason,
                    "retry_after_seconds": retry_after,
                }
            )
        )

    def active(self) -> list[str]:
        return sorted(r.ref for r in self.rows.values() if not r.status.is_terminal())

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)
