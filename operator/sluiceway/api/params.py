"""The path and query parameters the routers share, declared once so that every route
validates and documents them alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import WithJsonSchema

from sluiceway.model.common import DNS_LABEL_PATTERN, ENGINE_NAME_PATTERN
from sluiceway.model.execution import RunStatus, TaskStatus

NAMESPACE = Annotated[str, Path(pattern=DNS_LABEL_PATTERN, description="Kubernetes namespace")]
NAME = Annotated[str, Path(pattern=ENGINE_NAME_PATTERN, max_length=253)]
EXECUTION_ID = Annotated[uuid.UUID, Path(description="A run id, as returned when it started")]
TASK_ID = Annotated[uuid.UUID, Path(description="A task id, as leased")]


def cursor_query(max_length: int) -> Any:
    """A page cursor: opaque, so its one rule the document can only state in
    words is that it must be a `nextCursor` this list returned (in the same
    order); its alphabet and length are in the schema."""
    return Query(
        max_length=max_length,
        pattern=CURSOR_PATTERN,
        description="Opaque: only the `nextCursor` of the previous page of this list, in the same order, "
        "is read; any other string is refused (422 naming `cursor`).",
    )


# What encode_cursor writes: unpadded URL-safe base64.
CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"


def instant_query(alias: str, description: str = "") -> Any:
    """A query parameter holding an instant, as the plane reads it (an ISO 8601 date-time with a time zone)."""
    said = f"{description}: " if description else ""
    return Query(
        alias=alias,
        description=f"{said}an ISO 8601 date-time with a time zone, e.g. 2026-12-24T18:00:00Z",
    )


def run_id_query(alias: str | None = None, description: str = "A run id") -> Any:
    """A query parameter holding a run id: a UUID (else 422 naming it)."""
    return Query(alias=alias, description=description)


# Query texts the plane parses, with the format they must have in the document
# (on the string itself, so a generated client and a fuzzer both see it).
InstantText = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
RunIdText = Annotated[str, WithJsonSchema({"type": "string", "format": "uuid"})]


def _statuses(values: Iterable[str]) -> Any:
    """A `status` filter item: one status, or several comma-separated, as the
    handlers accept them; the document states it, so clients keep to it."""
    one = "|".join(values)
    return Annotated[str, WithJsonSchema({"type": "string", "pattern": f"^({one})(,({one}))*$"})]


RunStatusText = _statuses(RunStatus)
TaskStatusText = _statuses(TaskStatus)
