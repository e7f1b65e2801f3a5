"""A PostgreSQL cluster managed by Patroni (Debian's package): a primary and a
synchronous standby, each a "host" of its own (a Patroni process and the
PostgreSQL it runs), their distributed configuration in an etcd of their own.
The operator reaches the primary through a DSN naming both hosts with
`target_session_attrs=read-write`, as it would behind any Patroni or
CloudNativePG cluster (docs/ha.md).

Killing a host is SIGKILL to both of its process groups at once (Patroni runs
PostgreSQL in a session of its own, so that a Patroni restart leaves it up):
nothing on that host gets to say goodbye, as when a machine dies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluiceway.devenv.controlplane import binaries, start_etcd
from sluiceway.devenv.postgres import BIN, _server_user
from sluiceway.devenv.processes import Child, free_port, wait_until

SCOPE = "sluiceway"
# Failover within ~10 s of a host's death: the leader key lives `ttl` seconds,
# and every member looks every `loop_wait`. Patroni's defaults are 30/10.
TTL, LOOP_WAIT, RETRY_TIMEOUT = 10, 1, 3


def patroni_installed() -> bool:
    return shutil.which("patroni") is not None


@dataclass
class Host:
    name: str
    pg_port: int
    api_port: int
    workdir: Path
    child: Child | None = None

    @property
    def data(self) -> Path:
        return self.workdir / "data"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


class PatroniCluster:
    """`with PatroniCluster() as cluster:` a primary and a synchronous standby."""

    def __init__(self, members: int = 2, *, workdir: Path | None = None, synchronous: bool = True) -> None:
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="sluiceway-patroni-"))
        self.synchronous = synchronous
        self.user = _server_user()
        self.hosts = [Host(f"pg{i}", free_port(), free_port(), self.workdir / f"pg{i}") for i in range(members)]
        self.etcd: Child | None = None
        self.etcd_url = ""

    @property
    def dsn(self) -> str:
        hosts = ",".join(f"127.0.0.1:{h.pg_port}" for h in self.hosts)
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def __enter__(self) -> PatroniCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)
        self._start_etcd()
        for host in self.hosts:
            self.start_host(host)
            # One at a time: the first bootstraps the cluster, the next clones it.
            wait_until(lambda h=host: self._member(h) is not None, timeout=90, what=f"{host.name} to join")
        wait_until(self._healthy, timeout=90, what="a primary and a streaming synchronous standby")

    def _start_etcd(self) -> None:
        self.etcd, self.etcd_url = start_etcd(binaries() / "etcd", self.workdir, "patroni-etcd")

    def start_host(self, host: Host) -> None:
        """Start (or bring back) a host: a fresh one clones the primary, a dead
        primary rejoins as a standby, rewound to the new timeline."""
        host.workdir.mkdir(parents=True, exist_ok=True)
        config = host.workdir / "patroni.json"  # JSON is YAML
        config.write_text(json.dumps(self._config(host), indent=2))
        if self.user:
            subprocess.run(["chown", "-R", self.user, str(host.workdir)], check=True)
        argv = ["patroni", str(config)]
        host.child = Child(f"patroni-{host.name}", argv, host.workdir, user=self.user)

    def _config(self, host: Host) -> dict[str, Any]:
        return {
            "scope": SCOPE,
            "name": host.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{host.api_port}", "connect_address": f"127.0.0.1:{host.api_port}"},
            "etcd3": {"hosts": self.etcd_url.removeprefix("http://")},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL,
                    "loop_wait": LOOP_WAIT,
                    "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 0 if self.synchronous else 1048576,
                    "synchronous_mode": self.synchronous,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "max_connections": 300,
                            "synchronous_commit": "on",
                            # The suite kills processes, never the machine: the page cache survives.
                            # full_page_writes stays on: pg_rewind needs it to rejoin a dead primary.
                            "fsync": "off",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{host.pg_port}",
                "connect_address": f"127.0.0.1:{host.pg_port}",
                "data_dir": str(host.data),
                "bin_dir": str(BIN),
                "pgpass": str(host.workdir / "pgpass"),
                # A dead primary that cannot be rewound is cloned again rather than left out.
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {"unix_socket_directories": str(host.workdir), "shared_buffers": "128MB"},
            },
        }

    # -- what the cluster says about itself ---------------------------------

    def members(self) -> list[dict[str, Any]]:
        for host in self.hosts:
            try:
                with urllib.request.urlopen(f"{host.api}/cluster", timeout=2) as answer:
                    found: list[dict[str, Any]] = json.loads(answer.read())["members"]
                    return found
            except OSError:
                continue
        return []

    def _member(self, host: Host) -> dict[str, Any] | None:
        up = ("running", "streaming")
        return next((m for m in self.members() if m["name"] == host.name and m["state"] in up), None)

    def primary(self) -> Host | None:
        leader = next((m["name"] for m in self.members() if m["role"] == "leader" and m["state"] == "running"), None)
        return next((h for h in self.hosts if h.name == leader), None)

    def _healthy(self) -> bool:
        roles = {m["role"] for m in self.members() if m["state"] in ("running", "streaming")}
        wanted = "sync_standby" if self.synchronous else "replica"
        return "leader" in roles and wanted in roles

    def wait_healthy(self, timeout: float = 120) -> None:
        wait_until(self._healthy, timeout=timeout, what="a primary and a streaming standby again")

    # -- faults ---------------------------------------------------------------

    def kill_host(self, host: Host) -> None:
        """SIGKILL Patroni and PostgreSQL of `host` at the same instant."""
        leaders = [host.child.process.pid if host.child else None, host.postmaster_pid()]
        groups = set()
        for pid in filter(None, leaders):
            try:
                groups.add(os.getpgid(pid))
            except ProcessLookupError:
                pass
        for group in groups - {os.getpgrp()}:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if host.child is not None:
            host.child.kill()
            host.child = None

    def wait_primary_other_than(self, name: str, timeout: float = 60) -> Host:
        """The standby Patroni promotes once the dead primary's leader key expires."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = self.primary()
            if new is not None and new.name != name:
                return new
            time.sleep(0.2)
        raise TimeoutError(f"no primary other than {name} after {timeout:.0f} s")

    def switchover(self, timeout: float = 60) -> tuple[str, str]:
        """A planned switchover to the synchronous standby: (old, new) primary names."""
        old = self.primary()
        assert old is not None, "no primary to switch over from"
        body = json.dumps({"leader": old.name}).encode()
        request = urllib.request.Request(
            f"{old.api}/switchover", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            answer.read()
        return old.name, self.wait_primary_other_than(old.name, timeout).name

    def stop(self) -> None:
        for host in self.hosts:
            self.kill_host(host)
        if self.etcd is not None:
            self.etcd.stop()
            self.etcd = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
