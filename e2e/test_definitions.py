"""TaskDefinition, Semaphore and Quota through kubectl: the API server admits
or refuses them, the operator stores them (as its HTTP API shows) and reports
in `status`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import call
from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"


def task_definition(resource_name: str, /, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TaskDefinition", "metadata": {"name": resource_name}, "spec": spec}


def ready_at_generation(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = kube.get(kind, name, namespace)
        cond = condition(obj)
        if obj and cond and obj["status"].get("observedGeneration") == obj["metadata"]["generation"]:
            return obj
        return None

    return eventually(probe, what=f"{kind}/{name} to report its generation")


def stored_task(operator: OperatorProcess, namespace: str, name: str) -> dict[str, Any] | None:
    """The task definition the API serves (from the store), or None while it has none."""
    status, body = call("GET", f"{operator.api_url}/v1/ns/{namespace}/metadata/task-definitions/{name}")
    if status == 404:
        return None
    assert status == 200, body
    return dict(body)


def test_a_valid_task_definition_becomes_ready_and_stored(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube.apply(
        task_definition(
            "charge",
            retryCount=5,
            retryLogic="EXPONENTIAL_BACKOFF",
            retryDelaySeconds=2,
            backoffScaleFactor=2,
            maxRetryDelaySeconds=300,
            jitter=0.2,
            retryBudget=0.3,
            nonRetryableErrors=["card_declined", "INVALID_ARGUMENT"],
        ),
        namespace,
    )
    obj = ready_at_generation(kube, "taskdefinition", "charge", namespace)
    ready = condition(obj)
    assert ready is not None and ready["status"] == "True", ready
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 1
    assert obj["status"]["taskType"] == "charge"
    row = eventually(lambda: stored_task(operator, namespace, "charge"), what="the store row")
    assert row["generation"] == 1
    assert row["nonRetryableErrors"] == ["card_declined", "INVALID_ARGUMENT"]


def test_a_change_is_followed_by_the_store(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(task_definition("partner-api", rateLimitPerFrequency=100, rateLimitFrequencySeconds=60), namespace)
    ready_at_generation(kube, "taskdefinition", "partner-api", namespace)
    kube.apply(task_definition("partner-api", rateLimitPerFrequency=50, rateLimitFrequencySeconds=60), namespace)

    def follows() -> dict[str, Any] | None:
        row = stored_task(operator, namespace, "partner-api")
        return row if row and row["generation"] == 2 else None

    row = eventually(follows, what="the store to follow generation 2")
    assert row["rateLimitPerFrequency"] == 50
    obj = ready_at_generation(kube, "taskdefinition", "partner-api", namespace)
    assert obj["status"]["observedGeneration"] == 2


def test_an_engine_name_with_underscores_lives_in_spec_name(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube.apply(task_definition("export-report", name="export_report", semaphores=["legacy_erp"]), namespace)
    obj = ready_at_generation(kube, "taskdefinition", "export-report", namespace)
    assert obj["status"]["taskType"] == "export_report"
    assert eventually(lambda: stored_task(operator, namespace, "export_report"))


def test_two_definitions_claiming_one_task_type_conflict(kube: Kube, namespace: str) -> None:
    kube.apply(task_definition("first", name="shared_type"), namespace)
    ready_at_generation(kube, "taskdefinition", "first", namespace)
    kube.apply(task_definition("second", name="shared_type"), namespace)
    obj = ready_at_generation(kube, "taskdefinition", "second", namespace)
    ready = condition(obj)
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "NameConflict")
    assert "TaskDefinition first" in ready["message"]


INVALID = [
    ("jitter", {"jitter": 1.5}, "spec.jitter"),
    ("retryCount", {"retryCount": 101}, "spec.retryCount"),
    ("negative retryCount", {"retryCount": -1}, "spec.retryCount"),
    ("backoffScaleFactor", {"backoffScaleFactor": 0.5}, "spec.backoffScaleFactor"),
    ("retryBudget", {"retryBudget": 1.2}, "spec.retryBudget"),
    ("retryLogic", {"retryLogic": "RANDOM"}, "spec.retryLogic"),
    ("timeoutPolicy", {"timeoutPolicy": "IGNORE"}, "spec.timeoutPolicy"),
    ("negative timeout", {"heartbeatTimeout": -5}, "spec.heartbeatTimeout"),
    ("responseTimeoutSeconds zero", {"responseTimeoutSeconds": 0}, "spec.responseTimeoutSeconds"),
    ("pollTimeoutSeconds", {"pollTimeoutSeconds": 3600}, "spec.pollTimeoutSeconds"),
    ("rate window", {"rateLimitFrequencySeconds": 0}, "spec.rateLimitFrequencySeconds"),
    ("cap below base", {"retryDelaySeconds": 10, "maxRetryDelaySeconds": 5}, "spec.maxRetryDelaySeconds"),
    ("startToClose over total", {"startToCloseTimeout": 60, "timeoutSeconds": 30}, "spec.startToCloseTimeout"),
    ("duplicate semaphore", {"semaphores": ["erp", "erp"]}, "spec.semaphores"),
    ("duplicate non-retryable", {"nonRetryableErrors": ["card_declined", "card_declined"]}, "spec.nonRetryableErrors"),
    ("bad task type name", {"name": "no spaces allowed"}, "spec.name"),
    ("empty non-retryable", {"nonRetryableErrors": [""]}, "spec.nonRetryableErrors"),
    ("wrong type", {"retryCount": "three"}, "spec.retryCount"),
]


@pytest.mark.parametrize(("case", "spec", "field"), INVALID, ids=[c[0] for c in INVALID])
def test_the_api_server_refuses_invalid_definitions_naming_the_field(
    kube: Kube, namespace: str, case: str, spec: dict[str, Any], field: str
) -> None:
    result = kube.apply(task_definition("bad", **spec), namespace, check=False)
    assert result.returncode != 0, f"{case} was admitted"
    assert field in result.stderr, result.stderr
    assert kube.get("taskdefinition", "bad", namespace) is None


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_duplicates_in_a_set_list_are_refused_at_kubectl_apply(kube: Kube, namespace: str, server_side: bool) -> None:
    workflow = {
        "apiVersion": API,
        "kind": "Workflow",
        "metadata": {"name": "joined"},
        "spec": {
            "inputParameters": ["amount", "amount"],
            "tasks": [
                {"name": "a", "taskReferenceName": "a"},
                {"name": "join", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["a", "a"]},
            ],
        },
    }
    result = kube.apply(workflow, namespace, check=False, server_side=server_side)
    assert result.returncode != 0, "duplicates were admitted"
    assert "spec.inputParameters" in result.stderr and "spec.tasks[1].joinOn" in result.stderr, result.stderr
    result = kube.apply(task_definition("twice", semaphores=["erp", "erp"]), namespace, check=False, server_side=True)
    assert result.returncode != 0 and "spec.semaphores" in result.stderr, result.stderr
    assert kube.get("workflow", "joined", namespace) is None and kube.get("taskdefinition", "twice", namespace) is None


def test_deleting_removes_it_from_the_store(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(task_definition("doomed"), namespace)
    ready_at_generation(kube, "taskdefinition", "doomed", namespace)
    assert eventually(lambda: stored_task(operator, namespace, "doomed"))
    kube.delete("taskdefinition", "doomed", namespace)
    assert kube.get("taskdefinition", "doomed", namespace) is None
    assert stored_task(operator, namespace, "doomed") is None


def test_semaphore_is_stored_and_reports_permits(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(
        {
            "apiVersion": API,
            "kind": "Semaphore",
            "metadata": {"name": "legacy-erp"},
            "spec": {"name": "legacy_erp", "permits": 4},
        },
        namespace,
    )
    obj = ready_at_generation(kube, "semaphore", "legacy-erp", namespace)
    assert obj["status"]["permits"] == 4 and obj["status"]["semaphoreName"] == "legacy_erp"
    status, stored = call("GET", f"{operator.api_url}/v1/ns/{namespace}/semaphores/legacy_erp")
    assert (status, stored["permits"]) == (200, 4), stored
    refused = kube.apply(
        {"apiVersion": API, "kind": "Semaphore", "metadata": {"name": "neg"}, "spec": {"permits": -1}},
        namespace,
        check=False,
    )
    assert refused.returncode != 0 and "spec.permits" in refused.stderr
    kube.delete("semaphore", "legacy-erp", namespace)
    assert call("GET", f"{operator.api_url}/v1/ns/{namespace}/semaphores") == (200, [])


def test_quota_is_stored(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(
        {
            "apiVersion": API,
            "kind": "Quota",
            "metadata": {"name": "default"},
            "spec": {"maxConcurrentExecutions": 5000, "maxExecutionsPerMinute": 2000},
        },
        namespace,
    )
    ready_at_generation(kube, "quota", "default", namespace)
    status, stored = call("GET", f"{operator.api_url}/v1/ns/{namespace}/quotas")
    assert status == 200, stored
    assert (stored["maxConcurrentExecutions"], stored["maxExecutionsPerMinute"], stored["maxSchedules"]) == (
        5000,
        2000,
        None,
    )


def test_kubectl_get_sluiceway_lists_every_kind_with_columns(kube: Kube, namespace: str) -> None:
    kube.apply(task_definition("listed", retryCount=2, concurrentExecLimit=8), namespace)
    kube.apply(
        {"apiVersion": API, "kind": "Semaphore", "metadata": {"name": "pool"}, "spec": {"permits": 2}}, namespace
    )
    ready_at_generation(kube, "taskdefinition", "listed", namespace)
    listing = kube.run("get", "sluiceway", "-n", namespace).stdout
    assert "taskdefinition.sluiceway.dev/listed" in listing
    assert "semaphore.sluiceway.dev/pool" in listing
    table = kube.run("get", "taskdefinitions", "-n", namespace).stdout.splitlines()
    assert table[0].split()[:4] == ["NAME", "READY", "RETRIES", "LIMIT"]
    assert table[1].split()[:4] == ["listed", "True", "2", "8"]
