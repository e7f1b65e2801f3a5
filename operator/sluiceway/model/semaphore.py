"""Semaphore: a named ceiling shared by unrelated task types."""

from __future__ import annotations

from pydantic import Field

from sluiceway.model.common import EngineName, Spec, Status


class SemaphoreSpec(Spec):
    """A named ceiling on concurrent leases, shared by unrelated task types."""

    name: EngineName | None = Field(
        None,
        description="Semaphore name TaskDefinitions refer to. Defaults to metadata.name.",
    )
    permits: int = Field(ge=0, le=1_000_000, description="Leases that may hold it at once.")


class SemaphoreHolder(Spec):
    task_id: str
    execution_id: str
    task_type: str
    since: str


class SemaphoreStatus(Status):
    semaphore_name: str | None = None
    permits: int | None = None
    held: int | None = None
    holders: list[SemaphoreHolder] | None = None
