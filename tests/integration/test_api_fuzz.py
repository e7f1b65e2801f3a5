"""A bounded, seeded schemathesis pass over the served OpenAPI document of the
real app, on a real PostgreSQL: every operation, in the coverage, fuzzing and
stateful phases (links from a started run to reading, deciding, explaining
and terminating it). It fails on any 5xx and on any answer the document does
not describe. The definition writes need Kubernetes: e2e/test_api_fuzz.py
covers them against the operator."""

from __future__ import annotations

import datetime
import re
import uuid

import pytest

from sluiceway.model.schedule import ScheduleSpec
from sluiceway.store import schedules
from sluiceway.store.database import Pool
from tests.support import fuzzing
from tests.support.plane import Plane
from tests.support.store import NS, define_workflow, lease, report, scheduled, settle, start

# Writes through Kubernetes: fuzzed by e2e/test_api_fuzz.py against a real API server.
WRITES = (
    "put_task_definition",
    "put_semaphore",
    "put_quotas",
    "put_schedule",
    "delete_schedule",
    "pause_schedule",
    "resume_schedule",
)


async def test_the_api_answers_a_seeded_fuzz_pass_as_documented(plane: Plane) -> None:
    await define_workflow(plane.pool, "fuzz", [{"name": "job", "taskReferenceName": "j"}])
    for _ in range(20):  # tasks for the polls the fuzzer steers to `job`
        await start(plane.pool, "fuzz")
    exclusions = [arg for op in WRITES for arg in ("--exclude-operation-id", op)]
    outcome = await fuzzing.run(
        plane.url,
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        "60",
        *exclusions,
        steer={"namespace": NS, "workflow": "fuzz", "task_type": "job"},
    )
    print(f"schemathesis seed {fuzzing.seed()} (replay or explore with SLUICEWAY_FUZZ_SEED)")
    print(outcome.output)
    assert outcome.code == 0, outcome.output[-20_000:]


# Every operation's server checks are in the document: its schemas, formats,
# patterns and bounds, and, for what JSON Schema cannot say, the description
# of the field, which the positive mode of tests/support/fuzzing.py keeps
# generated data to (a cursor the list returned, the search-attribute filter
# grammar, env names unique, maxReplicas at least minReplicas, no NUL in any
# payload, ...). None is left out: a new operation is held to it at once.
# Writes through Kubernetes are checked up to the write (503 without it).


async def _seed_for_acceptance(pool: Pool) -> dict[str, str]:
    """What the pass steers to, so that it reaches the checks behind "not
    found": the workflow, a schedule of it, a running run whose task is
    leased (messages, results) and a finished run (restarts)."""
    # Names of its own: the pass above may have left runs of `fuzz` in the same database.
    await define_workflow(pool, "accept", [{"name": "accepted", "taskReferenceName": "a"}])
    # One fire in any range: a backfill starts at most one run.
    spec = ScheduleSpec(
        workflow="accept", cron=["0 0 1 1 *"], end_at=datetime.datetime(1971, 1, 1, tzinfo=datetime.UTC)
    )
    async with pool.acquire() as conn:
        await schedules.upsert_schedule(conn, NS, "accept", str(uuid.uuid4()), 1, spec)
    finished, running = await start(pool, "accept"), await start(pool, "accept")
    await settle(pool)
    await scheduled(pool, "accepted", 2)  # the plane's own decider may still be deciding one of them
    leases = {found.execution_id: found for found in await lease(pool, "accepted", count=2)}
    await report(pool, leases[finished])
    await settle(pool)
    return {
        "namespace": NS,
        "workflow": "accept",
        "names": "accept",
        "run_ids": f"{running},{finished}",
        "task_ids": leases[running].task_id,
        "reference": "a",  # the task both runs ran: what a rerun starts from
    }


@pytest.mark.timeout(1500)  # every operation: minutes on a busy machine
async def test_the_api_accepts_what_its_document_allows(plane: Plane) -> None:
    """Schema-valid requests to any operation are never refused as invalid
    (400, 413, 422): a generated client that keeps to the document is not
    refused for its data. 404, 409, 429 and 503 (no such run, not running,
    no Kubernetes) are answers about the state, not the data."""
    steer = await _seed_for_acceptance(plane.pool)
    outcome = await fuzzing.run(
        plane.url,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "10",
        steer=steer,
        checks="positive_data_acceptance",
        positive=True,
    )
    print(f"schemathesis seed {fuzzing.seed()} (replay or explore with SLUICEWAY_FUZZ_SEED)")
    print(outcome.output)
    selected = re.search(r"Operations: +(\d+) selected / (\d+) total", outcome.output)
    assert selected and selected[1] == selected[2], outcome.output[:2_000]
    assert outcome.code == 0, outcome.output[-20_000:]
