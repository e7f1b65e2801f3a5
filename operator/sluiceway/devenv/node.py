"""A node for the local cluster, so that pods really run: containerd and runc
(the distribution's), kubelet, kube-proxy and kube-scheduler (built from the
same Kubernetes sources as the control plane, `hack/build-node.sh`), the CNI
bridge and host-local plugins (the distribution's), and CoreDNS as the cluster
DNS. Needs root.

Everything lives in places of its own, so that several nodes (two checkouts
testing side by side) never meet and a stop leaves nothing behind:

- a *slot* (0-31), held by a lock for the node's lifetime, names all of them;
- a network namespace `sluiceway-node<slot>` joined to the host by a veth pair
  (host 10.249.<slot>.1, node 10.249.<slot>.2). The API server listens on the
  host end. The namespace has no default route: the pod range
  10.250.<slot>.0/24 on its bridge and the service range reach nothing but
  this machine, and an image pull that misses the local images fails at once
  instead of going out. kube-proxy's and the kubelet's iptables rules are the
  namespace's own;
- a private mount namespace for the node's processes, with tmpfs over the
  host paths containerd and the kubelet insist on (/run/netns,
  /run/containerd, /var/lib/cni, /var/log/containers): every mount a pod makes
  dies with it;
- a cgroup `sluiceway-node<slot>` in every hierarchy: the kubelet's
  `cgroupRoot`, and the parent of the node processes' own cgroup, so a stop
  kills every process of the node, shims and containers included.

This host runs cgroup v1 (hybrid), so the kubelet needs `failCgroupV1: false`
and the cgroupfs driver; see docs/local-node.md.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sluiceway.devenv.certificates import Pair
from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.processes import Child, wait_until

NODE_BUILD_SCRIPT = REPO_ROOT / "hack" / "build-node.sh"
IMAGE_BUILD_SCRIPT = REPO_ROOT / "hack" / "build-image.sh"
NODE_NAME = "sluiceway-node"
SLOTS = 32
LOCKS = Path("/run/sluiceway")
CGROUPS = Path("/sys/fs/cgroup")
CONTAINERD = "/usr/bin/containerd"
CTR = "/usr/bin/ctr"
RUNC = "/usr/sbin/runc"
CNI_PLUGINS = "/usr/lib/cni"
PAUSE_IMAGE = "localhost/sluiceway/pause:3.10.2"
# Host paths containerd, the CNI plugins and the kubelet write to whatever their
# configuration says; each node gets a tmpfs over them in its mount namespace.
PRIVATE_PATHS = ("/run/netns", "/run/containerd", "/var/lib/cni", "/var/log/containers")
SERVICE_CIDR = "10.0.0.0/24"  # the control plane's --service-cluster-ip-range


def node_binaries() -> Path:
    """kubelet, kube-proxy, kube-scheduler, pause and coredns: $SLUICEWAY_NODE_BIN_DIR or the cached build."""
    configured = os.environ.get("SLUICEWAY_NODE_BIN_DIR")
    if configured:
        return Path(configured)
    out = subprocess.run(["bash", str(NODE_BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def build_images() -> dict[str, tuple[Path, str]]:
    """pause, postgres and sluiceway: name -> (OCI archive, image reference), from the cached builds."""
    out = subprocess.run(["bash", str(IMAGE_BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True).stdout
    images = {}
    for line in out.splitlines():
        name, archive, reference = line.split()
        images[name] = (Path(archive), reference)
    return images


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


@dataclass(frozen=True)
class Slot:
    """The names and addresses of one node; never routed off this machine."""

    number: int

    @property
    def netns(self) -> str:
        return f"sluiceway-node{self.number}"

    @property
    def host_interface(self) -> str:
        return f"swnode{self.number}"

    @property
    def cgroup(self) -> str:
        return f"sluiceway-node{self.number}"

    @property
    def host_ip(self) -> str:
        return f"10.249.{self.number}.1"

    @property
    def node_ip(self) -> str:
        return f"10.249.{self.number}.2"

    @property
    def link_cidr(self) -> str:
        return f"10.249.{self.number}.0/30"

    @property
    def pod_cidr(self) -> str:
        return f"10.250.{self.number}.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"10.250.{self.number}.1"


class SlotLock:
    """The first free slot, held with flock until `release()` (or the process dies)."""

    def __init__(self) -> None:
        LOCKS.mkdir(parents=True, exist_ok=True)
        for number in range(SLOTS):
            handle = open(LOCKS / f"node{number}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            self.slot, self._handle = Slot(number), handle
            return
        raise RuntimeError(f"all {SLOTS} node slots are in use (see {LOCKS})")

    def release(self) -> None:
        self._handle.close()


# --- the network: a namespace, a veth pair, routes that stay on this machine ---


def create_network(slot: Slot) -> None:
    run("ip", "netns", "add", slot.netns)
    run("ip", "link", "add", slot.host_interface, "type", "veth", "peer", "name", "eth0", "netns", slot.netns)
    run("ip", "addr", "add", f"{slot.host_ip}/30", "dev", slot.host_interface)
    run("ip", "link", "set", slot.host_interface, "up")
    # Tests on the host reach pods directly; the route goes away with the interface.
    run("ip", "route", "add", slot.pod_cidr, "via", slot.node_ip, "dev", slot.host_interface)
    inside = ("ip", "netns", "exec", slot.netns)
    run(*inside, "ip", "addr", "add", f"{slot.node_ip}/30", "dev", "eth0")
    run(*inside, "ip", "link", "set", "eth0", "up")
    run(*inside, "ip", "link", "set", "lo", "up")
    # Per-namespace settings: the node forwards between its bridge and the link,
    # and bridged pod traffic passes kube-proxy's iptables rules.
    run(*inside, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    run(*inside, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")


def delete_network(slot: Slot) -> None:
    run("ip", "netns", "delete", slot.netns, check=False)
    run("ip", "link", "delete", slot.host_interface, check=False)


# --- cgroups: one subtree per node in every hierarchy -------------------------


def hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, and the unified one in hybrid mode)."""
    found: list[Path] = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, target, fstype, *_ = line.split()
        if fstype in ("cgroup", "cgroup2") and target.startswith(str(CGROUPS)):
            found.append(Path(target))
    return found


