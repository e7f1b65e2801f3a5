"""The Kubernetes side of the end-to-end tests: a real API server (the local
control plane, or the cluster at $SLUICEWAY_E2E_KUBECONFIG) with the CRDs
installed, and a small kubectl driver: the tests act as a user would, through
kubectl.

An existing cluster is only used when named explicitly in
SLUICEWAY_E2E_KUBECONFIG: a plain $KUBECONFIG may well point at production."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from tests.support.waiting import eventually


@dataclass
class Kube:
    kubectl_path: str
    kubeconfig: Path

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def delete_sluiceway_objects(self, namespace: str, seconds: int = 120) -> None:
        """Delete every Sluiceway object in a namespace and wait (at most `seconds`) for the
        operator to clear their finalizers; what is left then goes with the namespace. kubectl
        gives up first, so a slow operator on a loaded machine never fails a test's teardown."""
        self.run(
            "delete",
            "sluiceway",
            "--all",
            "-n",
            namespace,
            "--wait=true",
            f"--timeout={seconds}s",
            check=False,
            timeout=seconds + 30,
        )

    def apply(
        self, manifest: dict[str, Any] | str, namespace: str, *, check: bool = True, server_side: bool = False
    ) -> subprocess.CompletedProcess[str]:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        extra = ["--server-side", "--field-manager=e2e"] if server_side else []
        return self.run("apply", "-n", namespace, *extra, "-f", "-", input=text, check=check)

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        result = self.run("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        found: dict[str, Any] = json.loads(result.stdout)
        return found

    def requests_served(self, verb: str, resource: str, subresource: str = "") -> int:
        """How many requests of `verb` on `resource` the API server has answered
        since it started (apiserver_request_total, from its /metrics): what a
        test counts to show that a client asked often, or seldom."""
        from prometheus_client.parser import text_string_to_metric_families

        text = self.run("get", "--raw", "/metrics").stdout
        return int(
            sum(
                sample.value
                for family in text_string_to_metric_families(text)
                if family.name == "apiserver_request"
                for sample in family.samples
                if sample.name == "apiserver_request_total"
                and sample.labels.get("verb") == verb
                and sample.labels.get("resource") == resource
                and sample.labels.get("subresource", "") == subresource
            )
        )

    def delete(self, kind: str, name: str, namespace: str, *, wait: bool = True) -> None:
        self.run(
            "delete", kind, name, "-n", namespace, "--ignore-not-found", f"--wait={str(wait).lower()}", "--timeout=60s"
        )


def condition(obj: dict[str, Any] | None, type_: str = "Ready") -> dict[str, Any] | None:
    if not obj:
        return None
    for item in obj.get("status", {}).get("conditions", []):
        if item.get("type") == type_:
            found: dict[str, Any] = item
            return found
    return None


@dataclass
class Cluster:
    kube: Kube
    control_plane: ControlPlane | None


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    existing = os.environ.get("SLUICEWAY_E2E_KUBECONFIG")
    if existing:
        kubectl = shutil.which("kubectl")
        assert kubectl, "kubectl must be on PATH to test an existing cluster"
        kube = Kube(kubectl, Path(existing))
        _install_crds(kube)
        yield Cluster(kube, None)
        return
    with ControlPlane() as plane:
        kube = Kube(str(plane.bin / "kubectl"), plane.kubeconfig)
        _install_crds(kube)
        yield Cluster(kube, plane)


def _install_crds(kube: Kube) -> None:
    """Apply the CRDs and wait until each is listed, not only Established: a
    CRD's storage answers 429 "(re)initializing" for a while after that, and an
    operator started then waits out kopf's retry backoff before it sees anything."""
    # Server-side, as docs/upgrades.md says: the Workflow CRD is larger than the
    # last-applied annotation a client-side apply keeps.
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(REPO_ROOT / "crds"))
    kube.run("wait", "--for=condition=Established", "-f", str(REPO_ROOT / "crds"), "--timeout=60s")
    resources = ",".join(path.name.removesuffix(".yaml") for path in sorted((REPO_ROOT / "crds").glob("*.yaml")))
    eventually(
        lambda: kube.run("get", resources, "-A", "-o", "name", check=False).returncode == 0,
        timeout=60,
        what="every CRD's storage to serve a list",
    )
