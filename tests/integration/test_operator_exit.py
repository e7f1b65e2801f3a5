"""The operator as a process: a part that dies ends it with status 1 and its
traceback in the log, so Kubernetes restarts it; SIGTERM ends it with 0."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.operators import start_operator


def test_a_dead_api_server_ends_the_process_with_status_1(database_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:  # another process already listens on the API's port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = start_operator("operator", database_url, tmp_path, port=taken.getsockname()[1], ready=False)
        returncode = process.child.process.wait(90)
    process.stop()  # it has exited: this closes its log
    output = process.child.log_path.read_text()
    assert returncode == 1, output
    assert "the API server part of the operator died" in output and "Traceback" in output
    assert "exiting with status 1 so that Kubernetes restarts this replica" in output


def test_sigterm_ends_the_process_with_status_0(database_url: str, tmp_path: Path) -> None:
    process = start_operator("operator", database_url, tmp_path)  # waits until its /readyz answers
    process.stop(grace=60)  # SIGTERM
    assert process.child.process.returncode == 0, process.logs()
