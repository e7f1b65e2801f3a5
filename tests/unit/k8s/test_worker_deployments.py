"""The worker Deployment built from `spec.workers`, and the decisions about it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.k8s import crds
from sluiceway.k8s.worker_pods import (
    MissingImage,
    Ownership,
    build_worker_deployment,
    container_env,
    label_value,
    ownership,
    starting_replicas,
    workers_status,
)
from sluiceway.model.resources import TASK_DEFINITION
from sluiceway.model.taskdefinition import TaskDefinitionSpec, WorkerPodsSpec

UID = "0f4b7d7e-6f1c-4c43-9a51-1d2f0f4a8c11"
URL = "http://sluiceway.sluiceway.svc:8080"


def workers(**spec: Any) -> WorkerPodsSpec:
    return WorkerPodsSpec.model_validate(spec)


def build(
    spec: WorkerPodsSpec | None = None,
    *,
    replicas: int = 2,
    default_image: str | None = None,
    task_type: str = "export_report",
) -> dict[str, Any]:
    return build_worker_deployment(
        "export-report",
        UID,
        "team-a",
        task_type,
        spec or workers(image="example.com/worker:1", args=["worker", "app:w"]),
        URL,
        default_image,
        replicas,
    )


def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return found


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [only] = pod(deployment)["containers"]
    found: dict[str, Any] = only
    return found


def env(deployment: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(deployment)["env"]}


def test_names_labels_and_selector() -> None:
    deployment = build()
    assert (deployment["apiVersion"], deployment["kind"]) == ("apps/v1", "Deployment")
    assert deployment["metadata"]["name"] == "export-report-workers"
    assert deployment["metadata"]["namespace"] == "team-a"
    labels = deployment["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "sluiceway-worker"
    assert labels["app.kubernetes.io/managed-by"] == "sluiceway"
    assert labels["sluiceway.dev/task-type"] == "export_report"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "sluiceway-worker", "sluiceway.dev/task-definition-uid": UID}
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= template_labels.items()
    assert template_labels["sluiceway.dev/task-type"] == "export_report"


def test_owned_by_the_task_definition() -> None:
    assert build()["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "sluiceway.dev/v1beta1",
            "kind": "TaskDefinition",
            "name": "export-report",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def test_pods_outlive_the_workers_shutdown_grace() -> None:
    """SIGKILL must not cut off the hand-back that follows the SDK's 30 s grace."""
    assert pod(build())["terminationGracePeriodSeconds"] > 30


def test_replicas_come_from_the_caller() -> None:
    assert build(replicas=0)["spec"]["replicas"] == 0
    assert build(replicas=7)["spec"]["replicas"] == 7


def test_the_api_address_and_credentials_are_injected() -> None:
    deployment = build()
    assert env(deployment) == {
        "SLUICEWAY_URL": URL,
        "SLUICEWAY_NAMESPACE": "team-a",
        "SLUICEWAY_TASK_TYPE": "export_report",
        "SLUICEWAY_TOKEN_FILE": "/var/run/secrets/sluiceway/token",
        "SLUICEWAY_CONCURRENCY": "1",
        "SLUICEWAY_WORKER_ID": {"fieldRef": {"fieldPath": "metadata.name"}},
    }
    volumes = {v["name"]: v for v in pod(deployment)["volumes"]}
    assert volumes["sluiceway-token"]["projected"] == {
        "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]
    }
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}
    mounts = {m["name"]: m for m in container(deployment)["volumeMounts"]}
    assert mounts["sluiceway-token"] == {
        "name": "sluiceway-token",
        "mountPath": "/var/run/secrets/sluiceway",
        "readOnly": True,
    }
    assert mounts["tmp"]["mountPath"] == "/tmp"
    assert pod(deployment)["serviceAccountName"] == "default"


def test_user_env_follows_and_may_override_an_injected_variable() -> None:
    spec = workers(
        image="w:1",
        env=[{"name": "LOG_LEVEL", "value": "debug"}, {"name": "SLUICEWAY_URL", "value": "http://elsewhere:8080"}],
    )
    names = [e["name"] for e in container_env("team-a", "t", spec, URL)]
    assert names.count("SLUICEWAY_URL") == 1 and names[-2:] == ["LOG_LEVEL", "SLUICEWAY_URL"]
    assert env(build(spec))["SLUICEWAY_URL"] == "http://elsewhere:8080"


