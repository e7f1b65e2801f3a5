"""Shapes shared by every resource: the spec base, names and conditions."""

from __future__ import annotations

import datetime
import math
import re
import uuid
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

# The widest numbers the store's columns hold: int4 for epochs, attempts,
# versions and counts; JSON numbers travel through orjson into jsonb, int8 at most.
INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Deeper JSON than this is refused rather than walked: no real payload needs it,
# and the decoders on the way to jsonb recurse.
MAX_JSON_DEPTH = 64


def wire_time(value: datetime.datetime | None) -> str | None:
    """An instant as the API writes it: ISO 8601 in UTC, with a `Z`."""
    if value is None:
        return None
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def kube_time(value: datetime.datetime | None) -> str | None:
    """An instant as Kubernetes writes one in an object (RFC 3339 to the second, `Z`)."""
    return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


# Task types, semaphores and workflows keep the names users already know from
# Conductor-style engines ("export_report", "legacy_erp"). Kubernetes object
# names cannot hold underscores or capitals, so a resource may carry `spec.name`
# for the engine-level name; without it the object's own name is used.
ENGINE_NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?$"
EngineName = Annotated[str, Field(pattern=ENGINE_NAME_PATTERN, max_length=253)]

# Kubernetes names: a namespace is a DNS label, most objects a DNS subdomain.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
_KUBE_NAME = re.compile(DNS_SUBDOMAIN_PATTERN)


def kube_name_for(engine_name: str) -> str:
    """The Kubernetes object name an engine name maps to (`legacy_erp` ->
    `legacy-erp`), used when the REST API creates a resource from a name that
    Kubernetes would refuse."""
    candidate = re.sub(r"[^a-z0-9.-]+", "-", engine_name.lower()).strip("-.")
    if not candidate or not _KUBE_NAME.match(candidate):
        raise ValueError(f"cannot derive a Kubernetes name from {engine_name!r}")
    return candidate[:253]


Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
Epoch = Annotated[int, Field(ge=0, le=INT32_MAX, description="The lease epoch, as leased.")]

_UUID_PATTERN = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"


def _canonical_uuid(value: str) -> str:
    return str(uuid.UUID(value))


# Ids the store keys by uuid: checked at the edge and kept in canonical form, so
# every layer compares one spelling of an id.
Uuid = Annotated[str, Field(pattern=_UUID_PATTERN, max_length=36), AfterValidator(_canonical_uuid)]

T = TypeVar("T")


def _refuse_duplicates(items: list[T]) -> list[T]:
    seen: list[T] = []
    duplicates: list[str] = []
    for item in items:
        if item in seen and str(item) not in duplicates:
            duplicates.append(str(item))
        seen.append(item)
    if duplicates:
        raise ValueError(f"duplicate entries: {', '.join(duplicates)}")
    return items


# A list that is a set in meaning: duplicates are refused by pydantic (so by the
# REST surface, with a 422 naming the field) and, through the generated CRD's
# `x-kubernetes-list-type: set`, by the API server at `kubectl apply`.
SetOf = Annotated[
    list[T],
    AfterValidator(_refuse_duplicates),
    Field(json_schema_extra={"x-kubernetes-list-type": "set", "uniqueItems": True}),
]


# The rule every JSON payload keeps (`unstorable`), for the API document's
# descriptions: JSON Schema cannot say "no NUL character at any depth".
PAYLOAD_RULE = (
    "As every payload: text (keys and values, at any depth) holds no NUL character or lone surrogate, "
    f"integers fit in 64 bits, nesting is at most {MAX_JSON_DEPTH} levels (else 422 naming the field)."
)
TEXT_RULE = "Holds no NUL character or lone surrogate (else 422 naming the field)."


def unstorable(value: Any) -> str | None:
    """Why this JSON value cannot be stored as sent (text or jsonb), or None.

    PostgreSQL refuses NUL characters in text and jsonb, UTF-8 cannot encode a
    lone surrogate (JSON's `\\ud800` decodes to one), and jsonb arrives
    through orjson, which holds integers to 64 bits. Walked without recursion,
    so no payload can exhaust the stack."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if not item.isascii() or "\x00" in item:
                problem = _bad_text(item)
                if problem:
                    return problem
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return "integers must fit in 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "numbers must be finite"
        elif isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                return f"nested deeper than {MAX_JSON_DEPTH} levels"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return None


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "text must not contain NUL characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "text must be valid Unicode (no lone surrogates)"
    return None


class Spec(BaseModel):
    """Base of every spec and payload: camelCase on the wire, snake_case in
    Python, immutable once parsed. Unknown fields are ignored, as the API
    server's structural schema prunes them. Numbers are finite and every value
    is one the store can hold, so bad input is refused here, naming the field,
    never by PostgreSQL with a 500."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="ignore",
        use_enum_values=False,
        allow_inf_nan=False,
    )

    # Fields whose items are validated later, one by one (batches): not walked here.
    deferred: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name not in cls.deferred and isinstance(value, str | int | float | dict | list):
            problem = unstorable(value)
            if problem:
                raise ValueError(problem)
        return value

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


# The label a Secret must carry before the operator reads it for a task or a
# webhook: a Workflow author who may not read Secrets cannot have the
# operator read one for them.
SECRET_LABEL = "sluiceway.dev/secret"
_SECRET_NAME = DNS_SUBDOMAIN_PATTERN
_SECRET_KEY = r"^[-._a-zA-Z0-9]{1,253}$"


class SecretKeyRef(Spec):
    """One key of a Secret in the same namespace, labelled `sluiceway.dev/secret: "true"`."""

    name: str = Field(pattern=_SECRET_NAME, max_length=253, description="The Secret's name.")
    key: str = Field(pattern=_SECRET_KEY, description="The key in its data.")


# What `sluiceway admin import` writes on every object it restores: the uid the
# object had in the cluster it was exported from. A restored object gets a new
# uid, and three things are keyed by the old one in PostgreSQL: a WorkflowRun's
# run (its id), a Schedule's row (a new uid would drop its fire history) and a
# Trigger's dedup keys (hashed with it). See docs/backup.md.
RESTORED_UID_ANNOTATION = "sluiceway.dev/restored-uid"


def identity_of(metadata: Mapping[str, Any], uid: str) -> str:
    """The uid an object is known by in PostgreSQL: the restored one when an
    import wrote it (and it is a uid at all), else its own."""
    restored = (metadata.get("annotations") or {}).get(RESTORED_UID_ANNOTATION)
    if not isinstance(restored, str):
        return uid
    try:
        return str(uuid.UUID(restored))
    except ValueError:  # not written by an import: a typo must not stop the object's reconcile
        return uid
