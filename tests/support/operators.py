"""One way to run `sluiceway operator` as a process, as a Pod runs it: its
settings in SLUICEWAY_* variables, its API on a loopback port, its output in
a log file, in a process group of its own so a signal reaches all of it.

Without a kubeconfig the operator runs the execution plane alone
(SLUICEWAY_KUBERNETES=false): the API, the deciders and the sweeper."""

from __future__ import annotations

import http.client
import os
import sys
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sluiceway.devenv.processes import Child, free_port
from tests.support.waiting import eventually

# The shared e2e operator's timers (seconds): short, so tests that wait on a
# status report or an autoscaling decision wait a second, not five.
STATUS_INTERVAL = 1.0
AUTOSCALING_INTERVAL = 1.0


@dataclass
class OperatorProcess:
    name: str
    child: Child
    database_url: str
    port: int

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self, lines: int = 200) -> str:
        return self.child.tail(lines)

    def alive(self) -> bool:
        return self.child.alive()

    def wait_ready(self, timeout: float = 60) -> None:
        eventually(lambda: answers(self.api_url), timeout=timeout, what=f"{self.name} /readyz", child=self.child)

    def kill(self) -> None:
        """SIGKILL, as a node failure or an OOM kill would."""
        self.child.kill()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds, as Kubernetes stops a Pod."""
        self.child.stop(grace)


def start_operator(
    name: str,
    database_url: str,
    logs: Path,
    *,
    kubeconfig: Path | None = None,
    port: int | None = None,
    log_level: str = "WARNING",
    settings: Mapping[str, str] | None = None,
    ready: bool = True,
    timeout: float = 60,
) -> OperatorProcess:
    """Start an operator, and unless `ready=False` wait until its API answers
    /readyz. `settings` are further SLUICEWAY_* variables, named in full."""
    port = port or free_port()
    env = {
        **os.environ,
        "SLUICEWAY_DATABASE_URL": database_url,
        "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
        "SLUICEWAY_LOG_LEVEL": log_level,
        **({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {"SLUICEWAY_KUBERNETES": "false"}),
        **(settings or {}),
    }
    child = Child(name, [sys.executable, "-m", "sluiceway", "operator"], logs, env=env)
    process = OperatorProcess(name, child, database_url, port)
    if ready:
        try:
            process.wait_ready(timeout)
        except BaseException:
            child.stop()
            raise
    return process


def answers(url: str) -> bool:
    """Whether the API at `url` is up and ready; not yet, while it refuses."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, http.client.HTTPException):
        return False
