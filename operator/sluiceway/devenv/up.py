"""`make up` / `sluiceway up`: the embedded defaults in the foreground.

Starts a local PostgreSQL and a local control plane, applies the CRDs, runs the
operator as a child process, prints how to reach it, and on Ctrl-C stops
everything it started."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child, free_port, wait_until

BANNER = """
Sluiceway is up: a local kube-apiserver, PostgreSQL and the operator.

  export KUBECONFIG={kubeconfig}

Try first:
  kubectl apply -f {examples}/
  kubectl get sluiceway
  python -m sluiceway worker {examples}/workers.py --url {api} --namespace default
  kubectl get workflowruns

The HTTP API is at {api} (OpenAPI document at {api}/docs).

Logs: {logs}
Press Ctrl-C to stop everything.
"""


def api_port(preferred: int = 8080) -> int:
    """8080 when it is free, else any free port."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            return free_port()


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


def main(state: Path) -> int:
    state = state.resolve()
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    print("starting PostgreSQL and the control plane (the first run builds it from source)...", flush=True)
    with LocalPostgres(workdir=state / "postgres") as pg, ControlPlane(workdir=state / "cluster") as cluster:
        kubeconfig = state / "kubeconfig"
        shutil.copy(cluster.kubeconfig, kubeconfig)
        kubeconfig.chmod(0o600)
        subprocess.run(
            [str(cluster.bin / "kubectl"), f"--kubeconfig={kubeconfig}", "apply", "-f", str(REPO_ROOT / "crds")],
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
        port = api_port()
        operator = start_operator(state, kubeconfig, pg.dsn, port)
        api = f"http://127.0.0.1:{port}"
        try:
            wait_until(
                lambda: urllib.request.urlopen(f"{api}/readyz", timeout=2).status == 200,
                timeout=60,
                what="the operator's API",
                child=operator,
            )
            print(
                BANNER.format(kubeconfig=kubeconfig, examples=REPO_ROOT / "examples", logs=state, api=api), flush=True
            )
            while not stop.wait(1.0):
                if not operator.alive():
                    print(f"the operator exited:\n{operator.tail()}", file=sys.stderr)
                    return 1
        finally:
            print("stopping...", flush=True)
            operator.stop()
    print("stopped.")
    return 0
