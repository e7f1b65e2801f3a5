"""Finding runs and tasks: the list filters every edge takes as text (the
REST API's query parameters, the web UI's filter form), parsed once, and
the keyset pages they select (store.listing), with the opaque cursor that
continues a page. A filter or cursor that cannot be read raises `Invalid`
naming it."""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from sluiceway.controls import attributes as attribute_rules
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.plane.core import Plane
from sluiceway.plane.errors import Invalid
from sluiceway.store import attributes, listing
from sluiceway.store.database import Connection
from sluiceway.store.listing import Page, Position

__all__ = ["Order", "Page", "RunQuery", "TaskQuery", "decode_cursor", "encode_cursor", "find_runs", "find_tasks"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_ATTRIBUTE_FILTERS = 10

E = TypeVar("E", bound=StrEnum)


class Order(StrEnum):
    NEWEST = "newest"
    OLDEST = "oldest"


def encode_cursor(position: Position, order: Order) -> str:
    raw = json.dumps({"t": position.created_at.isoformat(), "i": str(position.id), "o": order.value})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(text: str, order: Order) -> Position:
    """The position a cursor names; Invalid for anything `encode_cursor` did
    not write, or a cursor of a page in the other order."""
    read = _read_cursor(text)
    if read is None:
        raise Invalid("cursor", "not a cursor this API returned: pass `nextCursor` from the previous page")
    position, written_for = read
    if written_for is not order:
        raise Invalid("cursor", f"a cursor of the {written_for.value}-first order: list with order={written_for.value}")
    return position


def _read_cursor(text: str) -> tuple[Position, Order] | None:
    """What a cursor says, or None for anything of another shape. A caller can
    send any bytes, so every field's type is checked before it is used, rather
    than trusting the constructors to refuse a wrong type with a ValueError."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, RecursionError):  # RecursionError: JSON nested deeper than the stack
        return None
    if not isinstance(raw, dict):
        return None
    written_at, run, written_for = raw.get("t"), raw.get("i"), raw.get("o")
    if not (isinstance(written_at, str) and isinstance(run, str) and isinstance(written_for, str)):
        return None
    try:
        created_at = datetime.datetime.fromisoformat(written_at)
        if created_at.tzinfo is None:
            return None
        # PostgreSQL is sent the instant in UTC: an offset that moves it out
        # of the years a datetime holds is no instant this API wrote.
        return Position(created_at.astimezone(datetime.UTC), uuid.UUID(run)), Order(written_for)
    except (ValueError, OverflowError):
        return None


def instant(field: str, text: str | None) -> datetime.datetime | None:
    if text is None:
        return None
    try:
        value = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise Invalid(field, f"cannot read {text[:64]!r}: use ISO 8601, e.g. 2026-12-24T18:00:00Z") from None
    if value.tzinfo is None:
        raise Invalid(field, f"{text[:64]!r} has no time zone: add Z or an offset")
    return value


def several(field: str, values: Iterable[str] | None, kind: type[E]) -> tuple[E, ...]:
    """Repeated (`status=A&status=B`) or comma-separated (`status=A,B`) values of an enum."""
    found: list[E] = []
    for value in values or ():
        for part in value.split(","):
            part = part.strip().upper()
            if not part:
                continue
            try:
                item = kind(part)
            except ValueError:
                allowed = ", ".join(k.value for k in kind)
                raise Invalid(field, f"{part[:64]!r} is not one of {allowed}") from None
            if item not in found:
                found.append(item)
    return tuple(found)


def run_id(field: str, text: str | None) -> uuid.UUID | None:
    if text is None:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise Invalid(field, f"{text[:64]!r} is not a run id") from None


def no_nul(field: str, value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise Invalid(field, "must not contain a NUL character")
    return value


@dataclass(frozen=True)
class RunQuery:
    """A runs list's filters as sent (every one narrows)."""

    workflow: str | None = None
    version: int | None = None
    status: Sequence[str] = ()
    started_after: str | None = None
    started_before: str | None = None
    ended_after: str | None = None
    ended_before: str | None = None
    correlation_id: str | None = None
    parent: str | None = None
    workflow_run: str | None = None
    restarted_from: str | None = None
    awaiting_admission: bool | None = None
    sla_breached: bool | None = None
    search_attributes: Sequence[str] = ()


async def find_runs(
    plane: Plane,
    namespace: str,
    query: RunQuery,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    order: Order = Order.NEWEST,
) -> Page:
    """A page of the runs `query` selects, in start order; its rows are `listing.RunRow`s."""
    after = decode_cursor(cursor, order) if cursor is not None else None
    async with plane.pool.acquire() as conn:
        found = listing.RunFilter(
            workflow=query.workflow,
            version=query.version,
            statuses=several("status", query.status, RunStatus),
            started_after=instant("startedAfter", query.started_after),
            started_before=instant("startedBefore", query.started_before),
            ended_after=instant("endedAfter", query.ended_after),
            ended_before=instant("endedBefore", query.ended_before),
            correlation_id=no_nul("correlationId", query.correlation_id),
            parent=run_id("parent", query.parent),
            workflow_run=query.workflow_run,
            restarted_from=run_id("restartedFrom", query.restarted_from),
            awaiting_admission=query.awaiting_admission,
            sla_breached=query.sla_breached,
            attributes=await _attribute_filters(conn, namespace, query.workflow, query.search_attributes),
        )
        return await listing.runs(conn, namespace, found, after=after, limit=limit, ascending=order is Order.OLDEST)


async def _attribute_filters(
    conn: Connection, namespace: str, workflow: str | None, written: Sequence[str]
) -> tuple[attribute_rules.TypedFilter, ...]:
    if not written:
        return ()
    if len(written) > MAX_ATTRIBUTE_FILTERS:
        raise Invalid("searchAttribute", f"at most {MAX_ATTRIBUTE_FILTERS} attribute filters")
    declared = attribute_rules.declared_types(await attributes.declared(conn, namespace, workflow))
    found = []
    for text in written:
        try:
            condition = attribute_rules.parse_filter(text)
            found.append(attribute_rules.typed_filter(condition, attribute_rules.filter_type(condition.name, declared)))
        except attribute_rules.FilterError as error:
            raise Invalid("searchAttribute", str(error)) from None
    return tuple(found)


@dataclass(frozen=True)
class TaskQuery:
    """A task list's filters as sent (every one narrows)."""

    status: Sequence[str] = ()
    task_type: str | None = None
    worker_id: str | None = None
    execution_id: str | None = None
    reference_name: str | None = None
    type: str | None = None  # the engine's type: HUMAN, SIMPLE, HTTP, ...
    workflow: str | None = None


async def find_tasks(
    plane: Plane,
    namespace: str,
    query: TaskQuery,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    order: Order = Order.NEWEST,
) -> Page:
    """A page of the task attempts `query` selects; its rows are `listing.TaskRow`s."""
    after = decode_cursor(cursor, order) if cursor is not None else None
    found = listing.TaskFilter(
        statuses=several("status", query.status, TaskStatus),
        task_type=query.task_type,
        worker_id=no_nul("workerId", query.worker_id),
        execution_id=run_id("executionId", query.execution_id),
        reference_name=no_nul("referenceName", query.reference_name),
        type=query.type,
        workflow=query.workflow,
    )
    async with plane.pool.acquire() as conn:
        return await listing.tasks(conn, namespace, found, after=after, limit=limit, ascending=order is Order.OLDEST)
