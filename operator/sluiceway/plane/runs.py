"""Acting on a run that exists: pause, resume, retry from the failure, rerun
from a task, terminate, force a decision, send it a message. The REST API,
the web UI and a WorkflowRun's spec all call these, so each is limited,
audited and woken the same way whichever edge it came through.

Each returns a domain outcome: `Done` (or `Forced`, `MessageQueued`) when
it did something, and the refusal that says why not otherwise (an
`operations.Refused` with its reason, a payload over its limit, a full
message queue). Only what was done is audited."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sluiceway.controls.payloads import Oversized, PayloadLimit, json_size, oversized
from sluiceway.model.execution import MAX_MESSAGE_BYTES, MAX_QUEUED_MESSAGES
from sluiceway.observability import metrics
from sluiceway.plane.audit import Actor, Operation
from sluiceway.plane.core import Plane
from sluiceway.plane.units import unit
from sluiceway.store import audit, executions, messages, operations
from sluiceway.store.operations import Done, Refusal, Refused
from sluiceway.store.runs import RunView, get_run

__all__ = [
    "Done",
    "Forced",
    "MessageQueued",
    "Outcome",
    "QueueFull",
    "Refusal",
    "Refused",
    "audit_trail",
    "force_decide",
    "pause",
    "rerun",
    "resume",
    "retry",
    "send_message",
    "terminate",
    "terminate_workflow_runs",
]

Outcome = operations.Outcome
QueueFull = messages.QueueFull
# What one message may weigh besides the namespace's payload limit: a run's
# queue is read whole by the task that takes it.
MESSAGE_LIMIT = PayloadLimit(MAX_MESSAGE_BYTES, f"a message to a run is at most {MAX_MESSAGE_BYTES} bytes")


async def pause(plane: Plane, actor: Actor, namespace: str, run_id: str, reason: str = "") -> Outcome:
    async with unit(plane, actor, namespace) as work:
        outcome = await operations.pause(work.conn, namespace, run_id, reason)
        if isinstance(outcome, Done):
            work.changed(outcome.id, Operation.PAUSE, {"reason": reason})
    return outcome


async def resume(plane: Plane, actor: Actor, namespace: str, run_id: str) -> Outcome:
    async with unit(plane, actor, namespace) as work:
        outcome = await operations.resume(work.conn, namespace, run_id)
        if isinstance(outcome, Done):
            work.changed(outcome.id, Operation.RESUME)
    return outcome


async def retry(plane: Plane, actor: Actor, namespace: str, run_id: str) -> Outcome:
    async with unit(plane, actor, namespace) as work:
        outcome = await operations.retry(work.conn, namespace, run_id)
        if isinstance(outcome, Done):
            work.changed(outcome.id, Operation.RETRY)
    return outcome


async def rerun(
    plane: Plane, actor: Actor, namespace: str, run_id: str, ref: str, new_input: dict[str, Any] | None = None
) -> Outcome | Oversized:
    """The task `ref` and everything after it start afresh, with `new_input` merged over its inputs."""
    if new_input is not None:
        too_large = oversized("input", json_size(new_input), await plane.limit_of(namespace))
        if too_large is not None:
            return too_large
    async with unit(plane, actor, namespace) as work:
        outcome = await operations.rerun(work.conn, namespace, run_id, ref, new_input)
        if isinstance(outcome, Done):
            work.changed(outcome.id, Operation.RERUN, {"taskReferenceName": ref, "newInput": new_input is not None})
    return outcome


async def terminate(plane: Plane, actor: Actor, namespace: str, run_id: str, reason: str) -> Done | Refused:
    """Ask the decider to end a running run; the Done's status is the run's before it ends."""
    async with unit(plane, actor, namespace) as work:
        run = await _run(work.conn, namespace, run_id)
        if run is None:
            return operations.missing(namespace, run_id)
        if not await executions.request_termination(work.conn, namespace, run.id, reason):
            return Refused(Refusal.NOT_RUNNING, f"run {run.id} is {run.status.value}")
        work.changed(run.id, Operation.TERMINATE, {"reason": reason})
    return Done(run.id, run.status, "terminating")


async def terminate_workflow_runs(
    plane: Plane, actor: Actor, namespace: str, workflow: str, reason: str
) -> list[uuid.UUID]:
    """Ask the decider to end every running run of a workflow (its Workflow was deleted); the runs asked."""
    async with unit(plane, actor, namespace) as work:
        stopped = await executions.terminate_all(work.conn, namespace, workflow, reason)
        for run in stopped:
            work.changed(run, Operation.TERMINATE, {"reason": reason})
    return stopped


@dataclass(frozen=True)
class Forced:
    id: str
    released: bool  # it was quarantined, and the decider takes it again


async def force_decide(plane: Plane, actor: Actor, namespace: str, run_id: str) -> Forced | Refused:
    """Queue an evaluation of the run, releasing it from quarantine if it was set aside."""
    async with unit(plane, actor, namespace) as work:
        run = await _run(work.conn, namespace, run_id)
        if run is None:
            return operations.missing(namespace, run_id)
        released = await executions.release_quarantine(work.conn, namespace, run.id)
        await executions.enqueue_decide(work.conn, run.id, "forced")
        work.changed(run.id, Operation.DECIDE, {"released": released})
    return Forced(run.id, released)


@dataclass(frozen=True)
class MessageQueued:
    id: int
    delivered: bool  # a waiting PULL_WORKFLOW_MESSAGES task took it at once


async def send_message(
    plane: Plane, actor: Actor, namespace: str, run_id: str, payload: Any
) -> MessageQueued | Refused | QueueFull | Oversized:
    """Queue one message (any JSON value) for a running run, within the
    message limit and the namespace's payload limit, whichever is lower."""
    size = json_size(payload)
    limit = await plane.limit_of(namespace)
    too_large = oversized("body", size, MESSAGE_LIMIT if MESSAGE_LIMIT.limit <= limit.limit else limit)
    if too_large is not None:
        metrics.RUN_MESSAGES.labels("refused").inc()
        return too_large
    async with unit(plane, actor, namespace) as work:
        outcome = await messages.append(work.conn, namespace, run_id, payload, size, MAX_QUEUED_MESSAGES)
        if isinstance(outcome, messages.Appended):
            work.changed(run_id, Operation.MESSAGE, {"messageId": outcome.id, "bytes": size})
    if isinstance(outcome, messages.NoSuchRun):
        return operations.missing(namespace, run_id)
    if isinstance(outcome, messages.NotRunning):
        return Refused(Refusal.NOT_RUNNING, f"run {run_id} is {outcome.status}")
    if isinstance(outcome, QueueFull):
        metrics.RUN_MESSAGES.labels("refused").inc()
        return outcome
    metrics.RUN_MESSAGES.labels("queued").inc()
    return MessageQueued(outcome.id, bool(outcome.delivered_to))


async def audit_trail(
    plane: Plane, namespace: str, run_id: str, *, after: int = 0, limit: int = 1000
) -> list[audit.Entry] | Refused:
    """Who changed the run, oldest first: the entries after `after`, at most `limit`."""
    async with plane.pool.acquire() as conn:
        run = await _run(conn, namespace, run_id)
        if run is None:
            return operations.missing(namespace, run_id)
        return await audit.read(conn, namespace, uuid.UUID(run.id), after=after, limit=limit)


async def _run(conn: Any, namespace: str, run_id: str) -> RunView | None:
    """The run, or None when there is no such run (or `run_id` is not a run id at all)."""
    try:
        uuid.UUID(run_id)
    except ValueError:
        return None
    return await get_run(conn, namespace, run_id)
