"""End-to-end fixtures: a real API server (the local control plane, or the
cluster at $SLUICEWAY_E2E_KUBECONFIG), a real PostgreSQL, and the operator
running as a separate process, exactly as `make up` runs it.

An existing cluster is only used when named explicitly in
SLUICEWAY_E2E_KUBECONFIG: a plain $KUBECONFIG may well point at production."""

from __future__ import annotations

import json
import os
import shutil
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from e2e.kube import Kube
from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.processes import Child, free_port, wait_until

pytestmark = pytest.mark.e2e

# The shared operator's timers (seconds): short, so tests that wait on a status
# report or an autoscaling decision wait a second, not five.
STATUS_INTERVAL = 1.0
AUTOSCALING_INTERVAL = 1.0


@dataclass
class Cluster:
    kube: Kube
    control_plane: ControlPlane | None


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    existing = os.environ.get("SLUICEWAY_E2E_KUBECONFIG")
    if existing:
        kubectl = shutil.which("kubectl")
        assert kubectl, "kubectl must be on PATH to test an existing cluster"
        kube = Kube(kubectl, Path(existing))
        install_crds(kube)
        yield Cluster(kube, None)
        return
    with ControlPlane() as plane:
        kube = Kube(str(plane.bin / "kubectl"), plane.kubeconfig)
        install_crds(kube)
        yield Cluster(kube, plane)


def install_crds(kube: Kube) -> None:
    """Apply the CRDs and wait until each is listed, not only Established: a
    CRD's storage answers 429 "(re)initializing" for a while after that, and an
    operator started then waits out kopf's retry backoff before it sees anything."""
    kube.run("apply", "-f", str(REPO_ROOT / "crds"))
    kube.run("wait", "--for=condition=Established", "-f", str(REPO_ROOT / "crds"), "--timeout=60s")
    resources = ",".join(path.name.removesuffix(".yaml") for path in sorted((REPO_ROOT / "crds").glob("*.yaml")))
    wait_until(
        lambda: kube.run("get", resources, "-A", "-o", "name", check=False).returncode == 0,
        timeout=60,
        what="every CRD's storage to serve a list",
    )


@pytest.fixture(scope="session")
def kube(cluster: Cluster) -> Kube:
    return cluster.kube


@pytest.fixture(scope="session")
def operator_database(postgres_server: str) -> Iterator[str]:
    import asyncio

    name = f"e2e_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        conn = await asyncpg.connect(postgres_server)
        await conn.execute(f'CREATE DATABASE "{name}"')
        await conn.close()

    asyncio.run(create())
    yield postgres_server.rsplit("/", 1)[0] + f"/{name}"


@dataclass
class OperatorProcess:
    child: Child
    database_url: str
    api_url: str

    def logs(self) -> str:
        return self.child.tail(200)


@pytest.fixture(scope="session")
def operator(
    cluster: Cluster, operator_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    logs = tmp_path_factory.mktemp("operator")
    port = free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kube.kubeconfig),
        "SLUICEWAY_DATABASE_URL": operator_database,
        "SLUICEWAY_LOG_LEVEL": "DEBUG",
        "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
        # Tests that run operators of their own (HA, RBAC, auth) use namespaces outside this pattern.
        "SLUICEWAY_NAMESPACES": "e2e-*",
        # What the chart sets: spec.workers without an image (the examples) runs the operator's.
        "SLUICEWAY_WORKER_IMAGE": "ghcr.io/sluiceway/sluiceway:e2e",
        # Small numbers so a test can open a breaker and wait out its open time.
        "SLUICEWAY_CIRCUIT_BREAKER": '{"enabled": true, "minimumRequests": 3, "failureRatio": 0.5, '
        '"openMs": 1500, "maxOpenMs": 10000}',
        "SLUICEWAY_STATUS_INTERVAL": str(STATUS_INTERVAL),
        "SLUICEWAY_AUTOSCALING_INTERVAL": str(AUTOSCALING_INTERVAL),
        "SLUICEWAY_PURGE_INTERVAL": "1",
    }
    child = Child("operator", [sys.executable, "-m", "sluiceway", "operator"], logs, env=env)
    process = OperatorProcess(child, operator_database, f"http://127.0.0.1:{port}")
    wait_until(
        lambda: urllib.request.urlopen(f"{process.api_url}/readyz", timeout=2).status == 200,
        timeout=60,
        what="the operator's API /readyz",
        child=child,
    )
    yield process
    child.stop()
    if os.environ.get("SLUICEWAY_E2E_SHOW_LOGS"):
        print(process.logs())


@pytest.fixture
def namespace(kube: Kube, operator: OperatorProcess) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    yield name
    # Let the operator clear its finalizers before the namespace goes.
    kube.run("delete", "sluiceway", "--all", "-n", name, "--wait=true", "--timeout=60s", check=False)
    kube.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def db(operator: OperatorProcess) -> Iterator[str]:
    yield operator.database_url


def fetch(database_url: str, query: str, *args: object) -> list[dict[str, object]]:
    """Run one query against the operator's database (for assertions only)."""
    import asyncio

    async def go() -> list[dict[str, object]]:
        conn = await asyncpg.connect(database_url)
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        try:
            return [dict(r) for r in await conn.fetch(query, *args)]
        finally:
            await conn.close()

    return asyncio.run(go())


@pytest.fixture
def start_worker(operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Child]]:
    """Start `sluiceway worker` processes, as a user would; all are stopped after the test."""
    started: list[Child] = []
    logs = tmp_path_factory.mktemp("workers")

    def start(target: str, namespace: str, **env: str) -> Child:
        child = Child(
            f"worker-{len(started)}",
            [
                sys.executable,
                "-m",
                "sluiceway",
                "worker",
                target,
                "--url",
                operator.api_url,
                "--namespace",
                namespace,
            ],
            logs,
            env={**os.environ, **env},
        )
        started.append(child)
        return child

    yield start
    for child in started:
        child.stop()
