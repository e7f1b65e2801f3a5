"""Workflow definitions: versions that runs pin, and the live Workflow objects.

Versions are read as parsed WorkflowSpecs. A version is immutable, so each is
parsed once per process."""

from __future__ import annotations

import datetime
import functools
import logging
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import asyncpg
from pydantic import ValidationError

from sluiceway.model.workflow import WorkflowSpec
from sluiceway.store.definitions import Claim

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkflowVersion:
    name: str
    version: int
    spec: WorkflowSpec | None  # None: the stored spec no longer parses (the decider quarantines its runs)


# The stored text of the versions the decider read lately, by (namespace, name,
# version, created_at): a version row is never rewritten, and its creation time
# tells apart a row made again under the same number. The decider's lock of due
# runs reads that key, not the spec: converting each run's spec to text on
# every pass cost PostgreSQL more than the rest of that statement once
# workflows grew to a few kilobytes. The same string object is passed on to
# parsed_spec, whose cache then hashes and compares it at no cost.
SpecKey = tuple[str, str, int, datetime.datetime | None]
_SPECS_KEPT = 2048
_raw_specs: OrderedDict[SpecKey, str] = OrderedDict()
_SPECS = """
SELECT v.namespace, v.name, v.version, v.created_at, v.spec::text AS spec FROM workflow_versions v
  JOIN unnest($1::text[], $2::text[], $3::int[]) AS k(namespace, name, version)
    ON v.namespace = k.namespace AND v.name = k.name AND v.version = k.version
"""


async def stored_specs(conn: asyncpg.Connection, keys: Iterable[SpecKey]) -> dict[SpecKey, str]:
    """The stored text of each of these versions (a key whose created_at is
    None, or whose row is gone, is left out), read once per process."""
    found: dict[SpecKey, str] = {}
    missing: set[SpecKey] = set()
    for key in keys:
        raw = _raw_specs.get(key)
        if raw is not None:
            _raw_specs.move_to_end(key)
            found[key] = raw
        elif key[3] is not None:
            missing.add(key)
    if missing:
        rows = await conn.fetch(_SPECS, [k[0] for k in missing], [k[1] for k in missing], [k[2] for k in missing])
        for row in rows:
            key = (row["namespace"], row["name"], row["version"], row["created_at"])
            if key in missing:
                found[key] = _raw_specs[key] = row["spec"]
        while len(_raw_specs) > _SPECS_KEPT:
            _raw_specs.popitem(last=False)
    return found


@functools.lru_cache(maxsize=2048)
def parsed_spec(namespace: str, name: str, version: int, raw: str) -> WorkflowSpec:
    """One stored version, parsed; raises what the model raises. The raw JSON
    is part of the key only to keep the cache honest if a version row were
    ever rewritten."""
    return WorkflowSpec.model_validate_json(raw)


def readable_spec(namespace: str, name: str, version: int, raw: str | None) -> WorkflowSpec | None:
    """The parsed version, or None when it is missing or no longer parses."""
    if raw is None:
        return None
    try:
        return parsed_spec(namespace, name, version, raw)
    except ValidationError as error:
        log.warning("workflow %s/%s version %d cannot be read: %s", namespace, name, version, error)
        return None


_OWNER = "SELECT resource_name FROM workflows WHERE namespace = $1 AND name = $2"
_RELEASE_OLD_NAME = "DELETE FROM workflows WHERE namespace = $1 AND resource_name = $2 AND name <> $3"
_LATEST = """
SELECT v.version, v.spec FROM workflow_versions v
 WHERE v.namespace = $1 AND v.name = $2 ORDER BY v.version DESC LIMIT 1
"""
_ADD_VERSION = "INSERT INTO workflow_versions (namespace, name, version, spec) VALUES ($1, $2, $3, $4)"
_UPSERT = """
INSERT INTO workflows (namespace, name, resource_name, generation, latest_version)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, name) DO UPDATE
   SET generation = EXCLUDED.generation, latest_version = EXCLUDED.latest_version, updated_at = now()
 WHERE workflows.resource_name = EXCLUDED.resource_name
RETURNING resource_name
"""
_DELETE = "DELETE FROM workflows WHERE namespace = $1 AND resource_name = $2"
_GET_VERSION = """
SELECT version, spec::text AS spec FROM workflow_versions WHERE namespace = $1 AND name = $2 AND version = $3
"""
_GET_LIVE = """
SELECT v.version, v.spec::text AS spec FROM workflows w
  JOIN workflow_versions v ON v.namespace = w.namespace AND v.name = w.name AND v.version = w.latest_version
 WHERE w.namespace = $1 AND w.name = $2
"""
_COUNT = "SELECT count(*) FROM workflows WHERE namespace = $1"


