"""Who changed a run and how: the operations the audit trail names, the
actors of each edge, and the Kubernetes Events that repeat an entry on the
run's WorkflowRun (`kubectl describe workflowrun`).

The audit table is the record, written in the command's own transaction
(`sluiceway.plane.units`); Events are a convenience posted after the commit,
and may be dropped (the API server unreachable, too many pending)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import StrEnum

from sluiceway.kubeapi.client import Events, KubeError
from sluiceway.model import API_VERSION
from sluiceway.store.audit import Actor

log = logging.getLogger(__name__)

__all__ = ["ANONYMOUS", "Actor", "Announcement", "Announcer", "Operation", "operator_actor"]

ANONYMOUS = Actor("anonymous (authentication is off)", "anonymous")
MAX_PENDING_EVENTS = 100


class Operation(StrEnum):
    """Every way a run is changed from outside the engine, as the audit trail names it."""

    START = "start"
    TERMINATE = "terminate"
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"
    RERUN = "rerun"
    RESTART = "restart"
    DECIDE = "decide"
    MESSAGE = "message"
    COMPLETE = "complete"
    REJECT = "reject"
    WEBHOOK = "webhook"

    @property
    def reason(self) -> str:
        """The reason of the Event that announces it on a WorkflowRun."""
        return _REASONS[self]


_REASONS = {
    Operation.START: "Started",
    Operation.TERMINATE: "Terminated",
    Operation.PAUSE: "Paused",
    Operation.RESUME: "Resumed",
    Operation.RETRY: "Retried",
    Operation.RERUN: "Rerun",
    Operation.RESTART: "Restarted",
    Operation.DECIDE: "DecideForced",
    Operation.MESSAGE: "MessageReceived",
    Operation.COMPLETE: "HumanTaskCompleted",
    Operation.REJECT: "HumanTaskRejected",
    Operation.WEBHOOK: "WebhookAccepted",
}


def operator_actor(why: str) -> Actor:
    """The operator itself, acting on a run for a reason of its own (a Workflow deleted, say)."""
    return Actor(f"sluiceway operator ({why})", "operator")


@dataclass(frozen=True)
class Announcement:
    namespace: str
    workflow_run: str
    reason: str
    message: str


class Announcer:
    """Posts the Events of audit entries in the background: never blocks or
    fails the command that wrote them. Without Kubernetes, announces nothing."""

    def __init__(self, events: Events | None = None) -> None:
        self.events = events
        self._pending: set[asyncio.Task[None]] = set()

    def announce(self, announcements: list[Announcement]) -> None:
        for found in announcements:
            if self.events is None or len(self._pending) >= MAX_PENDING_EVENTS:
                continue
            task = asyncio.create_task(self._post(self.events, found))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    @staticmethod
    async def _post(events: Events, found: Announcement) -> None:
        involved = {"apiVersion": API_VERSION, "kind": "WorkflowRun", "namespace": found.namespace}
        try:
            await events.post({**involved, "name": found.workflow_run}, "Normal", found.reason, found.message)
        except KubeError as error:
            log.info("audit Event on workflowrun %s/%s not posted: %s", found.namespace, found.workflow_run, error)
