"""Starting runs, whichever edge asks: `POST .../executions` (one or many),
a WorkflowRun, a restart of a finished run. Every start is measured against
the namespace's payload limit first, goes through the one store path
(`executions.start_runs`), is decided inline when the operator does so, and
is audited as `start` on the run it created (an idempotent retry that found
its run, or a refusal, is not)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sluiceway.controls.payloads import Oversized, oversized_value
from sluiceway.plane.audit import Actor, Operation
from sluiceway.plane.core import Plane
from sluiceway.plane.units import unit
from sluiceway.store import executions, operations
from sluiceway.store.executions import Started, StartItem, StartOutcome

__all__ = ["StartItem", "StartOutcome", "Started", "restart", "start", "start_many"]


async def start(
    plane: Plane, actor: Actor, namespace: str, item: StartItem, *, paused: str | None = None
) -> StartOutcome | Oversized:
    """Start one run. `paused`: created paused with that reason (a WorkflowRun
    applied with `spec.paused`), audited as a pause too."""
    [outcome] = await start_many(plane, actor, namespace, [item], paused=paused)
    return outcome


async def start_many(
    plane: Plane, actor: Actor, namespace: str, items: Sequence[StartItem], *, paused: str | None = None
) -> list[StartOutcome | Oversized]:
    """Start each item, judged on its own: one outcome per item, in order. All
    the starts go in one transaction."""
    limit = await plane.limit_of(namespace)
    over = {at: found for at, item in enumerate(items) if (found := oversized_value("input", item.input, limit))}
    wanted = [item for at, item in enumerate(items) if at not in over]
    async with unit(plane, actor, namespace) as work:
        # A paused start is decided after its pause; the others as they are written.
        first = work.inline.first() if paused is None else None
        outcomes = await executions.start_runs(
            work.conn,
            namespace,
            wanted,
            idempotency_window=plane.idempotency_window,
            notify=not plane.decides_inline,
            first=first,
        )
        await work.inline.took_first(work.conn, first)
        created: list[uuid.UUID] = []
        for item, outcome in zip(wanted, outcomes, strict=True):
            if isinstance(outcome, Started) and outcome.created:
                created.append(uuid.UUID(outcome.id))
                work.changed(outcome.id, Operation.START, {"workflow": item.name})
        if paused is not None:
            for run in created:  # before its first decision: nothing is scheduled yet
                await operations.pause(work.conn, namespace, str(run), paused)
                work.changed(run, Operation.PAUSE, {"reason": paused})
        # The runs not written by `first` (gated, keyed, ...): a paused run's decision schedules nothing.
        handled = first.handled if first is not None else set()
        await work.inline.decide(work.conn, [run for run in created if run not in handled])
        if created and not plane.decides_inline:
            work.wake_decider()
    judged = iter(outcomes)
    return [over[at] if at in over else next(judged) for at in range(len(items))]


async def restart(
    plane: Plane,
    actor: Actor,
    namespace: str,
    run_id: str,
    *,
    new_input: dict[str, Any] | None = None,
    latest_version: bool = False,
    request_id: str | None = None,
) -> StartOutcome | operations.Refused | Oversized:
    """A new run of a finished run's workflow, linked to it by `restartedFrom`:
    audited as `restart` on both runs."""
    too_large = oversized_value("input", new_input, await plane.limit_of(namespace))
    if too_large is not None:
        return too_large
    async with unit(plane, actor, namespace) as work:
        outcome = await operations.restart(
            work.conn,
            namespace,
            run_id,
            new_input=new_input,
            latest_version=latest_version,
            request_id=request_id,
            idempotency_window=plane.idempotency_window,
        )
        if isinstance(outcome, Started) and outcome.created:
            detail = {"restartedFrom": run_id, "newRun": outcome.id}
            work.changed(outcome.id, Operation.RESTART, detail)
            work.changed(run_id, Operation.RESTART, detail)
    return outcome
