"""Payload limits: how many bytes of JSON one value a tenant sends (a run's
input, a task's output, a message, a webhook body) may hold.

The operator sets a ceiling (SLUICEWAY_MAX_PAYLOAD_BYTES, 2 MiB by default,
as Temporal's blob limit); a namespace's Quotas may lower it with
`maxPayloadBytes`, never raise it. The lowest applies, and a refusal names
what set it, so a user knows whom to ask. Sizes are counted by the caller
(bytes of the value's compact JSON, what the store keeps); this is the
arithmetic and the wording."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

OPERATOR_SETTING = "SLUICEWAY_MAX_PAYLOAD_BYTES"
DEFAULT_MAX_PAYLOAD_BYTES = 2 * 1024 * 1024
# One request body: a payload, or a batch of results, with room to spare.
DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024
CONTROL = "maxPayloadBytes"
# Where users read how to pass large data: by reference, to object storage.
LARGE_DATA_DOC = "docs/payloads.md"


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON: what the store would keep."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # orjson holds integers to 64 bits; the models refuse larger ones, but never guess
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


@dataclass(frozen=True)
class PayloadLimit:
    limit: int  # bytes of JSON
    source: str  # what sets it: the operator's setting or a Quota's field

    def lower(self, other: int | None) -> int:
        """The lower of this limit and another one (None: no other)."""
        return self.limit if other is None else min(self.limit, other)


def payload_limit(operator_limit: int, quotas: Iterable[tuple[str, int | None]]) -> PayloadLimit:
    """The limit of a namespace: the operator's, lowered by any of its Quotas
    (by name); on a tie the first Quota by name is named."""
    found = PayloadLimit(operator_limit, OPERATOR_SETTING)
    for name, limit in sorted(quotas, key=lambda quota: quota[0]):
        if limit is not None and limit < found.limit:
            found = PayloadLimit(limit, f"Quota {name} {CONTROL}")
    return found


@dataclass(frozen=True)
class Oversized:
    """A value over its limit: refused (413), or, for a task's result, the
    task fails with `message` as its reason. Never truncated."""

    field: str
    size: int
    limit: PayloadLimit

    @property
    def message(self) -> str:
        return (
            f"{self.field}: {self.size} bytes of JSON, over the limit of {self.limit.limit} bytes "
            f"({self.limit.source}); pass large data by reference (see {LARGE_DATA_DOC})"
        )

    def details(self) -> dict[str, object]:
        return {
            "control": CONTROL,
            "field": self.field,
            "size": self.size,
            "limit": self.limit.limit,
            "limitSource": self.limit.source,
        }


def oversized(field: str, size: int, limit: PayloadLimit) -> Oversized | None:
    return Oversized(field, size, limit) if size > limit.limit else None


def oversized_value(field: str, value: Any, limit: PayloadLimit) -> Oversized | None:
    """`value` measured against `limit`; None when it fits (or is None: nothing sent)."""
    return None if value is None else oversized(field, json_size(value), limit)
