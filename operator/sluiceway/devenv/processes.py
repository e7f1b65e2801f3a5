"""Child processes that are always stopped (SIGTERM, a grace period,
SIGKILL), and the ports they listen on: reserved so that two `make up` never
pick the same one, and checked to be the child's own before anyone is told
its address."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Lock files shared by the processes of this user on this machine (flock:
# released by the kernel when the holder exits, however it exits).
LOCKS = Path(tempfile.gettempdir()) / f"sluiceway-locks-{os.getuid()}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Lock:
    """An exclusive lock on a name, across this user's processes, held until
    released or until the process ends."""

    def __init__(self, name: str, fd: int) -> None:
        self.name = name
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def try_lock(name: str) -> Lock | None:
    """The lock on `name`, or None while another process (or another caller
    in this one) holds it."""
    LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(LOCKS / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EACCES):
            return None
        raise
    return Lock(name, fd)


def can_bind(host: str, port: int) -> bool:
    with socket.socket() as probe:
        # As a server binds: SO_REUSEADDR, so a port in TIME_WAIT counts as free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class Reservation:
    """A port, and the lock that keeps other reservations off it."""

    port: int
    lock: Lock

    def release(self) -> None:
        self.lock.release()


def reserve_port(host: str = "127.0.0.1", preferred: int | None = None) -> Reservation:
    """A port that can be bound on `host` now and that no other reservation
    holds: `preferred` when it is both, else one the kernel offers. Hold it
    until the server listens on it. A process that does not reserve can still
    take the port first: `listens` tells, once the server should listen."""
    if preferred is not None:
        lock = try_lock(f"port-{preferred}")
        if lock is not None and can_bind(host, preferred):
            return Reservation(preferred, lock)
        if lock is not None:
            lock.release()
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((host, 0))
            port: int = probe.getsockname()[1]
        lock = try_lock(f"port-{port}")
        if lock is not None:
            return Reservation(port, lock)
    raise RuntimeError(f"no free port to reserve on {host}")


def _listening_sockets(port: int) -> set[str]:
    """The sockets listening on `port` (any address), as /proc/<pid>/fd names them."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            next(rows, None)  # the header
            for row in rows:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rpartition(":")[2], 16) == port:  # 0A: LISTEN
                    found.add(f"socket:[{inode}]")
    return found


def _group(leader: int) -> Iterator[int]:
    """The processes of `leader`'s process group (a Child leads its own)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rpartition(")")[2].split()[2]) == leader:  # pid (comm) state ppid pgrp
                yield int(entry)


def listens(child: Child, port: int, host: str = "127.0.0.1") -> bool:
    """Whether `child` (or a process it started) is what listens on `port`,
    rather than some other process that took the port first. Without /proc
    (not Linux) only whether something listens there while the child lives."""
    if not Path("/proc/net/tcp").exists():
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return child.alive()
        return False
    sockets = _listening_sockets(port)
    if not sockets or not child.alive():
        return False
    for pid in _group(child.process.pid):
        with contextlib.suppress(OSError):
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in sockets for fd in os.listdir(f"/proc/{pid}/fd")):
                return True
    return False


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
