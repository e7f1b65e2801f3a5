"""A command's unit of work: one connection, one transaction, the runs it
decides inline, its audit entries, and what happens once it has committed.

    async with unit(plane, actor, namespace) as work:
        outcome = await operations.pause(work.conn, namespace, run_id, reason)
        if isinstance(outcome, operations.Done):
            work.changed(outcome.id, Operation.PAUSE, {"reason": reason})
    return outcome

A command that changes a run says so with `changed`, and that is the only way
to write the audit trail: the entries go in at the end of the transaction, so
they commit with the change or not at all, and a change rolled back names
nobody. After the commit the unit reports what was decided inline, wakes this
process's decider when runs were queued for it, and announces the entries on
WorkflowRuns as Events."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sluiceway.plane.audit import Actor, Announcement, Operation
from sluiceway.plane.core import InlineDecisions, Plane
from sluiceway.store import audit
from sluiceway.store.database import Connection


@dataclass
class Unit:
    conn: Connection
    actor: Actor
    namespace: str  # where its changes are, unless one names another
    inline: InlineDecisions
    changes: list[audit.Change] = field(default_factory=list)
    queued: bool = False  # runs were queued for the decider without being decided here
    announcements: list[Announcement] = field(default_factory=list)

    def changed(
        self,
        run_id: str | uuid.UUID,
        operation: Operation,
        detail: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> None:
        """This command changed the run: record `operation` on it, as the unit's actor."""
        where = namespace or self.namespace
        self.changes.append(audit.Change(where, uuid.UUID(str(run_id)), operation.value, detail or {}))

    def wake_decider(self) -> None:
        """This command queued runs the decider loop must take: wake this process's at commit."""
        self.queued = True

    async def record(self) -> None:
        """Write the audit entries (the unit does, as its transaction ends)."""
        recorded = await audit.record(self.conn, self.actor, self.changes)
        by = f"by {self.actor.name} (via {self.actor.via})"
        self.announcements = [
            Announcement(r.namespace, r.workflow_run, Operation(r.operation).reason, f"{r.operation} {by}")
            for r in recorded
        ]


@contextlib.asynccontextmanager
async def unit(plane: Plane, actor: Actor, namespace: str = "") -> AsyncIterator[Unit]:
    """Run a command's body in one transaction; see the module's docstring."""
    async with plane.pool.acquire() as conn, plane.inline_decisions() as inline, conn.transaction():
        work = Unit(conn, actor, namespace, inline)
        yield work
        await work.record()
    await plane.committed(inline.decided, work.queued)
    plane.announcer.announce(work.announcements)
