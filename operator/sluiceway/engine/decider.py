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
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from enum import Enum, StrEnum
from random import Random
from typing import Any

from pydantic import ValidationError

from sluiceway.controls import expressions, priority, retries, timeouts
from sluiceway.controls.budget import BudgetWindow
from sluiceway.controls.chains import chain_timeout_seconds, deadline_fraction, next_run_id
from sluiceway.controls.durations import parse_duration, parse_instant
from sluiceway.controls.expressions import ExpressionError
from sluiceway.controls.pausing import RunClocks, timed_out
from sluiceway.controls.policy import TaskPolicy, resolve
from sluiceway.engine.commands import (
    AdmitNext,
    ArmChainDeadline,
    ArmRunTimeout,
    Command,
    Consequence,
    ContinueAsNew,
    DecideAgain,
    Decision,
    FinishRun,
    Hold,
    NotifyParent,
    PruneIterations,
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
from sluiceway.model.workflow import EvaluatorType, TaskType, WorkflowTask, iter_tasks

_HAS_CHILDREN = (TaskType.FORK_JOIN, TaskType.FORK_JOIN_DYNAMIC, TaskType.SWITCH)
# A loop of engine tasks only would run all its iterations in one pass; it
# advances this many at most, then asks to be decided again.
ITERATIONS_PER_PASS = 50
# A dynamic fork's task specs: branches at most.
MAX_DYNAMIC_BRANCHES = 1000


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


def iteration_ref(ref: str, iteration: int) -> str:
    """How one iteration of a DO_WHILE addresses its task `ref`: `ref__3`."""
    return f"{ref}__{iteration}"


def renamed(tasks: Sequence[WorkflowTask], iteration: int, inner: frozenset[str]) -> list[WorkflowTask]:
    """One iteration's copy of a loop's tasks: every reference in `inner`
    (the loop's own) becomes `ref__N`, in nested lists and joins too."""
    return [_renamed(task, iteration, inner) for task in tasks]


def _renamed(task: WorkflowTask, iteration: int, inner: frozenset[str]) -> WorkflowTask:
    update: dict[str, Any] = {"task_reference_name": iteration_ref(task.task_reference_name, iteration)}
    if task.fork_tasks:
        update["fork_tasks"] = [renamed(branch, iteration, inner) for branch in task.fork_tasks]
    if task.decision_cases:
        update["decision_cases"] = {k: renamed(v, iteration, inner) for k, v in task.decision_cases.items()}
    if task.default_case:
        update["default_case"] = renamed(task.default_case, iteration, inner)
    if task.join_on:
        update["join_on"] = [iteration_ref(r, iteration) if r in inner else r for r in task.join_on]
    return task.model_copy(update=update)


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
        self.continuation: ContinueAsNew | None = None
        self.chain_deadline = snapshot.chain_deadline_at
        workflow = snapshot.workflow
        self.cap = workflow.max_concurrent_tasks
        self.active_workers = sum(
            1 for row in self.rows.values() if row.type.executor().leases() and not row.status.is_terminal()
        )
        self.needs: set[str] = set()  # task types whose policy the snapshot lacks
        self.origin: dict[str, str] = {}  # a generated reference -> the declared one its overrides are keyed by
        # DO_WHILE loops: their reference -> the references of their tasks, and
        # the iteration being walked (its references are aliased by their names).
        self.loops: dict[str, frozenset[str]] = workflow.loop_members
        # One policy per (task type, workflow task, overrides key) for the pass: a
        # 100-branch fan-out schedules 100 tasks of one type under one workflow task.
        self.policies: dict[tuple[str, int, str | None], TaskPolicy] = {}
        self.stamp: tuple[str, int] | None = None
        self.scope: dict[str, str] = {}

    # -- the run ---------------------------------------------------------------

    def run(self) -> Decision:
        snap = self.snap
        if not snap.evaluated and snap.workflow.timeout_seconds > 0:
            # Armed on the one evaluation guaranteed to happen exactly once: the first.
            self.commands.append(ArmRunTimeout(self.now + datetime.timedelta(seconds=snap.workflow.timeout_seconds)))
        self._arm_chain_deadline()
        passed = timed_out(RunClocks(timeout_at=snap.timeout_at, chain_deadline_at=self.chain_deadline), self.now)
        if snap.terminate_requested is not None:
            self._finish(RunStatus.TERMINATED, snap.terminate_requested)
        elif snap.paused:  # results are recorded; nothing new starts and no deadline fires until it resumes
            self._hold("", "paused", "the run is paused")
        elif passed == "chain" and self.chain_deadline is not None:
            self._finish(
                RunStatus.TIMED_OUT,
                f"the chain's deadline passed ({self.chain_deadline.isoformat()}, chainTimeoutSeconds from the "
                f"chain's first run {snap.chain_id or snap.id})",
                by_chain_deadline=True,
            )
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
            if self.continuation is not None and self.finish.status is RunStatus.COMPLETED:
                self.commands.append(self.continuation)
        return Decision(self.commands, self.holds, frozenset(self.needs))

    def _arm_chain_deadline(self) -> None:
        """A chain's first run arms the chain's deadline, once; every later
        link was started with it (a continuation has a previous run)."""
        snap = self.snap
        if snap.evaluated or snap.previous_run_id is not None or snap.chain_deadline_at is not None:
            return
        seconds = chain_timeout_seconds(snap.workflow.chain_timeout_seconds, snap.defaults.max_chain_timeout_seconds)
        if seconds > 0:
            self.chain_deadline = self.now + datetime.timedelta(seconds=seconds)
            self.commands.append(ArmChainDeadline(self.chain_deadline))

    def _finish(
        self,
        status: RunStatus,
        reason: str,
        output: dict[str, Any] | None = None,
        failed_task_id: str | None = None,
        by_chain_deadline: bool = False,
    ) -> None:
        if self.finish is None:
            self.finish = FinishRun(status, reason, output or {}, failed_task_id, by_chain_deadline)

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
        if task.type is TaskType.DO_WHILE and row.status is TaskStatus.IN_PROGRESS:
            return self._loop(task, row)
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
        if task.type is TaskType.DO_WHILE and row is not None and row.status is TaskStatus.IN_PROGRESS:
            return self._loop(task, row)  # outside the try too: an iteration's failure is its task's
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
        if kind is TaskType.CONTINUE_AS_NEW:
            return self._continue_as_new(task)
        if kind is TaskType.WAIT:
            return self._wait(task)
        if kind is TaskType.SUB_WORKFLOW:
            return self._sub_workflow(
                task, attempt=self._first_attempt(task.task_reference_name), inputs=self._inputs(task)
            )
        if kind is TaskType.DO_WHILE:
            return self._start_loop(task)
        if kind.waits():
            return self._await(task)
        raise AssertionError(f"unhandled task type {kind}")  # pragma: no cover - the enum is exhaustive

    def _first_attempt(self, ref: str) -> int:
        """The number of a task's first attempt: 1, or the next after the attempts a retry superseded."""
        return self.snap.superseded.get(ref, 0) + 1

    def _policy(self, task: WorkflowTask | None, name: str) -> TaskPolicy:
        origin = None if task is None else self.origin.get(task.task_reference_name, task.task_reference_name)
        key = (name, id(task), origin)
        found = self.policies.get(key)
        if found is None:
            found = self.policies[key] = self._resolved_policy(task, name, origin)
        return found

    def _resolved_policy(self, task: WorkflowTask | None, name: str, origin: str | None) -> TaskPolicy:
        policy = self.snap.policies.get(name)
        if policy is None:
            self.needs.add(name)  # decided again once the store has it: never the defaults by mistake
        policy = (policy or resolve(None, self.snap.defaults)).for_task(task)
        if task is None:
            return policy
        override = self.snap.task_overrides.get(origin or "")
        if override is None:
            return policy
        return policy.overridden(override.retry_count, override.start_to_close_timeout)

    def _emit(self, command: ScheduleTask | RecordTask) -> None:
        """Append a new task row's command, stamped with the iteration being walked."""
        if self.stamp is not None:
            command = replace(command, loop=self.stamp[0], iteration=self.stamp[1])
        self.commands.append(command)

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
            if task is not None:
                input_.update(_call_spec(task))
                if task.type is TaskType.CONTAINER:
                    input_.update(self._container_spec(task))
        kind = task.type if task else TaskType.SIMPLE
        self._emit(
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
                time_budget=policy.retry.deadline_budget() if attempt == 1 else 0,
                priority=priority.effective(task.priority if task else None, self.snap.priority),
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

    def _container_spec(self, task: WorkflowTask) -> dict[str, Any]:
        """A CONTAINER's spec with each env `value` resolved as inputParameters
        are (a value that is not text is passed as JSON, a missing one as '')."""
        if task.container is None:
            return {}
        spec = task.container.to_wire()
        for env in spec.get("env", []):
            if "value" in env:
                where = f"tasks[{task.task_reference_name}].container.env[{env['name']}].value"
                value = expressions.resolve(env["value"], self._context(), where)
                if value is None:
                    env["value"] = ""
                else:
                    env["value"] = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return {"container": spec}

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
        self._emit(command)
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
            loop=self.stamp[0] if self.stamp else None,
            iteration=self.stamp[1] if self.stamp else None,
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

    def _continue_as_new(self, task: WorkflowTask) -> Progress:
        """End the run COMPLETED and start the next link of its chain on the
        new input, in the same transaction (see ContinueAsNew)."""
        inputs = self._inputs(task)
        where = f"tasks[{task.task_reference_name}].inputParameters"
        new_input = inputs.get("input", {})
        if not isinstance(new_input, dict):
            raise ValueError(f"{where}.input must resolve to an object, got {_kind(new_input)}")
        output = inputs.get("workflowOutput") or {}
        snap = self.snap
        following = next_run_id(snap.id)
        self._record(task, TaskStatus.COMPLETED, input_=inputs, output={"nextRunId": following})
        self._finish(
            RunStatus.COMPLETED,
            f"continued as new: run {following}",
            dict(output) if isinstance(output, dict) else {"result": output},
        )
        self.continuation = ContinueAsNew(
            snap.workflow_name, dict(new_input), following, snap.chain_id or snap.id, self.chain_deadline
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
        self._emit(
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
        self._emit(
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

    # -- waiting tasks ---------------------------------------------------------

    def _await(self, task: WorkflowTask) -> Progress:
        """WAIT_FOR_WEBHOOK, HUMAN, PULL_WORKFLOW_MESSAGES: IN_PROGRESS until
        their own intake ends them (a verified webhook, a person, a message).
        Only timeoutSeconds applies: the only thing that ends a wait nobody answers."""
        inputs = self._inputs(task)
        where = f"tasks[{task.task_reference_name}]"
        if task.type is TaskType.WAIT_FOR_WEBHOOK:
            matches = inputs.get("matches")
            if matches is not None and not isinstance(matches, dict | str):
                raise ValueError(
                    f"{where}.inputParameters.matches must be an object or a CEL string, got {_kind(matches)}"
                )
            if isinstance(matches, str):
                with _at(f"{where}.inputParameters.matches"):
                    expressions.check_cel(matches)
            inputs["webhook"] = task.webhook
        elif task.type is TaskType.PULL_WORKFLOW_MESSAGES:
            inputs["batchSize"] = task.batch_size or 1
        policy = self._policy(task, task.name)
        self._emit(
            ScheduleTask(
                ref=task.task_reference_name,
                type=task.type,
                name=task.name,
                attempt=1,
                input=inputs,
                status=TaskStatus.IN_PROGRESS,
                available_at=self.now,
                deadlines=timeouts.on_ready(policy.timeouts, self.now, None, waiting=True),
                first_scheduled_at=self.now,
                timeouts=policy.timeouts,
            )
        )
        return Progress.BLOCKED

    # -- DO_WHILE --------------------------------------------------------------

    def _start_loop(self, task: WorkflowTask) -> Progress:
        inputs = self._inputs(task)
        where = f"tasks[{task.task_reference_name}]"
        limit = task.max_iterations or 0
        items = inputs.get("items") if "items" in task.input_parameters else None
        if "items" in task.input_parameters:
            if not isinstance(items, list):
                raise ValueError(f"{where}.inputParameters.items must resolve to a list, got {_kind(items)}")
            if len(items) > limit:
                raise ValueError(
                    f"{where}.inputParameters.items has {len(items)} items, more than maxIterations {limit}"
                )
            if not items:
                self._record(task, TaskStatus.COMPLETED, input_=inputs, output={"iteration": 0})
                return Progress.DONE
        self._record(task, TaskStatus.IN_PROGRESS, input_=inputs, output=_progress(1, items))
        return Progress.BLOCKED

    def _loop(self, task: WorkflowTask, row: TaskRow) -> Progress:
        """Walk the current iteration; when it is done, ask the loop condition
        whether another follows, and start it in the same pass."""
        iteration = int(row.output.get("iteration", 1))
        advanced = 0
        while True:
            with self._in_iteration(task, iteration):
                progress = self._sequence(
                    renamed(task.loop_over or [], iteration, self.loops[task.task_reference_name])
                )
                if progress is not Progress.DONE:
                    return progress
                try:
                    again = self._loop_goes_on(task, row, iteration)
                except _EVALUATION_ERRORS as error:
                    return self._loop_failed(task, row, str(error))
            if not again:
                self._end_loop(task, row, iteration)
                return Progress.DONE
            if iteration >= (task.max_iterations or 0):
                return self._loop_failed(
                    task,
                    row,
                    f"tasks[{task.task_reference_name}].maxIterations {task.max_iterations} reached while the loop "
                    "would go on",
                )
            if advanced >= ITERATIONS_PER_PASS:
                self.commands.append(DecideAgain())
                return Progress.BLOCKED
            iteration += 1
            advanced += 1
            row = self._advance(task, row, iteration)

    @contextlib.contextmanager
    def _in_iteration(self, task: WorkflowTask, iteration: int) -> Iterator[None]:
        """While walking one iteration: new rows are stamped with it, and its
        tasks are found by their declared references in expressions."""
        inner = self.loops[task.task_reference_name]
        self.stamp = (task.task_reference_name, iteration)
        self.scope = {ref: iteration_ref(ref, iteration) for ref in inner}
        for ref in inner:
            self.origin[iteration_ref(ref, iteration)] = ref
        try:
            yield
        finally:
            self.stamp, self.scope = None, {}

    def _loop_goes_on(self, task: WorkflowTask, row: TaskRow, iteration: int) -> bool:
        items = row.input.get("items") if "items" in task.input_parameters else None
        if isinstance(items, list) and iteration >= len(items):
            return False
        if not task.loop_condition:
            return isinstance(items, list)
        variables = self._cel_variables(row.input)
        variables.update(iteration=iteration, items=items if isinstance(items, list) else [])
        variables.update(item=row.output.get("item"), index=iteration - 1)
        with _at(f"tasks[{task.task_reference_name}].loopCondition"):
            value = expressions.evaluate_cel(task.loop_condition, variables)
        if not isinstance(value, bool):
            raise ExpressionError(
                f"tasks[{task.task_reference_name}].loopCondition must be true or false, got {_kind(value)}"
            )
        return value

    def _advance(self, task: WorkflowTask, row: TaskRow, iteration: int) -> TaskRow:
        """Start the next iteration: the loop's output says which, and the
        iteration falling out of keepLastN is deleted, its rows summarized."""
        items = row.input.get("items") if "items" in task.input_parameters else None
        summary = dict(row.output.get("summarized") or {})
        keep = task.keep_last_n
        if keep is not None and iteration - keep >= 1:
            dropped = iteration - keep
            statuses = dict(summary.get("tasks") or {})
            for ref, kept in list(self.rows.items()):
                if kept.loop == task.task_reference_name and kept.iteration is not None and kept.iteration <= dropped:
                    statuses[kept.status.value] = int(statuses.get(kept.status.value, 0)) + 1
                    del self.rows[ref]
            summary = {"iterations": dropped, "tasks": statuses}
            self.commands.append(PruneIterations(task.task_reference_name, dropped + 1))
        output = _progress(iteration, items if isinstance(items, list) else None)
        if summary:
            output["summarized"] = summary
        return self._amend(row, TaskStatus.IN_PROGRESS, output=output)

    def _end_loop(self, task: WorkflowTask, row: TaskRow, iteration: int) -> None:
        """The loop's output: its iteration count and, by iteration, the
        outputs of the iterations it kept (Conductor's shape)."""
        inner = self.loops[task.task_reference_name]
        output: dict[str, Any] = {"iteration": iteration}
        first = max(1, iteration - task.keep_last_n + 1) if task.keep_last_n else 1
        for n in range(first, iteration + 1):
            found = {ref: dict(r.output) for ref in inner if (r := self.rows.get(iteration_ref(ref, n))) is not None}
            if found:
                output[str(n)] = found
        if row.output.get("summarized"):
            output["summarized"] = row.output["summarized"]
        self._amend(row, TaskStatus.COMPLETED, output=output)

    def _loop_failed(self, task: WorkflowTask, row: TaskRow, message: str) -> Progress:
        failed = self._amend(row, TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason=message)
        return self._failed(task, failed)

    def _amend(
        self, row: TaskRow, status: TaskStatus, *, output: Mapping[str, Any] | None = None, reason: str = ""
    ) -> TaskRow:
        """Change a row the decider keeps (a DO_WHILE): stored, or recorded in this pass."""
        changed = replace(row, status=status, reason=reason, output=dict(output if output is not None else row.output))
        self.rows[row.ref] = changed
        if row.id:
            self.commands.append(UpdateTask(row.id, status, reason, dict(changed.output)))
            return changed
        for index in range(len(self.commands) - 1, -1, -1):
            command = self.commands[index]
            if isinstance(command, RecordTask) and command.ref == row.ref:
                self.commands[index] = replace(command, status=status, reason=reason, output=dict(changed.output))
                break
        return changed

    def _start_dynamic_fork(self, task: WorkflowTask) -> Progress:
        if "forkTasks" in task.input_parameters:
            inputs = self._fork_inputs(task)
            branches = self._dynamic_branches(task, inputs.get("forkTasks"))
            refs = [branch[-1].task_reference_name for branch in branches]
            self._record(task, TaskStatus.COMPLETED, input_=inputs, output={"forkedTasks": refs})
            return Progress.DONE
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

    def _fork_inputs(self, task: WorkflowTask) -> dict[str, Any]:
        """A fork of task specs' inputs, resolved now except each spec's own
        inputParameters: those are resolved when that task starts, so a task of
        a branch may read the outputs of the tasks before it."""
        where = f"tasks[{task.task_reference_name}].inputParameters"
        params = dict(task.input_parameters)
        raw = params.pop("forkTasks")
        context = self._context()
        resolved = expressions.resolve(params, context, where)
        inputs = dict(resolved) if isinstance(resolved, dict) else {}

        def spec(entry: Any, at: str) -> Any:
            if not isinstance(entry, dict):
                return expressions.resolve(entry, context, at)
            own = entry.get("inputParameters")
            rest = expressions.resolve({k: v for k, v in entry.items() if k != "inputParameters"}, context, at)
            return {**rest, "inputParameters": own} if own is not None else rest

        if isinstance(raw, list):
            inputs["forkTasks"] = [
                [spec(e, f"{where}.forkTasks[{i}][{j}]") for j, e in enumerate(entry)]
                if isinstance(entry, list)
                else spec(entry, f"{where}.forkTasks[{i}]")
                for i, entry in enumerate(raw)
            ]
        else:  # a reference to a list of specs, from the input or an earlier task
            inputs["forkTasks"] = expressions.resolve(raw, context, f"{where}.forkTasks")
        return inputs

    def _dynamic_branches(self, task: WorkflowTask, raw: object) -> list[list[WorkflowTask]]:
        """The branches a dynamic fork's `forkTasks` resolved to: each a task
        spec, or a list of them run in sequence. A spec without a reference
        gets `fork__i` (`fork__i__j` in a sequence); every reference must be
        new to the run."""
        where = f"tasks[{task.task_reference_name}].inputParameters.forkTasks"
        if not isinstance(raw, list):
            raise ValueError(f"{where} must resolve to a list of task specs, got {_kind(raw)}")
        if len(raw) > MAX_DYNAMIC_BRANCHES:
            raise ValueError(f"{where} has {len(raw)} branches, more than {MAX_DYNAMIC_BRANCHES}")
        taken = {t.task_reference_name for t in self.snap.workflow.all_tasks}
        branches: list[list[WorkflowTask]] = []
        for i, entry in enumerate(raw):
            specs = entry if isinstance(entry, list) else [entry]
            if not specs:
                raise ValueError(f"{where}[{i}] is an empty branch")
            branch = []
            for j, spec in enumerate(specs):
                at = f"{where}[{i}]" if not isinstance(entry, list) else f"{where}[{i}][{j}]"
                if not isinstance(spec, dict):
                    raise ValueError(f"{at} must be a task spec (an object), got {_kind(spec)}")
                default = dynamic_ref(task.task_reference_name, i) + (f"__{j}" if isinstance(entry, list) else "")
                try:
                    child = WorkflowTask.model_validate({"taskReferenceName": default, **spec})
                except ValidationError as error:
                    first = error.errors()[0]
                    path = ".".join(str(p) for p in first["loc"])
                    raise ValueError(f"{at}{'.' + path if path else ''}: {first['msg']}") from error
                for nested in iter_tasks([child]):
                    if nested.type is TaskType.DO_WHILE:
                        raise ValueError(f"{at}: a DO_WHILE cannot be forked dynamically")
                    if nested.task_reference_name in taken:
                        raise ValueError(f"{at}: taskReferenceName {nested.task_reference_name!r} is already used")
                    taken.add(nested.task_reference_name)
                    self.origin[nested.task_reference_name] = task.task_reference_name
                branch.append(child)
            branches.append(branch)
        return branches

    def _dynamic_children(self, task: WorkflowTask, fork_row: TaskRow) -> Progress:
        if "forkTaskName" not in fork_row.output:  # a fork of task specs: its branches walk like FORK_JOIN's
            branches = self._dynamic_branches(task, fork_row.input.get("forkTasks"))
            self.branches[task.task_reference_name] = [self._sequence(b) for b in branches]
            return Progress.HALT if Progress.HALT in self.branches[task.task_reference_name] else Progress.DONE
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
            self.origin[ref] = task.task_reference_name
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
            row.status,
            row.reason,
            attempt,
            row.retry_after_seconds,
            row.schedule_to_close_at,
            kind=row.retry_kind,
            delay_source=row.delay_source,
            task_id=row.id,
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
                "deadlineFraction": deadline_fraction(snap.timeout_at, snap.workflow.timeout_seconds, self.now),
                "chainId": snap.chain_id or snap.id,
                "previousRunId": snap.previous_run_id,
            },
        }
        for ref, row in self.rows.items():
            context[ref] = {
                "input": _object(row.input, f"the stored input of {ref}"),
                "output": _object(row.output, f"the stored output of {ref}"),
                "status": row.status.value,
                "reason": row.reason,
            }
        for ref, actual in self._aliases().items():
            if actual in context:
                context[ref] = context[actual]
        return context

    def _aliases(self) -> dict[str, str]:
        """A loop's tasks by their declared references: inside an iteration,
        that iteration's; elsewhere, the loop's latest."""
        aliases: dict[str, str] = {}
        for loop, inner in self.loops.items():
            row = self.rows.get(loop)
            iteration = row.output.get("iteration") if row is not None else None
            if isinstance(iteration, int) and iteration > 0:
                aliases.update({ref: iteration_ref(ref, iteration) for ref in inner})
        aliases.update(self.scope)
        return aliases

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


def _call_spec(task: WorkflowTask) -> dict[str, Any]:
    """What a system task's runner needs besides its inputs, kept on its row
    with them (the runner sees the leased row, not the workflow)."""
    if task.type is TaskType.GRPC and task.grpc is not None:
        return {"grpc": task.grpc.to_wire()}
    if task.type is TaskType.WEBHOOK and task.signing is not None:
        return {"signing": task.signing.to_wire()}
    return {}


def _progress(iteration: int, items: list[Any] | None) -> dict[str, Any]:
    """A running loop's output: its iteration and, over items, the current one."""
    output: dict[str, Any] = {"iteration": iteration}
    if items is not None and iteration <= len(items):
        output.update(item=items[iteration - 1], index=iteration - 1)
    return output


def _kind(value: object) -> str:
    """What a value is, for a message, without echoing a payload."""
    if isinstance(value, str):
        return f"the string {value[:64]!r}" if value else "an empty string"
    return "nothing" if value is None else f"a {type(value).__name__}"
