"""Publishing an event: one transaction records the event, judges it by
every Trigger of its name in the namespace (controls.triggers), starts one
run per Trigger that matches through the one start path
(`executions.start_runs`: the workflow's gates, the namespace's Quotas), and
records what each Trigger did: `started` (the run), `duplicate` (the run an
earlier delivery of the same event id started), `filtered`, `refused` (a
Quota or limit, with its numbers), `invalid` (the field whose expression did
not give what it needs); with no Trigger, `unmatched`.

Exactly one run per (Trigger, event id) within the Trigger's dedup window:
the start's requestId is derived from both, and claiming it is an insert
under the unique key of `start_requests`, in the start's own transaction. A
concurrent delivery waits on that row and then finds the run; so does one on
another replica, and a replica that dies mid-publish rolls back its claim
with its run. A refusal claims nothing, so a redelivery may start the run
once the Quota allows it.

Every run started is audited as `start` on it, with the event's actor: the
caller of `POST .../events/{event}`, or the Webhook's verified signature."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluiceway.controls import triggers as judging
from sluiceway.controls.payloads import Oversized, PayloadLimit, oversized_value
from sluiceway.model.common import wire_time
from sluiceway.model.trigger import COUNTED_OUTCOMES
from sluiceway.observability import metrics
from sluiceway.plane.audit import Actor, Operation
from sluiceway.plane.core import Plane
from sluiceway.plane.units import Unit, unit
from sluiceway.store import events, executions, triggers
from sluiceway.store.admission import LimitExceeded, QuotaExceeded
from sluiceway.store.events import EventRecord
from sluiceway.store.executions import RequestReused, Started, StartItem
from sluiceway.store.triggers import StoredTrigger

__all__ = ["OUTCOMES", "EventRecord", "Published", "event_view", "publish"]

# In the order of how much they tell: an event shows the first any Trigger had.
OUTCOMES = (*COUNTED_OUTCOMES, "unmatched")


@dataclass(frozen=True)
class Published:
    """The event as recorded, with one outcome per Trigger of its name."""

    event: EventRecord
    started: list[str] = field(default_factory=list)  # the runs this delivery created


async def publish(
    plane: Plane,
    actor: Actor,
    namespace: str,
    name: str,
    payload: Any,
    headers: Mapping[str, str],
    source: str,
    secret_headers: frozenset[str] = frozenset(),
) -> Published | Oversized:
    """Publish `payload` as the event `name` (headers in lower case; `source`:
    `api` or `webhook <name>`; `secret_headers`: headers no Trigger may read
    besides the credential ones, such as a Webhook's token). See the module's docstring."""
    limit = await plane.limit_of(namespace)
    too_large = oversized_value("payload", payload, limit)
    if too_large is not None:
        return too_large
    event_id = judging.delivery_id(headers, payload)
    variable = judging.event_variable(name, event_id, source, payload, headers, secret_headers)
    async with unit(plane, actor, namespace) as work:
        outcomes: list[dict[str, Any]] = []
        created: list[str] = []
        for trigger in await triggers.of_event(work.conn, namespace, name):
            outcome = await _judged(plane, work, namespace, trigger, variable, limit)
            outcomes.append(outcome)
            if outcome["outcome"] == "started":
                created.append(outcome["runId"])
        recorded = await events.record(work.conn, namespace, name, event_id, source, payload, outcomes)
        await work.inline.decide(work.conn, [uuid.UUID(run) for run in created])
        if created and not plane.decides_inline:
            work.wake_decider()
    for outcome in outcomes or [{"outcome": "unmatched"}]:
        metrics.TRIGGER_OUTCOMES.labels(outcome["outcome"]).inc()
    return Published(recorded, created)


async def _judged(
    plane: Plane, work: Unit, namespace: str, trigger: StoredTrigger, event: dict[str, Any], limit: PayloadLimit
) -> dict[str, Any]:
    """What one Trigger does with the event, started in the unit's transaction."""
    base: dict[str, Any] = {"trigger": trigger.name}
    if trigger.spec is None:
        return {**base, "outcome": "invalid", "field": "spec", "reason": trigger.problem}
    spec = trigger.spec
    judgement = judging.judge(spec, event)
    if isinstance(judgement, judging.Filtered):
        return {**base, "outcome": "filtered", "reason": f"condition {spec.condition} is false"}
    if isinstance(judgement, judging.Invalid):
        return {**base, "outcome": "invalid", "field": judgement.field, "reason": judgement.message}
    base["eventId"] = judgement.dedup_id
    too_large = oversized_value("input", judgement.input, limit)
    if too_large is not None:
        return {**base, "outcome": "invalid", "field": "input", "reason": too_large.message}
    item = StartItem(
        spec.workflow,
        spec.version,
        judgement.input,
        correlation_id=spec.correlation_id,
        request_id=judging.dedup_key(trigger.uid, judgement.dedup_id),
        priority=spec.priority,
    )
    [started] = await executions.start_runs(
        work.conn,
        namespace,
        [item],
        idempotency_window=spec.dedup_window_seconds,
        notify=not plane.decides_inline,
    )
    if isinstance(started, Started):
        if not started.created:
            return {**base, "outcome": "duplicate", "runId": started.id}
        detail = {"workflow": spec.workflow, "trigger": trigger.name, "event": event["name"]}
        work.changed(started.id, Operation.START, detail | {"eventId": judgement.dedup_id})
        return {**base, "outcome": "started", "runId": started.id}
    if isinstance(started, RequestReused):  # the same event id, another payload: still the one run
        return {**base, "outcome": "duplicate", "runId": started.execution_id}
    if isinstance(started, QuotaExceeded | LimitExceeded):
        return {**base, "outcome": "refused", "reason": started.message, "error": started.code, **started.details()}
    reason = getattr(started, "message", str(started))
    return {**base, "outcome": "refused", "reason": reason}


def event_view(event: EventRecord, *, with_payload: bool = False) -> dict[str, Any]:
    """An event as the API answers it: its outcomes, and its payload when asked."""
    view: dict[str, Any] = {
        "id": event.id,
        "event": event.name,
        "eventId": event.event_id,
        "source": event.source,
        "receivedAt": wire_time(event.received_at),
        "outcomes": event.outcomes,
        "outcome": _summary(event.outcomes),
    }
    if with_payload:
        view["payload"] = event.payload
    return view


def _summary(outcomes: list[dict[str, Any]]) -> str:
    """One word for the list: the first of OUTCOMES any Trigger had, `unmatched` for none."""
    found = {str(o["outcome"]) for o in outcomes}
    return next((kind for kind in OUTCOMES if kind in found), "unmatched")
