"""Worker pods: `spec.workers` becomes a Deployment owned by the TaskDefinition.

kube-controller-manager runs, so Deployments make ReplicaSets, rollouts make
new ones and the garbage collector follows owner references; there is no
kubelet, so pods stay Pending (and never become ready)."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.support.api import call
from tests.support.kube import Kube, condition
from tests.support.operators import AUTOSCALING_INTERVAL, OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"


def task_definition(resource_name: str, /, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "TaskDefinition", "metadata": {"name": resource_name}, "spec": spec}


def replica_sets(kube: Kube, namespace: str, owner_uid: str) -> list[dict[str, Any]]:
    found = json.loads(kube.run("get", "replicasets", "-n", namespace, "-o", "json").stdout)["items"]
    return [
        rs for rs in found if any(ref.get("uid") == owner_uid for ref in rs["metadata"].get("ownerReferences") or ())
    ]


def env_of(deployment: dict[str, Any]) -> dict[str, Any]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def image_of(deployment: dict[str, Any]) -> str:
    image: str = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    return image


def workers_status(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    found: dict[str, Any] = ((kube.get("taskdefinition", name, namespace) or {}).get("status") or {}).get(
        "workers"
    ) or {}
    return found


def test_a_worker_deployment_follows_its_task_definition_and_is_collected_with_it(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube.apply(
        task_definition(
            "exporter",
            name="export_report",
            workers={
                "image": "example.com/worker:1",
                "args": ["worker", "app.workers:exporter"],
                "replicas": 2,
                "env": [{"name": "LOG_LEVEL", "value": "debug"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            },
        ),
        namespace,
    )
    td = eventually(lambda: kube.get("taskdefinition", "exporter", namespace), what="the TaskDefinition")
    deployment = eventually(
        lambda: kube.get("deployment", "exporter-workers", namespace), timeout=60, what="the worker Deployment"
    )

    assert deployment["metadata"]["ownerReferences"] == [
        {
            "apiVersion": API,
            "kind": "TaskDefinition",
            "name": "exporter",
            "uid": td["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert deployment["spec"]["replicas"] == 2
    assert image_of(deployment) == "example.com/worker:1"
    env = env_of(deployment)
    assert env["SLUICEWAY_URL"] == "http://sluiceway.sluiceway.svc:8080"
    assert env["SLUICEWAY_NAMESPACE"] == namespace
    assert env["SLUICEWAY_TASK_TYPE"] == "export_report"
    assert env["SLUICEWAY_TOKEN_FILE"] == "/var/run/secrets/sluiceway/token"
    assert env["LOG_LEVEL"] == "debug"
    pod = deployment["spec"]["template"]["spec"]
    token = next(v for v in pod["volumes"] if v["name"] == "sluiceway-token")
    assert token["projected"]["sources"][0]["serviceAccountToken"]["path"] == "token"
    assert deployment["metadata"]["labels"]["sluiceway.dev/task-type"] == "export_report"
    shown = json.loads(
        kube.run("get", "deployment", "exporter-workers", "-n", namespace, "-o", "json", "--show-managed-fields").stdout
    )
    managers = {m["manager"] for m in shown["metadata"]["managedFields"] if m["operation"] == "Apply"}
    assert managers == {"sluiceway-operator"}

    dep_uid = deployment["metadata"]["uid"]
    first = eventually(
        lambda: replica_sets(kube, namespace, dep_uid),
        timeout=60,
        what="kube-controller-manager to create a ReplicaSet",
    )
    assert len(first) == 1 and first[0]["spec"]["replicas"] == 2

    def reported() -> dict[str, Any] | None:
        status = workers_status(kube, "exporter", namespace)
        return status if status.get("desiredReplicas") == 2 and status.get("replicas") == 2 else None

    status = eventually(reported, timeout=60, what="status.workers to show 2 replicas")
    assert status["readyReplicas"] == 0, "no kubelet: nothing is ever ready"
    assert status["image"] == "example.com/worker:1"
    assert status["deployment"] == "exporter-workers"

    # A change rolls out: a new pod template is a new ReplicaSet.
    kube.apply(
        task_definition(
            "exporter",
            name="export_report",
            workers={
                "image": "example.com/worker:2",
                "args": ["worker", "app.workers:exporter"],
                "replicas": 3,
            },
        ),
        namespace,
    )

    def followed() -> dict[str, Any] | None:
        found = kube.get("deployment", "exporter-workers", namespace)
        return found if found and found["spec"]["replicas"] == 3 and image_of(found) == "example.com/worker:2" else None

    updated = eventually(followed, timeout=60, what="the Deployment to follow the spec change")
    assert updated["metadata"]["uid"] == dep_uid
    assert "LOG_LEVEL" not in env_of(updated), "a removed variable is removed (server-side apply)"

    def rolled_out() -> list[dict[str, Any]] | None:
        found = replica_sets(kube, namespace, dep_uid)
        return found if len(found) == 2 else None

    rollout = eventually(rolled_out, timeout=60, what="a second ReplicaSet for the rollout")
    assert {image_of(rs) for rs in rollout} == {"example.com/worker:1", "example.com/worker:2"}
    eventually(
        lambda: (
            (s := workers_status(kube, "exporter", namespace)).get("desiredReplicas") == 3
            and s.get("image") == "example.com/worker:2"
            and s
        ),
        timeout=30,
        what="status.workers to follow",
    )

    # Deleting the definition lets the garbage collector take everything it owned.
    kube.delete("taskdefinition", "exporter", namespace)
    eventually(
        lambda: kube.get("deployment", "exporter-workers", namespace) is None,
        timeout=60,
        what="the Deployment to be garbage-collected",
    )
    eventually(
        lambda: replica_sets(kube, namespace, dep_uid) == [], timeout=60, what="the ReplicaSets to be garbage-collected"
    )


def test_removing_spec_workers_deletes_the_deployment(kube: Kube, namespace: str) -> None:
    kube.apply(task_definition("shortlived", workers={"image": "example.com/worker:1", "replicas": 0}), namespace)
    eventually(
        lambda: kube.get("deployment", "shortlived-workers", namespace), timeout=60, what="the worker Deployment"
    )
    kube.apply(task_definition("shortlived"), namespace)
    eventually(
        lambda: kube.get("deployment", "shortlived-workers", namespace) is None,
        timeout=60,
        what="the Deployment to go with spec.workers",
    )
    eventually(
        lambda: (
            "workers" not in (kube.get("taskdefinition", "shortlived", namespace) or {}).get("status", {"workers": 1})
        ),
        what="status.workers to be cleared",
    )


def test_autoscaling_never_runs_more_workers_than_the_gates_admit(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube.apply(
        task_definition(
            "capped",
            concurrentExecLimit=2,
            workers={
                "image": "example.com/worker:1",
                "concurrency": 1,
                "autoscaling": {"minReplicas": 0, "maxReplicas": 10},
            },
        ),
        namespace,
    )
    kube.apply(
        {
            "apiVersion": API,
            "kind": "Workflow",
            "metadata": {"name": "capped-flow"},
            "spec": {"tasks": [{"name": "capped", "taskReferenceName": "only"}]},
        },
        namespace,
    )
    eventually(
        lambda: (
            (o := kube.get("workflow", "capped-flow", namespace))
            and (c := condition(o))
            and c["status"] == "True"
            and o["status"].get("version")
        ),
        what="the Workflow to be stored",
    )
    idle = eventually(
        lambda: kube.get("deployment", "capped-workers", namespace), timeout=60, what="the worker Deployment"
    )
    assert idle["spec"]["replicas"] == 0, "an empty queue with minReplicas 0 runs no pods"

    api = f"{operator.api_url}/v1/ns/{namespace}/executions"
    for _ in range(20):
        status, body = call("POST", api, {"name": "capped-flow"})
        assert status == 201, body

    observed: list[int] = []

    def replicas() -> int:
        found = kube.get("deployment", "capped-workers", namespace) or {"spec": {"replicas": 0}}
        observed.append(int(found["spec"]["replicas"]))
        return observed[-1]

    # The autoscaler may act while the starts are still arriving (one ready
    # task, one worker); what must hold is that it reaches the cap's 2 and
    # never passes it, whatever it saw on the way.
    eventually(lambda: replicas() == 2, timeout=60, what="the autoscaler to scale to the cap's 2 workers")
    eventually(
        lambda: workers_status(kube, "capped", namespace).get("desiredReplicas") == 2,
        timeout=30,
        what="status.workers.desiredReplicas 2",
    )
    settle = time.monotonic() + 3 * AUTOSCALING_INTERVAL  # three more evaluations: still 2, never 10
    while time.monotonic() < settle:
        replicas()
        time.sleep(0.2)
    assert max(observed) == 2, f"20 tasks ready, but concurrentExecLimit 2 admits 2 workers; saw {observed}"
    assert observed[-1] == 2
    assert workers_status(kube, "capped", namespace)["desiredReplicas"] == 2


def test_the_api_server_refuses_min_above_max(kube: Kube, namespace: str) -> None:
    result = kube.apply(
        task_definition(
            "bad-scaling",
            workers={"image": "example.com/worker:1", "autoscaling": {"minReplicas": 5, "maxReplicas": 2}},
        ),
        namespace,
        check=False,
    )
    assert result.returncode != 0
    assert "spec.workers.autoscaling.maxReplicas" in result.stderr, result.stderr
    assert "maxReplicas must be at least minReplicas" in result.stderr
