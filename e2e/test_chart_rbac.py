"""The chart's RBAC is sufficient and not padded: `helm install` into the real
API server, run the operator as the chart's ServiceAccount (a token for it,
nothing more), and see it do its whole job; then take one rule away and see
that part of the job fail."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.devenv.controlplane import REPO_ROOT
from sluiceway.devenv.processes import Child, free_port
from tests.support.database import Databases, fetch
from tests.support.kube import Cluster, Kube, condition
from tests.support.operators import start_operator
from tests.support.waiting import eventually
from tests.support.workers import start_worker

API = "sluiceway.dev/v1beta1"
CHART = REPO_ROOT / "charts" / "sluiceway"
WORKERS = str(Path(__file__).parent / "workers" / "fulfilment.py")


def token_kubeconfig(kube: Kube, token: str, path: Path) -> Path:
    """The admin kubeconfig's cluster, with a bearer token as the only credential."""
    admin = yaml.safe_load(kube.run("config", "view", "--raw", "--minify").stdout)
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Install:
    release: str
    release_namespace: str
    watched: str
    operator: Child
    api_url: str
    database: str


def helm_bin(cluster: Cluster) -> str:
    if cluster.control_plane is not None:
        return str(cluster.control_plane.bin / "helm")
    return "helm"


@pytest.fixture
def install(cluster: Cluster, databases: Databases, tmp_path: Path) -> Iterator[Install]:
    kube = cluster.kube
    suffix = uuid.uuid4().hex[:6]
    release, release_ns, watched = f"rbac{suffix}", f"rbac-{suffix}", f"rbac-work-{suffix}"
    for namespace in (release_ns, watched):
        kube.run("create", "namespace", namespace)
    kube.run("create", "secret", "generic", "sluiceway-db", "-n", release_ns, "--from-literal=dsn=unused-here")
    env = {
        **os.environ,
        "KUBECONFIG": str(kube.kubeconfig),
        "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
        "HELM_DATA_HOME": str(tmp_path / "helm-data"),
    }
    import subprocess

    subprocess.run(
        [
            helm_bin(cluster),
            "install",
            release,
            str(CHART),
            "-n",
            release_ns,
            "--skip-crds",
            "--set",
            "database.existingSecret=sluiceway-db",
            "--set",
            f"watchNamespaces={{{watched}}}",
            "--wait=false",
        ],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    service_account = f"{release}-sluiceway"
    token = kube.run("create", "token", service_account, "-n", release_ns, "--duration=2h").stdout.strip()
    kubeconfig = token_kubeconfig(kube, token, tmp_path / "operator.kubeconfig")
    dsn = asyncio.run(databases.create("rbac"))
    port = free_port()
    operator = start_operator(
        "operator-as-chart-sa",
        dsn,
        tmp_path,
        kubeconfig=kubeconfig,
        port=port,
        log_level="INFO",
        settings={
            "SLUICEWAY_NAMESPACES": watched,
            "SLUICEWAY_AUTH": "kubernetes",
            "SLUICEWAY_LEADER_ELECTION_NAMESPACE": release_ns,
            "SLUICEWAY_API_KEYS_NAMESPACE": release_ns,
            "SLUICEWAY_POD_NAME": "operator-0",
            "SLUICEWAY_API_URL": f"http://127.0.0.1:{port}",
        },
    )
    yield Install(release, release_ns, watched, operator.child, operator.api_url, dsn)
    operator.stop()
    kube.run("delete", "sluiceway", "--all", "-n", watched, "--wait=false", check=False)
    subprocess.run([helm_bin(cluster), "uninstall", release, "-n", release_ns], env=env, capture_output=True)
    for namespace in (release_ns, watched):
        kube.run("delete", "namespace", namespace, "--wait=false", check=False)


def apply(kube: Kube, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)


def ready(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return eventually(
        lambda: (o := kube.get(kind, name, namespace)) and (c := condition(o)) and c["status"] == "True" and o,
        timeout=60,
        what=f"{kind}/{name} Ready",
    )


def worker_token(kube: Kube, namespace: str) -> str:
    """A worker ServiceAccount that ordinary RBAC lets poll and update task definitions."""
    kube.run("create", "serviceaccount", "worker", "-n", namespace)
    kube.run(
        "create", "role", "worker", "-n", namespace, "--verb=poll,update", "--resource=taskdefinitions.sluiceway.dev"
    )
    kube.run(
        "create", "rolebinding", "worker", "-n", namespace, "--role=worker", f"--serviceaccount={namespace}:worker"
    )
    return kube.run("create", "token", "worker", "-n", namespace, "--duration=2h").stdout.strip()


def test_the_operator_does_its_whole_job_with_exactly_the_charts_rbac(
    cluster: Cluster, install: Install, tmp_path: Path
) -> None:
    kube, ns = cluster.kube, install.watched
    apply(kube, ns, "Semaphore", "erp", {"name": "legacy_erp", "permits": 2})
    apply(kube, ns, "Quota", "default", {"maxConcurrentExecutions": 50})
    apply(
        kube,
        ns,
        "TaskDefinition",
        "reserve-stock",
        {
            "name": "reserve_stock",
            "semaphores": ["legacy_erp"],
            "workers": {"image": "example.com/fulfilment:1", "replicas": 1},
        },
    )
    apply(
        kube,
        ns,
        "Workflow",
        "reserve",
        {"tasks": [{"name": "reserve_stock", "taskReferenceName": "reserve", "inputParameters": {"skus": ["A", "B"]}}]},
    )
    for kind, name in (
        ("semaphore", "erp"),
        ("quota", "default"),
        ("taskdefinition", "reserve-stock"),
        ("workflow", "reserve"),
    ):
        ready(kube, ns, kind, name)
    deployment = eventually(
        lambda: kube.get("deployment", "reserve-stock-workers", ns), timeout=60, what="the worker Deployment"
    )
    assert deployment["metadata"]["ownerReferences"][0]["kind"] == "TaskDefinition"
    worker = start_worker(
        "worker", WORKERS, install.api_url, ns, tmp_path, env={"SLUICEWAY_TOKEN": worker_token(kube, ns)}
    )
    try:
        kube.run(
            "create",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": API,
                    "kind": "WorkflowRun",
                    "metadata": {"name": "reserve-1"},
                    "spec": {"workflow": "reserve"},
                }
            ),
        )
        status = eventually(
            lambda: (
                (s := (kube.get("workflowrun", "reserve-1", ns) or {}).get("status", {})).get("phase") == "Completed"
                and s
            ),
            timeout=60,
            what="the run to complete",
        )
    finally:
        worker.stop()
    assert status["output"] == {"reserved": ["A:ok", "B:ok"]}
    lease = json.loads(
        kube.run("get", "lease", "sluiceway-operator", "-n", install.release_namespace, "-o", "json").stdout
    )
    assert lease["spec"]["holderIdentity"] == "operator-0"
    events = json.loads(kube.run("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Completed" and e["involvedObject"]["name"] == "reserve-1" for e in events)
    quota = eventually(lambda: (kube.get("quota", "default", ns) or {}).get("status", {}).get("used"))
    assert quota is not None
    log = install.operator.tail(400)
    assert "forbidden" not in log.lower(), log


def test_a_container_step_creates_reads_and_deletes_its_pod_with_exactly_the_charts_rbac(
    cluster: Cluster, install: Install
) -> None:
    """CONTAINER tasks (docs/tasks/container.md) need pods get, list, watch,
    create, delete and pods/log get: this control plane has no node, so the pod
    stays Pending until scheduleToStart deletes it, which uses each of them (a
    refused watch would be logged, and retried, as forbidden)."""
    kube, ns = cluster.kube, install.watched
    apply(kube, ns, "TaskDefinition", "unplaced", {"retryCount": 0, "scheduleToStartTimeout": 2})
    task = {"name": "unplaced", "taskReferenceName": "step", "type": "CONTAINER", "container": {"image": "x:1"}}
    apply(kube, ns, "Workflow", "unplaced", {"tasks": [task]})
    ready(kube, ns, "taskdefinition", "unplaced")
    ready(kube, ns, "workflow", "unplaced")
    run = {
        "apiVersion": API,
        "kind": "WorkflowRun",
        "metadata": {"name": "unplaced-1"},
        "spec": {"workflow": "unplaced"},
    }
    kube.run("create", "-n", ns, "-f", "-", input=json.dumps(run))
    pod = eventually(
        lambda: json.loads(kube.run("get", "pods", "-n", ns, "-l", "sluiceway.dev/attempt=1", "-o", "json").stdout)[
            "items"
        ],
        timeout=60,
        what="the step's pod",
    )[0]
    assert pod["metadata"]["ownerReferences"][0]["name"] == "unplaced-1", "the WorkflowRun owns its pods"
    eventually(
        lambda: (
            fetch(install.database, "SELECT status FROM executions WHERE resource_name = 'unplaced-1'")
            == [{"status": "FAILED"}]
        ),
        timeout=60,
        what="the run to fail at scheduleToStart",
    )
    reasons = fetch(install.database, "SELECT reason FROM tasks WHERE ref = 'step' AND namespace = $1", ns)
    assert [str(r["reason"])[:22] for r in reasons] == ["scheduleToStartTimeout"], reasons
    eventually(
        lambda: (
            not [
                p
                for p in json.loads(
                    kube.run("get", "pods", "-n", ns, "-l", "sluiceway.dev/attempt=1", "-o", "json").stdout
                )["items"]
                if not p["metadata"].get("deletionTimestamp")
            ]
        ),
        timeout=30,
        what="the pod to be deleted",
    )
    assert "forbidden" not in install.operator.tail(400).lower()


def test_taking_one_rule_away_breaks_that_part_of_the_job(cluster: Cluster, install: Install) -> None:
    kube, ns = cluster.kube, install.watched
    apply(
        kube,
        ns,
        "Workflow",
        "noop",
        {
            "tasks": [
                {
                    "name": "calc",
                    "taskReferenceName": "calc",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "cel", "expression": "1 + 1"},
                }
            ]
        },
    )
    ready(kube, ns, "workflow", "noop")
    role = json.loads(kube.run("get", "role", install.release + "-sluiceway", "-n", ns, "-o", "json").stdout)
    granted = [resource for rule in role["rules"] for resource in rule["resources"]]
    assert "workflowruns/status" in granted, "the chart grants patching WorkflowRun status"
    for rule in role["rules"]:  # take exactly that one resource away, nothing else
        rule["resources"] = [r for r in rule["resources"] if r != "workflowruns/status"]
    kube.run("replace", "-f", "-", input=json.dumps(role))
    kube.run(
        "create",
        "-n",
        ns,
        "-f",
        "-",
        input=json.dumps(
            {"apiVersion": API, "kind": "WorkflowRun", "metadata": {"name": "unreported"}, "spec": {"workflow": "noop"}}
        ),
    )
    # The run itself happens (PostgreSQL is the operator's own), but its WorkflowRun never hears of it.
    # So only the store can show that it ran: the WorkflowRun's status is what was taken away, and
    # nothing a user holds names the run's execution id.
    eventually(
        lambda: (
            fetch(install.database, "SELECT status FROM executions WHERE resource_name = 'unreported'")
            == [{"status": "COMPLETED"}]
        ),
        timeout=60,
        what="the run to complete in the store",
    )
    time.sleep(5)
    status = (kube.get("workflowrun", "unreported", ns) or {}).get("status", {})
    assert status.get("phase") != "Completed", status
    eventually(
        lambda: "forbidden" in install.operator.tail(400).lower(),
        timeout=30,
        what="the operator to log the refused status write",
    )