def test_hardened_security_context() -> None:
    deployment = build()
    assert pod(deployment)["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert container(deployment)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_the_container_runs_what_the_spec_says() -> None:
    spec = workers(
        image="example.com/worker:2",
        command=["python", "-m", "sluiceway"],
        args=["worker", "app:w"],
        resources={"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        serviceAccountName="exporter",
        concurrency=4,
    )
    deployment = build(spec)
    c = container(deployment)
    assert (c["name"], c["image"]) == ("worker", "example.com/worker:2")
    assert c["command"] == ["python", "-m", "sluiceway"] and c["args"] == ["worker", "app:w"]
    assert c["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    assert pod(deployment)["serviceAccountName"] == "exporter"
    assert env(deployment)["SLUICEWAY_CONCURRENCY"] == "4"


def test_without_a_command_the_image_entrypoint_runs() -> None:
    c = container(build(workers(image="w:1", args=["app:w"])))
    assert "command" not in c and c["args"] == ["app:w"]
    assert "args" not in container(build(workers(image="w:1")))
    assert "resources" not in container(build(workers(image="w:1")))


def test_the_operator_default_image() -> None:
    assert container(build(workers(), default_image="ghcr.io/acme/worker:3"))["image"] == "ghcr.io/acme/worker:3"
    assert container(build(workers(image="mine:1"), default_image="theirs:1"))["image"] == "mine:1"
    with pytest.raises(MissingImage):
        build(workers())


def test_a_long_task_type_still_makes_a_valid_label() -> None:
    value = build(task_type="a" * 70 + "_x")["metadata"]["labels"]["sluiceway.dev/task-type"]
    assert len(value) <= 63 and value.isalnum()
    assert label_value("export_report") == "export_report"
    assert label_value("-weird/name.") == "weird-name"


def test_ownership_of_an_existing_deployment() -> None:
    ours = build()
    assert ownership(None, "export-report", UID) is Ownership.ABSENT
    assert ownership(ours, "export-report", UID) is Ownership.OURS
    assert ownership(ours, "export-report", "another-uid") is Ownership.STALE
    assert ownership({"metadata": {"name": "export-report-workers"}}, "export-report", UID) is Ownership.FOREIGN


def test_starting_replicas() -> None:
    assert starting_replicas(workers(replicas=3), current=9) == 3
    scaled = workers(autoscaling={"minReplicas": 1, "maxReplicas": 5})
    assert starting_replicas(scaled, current=None) == 1
    assert starting_replicas(scaled, current=4) == 4, "a spec change does not reset the autoscaler"
    assert starting_replicas(scaled, current=9) == 5


def test_status_from_the_deployment() -> None:
    deployment = {**build(replicas=3), "status": {"replicas": 3, "updatedReplicas": 2, "readyReplicas": 1}}
    assert workers_status("export-report", "w:1", deployment) == {
        "deployment": "export-report-workers",
        "image": "w:1",
        "desiredReplicas": 3,
        "replicas": 3,
        "updatedReplicas": 2,
        "readyReplicas": 1,
    }
    assert workers_status("export-report", "w:1", build(replicas=2))["readyReplicas"] == 0


# --- the model and its schema -------------------------------------------------


def test_defaults() -> None:
    spec = workers()
    assert (spec.replicas, spec.concurrency, spec.service_account_name) == (1, 1, "default")
    assert spec.target_tasks_per_replica() == 1
    assert workers(concurrency=4, autoscaling={"maxReplicas": 3}).target_tasks_per_replica() == 4
    assert (
        workers(concurrency=4, autoscaling={"maxReplicas": 3, "targetTasksPerReplica": 10}).target_tasks_per_replica()
        == 10
    )
    assert TaskDefinitionSpec.model_validate({"workers": {"image": "w:1"}}).workers == workers(image="w:1")


@pytest.mark.parametrize(
    "bad",
    [
        {"replicas": -1},
        {"concurrency": 0},
        {"env": [{"name": "1BAD"}]},
        {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]},
        {"serviceAccountName": "Not_A_Name"},
        {"resources": {"requests": {"cpu": "one"}}},
        {"autoscaling": {"minReplicas": 0}},
        {"autoscaling": {"maxReplicas": 0}},
        {"autoscaling": {"minReplicas": 3, "maxReplicas": 2}},
        {"autoscaling": {"maxReplicas": 2, "targetTasksPerReplica": 0}},
    ],
)
def test_invalid_worker_specs_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        workers(**bad)


def _workers_schema() -> dict[str, Any]:
    root = crds.crd_for(TASK_DEFINITION)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    found: dict[str, Any] = root["properties"]["spec"]["properties"]["workers"]
    return found


def test_the_schema_describes_every_field() -> None:
    def walk(node: dict[str, Any], path: str) -> None:
        for name, child in node.get("properties", {}).items():
            assert child.get("description"), f"{path}.{name} has no description"
            walk(child, f"{path}.{name}")
        if "items" in node:
            walk(node["items"], f"{path}[]")

    walk(_workers_schema(), "spec.workers")


def test_the_schema_refuses_min_above_max_naming_the_field() -> None:
    scaling = _workers_schema()["properties"]["autoscaling"]
    [rule] = scaling["x-kubernetes-validations"]
    assert rule["fieldPath"] == ".maxReplicas" and "minReplicas" in rule["message"]
    assert scaling["required"] == ["maxReplicas"]
    env_schema = _workers_schema()["properties"]["env"]
    assert (env_schema["x-kubernetes-list-type"], env_schema["x-kubernetes-list-map-keys"]) == ("map", ["name"])
