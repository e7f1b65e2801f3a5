"""`make up` / `sluiceway up`: the embedded defaults in the foreground.

Starts a local PostgreSQL and a local control plane, applies the CRDs, runs the
operator as a child process, prints how to reach it, and on Ctrl-C stops
everything it started. With `--node` (`make up NODE=1`, root only) a local node
joins the cluster, so pods run: worker pods of `spec.workers` run the image
`make image` builds and reach the operator's API on the node link's host
address."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

from sluiceway import __version__
from sluiceway.cli.config import write_server
from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.node import Node, NodeNetwork, build_images
from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child, Lock, Reservation, can_bind, listens, reserve_port, try_lock, wait_until

BANNER = """
Sluiceway is up: a local kube-apiserver, PostgreSQL and the operator.

In another shell (these lines work as printed, in any directory):

  export KUBECONFIG={kubeconfig}
  export PATH="{path}:$PATH"

Try first:
  kubectl apply -f {examples}/
  kubectl get sluiceway
  sluiceway worker {examples}/workers.py --url {api} --namespace default
  sluiceway runs list
  sluiceway runs watch workflowrun/album-2026-11

The web UI is at {api}/ui (runs, their graphs and timelines, gates, definitions).
The HTTP API is at {api} (OpenAPI document at {api}/docs).
{node}
Logs: {logs}
Press Ctrl-C to stop everything.
"""


def banner(kubeconfig: Path, bin_dirs: list[Path], api: str, logs: Path, node: str = "") -> str:
    """What `make up` prints: commands that work as printed on a fresh clone,
    with the directories of `sluiceway` (the project's virtual environment)
    and `kubectl` (the local control plane's) put on the PATH."""
    path = ":".join(dict.fromkeys(str(d) for d in bin_dirs))
    return BANNER.format(
        kubeconfig=kubeconfig, path=path, examples=REPO_ROOT / "examples", api=api, logs=logs, node=node
    )


def command_dir() -> Path:
    """Where the `sluiceway` command of this Python lives (the venv's bin)."""
    return Path(sys.executable).parent


NODE_BANNER = """
Pods run on a local node (kubectl get pods -A). spec.workers pods run {image}:
  kubectl apply -f {examples}/ && kubectl get workflowruns -w
The same cluster takes the Helm chart with its pods (docs/local-node.md).
"""


def serve_api(
    start: Callable[[int], Child], host: str = "127.0.0.1", preferred: int | None = 8080, attempts: int = 5
) -> tuple[Child, Reservation]:
    """Start the API server with `start(port)` on a port of its own, and return
    once the child listens there: 8080 when it is free, else any free port.
    Another `make up` choosing at the same time never gets the same port (a
    reservation); a process that takes the port before the child binds it
    makes the child exit, and the next port is tried. Nobody is told an
    address before the child is the one listening on it."""
    for _ in range(attempts):
        reservation = reserve_port(host, preferred)
        child = start(reservation.port)
        try:
            wait_until(
                functools.partial(listens, child, reservation.port, host),
                timeout=60,
                what=f"the API to listen on {host}:{reservation.port}",
                child=child,
            )
            return child, reservation
        except RuntimeError:  # the child exited
            child.stop()
            reservation.release()
            if can_bind(host, reservation.port):
                raise  # not because another process took its port: the child's log says why
            preferred = None  # taken after it was chosen: a port the kernel offers next
        except BaseException:
            child.stop()
            reservation.release()
            raise
    raise RuntimeError(f"the API could not listen on {host}: {attempts} ports were taken as it started")


def start_operator(
    state: Path, kubeconfig: Path, dsn: str, port: int, extra_env: dict[str, str] | None = None
) -> Child:
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SLUICEWAY_DATABASE_URL": dsn,
        "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
        **(extra_env or {}),
    }
    return Child("operator", [sys.executable, "-m", "sluiceway", "operator"], state, env=env)


def claim_state(state: Path) -> Lock | None:
    """The state directory, for this `sluiceway up` alone (None: another one
    runs with it). Two in one checkout would share, and delete, one."""
    return try_lock(f"state-{hashlib.sha256(str(state.resolve()).encode()).hexdigest()[:16]}")


def main(state: Path, node: bool = False) -> int:
    state = state.resolve()
    in_use = claim_state(state)
    if in_use is None:
        print(
            f"another `sluiceway up` is running with the state directory {state}: "
            "stop it first, or start this one with --state-dir elsewhere",
            file=sys.stderr,
        )
        return 1
    with in_use:
        return _up(state, node)


def _up(state: Path, node: bool) -> int:
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    print("starting PostgreSQL and the control plane (the first run builds it from source)...", flush=True)
    with contextlib.ExitStack() as started:
        pg = started.enter_context(LocalPostgres(workdir=state / "postgres"))
        network = started.enter_context(NodeNetwork()) if node else None
        host = network.host_ip if network else "127.0.0.1"
        cluster = started.enter_context(ControlPlane(workdir=state / "cluster", bind_address=host, nodes=node))
        # The image `make image` builds: what spec.workers without an image (the examples) runs.
        operator_env = {"SLUICEWAY_WORKER_IMAGE": f"ghcr.io/sluiceway/sluiceway:{__version__}"}
        node_banner = ""
        if network is not None:
            print("building the images and starting the node (the first run builds them)...", flush=True)
            images = build_images()
            started.enter_context(
                Node(cluster, network, images=[archive for archive, _ in images.values()], workdir=state / "node")
            )
            image = images["sluiceway"][1]
            operator_env["SLUICEWAY_WORKER_IMAGE"] = image
            node_banner = NODE_BANNER.format(image=image, examples=REPO_ROOT / "examples")
        kubeconfig = state / "kubeconfig"
        shutil.copy(cluster.kubeconfig, kubeconfig)
        kubeconfig.chmod(0o600)
        subprocess.run(
            # Server-side: the Workflow CRD, one schema per served version, is larger than
            # the last-applied annotation a client-side apply keeps (256 KiB).
            [
                str(cluster.bin / "kubectl"),
                f"--kubeconfig={kubeconfig}",
                "apply",
                "--server-side",
                "-f",
                str(REPO_ROOT / "crds"),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [
                str(cluster.bin / "kubectl"),
                f"--kubeconfig={kubeconfig}",
                "wait",
                "--for=condition=Established",
                "-f",
                str(REPO_ROOT / "crds"),
                "--timeout=60s",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )

        def operator_on(port: int) -> Child:
            # Worker pods call the API where they can reach it: the node link's host address.
            env = operator_env | {
                "SLUICEWAY_API_ADDRESS": f"{host}:{port}",
                "SLUICEWAY_API_URL": f"http://{host}:{port}",
            }
            return start_operator(state, kubeconfig, pg.dsn, port, env)

        operator, reservation = serve_api(operator_on, host)
        started.callback(reservation.release)
        api = f"http://{host}:{reservation.port}"
        try:
            wait_until(
                lambda: urllib.request.urlopen(f"{api}/readyz", timeout=2).status == 200,
                timeout=60,
                what="the operator's API",
                child=operator,
            )
            write_server(kubeconfig, api)  # so `sluiceway runs list` finds this API with no flags
            print(banner(kubeconfig, [command_dir(), cluster.bin], api, state, node_banner), flush=True)
            while not stop.wait(1.0):
                if not operator.alive():
                    print(f"the operator exited:\n{operator.tail()}", file=sys.stderr)
                    return 1
        finally:
            print("stopping...", flush=True)
            operator.stop()
    print("stopped.")
    return 0