_DEFINITION_LIMIT = """
SELECT resource_name, max_workflow_definitions FROM quotas
 WHERE namespace = $1 AND max_workflow_definitions IS NOT NULL ORDER BY max_workflow_definitions LIMIT 1
"""


class DefinitionQuotaExceeded(Exception):
    """A new Workflow would pass the namespace's maxWorkflowDefinitions."""


async def upsert_workflow(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    resource_name: str,
    generation: int,
    spec: dict[str, Any],
) -> tuple[Claim, int]:
    """Store the spec under a new version if it changed; return the claim and
    the version new runs start on. Raises DefinitionQuotaExceeded for a new
    workflow past the namespace quota (checked under a lock, so two new
    Workflows cannot both take the last slot)."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('workflow-definitions:' || $1))", namespace)
        owner = await conn.fetchval(_OWNER, namespace, name)
        if owner is not None and owner != resource_name:
            latest = await conn.fetchrow(_LATEST, namespace, name)
            return Claim(owner), int(latest["version"]) if latest else 0
        if owner is None:
            limit = await conn.fetchrow(_DEFINITION_LIMIT, namespace)
            defined = await count_workflows(conn, namespace)
            if limit is not None and defined >= limit["max_workflow_definitions"]:
                raise DefinitionQuotaExceeded(
                    f"quota {limit['resource_name']}: maxWorkflowDefinitions {limit['max_workflow_definitions']} "
                    f"reached ({defined} defined)"
                )
        await conn.execute(_RELEASE_OLD_NAME, namespace, resource_name, name)
        latest = await conn.fetchrow(_LATEST, namespace, name)
        version = int(latest["version"]) if latest else 0
        if latest is None or latest["spec"] != spec:
            version += 1
            await conn.execute(_ADD_VERSION, namespace, name, version, spec)
        await conn.fetchval(_UPSERT, namespace, name, resource_name, generation, version)
        return Claim(resource_name), version


async def delete_workflow(conn: asyncpg.Connection, namespace: str, resource_name: str) -> None:
    """Stop new runs; versions stay for the runs that pinned them."""
    await conn.execute(_DELETE, namespace, resource_name)


async def find_version(
    conn: asyncpg.Connection, namespace: str, name: str, version: int | None
) -> WorkflowVersion | None:
    """A pinned version (even of a deleted Workflow), or the live latest one."""
    if version is None:
        row = await conn.fetchrow(_GET_LIVE, namespace, name)
    else:
        row = await conn.fetchrow(_GET_VERSION, namespace, name, version)
    if row is None:
        return None
    version = int(row["version"])
    return WorkflowVersion(name, version, readable_spec(namespace, name, version, row["spec"]))


async def count_workflows(conn: asyncpg.Connection, namespace: str) -> int:
    return int(await conn.fetchval(_COUNT, namespace))


@dataclass(frozen=True)
class LiveWorkflow:
    name: str
    resource_name: str
    version: int
    spec: dict[str, Any]


_LIST = """
SELECT w.name, w.resource_name, w.latest_version, v.spec FROM workflows w
  JOIN workflow_versions v ON v.namespace = w.namespace AND v.name = w.name AND v.version = w.latest_version
 WHERE w.namespace = $1 ORDER BY w.name
"""
_RESOURCE = "SELECT resource_name FROM workflows WHERE namespace = $1 AND name = $2"


async def list_workflows(conn: asyncpg.Connection, namespace: str) -> list[LiveWorkflow]:
    """The namespace's live workflows, each with the version new runs start on."""
    return [
        LiveWorkflow(r["name"], r["resource_name"], r["latest_version"], r["spec"])
        for r in await conn.fetch(_LIST, namespace)
    ]


async def resource_of(conn: asyncpg.Connection, namespace: str, name: str) -> str | None:
    """The Workflow object that defines `name` now, if any."""
    found: str | None = await conn.fetchval(_RESOURCE, namespace, name)
    return found
