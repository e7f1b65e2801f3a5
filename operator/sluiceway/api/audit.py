"""The audit trail of runs at the edge: every operation that changes a run
through the API records who did it (the authenticated identity, never a
credential) in the run's audit table, in the operation's own transaction,
and, for a run started by a WorkflowRun, as a Kubernetes Event on that
object once the transaction committed (`kubectl describe workflowrun`).

    async with svc.pool.acquire() as conn, conn.transaction():
        ...the operation...
        event = await audited(conn, request, namespace, run_id, "pause", {"reason": reason})
    announce(request, event)

The table is the record; Events are a convenience and may be dropped (the
API server unreachable, too many pending)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from sluiceway.api.guards import identity_of
from sluiceway.api.services import services_of
from sluiceway.kubeapi.client import Events, KubeError
from sluiceway.model import API_VERSION
from sluiceway.store import audit
from sluiceway.store.database import Connection

log = logging.getLogger(__name__)

ANONYMOUS = audit.Actor("anonymous (authentication is off)", "anonymous")
MAX_PENDING_EVENTS = 100
# The Event reason of each operation.
REASONS = {
    "start": "Started",
    "terminate": "Terminated",
    "pause": "Paused",
    "resume": "Resumed",
    "retry": "Retried",
    "rerun": "Rerun",
    "restart": "Restarted",
    "decide": "DecideForced",
    "message": "MessageReceived",
    "complete": "HumanTaskCompleted",
    "reject": "HumanTaskRejected",
    "webhook": "WebhookAccepted",
}
_pending: set[asyncio.Task[None]] = set()


def actor_of(request: Request) -> audit.Actor:
    """Who makes this request: the identity's user name, and the API key's
    Secret name when a key was used (the key itself is never kept)."""
    if not services_of(request).authenticate:
        return ANONYMOUS
    identity = identity_of(request)
    name = identity.user if identity.key is None else f"{identity.user} (API key {identity.key})"
    return audit.Actor(name, identity.via)


@dataclass(frozen=True)
class Announcement:
    namespace: str
    workflow_run: str
    reason: str
    message: str


async def audited(
    conn: Connection,
    request: Request | audit.Actor,
    namespace: str,
    run_id: str | uuid.UUID,
    operation: str,
    detail: dict[str, Any] | None = None,
) -> Announcement | None:
    """Record `operation` on the run, as the caller of `request` (or this
    actor); the Event to announce after commit, if the run has a WorkflowRun."""
    actor = request if isinstance(request, audit.Actor) else actor_of(request)
    workflow_run = await audit.record(conn, namespace, run_id, actor, operation, detail)
    if workflow_run is None:
        return None
    return Announcement(namespace, workflow_run, REASONS[operation], f"{operation} by {actor.name} (via {actor.via})")


def announce(request: Request, *announcements: Announcement | None) -> None:
    """Post the Events in the background; never blocks or fails the request."""
    kube = services_of(request).kube
    for found in announcements:
        if found is None or kube is None or len(_pending) >= MAX_PENDING_EVENTS:
            continue
        involved = {"apiVersion": API_VERSION, "kind": "WorkflowRun", "namespace": found.namespace}
        task = asyncio.create_task(_post(Events(kube), {**involved, "name": found.workflow_run}, found))
        _pending.add(task)
        task.add_done_callback(_pending.discard)


async def _post(events: Events, involved: dict[str, str], found: Announcement) -> None:
    try:
        await events.post(involved, "Normal", found.reason, found.message)
    except KubeError as error:
        log.info("audit Event on workflowrun %s/%s not posted: %s", found.namespace, found.workflow_run, error)