def create_cgroup(path: str) -> None:
    """`path` (relative) in every hierarchy; cpusets start with their parent's CPUs and memory nodes."""
    for hierarchy in hierarchies():
        current = hierarchy
        for part in Path(path).parts:
            parent, current = current, current / part
            current.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (current / knob).exists() and not (current / knob).read_text().strip():
                    (current / knob).write_text((parent / knob).read_text())


def join_cgroup(path: str) -> None:
    """Move the calling process into `path` in every hierarchy (a preexec_fn)."""
    for hierarchy in hierarchies():
        (hierarchy / path / "cgroup.procs").write_text(str(os.getpid()))


def cgroup_pids(name: str) -> set[int]:
    pids: set[int] = set()
    for hierarchy in hierarchies():
        for procs in (hierarchy / name).rglob("cgroup.procs") if (hierarchy / name).exists() else ():
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                continue
    return pids


def kill_cgroup(name: str, timeout: float = 30) -> None:
    """SIGKILL every process in the subtree until none is left, then remove the subtree."""
    deadline = time.monotonic() + timeout
    while (pids := cgroup_pids(name)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    for hierarchy in hierarchies():
        root = hierarchy / name
        if not root.exists():
            continue
        for directory in sorted((d for d in root.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            _rmdir(directory, deadline)
        _rmdir(root, deadline)


def _rmdir(directory: Path, deadline: float) -> None:
    while True:
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# --- configuration files ---------------------------------------------------------


def containerd_config(state: Path) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{state}/root"
state = "{state}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{state}/containerd.sock"

[ttrpc]
  address = "{state}/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{state}/opt"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_selinux = false
  # This sandbox has no CAP_SYS_RESOURCE: no process may lower its oom_score_adj
  # (runc fails on the pause container's -998). Keep scores at containerd's own.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{RUNC}"
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "{CNI_PLUGINS}"
  conf_dir = "{state}/cni"
"""


def cni_config(slot: Slot, state: Path) -> dict[str, Any]:
    """A bridge with host-local addresses; pods get routes to the services and the
    API server only, through the bridge, and no masquerade: nothing leaves."""
    return {
        "cniVersion": "1.0.0",
        "name": "sluiceway",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(state / "ipam"),
                    "ranges": [[{"subnet": slot.pod_cidr, "gateway": slot.pod_gateway}]],
                    "routes": [{"dst": SERVICE_CIDR}, {"dst": slot.link_cidr}],
                },
            }
        ],
    }


def kubelet_config(slot: Slot, root: Path, ca: Path, containerd_socket: Path, resolv_conf: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This host's cgroups are v1 (hybrid); since 1.35 the kubelet refuses v1 unless told.
        "failCgroupV1": False,
        # containerd 1.6 cannot tell the kubelet its driver (the RuntimeConfig call is newer): say it.
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{slot.cgroup}",
        "containerRuntimeEndpoint": f"unix://{containerd_socket}",
        "address": slot.node_ip,
        "healthzBindAddress": "127.0.0.1",
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},  # only the API server holds a certificate of this CA
        "clusterDomain": "cluster.local",
        "clusterDNS": [slot.node_ip],
        "resolvConf": str(resolv_conf),
        "podLogsDir": str(root / "pod-logs"),
        "volumePluginDir": str(root / "volume-plugins"),
        "serializeImagePulls": False,
        "failSwapOn": False,
        "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE here (see containerd_config)
        # Images are imported, never pulled: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # A shared development machine: evict only when really short.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "nodeStatusReportFrequency": "10s",
        "shutdownGracePeriod": "0s",
    }


def kube_proxy_config(slot: Slot, kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "oomScoreAdj": 0,  # no CAP_SYS_RESOURCE here (see containerd_config)
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "clusterCIDR": slot.pod_cidr,
        "hostnameOverride": NODE_NAME,
        "bindAddress": slot.node_ip,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # The conntrack table size and timeouts are the whole machine's: leave them.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }


def corefile(kubeconfig: Path) -> str:
    """Cluster names only: no `forward`, so nothing is ever asked outside."""
    return f""".:53 {{
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
}}
"""


COREDNS_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "sluiceway:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "sluiceway:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "sluiceway:coredns"}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: "sluiceway:coredns"}
"""


# --- the node ---------------------------------------------------------------------


class NodeNetwork:
    """A slot and its network, prepared before the control plane starts: the API
    server must listen on `host_ip` for pods to reach it."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            raise PermissionError("a local node needs root (network and mount namespaces, cgroups)")
        self._lock = SlotLock()
        self.slot = self._lock.slot
        teardown(self.slot)  # whatever a killed run on this slot left
        try:
            create_network(self.slot)
        except BaseException:
            self.close()
            raise

    @property
    def host_ip(self) -> str:
        return self.slot.host_ip

    def __enter__(self) -> NodeNetwork:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        teardown(self.slot)
        self._lock.release()


def teardown(slot: Slot) -> None:
    """Kill every process of the slot's node, then remove its cgroups and network.
    The mount namespace dies with its last process, taking every mount with it."""
    kill_cgroup(slot.cgroup)
    delete_network(slot)


class Node:
    """kubelet, containerd, kube-proxy, kube-scheduler and CoreDNS joined to `plane`.
    `images` are OCI or docker archives imported into containerd before the kubelet starts."""

    def __init__(
        self, plane: ControlPlane, network: NodeNetwork, images: Sequence[Path] = (), workdir: Path | None = None
    ) -> None:
        self.plane = plane
        self.network = network
        self.slot = network.slot
        self.images = list(images)
        self.bin = node_binaries()
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="sluiceway-node-"))
        self.children: list[Child] = []
        self.anchor: Child | None = None

    def __enter__(self) -> Node:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        create_cgroup(f"{self.slot.cgroup}/system")
        self._enter_namespaces()
        self._start_containerd()
        # Unpacking is most of a node's start: the archives go in side by side.
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.images))) as imports:
            list(imports.map(self.import_image, self.images))
        self._start_kubelet(self._kubeconfig("kubelet", f"system:node:{NODE_NAME}", "system:nodes"))
        self._start_kube_proxy(self._kubeconfig("kube-proxy", "system:kube-proxy"))
        self.plane.kubectl("apply", "-f", "-", input=COREDNS_RBAC)
        self._start_coredns(self._kubeconfig("coredns", "sluiceway:coredns"))
        self._start_scheduler(self._kubeconfig("kube-scheduler", "system:kube-scheduler"))
        self.wait_ready()

    def _kubeconfig(self, stem: str, user: str, group: str | None = None) -> Path:
        pair: Pair = self.plane.ca.issue(stem, user, organization=group)
        return self.plane.write_kubeconfig(self.workdir / "pki" / f"{stem}.kubeconfig", pair, user=user)

    def _enter_namespaces(self) -> None:
        """A process that holds the node's mount namespace (with tmpfs over
        PRIVATE_PATHS) inside its network namespace; every node process joins both."""
        for path in PRIVATE_PATHS:
            Path(path).mkdir(parents=True, exist_ok=True)
        mounts = " && ".join(f"mount -t tmpfs -o mode=0755 tmpfs {path}" for path in PRIVATE_PATHS)
        ready = self.workdir / "namespaces-ready"
        self.anchor = self._spawn(
            "namespaces",
            [
                "nsenter",
                f"--net=/run/netns/{self.slot.netns}",
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f"{mounts} && touch {ready} && exec sleep infinity",
            ],
            enter=False,
        )
        wait_until(ready.exists, timeout=10, what="the node's namespaces", child=self.anchor)

    def _spawn(self, name: str, argv: list[str], *, enter: bool = True) -> Child:
        """A node process in the node's cgroup (so a stop finds it and its children) and namespaces."""
        cgroup = f"{self.slot.cgroup}/system"
        if enter:
            assert self.anchor is not None
            argv = ["nsenter", f"--target={self.anchor.process.pid}", "--net", "--mount", "--", *argv]
        child = Child(
            name,
            argv,
            self.workdir,
            preexec_fn=lambda: join_cgroup(cgroup),
            env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        )
        self.children.append(child)
        return child

    def _start_containerd(self) -> None:
        state = self.workdir / "containerd"
        (state / "cni").mkdir(parents=True, exist_ok=True)
        config = state / "config.toml"
        config.write_text(containerd_config(state))
        (state / "cni" / "10-sluiceway.conflist").write_text(json.dumps(cni_config(self.slot, state), indent=2))
        containerd = self._spawn("containerd", [CONTAINERD, "--config", str(config), "--log-level", "warn"])
        wait_until(
            lambda: self.ctr("version").returncode == 0, timeout=30, what="containerd to answer", child=containerd
        )

    def ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(CTR, f"--address={self.containerd_socket}", "--namespace=k8s.io", *args, check=False)

    def import_image(self, archive: Path) -> None:
        result = self.ctr("images", "import", str(archive))
        if result.returncode != 0:
            raise RuntimeError(f"ctr images import {archive} failed:\n{result.stderr}")

    def _start_kubelet(self, kubeconfig: Path) -> None:
        root = self.workdir / "kubelet"
        root.mkdir(exist_ok=True)
        resolv = self.workdir / "resolv.conf"
        resolv.write_text("# pods that are not ClusterFirst resolve nothing: there is no DNS beyond the cluster's\n")
        config = self.workdir / "kubelet.yaml"
        config.write_text(
            yaml.safe_dump(kubelet_config(self.slot, root, self.plane.ca.pair.cert, self.containerd_socket, resolv))
        )
        self.kubelet = self._spawn(
            "kubelet",
            [
                str(self.bin / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.slot.node_ip}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self, kubeconfig: Path) -> None:
        config = self.workdir / "kube-proxy.yaml"
        config.write_text(yaml.safe_dump(kube_proxy_config(self.slot, kubeconfig)))
        self._spawn("kube-proxy", [str(self.bin / "kube-proxy"), f"--config={config}", "--v=1"])

    def _start_coredns(self, kubeconfig: Path) -> None:
        config = self.workdir / "Corefile"
        config.write_text(corefile(kubeconfig))
        self._spawn("coredns", [str(self.bin / "coredns"), "-conf", str(config)])

    def _start_scheduler(self, kubeconfig: Path) -> None:
        self._spawn(
            "kube-scheduler",
            [
                str(self.bin / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--v=1",
            ],
        )

    def wait_ready(self, timeout: float = 120) -> None:
        """Ready, and schedulable: the lifecycle controller has lifted the not-ready taint."""

        def ready() -> bool:
            node = self.plane.get(f"/api/v1/nodes/{NODE_NAME}")
            return not node["spec"].get("taints") and any(
                c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"]
            )

        wait_until(ready, timeout=timeout, what=f"node {NODE_NAME} to be Ready and untainted", child=self.kubelet)

    def logs(self) -> dict[str, str]:
        return {child.name: child.tail(60) for child in self.children}

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop(grace=5)
        self.children.clear()
        # Shims and containers outlive containerd by design: kill what is left in
        # the node's cgroups (the namespaces and their mounts die with the last one).
        kill_cgroup(self.slot.cgroup)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
