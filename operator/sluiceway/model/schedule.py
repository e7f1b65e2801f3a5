"""Schedule: starts runs of a Workflow on `cron` expressions or `every` an
interval, in a time zone, with an overlap policy, a catch-up window, jitter,
bounds and a run limit. Each fire is a row keyed by (schedule, fire time),
inserted in the transaction that starts its run, so restarts and replicas
never lose a fire or start it twice."""

from __future__ import annotations

import datetime
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field

from sluiceway.model.attributes import ATTRIBUTE_NAMES, MAX_PER_RUN, AttributeName
from sluiceway.model.common import INT32_MAX, EngineName, Spec, Status

MAX_CATCHUP_WINDOW_SECONDS = 31_536_000
DEFAULT_CATCHUP_WINDOW_SECONDS = 60
MAX_BACKFILL_FIRES = 1000
UPCOMING = 5  # fire times the status shows ahead


class OverlapPolicy(StrEnum):
    """What a fire does while an earlier run of the schedule still runs.
    Temporal's six; Kubernetes' and Argo's names are accepted for theirs."""

    SKIP = "Skip"
    BUFFER_ONE = "BufferOne"
    BUFFER_ALL = "BufferAll"
    CANCEL_OTHER = "CancelOther"
    TERMINATE_OTHER = "TerminateOther"
    ALLOW_ALL = "AllowAll"
    FORBID = "Forbid"  # Kubernetes and Argo: Skip
    REPLACE = "Replace"  # Kubernetes and Argo: TerminateOther (the running one is stopped, the new one starts)
    ALLOW = "Allow"  # Kubernetes and Argo: AllowAll

    def effective(self) -> OverlapPolicy:
        return _ALIASES.get(self, self)


_ALIASES = {
    OverlapPolicy.FORBID: OverlapPolicy.SKIP,
    OverlapPolicy.REPLACE: OverlapPolicy.TERMINATE_OTHER,
    OverlapPolicy.ALLOW: OverlapPolicy.ALLOW_ALL,
}


class ScheduleSpec(Spec):
    """When to start runs of a workflow, and what to do when they overlap."""

    workflow: EngineName = Field(description="The Workflow to start (its spec.name or metadata.name).")
    version: int | None = Field(None, ge=1, le=INT32_MAX, description="Pinned version; the latest when unset.")
    input: dict[str, Any] = Field(
        default_factory=dict,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="The input of every run it starts.",
    )
    search_attributes: dict[AttributeName, Any] = Field(
        default_factory=dict,
        max_length=MAX_PER_RUN,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True, **ATTRIBUTE_NAMES},
        description="Search attributes of every run it starts, checked against the workflow's declarations as a "
        "start's are: a value that does not fit refuses that fire, naming the attribute.",
    )
    correlation_id: str | None = Field(None, max_length=256, description="The correlationId of every run.")
    priority: int | None = Field(
        None, ge=1, le=5, description="The priority of every run, 1 (most urgent) to 5; the workflow's when unset."
    )
    cron: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="Cron expressions (minute hour day-of-month month day-of-week, or @hourly, @daily, @weekly, "
        "@monthly, @yearly); the schedule fires at each time any of them matches.",
        json_schema_extra={"items": {"type": "string", "maxLength": 256}},
    )
    every: str | None = Field(
        None,
        max_length=64,
        description="An interval instead of cron: `30s`, `5m`, `1h 30m`. Fires at multiples of it since the Unix "
        "epoch, plus `offset`.",
    )
    offset: str | None = Field(
        None,
        max_length=64,
        description="With `every`: shifts each fire, e.g. `every: 1h`, `offset: 15m` fires at a quarter past.",
    )
    timezone: str = Field(
        "UTC",
        max_length=64,
        description="IANA time zone the cron expressions are read in. A clock time skipped by a daylight-saving "
        "change does not fire that day; one the clock shows twice fires twice.",
    )
    start_at: datetime.datetime | None = Field(None, description="No fire before this instant.")
    end_at: datetime.datetime | None = Field(None, description="No fire after this instant.")
    jitter_seconds: int = Field(
        0,
        ge=0,
        le=86_400,
        description="Delay each fire by up to this many seconds, the same on every replica (derived from the "
        "schedule and the fire time), so many schedules on one time do not start together.",
    )
    suspend: bool = Field(False, description="Fire nothing while true; on resume the schedule goes on from then.")
    overlap_policy: OverlapPolicy = Field(
        OverlapPolicy.SKIP,
        description="While an earlier run of this schedule runs: Skip (default), BufferOne, BufferAll, CancelOther, "
        "TerminateOther or AllowAll (Forbid, Replace and Allow are read as Skip, TerminateOther and AllowAll).",
    )
    catchup_window_seconds: int = Field(
        DEFAULT_CATCHUP_WINDOW_SECONDS,
        ge=0,
        le=MAX_CATCHUP_WINDOW_SECONDS,
        description="After an outage, fires missed by at most this many seconds are started (under the overlap "
        "policy); older ones are skipped and counted. Default 60.",
    )
    max_runs: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Stop after starting this many scheduled runs (triggers and backfills do not count).",
    )
    keep_history: int = Field(10, ge=0, le=100, description="Recent fires listed in the status.")

    model_config = ConfigDict(
        **Spec.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "(has(self.cron) && size(self.cron) > 0) != has(self.every)",
                    "message": "set exactly one of cron (a list of expressions) and every (an interval)",
                },
                {
                    "rule": "!has(self.offset) || has(self.every)",
                    "message": "offset applies to every only",
                    "fieldPath": ".offset",
                },
                {
                    # date-time strings are CEL timestamps
                    "rule": "!has(self.startAt) || !has(self.endAt) || self.startAt < self.endAt",
                    "message": "endAt must be after startAt",
                    "fieldPath": ".endAt",
                },
            ]
        },
    )


class ScheduledRun(Spec):
    fire_time: str
    run_id: str | None = None
    outcome: str = Field(description="started, buffered, skipped or refused.")
    kind: str = Field(description="scheduled, catchup, trigger or backfill.")
    reason: str | None = None


class ScheduleStatus(Status):
    next_fire_times: list[str] | None = Field(None, description=f"The next {UPCOMING} fire times (UTC).")
    last_fire_time: str | None = None
    last_run_id: str | None = None
    active_runs: int | None = None
    buffered: int | None = None
    suspended: bool | None = None
    runs_started: int | None = Field(None, description="Scheduled runs started so far (counts against maxRuns).")
    missed: int | None = Field(None, description="Fires older than the catch-up window, skipped.")
    skipped: int | None = Field(None, description="Fires the overlap policy skipped.")
    recent: list[ScheduledRun] | None = Field(None, description="The latest fires, newest first (keepHistory).")
    refusal: dict[str, Any] | None = Field(
        None,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="Why the schedule is refused: {quota, limit, current, retryAfterSeconds} over maxSchedules.",
    )
