"""Shapes shared by every resource: the spec base, names and conditions."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Task types, semaphores and workflows keep the names users already know from
# Conductor-style engines ("export_report", "legacy_erp"). Kubernetes object
# names cannot hold underscores or capitals, so a resource may carry `spec.name`
# for the engine-level name; without it the object's own name is used.
ENGINE_NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?$"
EngineName = Annotated[str, Field(pattern=ENGINE_NAME_PATTERN, max_length=253)]

_KUBE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def kube_name_for(engine_name: str) -> str:
    """The Kubernetes object name an engine name maps to (`legacy_erp` ->
    `legacy-erp`), used when the REST API creates a resource from a name that
    Kubernetes would refuse."""
    candidate = re.sub(r"[^a-z0-9.-]+", "-", engine_name.lower()).strip("-.")
    if not candidate or not _KUBE_NAME.match(candidate):
        raise ValueError(f"cannot derive a Kubernetes name from {engine_name!r}")
    return candidate[:253]


class Spec(BaseModel):
    """Base of every spec and payload: camelCase on the wire, snake_case in
    Python, immutable once parsed. Unknown fields are ignored, as the API
    server's structural schema prunes them."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="ignore",
        use_enum_values=False,
    )

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON shape, without unset optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Spec):
    """The standard `metav1.Condition` shape, so Argo CD, Flux and
    `kubectl wait --for=condition=Ready` understand it."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str | None = None


class Status(Spec):
    """Fields every status carries."""

    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
