"""A cluster whose pods really run, for e2e/pods: a node, the image under
test on it, kubectl and helm.

- Locally (the default, as root): the local control plane with a local node
  (`sluiceway.devenv.node`), and the images built by `hack/build-image.sh`
  imported into the node's containerd.
- Against an existing cluster (kind, say): SLUICEWAY_E2E_KUBECONFIG names it,
  SLUICEWAY_E2E_IMAGE the image under test and SLUICEWAY_E2E_UPGRADE_IMAGE the
  same image under another tag, both already on the nodes (`kind load`);
  kubectl and helm come from PATH. See docs/local-node.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.node import Node, NodeNetwork, build_images
from tests.support.kube import Kube

CHART = REPO_ROOT / "charts" / "sluiceway"

Helm = Callable[..., subprocess.CompletedProcess[str]]


@dataclass
class PodCluster:
    kube: Kube
    helm: Helm
    image: str  # repository:tag of the image under test, present on the nodes
    upgrade_image: str  # the same image under another tag
    chart_values: list[str] = field(default_factory=list)  # --set flags every install needs here
    node: Node | None = None  # the local node, when the cluster is the local one

    def json(self, *args: str) -> Any:
        return json.loads(self.kube.run(*args, "-o", "json").stdout)


def helm_runner(binary: str, kubeconfig: Path, home: Path) -> Helm:
    env = {
        **os.environ,
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
        "KUBECONFIG": str(kubeconfig),
    }

    def helm(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, *args], env=env, text=True, capture_output=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    return helm


def existing_cluster(kubeconfig: Path, home: Path) -> PodCluster:
    kubectl, helm = shutil.which("kubectl"), shutil.which("helm")
    assert kubectl and helm, "kubectl and helm must be on PATH to test an existing cluster"
    image = os.environ.get("SLUICEWAY_E2E_IMAGE")
    upgrade = os.environ.get("SLUICEWAY_E2E_UPGRADE_IMAGE")
    assert image and upgrade, (
        "set SLUICEWAY_E2E_IMAGE and SLUICEWAY_E2E_UPGRADE_IMAGE to the image under test under two tags, "
        "both loaded on the cluster's nodes (see docs/local-node.md)"
    )
    values = []
    if postgres := os.environ.get("SLUICEWAY_E2E_POSTGRES_IMAGE"):
        repository, tag = postgres.rsplit(":", 1)
        values = ["--set", f"devPostgres.image.repository={repository}", "--set-string", f"devPostgres.image.tag={tag}"]
    return PodCluster(Kube(kubectl, kubeconfig), helm_runner(helm, kubeconfig, home), image, upgrade, values)


@contextlib.contextmanager
def local_pod_cluster(home: Path) -> Iterator[PodCluster]:
    """The local control plane with a local node (root only), the images built and imported."""
    images = build_images()
    with (
        NodeNetwork() as network,
        ControlPlane(bind_address=network.host_ip, nodes=True) as plane,
        Node(plane, network, images=[archive for archive, _ in images.values()]) as node,
    ):
        _, image = images["sluiceway"]
        upgrade = f"{image.rsplit(':', 1)[0]}:upgrade"
        tagged = node.ctr("images", "tag", "--force", image, upgrade)
        assert tagged.returncode == 0, tagged.stderr
        _, postgres = images["postgres"]
        repository, tag = postgres.rsplit(":", 1)
        kube = Kube(str(plane.bin / "kubectl"), plane.kubeconfig)
        yield PodCluster(
            kube,
            helm_runner(str(plane.bin / "helm"), plane.kubeconfig, home),
            image,
            upgrade,
            ["--set", f"devPostgres.image.repository={repository}", "--set-string", f"devPostgres.image.tag={tag}"],
            node,
        )
        if os.environ.get("SLUICEWAY_E2E_SHOW_LOGS"):
            for name, tail in node.logs().items():
                print(f"--- {name}\n{tail}")
