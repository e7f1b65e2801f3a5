"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and
kube-controller-manager built from the official sources (see
`hack/build-control-plane.sh`), started with generated certificates and an
admin client certificate, as controller-runtime's envtest does.

Alone it has no kubelet and no scheduler: pods stay Pending, but everything
that only talks to the API works, including garbage collection of owned
objects, Deployments and ReplicaSets, namespaces and ServiceAccounts. A
`sluiceway.devenv.node.Node` joins it to run pods for real; the API server then
listens on the node link's host address (`bind_address`) so that pods can reach
it, and authorizes kubelets with the Node authorizer.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from sluiceway.devenv.certificates import Authority, Pair, service_account_keys
from sluiceway.devenv.processes import Child, free_port, wait_until

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-control-plane.sh"


def binaries() -> Path:
    """The directory holding kube-apiserver, kube-controller-manager, kubectl,
    etcd and helm: $SLUICEWAY_BIN_DIR, or the cached build (built on first use)."""
    configured = os.environ.get("SLUICEWAY_BIN_DIR")
    if configured:
        return Path(configured)
    if not BUILD_SCRIPT.exists():
        raise RuntimeError("set SLUICEWAY_BIN_DIR: the build script is only in a source checkout")
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def start_etcd(binary: Path, workdir: Path, name: str = "etcd") -> tuple[Child, str]:
    """A single-member etcd on free local ports, its data in workdir/etcd,
    healthy when this returns: the child and its client URL."""
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    etcd = Child(
        name,
        [
            str(binary),
            f"--data-dir={workdir / 'etcd'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        workdir,
    )
    wait_until(
        lambda: b'"health":"true"' in urllib.request.urlopen(f"{url}/health", timeout=2).read(),
        timeout=60,
        what=f"{name} /health",
        child=etcd,
    )
    return etcd, url


class ControlPlane:
    """Start with `start()`, stop with `stop()` (or use it as a context manager)."""

    def __init__(
        self,
        *,
        controller_manager: bool = True,
        workdir: Path | None = None,
        bind_address: str = "127.0.0.1",
        nodes: bool = False,
    ) -> None:
        self.bin = binaries()
        self.bind_address = bind_address
        self.nodes = nodes
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="sluiceway-cp-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.with_controller_manager = controller_manager
        self.children: list[Child] = []
        self.port = 0
        self.kubeconfig = self.workdir / "admin.kubeconfig"

    @property
    def url(self) -> str:
        return f"https://{self.bind_address}:{self.port}"

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(exist_ok=True)
        self.ca = Authority(pki)
        serving = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            server=True,
            hosts=(
                "localhost",
                "127.0.0.1",
                self.bind_address,
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        self.admin = self.ca.issue("admin", "admin", organization="system:masters")
        self.sa = service_account_keys(pki)
        self._start_etcd()
        self._start_apiserver(serving)
        self.write_kubeconfig(self.kubeconfig, self.admin)
        if self.with_controller_manager:
            self._start_controller_manager()

    def _start_etcd(self) -> None:
        etcd, self.etcd_url = start_etcd(self.bin / "etcd", self.workdir)
        self.children.append(etcd)

    def _start_apiserver(self, serving: Pair) -> None:
        self.port = free_port()
        self._apiserver_argv = [
            str(self.bin / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={self.bind_address}",
            f"--secure-port={self.port}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={self.ca.pair.cert}",
            # Node: kubelets (system:node:<name>) may touch only their own node and pods.
            "--authorization-mode=Node,RBAC",
            # For logs, exec and port-forward, as a cluster admin.
            f"--kubelet-client-certificate={self.admin.cert}",
            f"--kubelet-client-key={self.admin.key}",
            "--kubelet-preferred-address-types=InternalIP",  # node names are in no resolver
            f"--service-account-issuer=https://{self.bind_address}:{self.port}",
            f"--service-account-key-file={self.sa.cert}",
            f"--service-account-signing-key-file={self.sa.key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            f"--cert-dir={self.workdir / 'pki'}",
            # Without a controller manager nothing creates ServiceAccounts for pods.
            *([] if self.with_controller_manager else ["--disable-admission-plugins=ServiceAccount"]),
        ]
        self._launch_apiserver()

    def _launch_apiserver(self, position: int | None = None) -> None:
        self.apiserver = Child("kube-apiserver", self._apiserver_argv, self.workdir)
        # Keep its place among the children: they are stopped in reverse order of start.
        self.children.insert(len(self.children) if position is None else position, self.apiserver)
        wait_until(
            lambda: self.get("/readyz") == "ok", timeout=120, what="kube-apiserver /readyz", child=self.apiserver
        )

    def restart_apiserver(self) -> None:
        """Kill the API server (SIGKILL: a crash, not a drain) and start it again
        on the same port, certificates and etcd; return once it is ready."""
        position = self.children.index(self.apiserver)
        self.apiserver.kill()
        self.children.remove(self.apiserver)
        self._launch_apiserver(position)

    def _start_controller_manager(self) -> None:
        kcm = Child(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--service-account-private-key-file={self.sa.key}",
                f"--root-ca-file={self.ca.pair.cert}",
                "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,"
                "-node-route-controller,-persistentvolume-binder,-attachdetach,-persistentvolume-expander"
                # With a node, its lifecycle controller lifts the not-ready taint the kubelet registers with.
                + ("" if self.nodes else ",-nodelifecycle"),
                "--concurrent-gc-syncs=5",
            ],
            self.workdir,
        )
        self.children.append(kcm)
        # The ServiceAccount controller creating `default` in `default` is a sign of life.
        wait_until(
            lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default") is not None,
            timeout=60,
            what="kube-controller-manager to create the default ServiceAccount",
            child=kcm,
        )

    def ssl_context(self, client: Pair | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.pair.cert))
        pair = client or self.admin
        context.load_cert_chain(str(pair.cert), str(pair.key))
        return context

    def get(self, path: str) -> Any:
        """GET a path as admin; JSON is decoded, text returned as is."""
        with urllib.request.urlopen(self.url + path, context=self.ssl_context(), timeout=5) as response:
            body = response.read().decode()
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            return body

    def write_kubeconfig(
        self, path: Path, client: Pair | None = None, *, token: str | None = None, user: str = "admin"
    ) -> Path:
        """A kubeconfig for the admin certificate, another client certificate, or a bearer token."""
        credentials: dict[str, str]
        if token is not None:
            credentials = {"token": token}
        else:
            pair = client or self.admin
            credentials = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "sluiceway-local",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca.pair.cert)},
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "sluiceway-local", "context": {"cluster": "sluiceway-local", "user": user}}],
            "current-context": "sluiceway-local",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "kubectl"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args],
            input=input,
            text=True,
            capture_output=True,
            check=check,
        )

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        self.children.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
