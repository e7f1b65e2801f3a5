"""A bounded, seeded schemathesis pass over the served OpenAPI document of the
real app, on a real PostgreSQL: every operation, in the coverage, fuzzing and
stateful phases (links from a started run to reading, deciding, explaining
and terminating it). It fails on any 5xx and on any answer the document does
not describe. The definition writes need Kubernetes: e2e/test_api_fuzz.py
covers them against the operator."""

from __future__ import annotations

from tests.support import fuzzing
from tests.support.plane import Plane
from tests.support.store import NS, define_workflow, start

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
