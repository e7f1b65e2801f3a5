"""The decider: given one run's snapshot, what happens next.

It walks the task graph from the top. A task with no row yet is started
(scheduled for a worker, or run here if it is an operator); a running task
blocks its sequence; a failed one goes through the retry decision; a completed
fork walks its branches, and a JOIN completes once its branches have. The walk
is level-based: it looks at rows, not at which event woke it, so running it
twice on the same snapshot yields the same commands, and a lost wake-up is
repaired by the next one.

The decider is total: nothing a spec, an input or a stored row holds makes it
raise. A reference or expression that cannot be evaluated fails its task
terminally, naming the field, and the run follows its policy; anything else
that goes wrong yields a single Quarantine command, so the store sets that run
aside and the loop goes on with the others.
"""

from __future__ import annotations

import contextlib
import datetime
import re
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum, StrEnum
from random import Random
from typing import Any

from sluiceway.controls import expressions, retries, timeouts
from sluiceway.controls.budget import BudgetWindow
from sluiceway.controls.durations import parse_duration, parse_instant
from sluiceway.controls.expressions import ExpressionError
from sluiceway.controls.pausing import RunClocks, timed_out
from sluiceway.controls.policy import TaskPolicy, resolve
from sluiceway.engine.commands import (
    AdmitNext,
    ArmRunTimeout,
    Command,
    Consequence,
    Decision,
    FinishRun,
    Hold,
    NotifyParent,
    Quarantine,
    RecordTask,
    ScheduleTask,
    StartChild,
    StartFailureWorkflow,
    UpdateTask,
)
from sluiceway.engine.snapshot import RunLinks, RunSnapshot, TaskRow
from sluiceway.model.common import ENGINE_NAME_PATTERN
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import EvaluatorType, TaskType, WorkflowTask

_HAS_CHILDREN = (TaskType.FORK_JOIN, TaskType.FORK_JOIN_DYNAMIC, TaskType.SWITCH)


class Progress(Enum):
    DONE = "done"  # the sequence (or task) has finished successfully
    BLOCKED = "blocked"  # something is running or waiting
    HALT = "halt"  # the run is finishing; stop walking


class Event(StrEnum):
    """Why the decider was woken. The walk does not depend on it; it is kept
    for tracing."""

    STARTED = "started"
    TASK_UPDATED = "task_updated"
    TIMER = "timer"
    CHILD_FINISHED = "child_finished"
    ADMITTED = "admitted"
    TERMINATE = "terminate"
    FORCED = "forced"


def decide(snapshot: RunSnapshot, event: Event, now: datetime.datetime, rng: Random) -> Decision:
    if snapshot.status.is_terminal():
        return Decision([])
    try:
        return _Walker(snapshot, now, rng).run()
    except Exception as error:  # noqa: BLE001 - totality: whatever a stored row holds, the loop goes on
        return Decision([Quarantine(f"the decider cannot evaluate this run: {type(error).__name__}: {error}")])


def consequences(run: RunLinks, finish: FinishRun) -> list[Consequence]:
    """What follows from a run's end, beyond ending it: its parent learns how
    it ended, the next run waiting on its admission key goes, and a failure
    starts its failure workflow."""
    found: list[Consequence] = []
    if run.parent_run_id is not None and run.parent_task_id is not None:
        ok = finish.status is RunStatus.COMPLETED
        found.append(
            NotifyParent(
                run.parent_run_id,
                run.parent_task_id,
                TaskStatus.COMPLETED if ok else TaskStatus.FAILED,
                finish.output,
                "" if ok else f"sub-workflow {run.id} {finish.status.value}: {finish.reason}",
            )
        )
    if run.admission_key is not None and not run.awaiting_admission and run.admission_limit is not None:
        found.append(AdmitNext(run.workflow_name, run.admission_key, run.admission_limit))
    if run.failure_workflow and finish.status in (RunStatus.FAILED, RunStatus.TIMED_OUT):
        failure = {
            "workflowId": run.id,
            "workflowName": run.workflow_name,
            "reason": finish.reason,
            "failureStatus": finish.status.value,
            "failureTaskId": finish.failed_task_id,
        }
        found.append(StartFailureWorkflow(run.failure_workflow, failure))
    return found


_MAX_HOLDS = 10
# What evaluating a reference, an expression or a value written by people can
# raise. It fails the task being started; the same input would fail again.
_EVALUATION_ERRORS = (ExpressionError, ValueError, OverflowError)
_ENGINE_NAME = re.compile(ENGINE_NAME_PATTERN)


