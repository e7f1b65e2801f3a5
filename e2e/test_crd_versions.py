"""CRD versions (docs/upgrades.md): v1alpha1 and v1beta1 served side by side,
converted by identity; an object written in v1alpha1 by the previous release
is read as v1beta1, reconciled by the operator (which watches v1beta1), and
rewritten in v1beta1 by `sluiceway crds --migrate`, which then trims the CRD's
storedVersions.

What etcd holds is read from etcd itself (the local control plane's), since
no API shows the version an object is stored in: that read is the one internal
look this test takes, and it is skipped against an existing cluster."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sluiceway.devenv.controlplane import REPO_ROOT
from sluiceway.k8s import crds
from sluiceway.model.resources import SEMAPHORE
from tests.support.api import call
from tests.support.kube import Cluster, Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

CRD = f"{SEMAPHORE.plural}.sluiceway.dev"
COMMITTED = REPO_ROOT / "crds" / f"{CRD}.yaml"


def apply_crd(kube: Kube, manifest: str) -> None:
    kube.run("apply", "--server-side", "--force-conflicts", "-f", "-", input=manifest)
    kube.run("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=60s")


def crd_versions(kube: Kube) -> tuple[str, list[str]]:
    """(the storage version, status.storedVersions) of the Semaphore CRD."""
    crd = json.loads(kube.run("get", "crd", CRD, "-o", "json").stdout)
    storage = next(v["name"] for v in crd["spec"]["versions"] if v["storage"])
    return storage, list(crd["status"]["storedVersions"])


def stored_as(cluster: Cluster, namespace: str, name: str) -> str | None:
    """The apiVersion etcd holds the object in (None without a local control plane)."""
    if cluster.control_plane is None:
        return None
    key = base64.b64encode(f"/registry/sluiceway.dev/{SEMAPHORE.plural}/{namespace}/{name}".encode()).decode()
    request = urllib.request.Request(
        f"{cluster.control_plane.etcd_url}/v3/kv/range", data=json.dumps({"key": key}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        found = json.loads(answer.read())
    return str(json.loads(base64.b64decode(found["kvs"][0]["value"]))["apiVersion"])


def read(kube: Kube, version: str, namespace: str, name: str) -> tuple[dict[str, Any], str]:
    """The object through one version (`kubectl get semaphores.v1beta1.sluiceway.dev`), and kubectl's stderr."""
    result = kube.run("get", f"{SEMAPHORE.plural}.{version}.sluiceway.dev", name, "-n", namespace, "-o", "json")
    return json.loads(result.stdout), result.stderr


