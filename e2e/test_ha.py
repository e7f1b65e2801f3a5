"""Two operator replicas: killing the one that reconciles hands over to the
other within seconds; the run in flight completes, nothing is lost or done
twice."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Cluster, fetch
from e2e.kube import Kube, condition, eventually
from sluiceway.devenv.processes import Child, free_port, wait_until

API = "sluiceway.dev/v1alpha1"
WORKERS = str(Path(__file__).parent / "workers" / "fulfilment.py")


class Replica:
    def __init__(self, name: str, child: Child, url: str) -> None:
        self.name, self.child, self.url = name, child, url

    def kill(self) -> None:
        os.killpg(self.child.process.pid, signal.SIGKILL)
        self.child.process.wait(10)


@pytest.fixture
def ha(cluster: Cluster, postgres_server: str, tmp_path: Path) -> Iterator[tuple[str, str, list[Replica]]]:
    namespace = f"ha-{uuid.uuid4().hex[:8]}"
    kube = cluster.kube
    kube.run("create", "namespace", namespace)
    database = f"ha_{uuid.uuid4().hex[:8]}"
    fetch(postgres_server, f'CREATE DATABASE "{database}"')
    dsn = postgres_server.rsplit("/", 1)[0] + f"/{database}"
    replicas: list[Replica] = []

    def start(name: str) -> Replica:
        port = free_port()
        env = {
            **os.environ,
            "KUBECONFIG": str(kube.kubeconfig),
            "SLUICEWAY_DATABASE_URL": dsn,
            "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
            "SLUICEWAY_NAMESPACES": namespace,
            "SLUICEWAY_LEADER_ELECTION_NAMESPACE": namespace,
            "SLUICEWAY_POD_NAME": name,
            "SLUICEWAY_LOG_LEVEL": "INFO",
        }
        child = Child(name, [sys.executable, "-m", "sluiceway", "operator"], tmp_path, env=env)
        replica = Replica(name, child, f"http://127.0.0.1:{port}")
        wait_until(
            lambda: urllib.request.urlopen(f"{replica.url}/readyz", timeout=2).status == 200,
            timeout=60,
            what=f"{name} /readyz",
            child=child,
        )
        replicas.append(replica)
        return replica

    first = start("op-1")
    eventually(lambda: holder(kube, namespace) == "op-1", what="op-1 to lead")
    start("op-2")
    yield namespace, dsn, replicas
    for replica in replicas:
        replica.child.stop()
    kube.run("delete", "sluiceway", "--all", "-n", namespace, "--wait=false", check=False)
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)
    del first


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
    cluster: Cluster, ha: tuple[str, str, list[Replica]], tmp_path: Path
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
    worker = Child(
        "worker",
        [sys.executable, "-m", "sluiceway", "worker", WORKERS, "--url", follower.url, "--namespace", namespace],
        tmp_path,
    )
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
    runs = fetch(dsn, "SELECT resource_name, status FROM executions ORDER BY resource_name")
    assert runs == [
        {"resource_name": "after", "status": "COMPLETED"},
        {"resource_name": "before", "status": "COMPLETED"},
    ]
    attempts = fetch(dsn, "SELECT ref, count(*)::int AS n FROM tasks GROUP BY execution_id, ref HAVING count(*) > 1")
    assert attempts == [], "a task ran twice"
    assert fetch(dsn, "SELECT count(*)::int AS n FROM decide_queue") == [{"n": 0}]