def dynamic_ref(fork_ref: str, index: int) -> str:
    return f"{fork_ref}__{index}"


class _Walker:
    def __init__(self, snapshot: RunSnapshot, now: datetime.datetime, rng: Random) -> None:
        self.snap = snapshot
        self.now = now
        self.rng = rng
        self.commands: list[Command] = []
        self.holds: list[Hold] = []
        # Superseded attempts are history: the walk starts those tasks afresh.
        self.rows: dict[str, TaskRow] = {
            ref: row
            for ref, row in snapshot.tasks.items()
            if ref not in snapshot.superseded or row.attempt > snapshot.superseded[ref]
        }  # plus what this pass records
        self.branches: dict[str, list[Progress]] = {}  # fork ref -> progress of each branch
        self.finish: FinishRun | None = None
        workflow = snapshot.workflow
        self.cap = workflow.max_concurrent_tasks
        self.active_workers = sum(
            1 for row in self.rows.values() if row.type.executor().leases() and not row.status.is_terminal()
        )

    # -- the run ---------------------------------------------------------------

    def run(self) -> Decision:
        snap = self.snap
        if not snap.evaluated and snap.workflow.timeout_seconds > 0:
            # Armed on the one evaluation guaranteed to happen exactly once: the first.
            self.commands.append(ArmRunTimeout(self.now + datetime.timedelta(seconds=snap.workflow.timeout_seconds)))
        passed = timed_out(RunClocks(timeout_at=snap.timeout_at, chain_deadline_at=snap.chain_deadline_at), self.now)
        if snap.terminate_requested is not None:
            self._finish(RunStatus.TERMINATED, snap.terminate_requested)
        elif snap.paused:  # results are recorded; nothing new starts and no deadline fires until it resumes
            self._hold("", "paused", "the run is paused")
        elif passed == "chain":
            self._finish(RunStatus.TIMED_OUT, "the chain's deadline passed")
        elif passed == "run":
            self._finish(RunStatus.TIMED_OUT, f"workflow timeoutSeconds {snap.workflow.timeout_seconds} exceeded")
        elif snap.awaiting_admission:
            self._hold("", "rateLimitConfig", "awaiting admission")
        else:
            progress = self._sequence(snap.workflow.tasks)
            if progress is Progress.DONE and self.finish is None:
                self._complete()
        if self.finish is not None:
            self.commands.append(self.finish)
            self.commands.extend(consequences(snap.links(), self.finish))
        return Decision(self.commands, self.holds)

    def _finish(
        self, status: RunStatus, reason: str, output: dict[str, Any] | None = None, failed_task_id: str | None = None
    ) -> None:
        if self.finish is None:
            self.finish = FinishRun(status, reason, output or {}, failed_task_id)

    def _complete(self) -> None:
        try:
            output = self._run_output()
        except _EVALUATION_ERRORS as error:
            self._finish(RunStatus.FAILED, f"the run's output cannot be evaluated: {error}")
            return
        self._finish(RunStatus.COMPLETED, "", output)

    def _run_output(self) -> dict[str, Any]:
        template = self.snap.workflow.output_parameters
        if template:
            resolved = expressions.resolve(template, self._context(), "outputParameters")
            return dict(resolved) if isinstance(resolved, dict) else {"result": resolved}
        last = self._last_completed(self.snap.workflow.tasks)
        return dict(last.output) if last else {}

    def _last_completed(self, tasks: Sequence[WorkflowTask]) -> TaskRow | None:
        for task in reversed(tasks):
            row = self.rows.get(task.task_reference_name)
            if row is not None and row.status.is_successful():
                return row
        return None

    # -- walking ---------------------------------------------------------------

    def _sequence(self, tasks: Sequence[WorkflowTask]) -> Progress:
        previous: WorkflowTask | None = None
        for task in tasks:
            progress = self._task(task, previous)
            if progress is not Progress.DONE:
                return progress
            previous = task
        return Progress.DONE

    def _task(self, task: WorkflowTask, previous: WorkflowTask | None) -> Progress:
        if self.finish is not None:
            return Progress.HALT
        row = self.rows.get(task.task_reference_name)
        if row is None:
            return self._start(task, previous)
        if not row.status.is_terminal():
            return Progress.BLOCKED
        if row.status.is_failure():
            return self._failed(task, row)
        return self._continue(task, row)

    def _continue(self, task: WorkflowTask, row: TaskRow) -> Progress:
        """A successful operator may still have work below it; one that failed
        and was absorbed (optional) has none."""
        if row.status is not TaskStatus.COMPLETED:
            return Progress.DONE
        if task.type is TaskType.FORK_JOIN:
            self.branches[task.task_reference_name] = [self._sequence(b) for b in task.fork_tasks or []]
            return Progress.HALT if Progress.HALT in self.branches[task.task_reference_name] else Progress.DONE
        if task.type is TaskType.FORK_JOIN_DYNAMIC:
            return self._dynamic_children(task, row)
        if task.type is TaskType.SWITCH:
            case = str(row.output.get("selectedCase", ""))
            return self._sequence(self._case(task, case))
        return Progress.DONE

    # -- starting tasks --------------------------------------------------------

    def _start(self, task: WorkflowTask, previous: WorkflowTask | None) -> Progress:
        try:
            progress = self._begin(task, previous)
        except _EVALUATION_ERRORS as error:
            return self._operator_failed(task, str(error))
        row = self.rows.get(task.task_reference_name)
        if task.type in _HAS_CHILDREN and row is not None and row.status is TaskStatus.COMPLETED:
            # Walked outside the try: a child's failure is the child's, never its parent's.
            return self._continue(task, row)
        return progress

    def _begin(self, task: WorkflowTask, previous: WorkflowTask | None) -> Progress:
        """Start one task: every expression it needs is evaluated here."""
        kind = task.type
        if kind.executor().leases():
            return self._schedule_worker_task(
                task, task.task_reference_name, task.name, None, attempt=self._first_attempt(task.task_reference_name)
            )
        if kind is TaskType.FORK_JOIN:
            self._record(task, TaskStatus.COMPLETED)
            return Progress.DONE
        if kind is TaskType.FORK_JOIN_DYNAMIC:
            return self._start_dynamic_fork(task)
        if kind is TaskType.JOIN:
            return self._join(task, previous)
        if kind is TaskType.SWITCH:
            case = self._switch_case(task)
            self._record(task, TaskStatus.COMPLETED, output={"evaluationResult": [case], "selectedCase": case})
            return Progress.DONE
        if kind is TaskType.INLINE:
            return self._inline(task)
        if kind is TaskType.TERMINATE:
            return self._terminate(task)
        if kind is TaskType.WAIT:
            return self._wait(task)
        if kind is TaskType.SUB_WORKFLOW:
            return self._sub_workflow(
                task, attempt=self._first_attempt(task.task_reference_name), inputs=self._inputs(task)
            )
        raise AssertionError(f"unhandled task type {kind}")  # pragma: no cover - the enum is exhaustive

    def _first_attempt(self, ref: str) -> int:
        """The number of a task's first attempt: 1, or the next after the attempts a retry superseded."""
        return self.snap.superseded.get(ref, 0) + 1

    def _policy(self, task: WorkflowTask | None, name: str) -> TaskPolicy:
        policy = self.snap.policies.get(name)
        return (policy or resolve(None, self.snap.defaults)).for_task(task)

    def _schedule_worker_task(
        self,
        task: WorkflowTask | None,
        ref: str,
        name: str,
        input_: dict[str, Any] | None,
        attempt: int,
        delay: float = 0.0,
        first_scheduled_at: datetime.datetime | None = None,
        schedule_to_close_at: datetime.datetime | None = None,
    ) -> Progress:
        if self.cap and self.active_workers >= self.cap:
            self._hold(ref, "maxConcurrentTasks", f"{self.active_workers}/{self.cap} tasks of this run are scheduled")
            return Progress.BLOCKED
        policy = self._policy(task, name)
        ready_at = self.now + datetime.timedelta(seconds=delay)
        first = first_scheduled_at or self.now
        # A retry carries its first attempt's deadline; a first attempt (or one a retry restarts) arms its own.
        retrying = first_scheduled_at is not None
        deadline = schedule_to_close_at if retrying else timeouts.first_schedule_to_close(policy.timeouts, first)
        if input_ is None:
            input_ = self._inputs(task) if task else {}
        kind = task.type if task else TaskType.SIMPLE
        self.commands.append(
            ScheduleTask(
                ref=ref,
                type=kind,
                name=name,
                attempt=attempt,
                input=input_,
                status=TaskStatus.SCHEDULED,
                available_at=ready_at,
                deadlines=timeouts.on_ready(policy.timeouts, ready_at, deadline),
                first_scheduled_at=first,
                timeouts=policy.timeouts,
            )
        )
        self.active_workers += 1
        return Progress.BLOCKED

    def _hold(self, ref: str, control: str, detail: str) -> None:
        if len(self.holds) < _MAX_HOLDS:  # a 10,000-way fan-out needs one example, not 10,000
            self.holds.append(Hold(ref, control, detail))

    def _inputs(self, task: WorkflowTask) -> dict[str, Any]:
        where = f"tasks[{task.task_reference_name}].inputParameters"
        resolved = expressions.resolve(dict(task.input_parameters), self._context(), where)
        return self._overridden(task.task_reference_name, dict(resolved) if isinstance(resolved, dict) else {})

    def _overridden(self, ref: str, inputs: dict[str, Any]) -> dict[str, Any]:
        """A rerun's new input for this task, merged over what it resolved to."""
        override = self.snap.input_overrides.get(ref)
        return {**inputs, **override} if override else inputs

    def _record(
        self,
        task: WorkflowTask,
        status: TaskStatus,
        *,
        output: dict[str, Any] | None = None,
        input_: dict[str, Any] | None = None,
        reason: str = "",
        ref: str | None = None,
    ) -> TaskRow:
        ref = ref or task.task_reference_name
        previous = self.rows.get(ref)
        attempt = previous.attempt + 1 if previous else self._first_attempt(ref)
        command = RecordTask(ref, task.type, task.name, attempt, status, input_ or {}, output or {}, reason)
        self.commands.append(command)
        row = TaskRow(
            id="",
            ref=ref,
            type=task.type,
            name=task.name,
            status=status,
            attempt=attempt,
            input=command.input,
            output=command.output,
            reason=reason,
        )
        self.rows[ref] = row
        return row

    def _operator_failed(self, task: WorkflowTask, message: str) -> Progress:
        # An expression that throws will throw again on identical input: terminal.
        row = self._record(task, TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason=message)
        return self._failed(task, row)

    # -- operators -------------------------------------------------------------

    def _case(self, task: WorkflowTask, case: str) -> list[WorkflowTask]:
        cases = task.decision_cases or {}
        return list(cases[case]) if case in cases else list(task.default_case or [])

    def _switch_case(self, task: WorkflowTask) -> str:
        inputs = self._inputs(task)
        expression = task.expression or ""
        if task.evaluator_type is EvaluatorType.CEL:
            with _at(f"tasks[{task.task_reference_name}].expression"):
                value = expressions.evaluate_cel(expression, self._cel_variables(inputs))
        else:  # value-param: the expression names an input parameter
            value = inputs.get(expression)
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    def _inline(self, task: WorkflowTask) -> Progress:
        inputs = self._inputs(task)
        expression = str(task.input_parameters.get("expression", ""))
        variables = {k: v for k, v in inputs.items() if k not in ("expression", "evaluatorType")}
        with _at(f"tasks[{task.task_reference_name}].inputParameters.expression"):
            value = expressions.evaluate_cel(expression, self._cel_variables(variables))
        self._record(task, TaskStatus.COMPLETED, input_=variables, output={"result": value})
        return Progress.DONE

    def _terminate(self, task: WorkflowTask) -> Progress:
        inputs = self._inputs(task)
        wanted = str(inputs.get("terminationStatus", "COMPLETED")).upper()
        status = {"COMPLETED": RunStatus.COMPLETED, "FAILED": RunStatus.FAILED, "TERMINATED": RunStatus.TERMINATED}.get(
            wanted
        )
        if status is None:
            raise ValueError(
                f"tasks[{task.task_reference_name}].inputParameters.terminationStatus must be COMPLETED, FAILED "
                f"or TERMINATED, not {wanted[:64]!r}"
            )
        output = inputs.get("workflowOutput") or {}
        self._record(task, TaskStatus.COMPLETED, input_=inputs, output={"terminationStatus": wanted})
        self._finish(
            status,
            str(inputs.get("terminationReason", "")),
            dict(output) if isinstance(output, dict) else {"result": output},
        )
        return Progress.HALT

    def _wait(self, task: WorkflowTask) -> Progress:
        inputs = self._inputs(task)
        until: datetime.datetime | None = None
        where = f"tasks[{task.task_reference_name}].inputParameters"
        if inputs.get("duration") is not None:
            with _at(f"{where}.duration"):
                until = self.now + datetime.timedelta(seconds=parse_duration(inputs["duration"]))
        elif inputs.get("until") is not None:
            with _at(f"{where}.until"):
                until = parse_instant(inputs["until"])
        if until is not None and until <= self.now:
            self._record(task, TaskStatus.COMPLETED, input_=inputs)
            return Progress.DONE
        policy = self._policy(task, task.name)
        deadlines = timeouts.on_ready(policy.timeouts, self.now, None, waiting=True)
        if until is not None:
            deadlines = timeouts.Deadlines(total=deadlines.total, wait_until=until)
        self.commands.append(
            ScheduleTask(
                ref=task.task_reference_name,
                type=TaskType.WAIT,
                name=task.name,
                attempt=self._first_attempt(task.task_reference_name),
                input=inputs,
                status=TaskStatus.IN_PROGRESS,
                available_at=self.now,
                deadlines=deadlines,
                first_scheduled_at=self.now,
                timeouts=policy.timeouts,
            )
        )
        return Progress.BLOCKED

    def _sub_workflow(self, task: WorkflowTask, attempt: int, inputs: dict[str, Any]) -> Progress:
        param = task.sub_workflow_param
        assert param is not None  # the model guarantees it
        policy = self._policy(task, task.name)
        self.commands.append(
            ScheduleTask(
                ref=task.task_reference_name,
                type=TaskType.SUB_WORKFLOW,
                name=task.name,
                attempt=attempt,
                input=inputs,
                status=TaskStatus.IN_PROGRESS,
                available_at=self.now,
                deadlines=timeouts.on_ready(policy.timeouts, self.now, None, waiting=True),
                first_scheduled_at=self.now,
                timeouts=policy.timeouts,
            )
        )
        self.commands.append(StartChild(task.task_reference_name, param.name, param.version, inputs))
        return Progress.BLOCKED

    def _start_dynamic_fork(self, task: WorkflowTask) -> Progress:
        inputs = self._inputs(task)
        name = inputs.get("forkTaskName")
        items = inputs.get("forkTaskInputs")
        where = f"tasks[{task.task_reference_name}].inputParameters"
        if not isinstance(name, str) or not _ENGINE_NAME.fullmatch(name):
            raise ValueError(f"{where}.forkTaskName must resolve to a task type name, got {_kind(name)}")
        if not isinstance(items, list):
            raise ValueError(f"{where}.forkTaskInputs must resolve to a list, got {_kind(items)}")
        refs = [dynamic_ref(task.task_reference_name, i) for i in range(len(items))]
        self._record(task, TaskStatus.COMPLETED, input_=inputs, output={"forkedTasks": refs, "forkTaskName": name})
        return Progress.DONE

    def _dynamic_children(self, task: WorkflowTask, fork_row: TaskRow) -> Progress:
        refs = list(fork_row.output.get("forkedTasks", []))
        name = str(fork_row.output.get("forkTaskName", ""))
        items = list(fork_row.input.get("forkTaskInputs", []))
        progress: list[Progress] = []
        child_task = WorkflowTask(
            name=name,
            task_reference_name=dynamic_ref(task.task_reference_name, 0),
            retry_count=task.retry_count,
            optional=task.optional,
        )
        for index, ref in enumerate(refs):
            row = self.rows.get(ref)
            if row is None:
                item = items[index] if index < len(items) else None
                child_input = self._overridden(ref, dict(item) if isinstance(item, dict) else {"item": item})
                progress.append(
                    self._schedule_worker_task(child_task, ref, name, child_input, attempt=self._first_attempt(ref))
                )
            elif not row.status.is_terminal():
                progress.append(Progress.BLOCKED)
            elif row.status.is_failure():
                progress.append(self._failed(child_task, row))
            else:
                progress.append(Progress.DONE)
            if self.finish is not None:
                break
        self.branches[task.task_reference_name] = progress
        return Progress.HALT if self.finish is not None else Progress.DONE

    def _join(self, task: WorkflowTask, previous: WorkflowTask | None) -> Progress:
        if task.join_on:
            waiting_on = list(task.join_on)
            done = all((r := self.rows.get(ref)) is not None and r.status.is_successful() for ref in waiting_on)
        else:
            fork = previous.task_reference_name if previous else ""
            branches = self.branches.get(fork, [])
            done = all(p is Progress.DONE for p in branches)
            fork_row = self.rows.get(fork)
            if previous is not None and previous.type is TaskType.FORK_JOIN_DYNAMIC and fork_row is not None:
                waiting_on = list(fork_row.output.get("forkedTasks", []))
            else:
                waiting_on = [b[-1].task_reference_name for b in (previous.fork_tasks or [])] if previous else []
        if not done:
            return Progress.BLOCKED
        output = {ref: dict(row.output) for ref in waiting_on if (row := self.rows.get(ref)) is not None}
        self._record(task, TaskStatus.COMPLETED, output=output)
        return Progress.DONE

    # -- failures --------------------------------------------------------------

    def _failed(self, task: WorkflowTask, row: TaskRow) -> Progress:
        policy = self._policy(task, row.name)
        budget = self.snap.budgets.get(row.name, BudgetWindow())
        # Counted from the first attempt since the last retry: a manual retry buys a fresh retryCount.
        attempt = row.attempt - self.snap.superseded.get(row.ref, 0)
        failed = retries.FailedAttempt(
            row.status, row.reason, attempt, row.retry_after_seconds, row.schedule_to_close_at
        )
        decision = retries.decide(failed, policy, budget, self.now, self.rng)
        if isinstance(decision, retries.Retry):
            if task.type is TaskType.SUB_WORKFLOW:  # a retry starts a new child on the same input
                return self._sub_workflow(task, attempt=row.attempt + 1, inputs=dict(row.input))
            return self._schedule_worker_task(
                task,
                row.ref,
                row.name,
                dict(row.input),
                attempt=row.attempt + 1,
                delay=decision.delay_seconds,
                first_scheduled_at=row.first_scheduled_at,
                schedule_to_close_at=row.schedule_to_close_at,
            )
        reason = f"{row.reason} [{decision.cause.value}: {decision.message}]" if row.reason else decision.message
        if not decision.fails_run():
            self._absorb(row, decision.outcome, reason)
            self.rows[row.ref] = TaskRow(**{**row.__dict__, "status": decision.outcome, "reason": reason})
            return Progress.DONE
        status = RunStatus.TIMED_OUT if decision.outcome is TaskStatus.TIMED_OUT else RunStatus.FAILED
        self._finish(
            status, f"task {row.ref} ({row.name}) {decision.outcome.value}: {reason}", failed_task_id=row.id or None
        )
        return Progress.HALT

    def _absorb(self, row: TaskRow, status: TaskStatus, reason: str) -> None:
        """An optional task's failure becomes COMPLETED_WITH_ERRORS."""
        if row.id:
            self.commands.append(UpdateTask(row.id, status, reason))
            return
        for index in range(len(self.commands) - 1, -1, -1):  # recorded in this pass: amend the record
            command = self.commands[index]
            if isinstance(command, RecordTask) and command.ref == row.ref:
                self.commands[index] = RecordTask(
                    command.ref,
                    command.type,
                    command.name,
                    command.attempt,
                    status,
                    command.input,
                    command.output,
                    reason,
                )
                return

    # -- expressions -----------------------------------------------------------

    def _context(self) -> dict[str, Any]:
        snap = self.snap
        context: dict[str, Any] = {
            "workflow": {
                "input": _object(snap.input, "the run's input"),
                "workflowId": snap.id,
                "correlationId": snap.correlation_id,
                "workflowType": snap.workflow_name,
                "version": snap.version,
            },
        }
        for ref, row in self.rows.items():
            context[ref] = {
                "input": _object(row.input, f"the stored input of {ref}"),
                "output": _object(row.output, f"the stored output of {ref}"),
                "status": row.status.value,
                "reason": row.reason,
            }
        return context

    def _cel_variables(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        context = self._context()
        workflow = context.pop("workflow")
        return {"input": dict(inputs), "workflow": workflow, "tasks": context}


@contextlib.contextmanager
def _at(where: str) -> Iterator[None]:
    """Name the field an evaluation failure came from."""
    try:
        yield
    except _EVALUATION_ERRORS as error:
        raise ExpressionError(f"{where}: {error}") from error


def _object(value: object, what: str) -> dict[str, Any]:
    """A stored JSON object. Anything else is stored state the decider cannot
    read: a TypeError, which quarantines the run rather than failing a task."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} is not a JSON object")
    return dict(value)


def _kind(value: object) -> str:
    """What a value is, for a message, without echoing a payload."""
    if isinstance(value, str):
        return f"the string {value[:64]!r}" if value else "an empty string"
    return "nothing" if value is None else f"a {type(value).__name__}"
