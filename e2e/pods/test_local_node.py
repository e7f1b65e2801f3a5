"""The local node itself: its pods resolve cluster names and nothing else,
have no route off the machine, leave the host's iptables and mounts alone,
and a stop leaves no process, mount, namespace, interface or cgroup behind.

Only on the local node (root); another cluster's nodes are not ours to inspect."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway.devenv.controlplane import ControlPlane
from sluiceway.devenv.node import Node, NodeNetwork, build_images, hierarchies
from tests.support.kube import Kube
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        bool(os.environ.get("SLUICEWAY_E2E_KUBECONFIG")), reason="inspects the local node; another cluster's are not"
    ),
]

PROBE = """
import json, socket
def resolve(name):
    try:
        return socket.gethostbyname(name)
    except OSError as error:
        return type(error).__name__
routes = [line.split()[1] for line in open("/proc/net/route").read().splitlines()[1:]]
print(json.dumps({
    "kubernetes": resolve("kubernetes.default.svc.cluster.local"),
    "outside": resolve("example.com"),
    "default_route": "00000000" in routes,
}))
"""


def host(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False).stdout


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[NodeNetwork, Node, Kube]]:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run the node tests: they need root")
        pytest.skip("the local node needs root")
    images = build_images()
    archives = [images[name][0] for name in ("pause", "sluiceway")]
    with (
        NodeNetwork() as network,
        ControlPlane(bind_address=network.host_ip, nodes=True) as plane,
        Node(plane, network, images=archives, workdir=tmp_path / "node") as started,
    ):
        yield network, started, Kube(str(plane.bin / "kubectl"), plane.kubeconfig)


def test_a_pod_resolves_cluster_names_only_and_has_no_route_off_the_machine(
    node: tuple[NodeNetwork, Node, Kube],
) -> None:
    network, started, kube = node
    image = build_images()["sluiceway"][1]
    kube.run(
        "run",
        "probe",
        f"--image={image}",
        "--image-pull-policy=IfNotPresent",
        "--restart=Never",
        "--command",
        "--",
        "python",
        "-c",
        PROBE,
    )
    eventually(
        lambda: (kube.get("pod", "probe", "default") or {}).get("status", {}).get("phase") == "Succeeded",
        timeout=120,
        what="the probe pod to run",
    )
    seen = json.loads(kube.run("logs", "probe").stdout)
    assert seen["kubernetes"] == "10.0.0.1", "cluster DNS answers for Services"
    assert seen["outside"] == "gaierror", "and for nothing else: there is no upstream resolver"
    assert seen["default_route"] is False, "a pod has routes to the services and the API server only"

    slot = network.slot
    node_routes = host("ip", "-n", slot.netns, "route", "show")
    assert "default" not in node_routes and slot.pod_cidr in node_routes
    assert "KUBE-SERVICES" in host("ip", "netns", "exec", slot.netns, "iptables-save")
    assert "KUBE-SERVICES" not in host("iptables-save"), "kube-proxy's rules stay in the node's namespace"
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(started.workdir) not in mounts, "the node's mounts live in its own mount namespace"


def test_a_stop_leaves_nothing_of_the_node_behind(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the local node needs root")
    images = build_images()
    workdir = tmp_path / "node"
    with NodeNetwork() as network, ControlPlane(bind_address=network.host_ip, nodes=True) as plane:
        slot = network.slot
        with Node(plane, network, images=[images["pause"][0]], workdir=workdir) as started:
            kube = Kube(str(plane.bin / "kubectl"), plane.kubeconfig)
            kube.run("run", "idle", f"--image={images['pause'][1]}", "--image-pull-policy=IfNotPresent")
            eventually(
                lambda: (kube.get("pod", "idle", "default") or {}).get("status", {}).get("phase") == "Running",
                timeout=60,
                what="a running pod (a container, a shim, a network namespace, mounts)",
            )
            pids = {child.process.pid for child in started.children}
        # The node is stopped; its network goes with the NodeNetwork.
        assert not any(Path(f"/proc/{pid}").exists() for pid in pids), "every node process has exited"
        assert not [h for h in hierarchies() if (h / slot.cgroup).exists()], "no cgroup left"
        leftovers = [p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _runs_from(p, workdir)]
        assert leftovers == [], "no process (shim, container) runs from the node's directory"
    assert slot.netns not in host("ip", "netns", "list")
    assert host("ip", "link", "show", slot.host_interface) == ""
    assert slot.pod_cidr not in host("ip", "route", "show")


def _runs_from(proc: Path, workdir: Path) -> bool:
    try:
        return str(workdir) in (proc / "cmdline").read_text(errors="replace")
    except OSError:
        return False
