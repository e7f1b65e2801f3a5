"""End-to-end fixtures: a real API server (tests/support/kube.py), a real
PostgreSQL, and the operator running as a separate process, exactly as
`make up` runs it (tests/support/operators.py); workers as processes."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from sluiceway.devenv.processes import Child
from tests.support.database import Databases
from tests.support.kube import Cluster, Kube, running_cluster
from tests.support.operators import AUTOSCALING_INTERVAL, STATUS_INTERVAL, OperatorProcess, start_operator
from tests.support.processes import stop_all
from tests.support.workers import start_worker as start_worker_process


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with running_cluster() as running:
        yield running


@pytest.fixture(scope="session")
def kube(cluster: Cluster) -> Kube:
    return cluster.kube


@pytest.fixture(scope="session")
def operator_database(databases: Databases) -> str:
    return asyncio.run(databases.create("e2e"))


@pytest.fixture(scope="session")
def operator(
    cluster: Cluster, operator_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator most e2e tests share, watching the namespaces `e2e-*`."""
    process = start_operator(
        "operator",
        operator_database,
        tmp_path_factory.mktemp("operator"),
        kubeconfig=cluster.kube.kubeconfig,
        log_level="DEBUG",
        settings={
            # Tests that run operators of their own (HA, RBAC, auth) use namespaces outside this pattern.
            "SLUICEWAY_NAMESPACES": "e2e-*",
            # What the chart sets: spec.workers without an image (the examples) runs the operator's.
            "SLUICEWAY_WORKER_IMAGE": "ghcr.io/sluiceway/sluiceway:e2e",
            # Small numbers so a test can open a breaker and wait out its open time.
            "SLUICEWAY_CIRCUIT_BREAKER": '{"enabled": true, "minimumRequests": 3, "failureRatio": 0.5, '
            '"openMs": 1500, "maxOpenMs": 10000}',
            "SLUICEWAY_STATUS_INTERVAL": str(STATUS_INTERVAL),
            "SLUICEWAY_AUTOSCALING_INTERVAL": str(AUTOSCALING_INTERVAL),
            # The purger runs every second, so a retention test waits a second, not a minute.
            "SLUICEWAY_PURGE_INTERVAL": "1",
            # The tests' HTTP servers listen on loopback, which system tasks may not reach by default.
            "SLUICEWAY_EGRESS_ALLOWED": "127.0.0.1,localhost",
        },
    )
    yield process
    process.stop()
    if os.environ.get("SLUICEWAY_E2E_SHOW_LOGS"):
        print(process.logs())


@pytest.fixture
def namespace(kube: Kube, operator: OperatorProcess) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    yield name
    # Let the operator clear its finalizers before the namespace goes.
    kube.delete_sluiceway_objects(name)
    kube.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def start_worker(operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Child]]:
    """Start `sluiceway worker` processes against the shared operator; all are stopped after the test."""
    started: list[Child] = []
    logs = tmp_path_factory.mktemp("workers")

    def start(target: str, namespace: str, **env: str) -> Child:
        child = start_worker_process(f"worker-{len(started)}", target, operator.api_url, namespace, logs, env=env)
        started.append(child)
        return child

    yield start
    stop_all(started)
