"""The definition writes of the REST surface, which go through the Kubernetes
API, against the operator and a real API server: refusals name the field
(the operator's own checks and the API server's, translated), and a seeded
schemathesis pass over those operations finds no 5xx and nothing the OpenAPI
document does not describe. tests/integration/test_api_fuzz.py covers every
other operation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import fuzzing
from tests.support.api import call
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess

WRITES = ("put_task_definition", "put_semaphore", "put_quotas", "put_schedule")


def fields_of(body: dict[str, Any]) -> list[str]:
    return [f["field"] for f in body.get("fields") or []]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "twice", "semaphores": ["erp", "erp"]}, "semaphores"),
        ({"name": "twice", "nonRetryableErrors": ["card_declined", "card_declined"]}, "nonRetryableErrors"),
        ({"name": "twice", "retryCount": 2**31}, "retryCount"),
        ({"name": "twice", "description": "nul \u0000"}, "description"),
    ],
)
def test_duplicates_and_out_of_bounds_values_are_422_naming_the_field(
    operator: OperatorProcess, namespace: str, kube: Kube, body: dict[str, Any], field: str
) -> None:
    status, answer = call("POST", f"{operator.api_url}/v1/ns/{namespace}/metadata/task-definitions", body)
    assert status == 422 and answer["error"] == "INVALID_REQUEST", answer
    assert field in fields_of(answer), answer
    assert kube.get("taskdefinition", "twice", namespace) is None, "nothing half-written"


def test_a_kubernetes_refusal_caused_by_the_input_is_a_4xx(operator: OperatorProcess, namespace: str) -> None:
    api = f"{operator.api_url}/v1/ns/{namespace}"
    # A task type name the operator accepts, whose object name (`a-.b`) the API server refuses.
    status, answer = call("POST", f"{api}/metadata/task-definitions", {"name": "a_.b"})
    assert status == 422 and answer["error"] == "INVALID_REQUEST", answer
    assert "metadata.name" in fields_of(answer), answer
    status, answer = call("PUT", f"{operator.api_url}/v1/ns/e2e-no-such-namespace/semaphores/erp", {"permits": 1})
    assert status == 404 and answer["error"] == "NOT_FOUND", answer


async def test_the_definition_writes_answer_a_seeded_fuzz_pass_as_documented(
    operator: OperatorProcess, namespace: str, kube: Kube
) -> None:
    inclusions = [arg for op in WRITES for arg in ("--include-operation-id", op)]
    outcome = await fuzzing.run(
        operator.api_url,
        "--phases",
        "coverage,fuzzing",
        "--max-examples",
        "15",
        *inclusions,
        steer={"namespace": namespace},
    )
    print(f"schemathesis seed {fuzzing.seed()} (replay or explore with SLUICEWAY_FUZZ_SEED)")
    print(outcome.output)
    assert outcome.code == 0, outcome.output[-20_000:]
    written = kube.run("get", "taskdefinitions,semaphores,quotas", "-n", namespace, "-o", "name").stdout.split()
    assert written, "the pass never got a definition through to Kubernetes"
    print(f"{len(written)} definitions written through the API server")
