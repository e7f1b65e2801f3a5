"""A CONTAINER step whose pod cannot start: the control plane of the e2e
tests has no node, so every pod stays Pending, as on a cluster without room
for it. scheduleToStart covers that wait: past it the pod is deleted and the
attempt fails (and is retried, as any timeout)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.api import call
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

API = "sluiceway.dev/v1alpha1"


def apply(kube: Kube, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)


def test_a_pod_that_cannot_be_scheduled_times_out_at_schedule_to_start_and_is_deleted(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    apply(
        kube,
        namespace,
        "TaskDefinition",
        "nowhere",
        {"retryCount": 1, "retryDelaySeconds": 1, "scheduleToStartTimeout": 3},
    )
    container = {"image": "localhost/never-pulled:1", "command": ["true"]}
    task = {"name": "nowhere", "taskReferenceName": "step", "type": "CONTAINER", "container": container}
    apply(kube, namespace, "Workflow", "nowhere", {"name": "nowhere", "tasks": [task]})
    eventually(
        lambda: (o := kube.get("workflow", "nowhere", namespace)) and o.get("status", {}).get("version"),
        what="the Workflow",
    )
    eventually(
        lambda: (
            (o := kube.get("taskdefinition", "nowhere", namespace))
            and o.get("status", {}).get("observedGeneration") == o["metadata"]["generation"]
        ),
        what="the TaskDefinition",
    )
    status, body = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": "nowhere"})
    assert status == 201, body
    url = f"{operator.api_url}/v1/ns/{namespace}/executions/{body['id']}"
    run = eventually(lambda: (v := call("GET", url)[1])["status"] != "RUNNING" and v, timeout=90, what="the run to end")
    assert run["status"] == "FAILED", run
    attempts = sorted((t["attempt"], t["status"]) for t in run["tasks"])
    assert attempts == [(1, "FAILED"), (2, "FAILED")], "a scheduleToStart timeout is retried"
    assert all("scheduleToStartTimeout" in t["reason"] for t in run["tasks"]), run["tasks"]
    left = json.loads(
        kube.run("get", "pods", "-n", namespace, "-l", f"sluiceway.dev/run-id={body['id']}", "-o", "json").stdout
    )["items"]
    assert all(p["metadata"].get("deletionTimestamp") for p in left), "every attempt's pod is deleted"


def test_a_pod_deleted_by_hand_fails_its_attempt_at_once(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """The operator learns of the deletion from its watch of the pods (no
    scheduleToStart here: nothing else would end the attempt), and fails the
    attempt, as when a node is drained under it."""
    apply(kube, namespace, "TaskDefinition", "removed", {"retryCount": 0})
    container = {"image": "localhost/never-pulled:1", "command": ["true"]}
    task = {"name": "removed", "taskReferenceName": "step", "type": "CONTAINER", "container": container}
    apply(kube, namespace, "Workflow", "removed", {"name": "removed", "tasks": [task]})
    eventually(
        lambda: (o := kube.get("workflow", "removed", namespace)) and o.get("status", {}).get("version"),
        what="the Workflow",
    )
    status, body = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": "removed"})
    assert status == 201, body
    selector = f"sluiceway.dev/run-id={body['id']}"
    eventually(
        lambda: json.loads(kube.run("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout)["items"],
        what="the step's pod",
    )
    kube.run("delete", "pods", "-n", namespace, "-l", selector, "--wait=false")
    url = f"{operator.api_url}/v1/ns/{namespace}/executions/{body['id']}"
    run = eventually(lambda: (v := call("GET", url)[1])["status"] != "RUNNING" and v, timeout=60, what="the run to end")
    assert run["status"] == "FAILED", run
    assert [t["status"] for t in run["tasks"]] == ["FAILED"]
    assert "was deleted before it ended" in run["tasks"][0]["reason"], run["tasks"]
