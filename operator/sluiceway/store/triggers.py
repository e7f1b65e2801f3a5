"""Triggers, as their reconciler stores them, and the ones a published event
is judged by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg
from pydantic import ValidationError

from sluiceway.model.trigger import TriggerSpec

_UPSERT = """
INSERT INTO triggers (namespace, name, uid, generation, event, spec) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (namespace, name) DO UPDATE
   SET uid = EXCLUDED.uid, generation = EXCLUDED.generation, event = EXCLUDED.event, spec = EXCLUDED.spec,
       updated_at = now()
"""
_DELETE = "DELETE FROM triggers WHERE namespace = $1 AND name = $2"
_OF_EVENT = "SELECT name, uid, spec FROM triggers WHERE namespace = $1 AND event = $2 ORDER BY name"


@dataclass(frozen=True)
class StoredTrigger:
    name: str
    uid: str
    spec: TriggerSpec | None  # None when a stored spec no longer parses (a newer release wrote it)
    problem: str = ""


async def upsert(
    conn: asyncpg.Connection, namespace: str, name: str, uid: str, generation: int, spec: TriggerSpec
) -> None:
    await conn.execute(_UPSERT, namespace, name, uid, generation, spec.event, spec.to_wire())


async def delete(conn: asyncpg.Connection, namespace: str, name: str) -> None:
    await conn.execute(_DELETE, namespace, name)


async def of_event(conn: asyncpg.Connection, namespace: str, event: str) -> list[StoredTrigger]:
    """The Triggers listening to `event`, by name (the order a publish claims their keys in)."""
    return [_stored(row["name"], row["uid"], row["spec"]) for row in await conn.fetch(_OF_EVENT, namespace, event)]


def _stored(name: str, uid: str, raw: dict[str, Any]) -> StoredTrigger:
    try:
        return StoredTrigger(name, uid, TriggerSpec.model_validate(raw))
    except ValidationError as error:
        return StoredTrigger(name, uid, None, str(error).splitlines()[0])
