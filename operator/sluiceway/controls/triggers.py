"""What a Trigger does with one event, pure: does its condition hold, what
input does the run start with, and under which id is it deduplicated.

Every expression is CEL over one variable, `event`:
`{name, id, source, payload, headers}` (header names in lower case, without
the ones that carry credentials: an `input` could copy them into a run's
input, which everyone who reads runs sees). `id` is
the delivery's own id: the first of the id headers senders use, or else a
hash of the payload, so a sender that retries the same body is deduplicated
without saying anything. A Trigger's `eventId` expression may pick another
(`event.payload.order.id`).

An expression that fails on this event (a missing field, a wrong type) is no
crash and no run: the event's outcome for the Trigger is `invalid`, naming
the field, and the next event is judged afresh."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from sluiceway.controls.expressions import ExpressionError, evaluate_cel
from sluiceway.model.trigger import TriggerSpec

# Delivery id headers, most specific first: Sluiceway's own, the generic
# idempotency key, GitHub's delivery id.
ID_HEADERS = ("x-sluiceway-event-id", "idempotency-key", "x-github-delivery")
MAX_EVENT_ID_LENGTH = 512
# Headers that carry the caller's credentials: never shown to a Trigger.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})


def delivery_id(headers: Mapping[str, str], payload: Any) -> str:
    """The delivery's id: an id header (names in lower case), else
    `sha256:<hex>` of the payload's canonical JSON (sorted keys)."""
    for header in ID_HEADERS:
        value = headers.get(header, "").strip()
        if value:
            return value[:MAX_EVENT_ID_LENGTH]
    canonical = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def event_variable(
    name: str,
    event_id: str,
    source: str,
    payload: Any,
    headers: Mapping[str, str],
    secret_headers: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The `event` every expression of a Trigger reads. `secret_headers`
    (lower case): more headers to hide, such as a Webhook's token header."""
    hidden = CREDENTIAL_HEADERS | secret_headers
    shown = {header: value for header, value in headers.items() if header not in hidden}
    return {"name": name, "id": event_id, "source": source, "payload": payload, "headers": shown}


@dataclass(frozen=True)
class Filtered:
    """The condition is false for this event: no run."""


@dataclass(frozen=True)
class Invalid:
    """An expression did not give what its field needs; no run."""

    field: str
    message: str


@dataclass(frozen=True)
class Mapped:
    """Start a run with this input, deduplicated by `dedup_id`."""

    input: dict[str, Any]
    dedup_id: str


Judgement = Filtered | Invalid | Mapped


def judge(spec: TriggerSpec, event: Mapping[str, Any]) -> Judgement:
    """What the Trigger `spec` does with `event` (see `event_variable`)."""
    variables = {"event": dict(event)}
    if spec.condition is not None:
        try:
            holds = evaluate_cel(spec.condition, variables)
        except ExpressionError as error:
            return Invalid("condition", str(error))
        if not isinstance(holds, bool):
            return Invalid("condition", f"gave {type(holds).__name__} {holds!r}, not a bool")
        if not holds:
            return Filtered()
    try:
        run_input = evaluate_cel(spec.input, variables) if spec.input is not None else event.get("payload")
    except ExpressionError as error:
        return Invalid("input", str(error))
    if not isinstance(run_input, dict):
        where = "input" if spec.input is not None else "payload"
        return Invalid(where, f"a run's input is an object, not {type(run_input).__name__}")
    return _deduplicated(spec, variables, run_input, str(event.get("id", "")))


def _deduplicated(spec: TriggerSpec, variables: dict[str, Any], run_input: dict[str, Any], default: str) -> Judgement:
    if spec.event_id is None:
        return Mapped(run_input, default)
    try:
        found = evaluate_cel(spec.event_id, variables)
    except ExpressionError as error:
        return Invalid("eventId", str(error))
    if isinstance(found, bool) or not isinstance(found, str | int) or found == "":
        return Invalid("eventId", f"gave {found!r}: an event id is a non-empty string or an integer")
    text = str(found)
    if len(text) > MAX_EVENT_ID_LENGTH:
        return Invalid("eventId", f"gave {len(text)} characters, over {MAX_EVENT_ID_LENGTH}")
    return Mapped(run_input, text)


def dedup_key(trigger_uid: str, dedup_id: str) -> str:
    """The start's requestId: one per (Trigger, event id), so a redelivery, a
    concurrent delivery or another replica's finds the run the first one
    started. The uid, not the name: a Trigger deleted and created again
    starts afresh. Hashed, so any event id fits the key."""
    digest = hashlib.sha256(f"{trigger_uid}\x00{dedup_id}".encode()).hexdigest()[:40]
    return f"trigger:{digest}"
