"""The operator as a process: a part that dies ends it with status 1 and its
traceback in the log, so Kubernetes restarts it; SIGTERM ends it with 0."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

from sluiceway.devenv.processes import free_port, wait_until


def _operator(database_url: str, port: int) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SLUICEWAY_DATABASE_URL": database_url,
        "SLUICEWAY_KUBERNETES": "false",
        "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{port}",
        "SLUICEWAY_LOG_LEVEL": "WARNING",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "sluiceway", "operator"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_dead_api_server_ends_the_process_with_status_1(database_url: str) -> None:
    with socket.socket() as taken:  # another process already listens on the API's port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = _operator(database_url, taken.getsockname()[1])
        output, _ = process.communicate(timeout=90)
    assert process.returncode == 1, output
    assert "the API server part of the operator died" in output and "Traceback" in output
    assert "exiting with status 1 so that Kubernetes restarts this replica" in output


def test_sigterm_ends_the_process_with_status_0(database_url: str) -> None:
    port = free_port()
    process = _operator(database_url, port)
    try:
        wait_until(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200,
            timeout=60,
            what="the operator's /readyz",
        )
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
