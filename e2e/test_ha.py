"""Two operator replicas: killing the one that reconciles hands over to the
other within seconds; the run in flight completes, nothing is lost or done
twice."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.database import Databases, fetch
from tests.support.kube import Cluster, Kube, condition
from tests.support.operators import OperatorProcess, start_operator
from tests.support.processes import stop_all
from tests.support.waiting import eventually
from tests.support.workers import start_worker

API = "sluiceway.dev/v1beta1"
WORKERS = str(Path(__file__).parent / "workers" / "fulfilment.py")


@pytest.fixture
def ha(cluster: Cluster, databases: Databases, tmp_path: Path) -> Iterator[tuple[str, str, list[OperatorProcess]]]:
    namespace = f"ha-{uuid.uuid4().hex[:8]}"
    kube = cluster.kube
    kube.run("create", "namespace", namespace)
    dsn = asyncio.run(databases.create("ha"))
    replicas: list[OperatorProcess] = []

    def start(name: str) -> OperatorProcess:
        replica = start_operator(
            name,
            dsn,
            tmp_path,
            kubeconfig=kube.kubeconfig,
            log_level="INFO",
            settings={
                "SLUICEWAY_NAMESPACES": namespace,
                "SLUICEWAY_LEADER_ELECTION_NAMESPACE": namespace,
                "SLUICEWAY_POD_NAME": name,
            },
        )
        replicas.append(replica)
        return replica

    try:
        start("op-1")
        eventually(lambda: holder(kube, namespace) == "op-1", what="op-1 to lead")
        start("op-2")
        yield namespace, dsn, replicas
    finally:
        stop_all([replica.child for replica in replicas])
    kube.run("delete", "sluiceway", "--all", "-n", namespace, "--wait=false", check=False)
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)


def holder(kube: Kube, namespace: str) -> str | None:
    lease = kube.run("get", "lease", "sluiceway-operator", "-n", namespace, "-o", "json", check=False)
    if lease.returncode != 0:
        return None
    value: str | None = json.loads(lease.stdout)["spec"].get("holderIdentity")
    return value


def apply(kube: Kube, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)


def phase(kube: Kube, namespace: str, name: str) -> str | None:
    value: str | None = (kube.get("workflowrun", name, namespace) or {}).get("status", {}).get("phase")
    return value


def test_killing_the_reconciling_replica_hands_over_and_loses_nothing(
    cluster: Cluster, ha: tuple[str, str, list[OperatorProcess]], tmp_path: Path
) -> None:
    kube = cluster.kube
    namespace, dsn, (leader, follower) = ha
    apply(
        kube,
        namespace,
        "Workflow",
        "handover",
        {
            "tasks": [
                {"name": "reserve_stock", "taskReferenceName": "reserve", "inputParameters": {"skus": ["A"]}},
                {"name": "pause", "taskReferenceName": "pause", "type": "WAIT", "inputParameters": {"duration": "4s"}},
                {"name": "send_email", "taskReferenceName": "email", "inputParameters": {"to": "ops@example.com"}},
            ]
        },
    )
    eventually(lambda: (o := kube.get("workflow", "handover", namespace)) and condition(o), what="the Workflow")
    worker = start_worker("worker", WORKERS, follower.api_url, namespace, tmp_path)
    try:
        kube.run(
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": API,
                    "kind": "WorkflowRun",
                    "metadata": {"name": "before"},
                    "spec": {"workflow": "handover"},
                }
            ),
        )
        eventually(
            lambda: (kube.get("workflowrun", "before", namespace) or {}).get("status", {}).get("executionId"),
            what="the first run to start",
        )
        killed_at = time.monotonic()
        leader.kill()
        eventually(lambda: holder(kube, namespace) == "op-2", timeout=60, what="op-2 to take the lease")
        print(f"handover took {time.monotonic() - killed_at:.1f} s")
        kube.run(
            "create",
            "-n",
            namespace,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": API,
                    "kind": "WorkflowRun",
                    "metadata": {"name": "after"},
                    "spec": {"workflow": "handover"},
                }
            ),
        )
        for name in ("before", "after"):
            assert (
                eventually(
                    lambda name=name: (
                        phase(kube, namespace, name) in ("Completed", "Failed") and phase(kube, namespace, name)
                    ),
                    timeout=60,
                    what=f"{name} to finish",
                )
                == "Completed"
            )
    finally:
        worker.stop()
    # Nothing done twice is an internal invariant: a second run of "before" or a second
    # attempt of a task would not show in either WorkflowRun, so it is checked in the store.
    runs = fetch(dsn, "SELECT resource_name, status FROM executions ORDER BY resource_name")
    assert runs == [
        {"resource_name": "after", "status": "COMPLETED"},
        {"resource_name": "before", "status": "COMPLETED"},
    ]
    attempts = fetch(dsn, "SELECT ref, count(*)::int AS n FROM tasks GROUP BY execution_id, ref HAVING count(*) > 1")
    assert attempts == [], "a task ran twice"
    assert fetch(dsn, "SELECT count(*)::int AS n FROM decide_queue") == [{"n": 0}]
