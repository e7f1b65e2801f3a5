"""Child processes that are always stopped: SIGTERM, a grace period, SIGKILL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Child:
    """One long-running process with its output in a log file."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, **popen: Any) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            list(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **popen,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the process group at once and reap it."""
        if self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(10)
        self._log.close()

    def stop(self, grace: float = 10.0) -> None:
        if self.alive():
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(5)
        self._log.close()


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, child: Child | None = None) -> None:
    """Poll `check` until it holds; fail with the child's log tail if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None and not child.alive():
            raise RuntimeError(f"{child.name} exited while waiting for {what}:\n{child.tail()}")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not up yet; any error means "try again"
            pass
        time.sleep(0.1)
    tail = f":\n{child.tail()}" if child is not None else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{tail}")
