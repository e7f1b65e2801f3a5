"""Quota: platform limits for one namespace, set by an administrator. Every
Quota in a namespace applies; an absent field, or an absent Quota, is
unlimited."""

from __future__ import annotations

from pydantic import Field

from sluiceway.model.common import Spec, Status


class QuotaSpec(Spec):
    """Namespace limits on runs, run starts per minute, definitions and schedules; absent is unlimited."""

    max_concurrent_executions: int | None = Field(None, ge=0, le=100_000_000)
    max_executions_per_minute: int | None = Field(None, ge=0, le=100_000_000)
    max_workflow_definitions: int | None = Field(None, ge=0, le=1_000_000)
    max_schedules: int | None = Field(None, ge=0, le=1_000_000)


class QuotaUsage(Spec):
    concurrent_executions: int = 0
    executions_this_minute: int = 0
    workflow_definitions: int = 0
    schedules: int = 0


class QuotaStatus(Status):
    used: QuotaUsage | None = None
