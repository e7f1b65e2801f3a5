"""Search attributes in the `run_attributes` side table: one row per run and
attribute, the value in the column of its type (see migration 0010 for why)."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterable
from typing import Any

import asyncpg
from pydantic import ValidationError

from sluiceway.controls.attributes import Attribute
from sluiceway.model.attributes import AttributeType, SearchAttribute

COLUMNS = {
    AttributeType.KEYWORD: "keyword",
    AttributeType.INT: "int_value",
    AttributeType.DOUBLE: "double_value",
    AttributeType.BOOL: "bool_value",
    AttributeType.DATETIME: "time_value",
}

_UPSERT = """
INSERT INTO run_attributes AS a (run_id, name, namespace, created_at, type, keyword, int_value, double_value,
                                 bool_value, time_value)
SELECT $1, v.name, $2, $3, v.type, v.keyword, v.int_value, v.double_value, v.bool_value, v.time_value
  FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::float8[], $9::bool[], $10::timestamptz[])
       AS v(name, type, keyword, int_value, double_value, bool_value, time_value)
ON CONFLICT (run_id, name) DO UPDATE
   SET type = EXCLUDED.type, keyword = EXCLUDED.keyword, int_value = EXCLUDED.int_value,
       double_value = EXCLUDED.double_value, bool_value = EXCLUDED.bool_value, time_value = EXCLUDED.time_value
"""
_OF_RUNS = """
SELECT run_id, name, type, keyword, int_value, double_value, bool_value, time_value
  FROM run_attributes WHERE run_id = ANY($1::uuid[]) AND namespace = $2 ORDER BY run_id, name
"""
_COPY = """
INSERT INTO run_attributes (run_id, name, namespace, created_at, type, keyword, int_value, double_value, bool_value,
                            time_value)
SELECT $2, name, namespace, $3, type, keyword, int_value, double_value, bool_value, time_value
  FROM run_attributes WHERE run_id = $1 AND NOT (name = ANY($4::text[]))
ON CONFLICT (run_id, name) DO NOTHING
"""
_DECLARED = """
SELECT w.name, v.spec->'searchAttributes' AS declared FROM workflows w
  JOIN workflow_versions v ON v.namespace = w.namespace AND v.name = w.name AND v.version = w.latest_version
 WHERE w.namespace = $1 AND ($2::text IS NULL OR w.name = $2) AND v.spec ? 'searchAttributes'
"""
_OF_TASKS = """
SELECT t.id AS task_id, e.id AS run_id, e.created_at, v.spec->'searchAttributes' AS declared
  FROM tasks t
  JOIN executions e ON e.id = t.execution_id
  LEFT JOIN workflow_versions v ON v.namespace = e.namespace AND v.name = e.workflow_name
                               AND v.version = e.workflow_version
 WHERE t.namespace = $1 AND t.id = ANY($2::uuid[])
"""


async def write(
    conn: asyncpg.Connection,
    run_id: uuid.UUID,
    namespace: str,
    created_at: datetime.datetime,
    attributes: Iterable[Attribute],
) -> None:
    """Set these attributes of a run (in the caller's transaction)."""
    rows = list(attributes)
    if not rows:
        return
    columns: dict[str, list[Any]] = {column: [] for column in COLUMNS.values()}
    for attribute in rows:
        for kind, column in COLUMNS.items():
            columns[column].append(attribute.value if attribute.type is kind else None)
    await conn.execute(
        _UPSERT,
        run_id,
        namespace,
        created_at,
        [a.name for a in rows],
        [a.type.value for a in rows],
        *columns.values(),
    )


async def copy(
    conn: asyncpg.Connection,
    source: uuid.UUID,
    target: uuid.UUID,
    created_at: datetime.datetime,
    except_names: Iterable[str] = (),
) -> None:
    """Give a restarted run the attributes of the run it restarts (those it did not set itself)."""
    await conn.execute(_COPY, source, target, created_at, list(except_names))


def _wire(row: asyncpg.Record) -> Any:
    kind = AttributeType(row["type"])
    value = row[COLUMNS[kind]]
    return Attribute(row["name"], kind, value).wire()


async def of_runs(
    conn: asyncpg.Connection, namespace: str, run_ids: list[uuid.UUID]
) -> dict[uuid.UUID, dict[str, Any]]:
    """The attributes of each of these runs of `namespace`, by name, in their JSON form."""
    found: dict[uuid.UUID, dict[str, Any]] = {run_id: {} for run_id in run_ids}
    if run_ids:
        for row in await conn.fetch(_OF_RUNS, run_ids, namespace):
            found[row["run_id"]][row["name"]] = _wire(row)
    return found


def declarations(raw: Any) -> list[SearchAttribute]:
    """The declarations in a stored spec's `searchAttributes`; entries that do
    not parse (a version stored by older code) are left out."""
    if isinstance(raw, str):
        raw = json.loads(raw)
    found = []
    for entry in raw if isinstance(raw, list) else []:
        try:
            found.append(SearchAttribute.model_validate(entry))
        except ValidationError:
            continue
    return found


async def declared(conn: asyncpg.Connection, namespace: str, workflow: str | None) -> list[list[SearchAttribute]]:
    """The declarations of the live workflows of a namespace (or of one)."""
    return [declarations(row["declared"]) for row in await conn.fetch(_DECLARED, namespace, workflow)]


async def of_tasks(
    conn: asyncpg.Connection, namespace: str, task_ids: list[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, datetime.datetime, list[SearchAttribute]]]:
    """For each task: its run, the run's creation time and the declarations of
    the run's workflow version (what a result may upsert)."""
    if not task_ids:
        return {}
    return {
        row["task_id"]: (row["run_id"], row["created_at"], declarations(row["declared"]))
        for row in await conn.fetch(_OF_TASKS, namespace, task_ids)
    }
