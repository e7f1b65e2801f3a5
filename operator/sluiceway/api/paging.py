"""What list routes share: the page size, the opaque cursor, times and
several-valued parameters in query strings, each refused with a 422 that
names the parameter."""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import uuid
from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

from sluiceway.api.errors import ApiError
from sluiceway.store.listing import Position

DEFAULT_LIMIT = 50
MAX_LIMIT = 500

E = TypeVar("E", bound=StrEnum)


def invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "INVALID_REQUEST", f"{field}: {message}", fields=[{"field": field, "message": message}])


class Order(StrEnum):
    NEWEST = "newest"
    OLDEST = "oldest"


def encode_cursor(position: Position, order: Order) -> str:
    raw = json.dumps({"t": position.created_at.isoformat(), "i": str(position.id), "o": order.value})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(text: str, order: Order) -> Position:
    """The position a cursor names; 422 for anything this API did not write,
    or a cursor of a page in the other order."""
    read = _read_cursor(text)
    if read is None:
        raise invalid("cursor", "not a cursor this API returned: pass `nextCursor` from the previous page")
    position, written_for = read
    if written_for is not order:
        raise invalid("cursor", f"a cursor of the {written_for.value}-first order: list with order={written_for.value}")
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
        raise invalid(field, f"cannot read {text[:64]!r}: use ISO 8601, e.g. 2026-12-24T18:00:00Z") from None
    if value.tzinfo is None:
        raise invalid(field, f"{text[:64]!r} has no time zone: add Z or an offset")
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
                raise invalid(field, f"{part[:64]!r} is not one of {allowed}") from None
            if item not in found:
                found.append(item)
    return tuple(found)


def run_id(field: str, text: str | None) -> uuid.UUID | None:
    if text is None:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise invalid(field, f"{text[:64]!r} is not a run id") from None