def same_in_both_versions(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """The object when both versions answer it identically but for apiVersion (None while
    the operator writes status between the two reads)."""
    old, _ = read(kube, "v1alpha1", namespace, name)
    new, _ = read(kube, "v1beta1", namespace, name)
    assert (old["apiVersion"], new["apiVersion"]) == ("sluiceway.dev/v1alpha1", "sluiceway.dev/v1beta1")
    strip = lambda o: {k: v for k, v in o.items() if k != "apiVersion"}  # noqa: E731
    return new if strip(old) == strip(new) else None


def semaphore(name: str, permits: int, version: str = "v1alpha1", **annotations: str) -> str:
    metadata: dict[str, Any] = {"name": name, "annotations": annotations}
    return yaml.safe_dump(
        {
            "apiVersion": f"sluiceway.dev/{version}",
            "kind": "Semaphore",
            "metadata": metadata,
            "spec": {"permits": permits},
        }
    )


def reconciled(kube: Kube, operator: OperatorProcess, namespace: str, name: str, permits: int) -> dict[str, Any]:
    """Ready at its generation, with the permits the operator stored (read through its API)."""

    def probe() -> dict[str, Any] | None:
        obj, _ = read(kube, "v1beta1", namespace, name)
        ready = condition(obj)
        if (
            not ready
            or ready["status"] != "True"
            or obj["status"].get("observedGeneration") != obj["metadata"]["generation"]
        ):
            return None
        status, stored = call("GET", f"{operator.api_url}/v1/ns/{namespace}/semaphores/{name}")
        return obj if status == 200 and stored["permits"] == permits and obj["status"]["permits"] == permits else None

    return eventually(probe, timeout=60, what=f"the operator to reconcile semaphore {name} with {permits} permits")


@pytest.fixture
def previous_release(kube: Kube) -> Iterator[None]:
    """The Semaphore CRD as a cluster of the previous release had it: stored in
    v1alpha1. This release's CRD is applied again afterwards, whatever happened."""
    apply_crd(kube, yaml.safe_dump(crds.crd_for(SEMAPHORE, storage="v1alpha1")))
    yield
    apply_crd(kube, COMMITTED.read_text())


def migrate(kube: Kube) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluiceway", "crds", "--migrate", "--kubeconfig", str(kube.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )


def write_in_v1alpha1(cluster: Cluster, kube: Kube, namespace: str, name: str, permits: int) -> None:
    """Apply the object in v1alpha1 until etcd holds it in v1alpha1: the API server
    takes a moment to store in a CRD's new storage version."""

    def written() -> bool:
        kube.apply(semaphore(name, permits, attempt=uuid.uuid4().hex), namespace)
        return stored_as(cluster, namespace, name) in ("sluiceway.dev/v1alpha1", None)

    eventually(written, timeout=30, what=f"semaphore {name} to be stored in v1alpha1")


@pytest.fixture
def unwatched_namespace(kube: Kube) -> Iterator[str]:
    """A namespace the shared operator does not watch (it watches e2e-*), so nothing
    but the migration writes the objects there."""
    name = f"crdv-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "namespace", name, "--wait=false", check=False)


def test_an_object_written_in_v1alpha1_is_read_as_v1beta1_reconciled_and_migrated(
    cluster: Cluster,
    kube: Kube,
    namespace: str,
    unwatched_namespace: str,
    operator: OperatorProcess,
    previous_release: None,
) -> None:
    # Written by the previous release's manifests: stored in v1alpha1 and reconciled.
    name, untouched = "legacy-pool", "untouched-pool"
    assert crd_versions(kube)[0] == "v1alpha1"
    write_in_v1alpha1(cluster, kube, namespace, name, 3)
    write_in_v1alpha1(cluster, kube, unwatched_namespace, untouched, 1)
    reconciled(kube, operator, namespace, name, 3)

    # The upgrade: this release's CRDs. Nothing rewrote the object no operator watches.
    apply_crd(kube, COMMITTED.read_text())
    storage, stored = crd_versions(kube)
    assert storage == "v1beta1" and set(stored) == {"v1alpha1", "v1beta1"}
    assert stored_as(cluster, unwatched_namespace, untouched) in ("sluiceway.dev/v1alpha1", None)

    # Read as v1beta1 (identity conversion: the same spec); v1alpha1 answers with a warning.
    untouched_before, _ = read(kube, "v1beta1", unwatched_namespace, untouched)
    assert untouched_before["apiVersion"] == "sluiceway.dev/v1beta1" and untouched_before["spec"] == {"permits": 1}
    old, warning = read(kube, "v1alpha1", unwatched_namespace, untouched)
    assert "sluiceway.dev/v1alpha1 Semaphore is deprecated; use sluiceway.dev/v1beta1" in warning
    assert {**old, "apiVersion": untouched_before["apiVersion"]} == untouched_before

    # The operator, which watches v1beta1, follows a change made through v1alpha1.
    kube.run("apply", "-n", namespace, "-f", "-", input=semaphore(name, 5))
    before = reconciled(kube, operator, namespace, name, 5)

    # The migration: every object rewritten in v1beta1, storedVersions trimmed.
    migrated = migrate(kube)
    assert migrated.returncode == 0, migrated.stderr
    assert f"{CRD}: " in migrated.stdout and "-> [v1beta1]" in migrated.stdout, migrated.stdout
    assert crd_versions(kube) == ("v1beta1", ["v1beta1"])
    for where, each in ((namespace, name), (unwatched_namespace, untouched)):
        assert stored_as(cluster, where, each) in ("sluiceway.dev/v1beta1", None)
    # Rewritten (a new resourceVersion), and nothing else changed.
    untouched_after = eventually(lambda: same_in_both_versions(kube, unwatched_namespace, untouched))
    assert untouched_after["metadata"]["resourceVersion"] != untouched_before["metadata"]["resourceVersion"]
    for key in ("spec", "metadata.generation", "metadata.uid", "metadata.creationTimestamp"):
        assert dig(untouched_after, key) == dig(untouched_before, key), key

    # Both versions read back the same object, which the operator still has as it was.
    after = eventually(lambda: same_in_both_versions(kube, namespace, name), what="both versions to agree")
    assert after["spec"] == before["spec"] == {"permits": 5}
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    reconciled(kube, operator, namespace, name, 5)

    # Idempotent: a second run finds nothing left to do.
    again = migrate(kube)
    assert again.returncode == 0 and f"{CRD}: every object is stored in v1beta1 already" in again.stdout


def dig(obj: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        obj = obj[key]
    return obj


def test_migration_refuses_before_this_release_crds_are_applied(kube: Kube, previous_release: None) -> None:
    """Run too early (the CRD still stores v1alpha1), it says what to do and trims nothing."""
    refused = migrate(kube)
    assert refused.returncode == 1
    assert f"{CRD} stores v1alpha1, not v1beta1: apply this release's CRDs first" in refused.stderr
    assert crd_versions(kube)[0] == "v1alpha1" and "v1alpha1" in crd_versions(kube)[1]
