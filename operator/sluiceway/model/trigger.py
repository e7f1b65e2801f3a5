"""Trigger: starts runs of a Workflow when a named event is published (a
verified call of a Webhook that names the event, or `POST .../events/{event}`),
with the run's input mapped by CEL, filtered by a CEL condition, and
deduplicated by an event id for a window: one run per (trigger, event id)."""

from __future__ import annotations

import cel
from pydantic import Field, field_validator

from sluiceway.model.common import INT32_MAX, EngineName, Spec, Status

DEFAULT_DEDUP_WINDOW_SECONDS = 86_400
# The longest a dedup window may be. The purger keeps idempotency keys at
# least this long (runtime.operator), so no window outlives its keys.
MAX_DEDUP_WINDOW_SECONDS = 7 * 86_400
MAX_EXPRESSION_LENGTH = 4096


def _compile(expression: str) -> None:
    # The model layer may not import controls/; `cel` is the same library
    # controls.expressions evaluates with, so what compiles here runs there.
    try:
        cel.compile(expression)
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"invalid CEL expression: {error}") from error


class TriggerSpec(Spec):
    """Start runs of a workflow when a named event is published."""

    event: EngineName = Field(description="The event's name: a Webhook's `event`, or POST .../events/{event}.")
    workflow: EngineName = Field(description="The Workflow to start (its spec.name or metadata.name).")
    version: int | None = Field(None, ge=1, le=INT32_MAX, description="Pinned version; the latest when unset.")
    condition: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_EXPRESSION_LENGTH,
        description="CEL over `event` giving a bool: only events for which it is true start a run. "
        "Every event when unset.",
    )
    input: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_EXPRESSION_LENGTH,
        description="CEL over `event` giving the run's input (an object). The event's payload when unset.",
    )
    event_id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_EXPRESSION_LENGTH,
        description="CEL over `event` giving the id runs are deduplicated by. When unset, the delivery's id "
        "(`event.id`: an X-Sluiceway-Event-Id, Idempotency-Key or X-GitHub-Delivery header, else a hash of the body).",
    )
    dedup_window_seconds: int = Field(
        DEFAULT_DEDUP_WINDOW_SECONDS,
        ge=1,
        le=MAX_DEDUP_WINDOW_SECONDS,
        description="For how long an event id names the run it started: a redelivery within it starts nothing. "
        "Default 86400 (a day), at most 604800 (a week).",
    )
    priority: int | None = Field(
        None, ge=1, le=5, description="The priority of every run, 1 (most urgent) to 5; the workflow's when unset."
    )
    correlation_id: str | None = Field(None, max_length=256, description="The correlationId of every run.")

    @field_validator("condition", "input", "event_id")
    @classmethod
    def _compiles(cls, expression: str | None) -> str | None:
        if expression is not None:
            _compile(expression)
        return expression


# What a Trigger's status counts: the outcomes an event can have for it
# (plane.events.OUTCOMES without `unmatched`, which belongs to no Trigger).
COUNTED_OUTCOMES = ("started", "duplicate", "filtered", "refused", "invalid")
# How many of the newest events of its name a Trigger's status reads: a
# window, so the read costs the same however many events are kept.
RECENT_EVENTS = 1000
_AMONG = f"Of the newest events of its name read (recent.events, {RECENT_EVENTS} at most), how many "


class TriggerRecent(Spec):
    """What a Trigger did with the newest events of the name it listens to."""

    events: int | None = Field(
        None,
        description=f"How many events of its name were read: the newest {RECENT_EVENTS} at most, "
        "of those still kept (SLUICEWAY_EVENT_RETENTION, default 7d).",
    )
    started: int | None = Field(None, description=_AMONG + "started a run.")
    duplicate: int | None = Field(
        None, description=_AMONG + "had an event id that had already started a run within the dedup window."
    )
    filtered: int | None = Field(None, description=_AMONG + "its condition was false for.")
    refused: int | None = Field(
        None, description=_AMONG + "had their start refused (a Quota, a workflow's limit, no such workflow)."
    )
    invalid: int | None = Field(
        None, description=_AMONG + "an expression failed on, or had a mapped input over the payload limit."
    )


class TriggerStatus(Status):
    event: str | None = Field(None, description="The event it listens to.")
    workflow: str | None = Field(None, description="The workflow it starts.")
    last_event_time: str | None = Field(
        None, description=f"When it last judged an event (any outcome), among the newest {RECENT_EVENTS} of its name."
    )
    last_run_id: str | None = Field(
        None,
        description=f"The newest run it started; kept when none of the newest {RECENT_EVENTS} events started one.",
    )
    recent: TriggerRecent | None = Field(
        None, description=f"What it did with the newest {RECENT_EVENTS} events of its name: a window, not its life."
    )
