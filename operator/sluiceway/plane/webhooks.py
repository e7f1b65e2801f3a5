"""A verified webhook call completes, in one transaction, every
WAIT_FOR_WEBHOOK task waiting on its endpoint whose `matches` accept it,
with the payload as the task's output; each completion is audited on its run
as `webhook`, with the Webhook's verified signature as the actor (third
parties hold no identity here). Verifying the call is the HTTP edge's job:
this is what a verified call does."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from sluiceway.controls import webhooks as verification
from sluiceway.controls.payloads import Oversized, oversized_value
from sluiceway.model.common import wire_time
from sluiceway.model.webhook import WebhookSpec
from sluiceway.observability import metrics
from sluiceway.plane.audit import Actor, Operation
from sluiceway.plane.core import Plane
from sluiceway.plane.units import unit
from sluiceway.store import webhooks
from sluiceway.store.webhooks import Waiting

__all__ = ["Waiting", "deliver", "endpoint", "signed_by"]


def signed_by(name: str) -> Actor:
    """Who makes a verified call of the Webhook `name`: its signature."""
    return Actor(f"webhook {name} (signature verified)", "signature")


async def endpoint(plane: Plane, namespace: str, name: str) -> WebhookSpec | None:
    """The Webhook's spec, to verify a call with; None when there is no such endpoint."""
    async with plane.pool.acquire() as conn:
        return await webhooks.get(conn, namespace, name)


async def deliver(
    plane: Plane, namespace: str, name: str, payload: Any, headers: Mapping[str, str]
) -> list[Waiting] | Oversized:
    """Complete the tasks waiting on the endpoint that accept this verified call; the tasks completed."""
    too_large = oversized_value("body", payload, await plane.limit_of(namespace))
    if too_large is not None:
        return too_large

    def accepts(task: Waiting) -> bool:
        inputs = {k: v for k, v in task.input.items() if k not in ("matches", "webhook")}
        return verification.matches(task.input.get("matches"), payload, headers, inputs)

    received = wire_time(datetime.datetime.now(datetime.UTC))
    output = {"payload": payload, "webhook": name, "receivedAt": received}
    async with unit(plane, signed_by(name), namespace) as work:
        completed = await webhooks.complete_matching(work.conn, namespace, name, accepts, output)
        for task in completed:
            work.changed(task.execution_id, Operation.WEBHOOK, {"taskReferenceName": task.ref})
    metrics.WEBHOOK_CALLS.labels("matched" if completed else "unmatched").inc()
    return completed
