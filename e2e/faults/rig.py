"""The processes of the fault suite, all on loopback, and the handles the
fault driver pulls: a PostgreSQL of its own that it may crash, two operator
replicas electing a leader, worker processes running the SDK, and the shared
kube-apiserver. Every process is a process-group leader, so SIGKILL, SIGSTOP
and SIGCONT reach all of it, as they would a container."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from e2e.kube import Kube
from sluiceway.api.errors import DATABASE_UNAVAILABLE
from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child, free_port, wait_until

WORKERS_FILE = str(Path(__file__).parent / "workers.py")
AUDIT_SQL = (Path(__file__).parent / "audit.sql").read_text()
DRIVER = "fault-driver"  # application_name of the suite's own sessions: never terminated by a fault
LEASE_NAME = "sluiceway-operator"
# What a restart or a terminated session looks like from a client; anything else is an answer.
UNAVAILABLE = (OSError, asyncpg.InterfaceError, *DATABASE_UNAVAILABLE)


class Replica:
    """One operator replica. Each start is a new incarnation with a new
    identity, as a rescheduled pod gets a new name, so a restart has to win
    the Lease like any other replica."""

    def __init__(self, base: str, env: dict[str, str], logs: Path) -> None:
        self.base = base
        self.port = free_port()
        self.env = env
        self.logs = logs
        self.incarnation = 0
        self.child: Child | None = None
        self.paused = False

    @property
    def identity(self) -> str:
        return f"{self.base}-{self.incarnation}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.incarnation += 1
        env = {
            **self.env,
            "SLUICEWAY_API_ADDRESS": f"127.0.0.1:{self.port}",
            "SLUICEWAY_POD_NAME": self.identity,
        }
        self.child = Child(self.identity, [sys.executable, "-m", "sluiceway", "operator"], self.logs, env=env)
        wait_until(
            lambda: urllib.request.urlopen(f"{self.url}/readyz", timeout=2).status == 200,
            timeout=90,
            what=f"{self.identity} /readyz",
            child=self.child,
        )

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    def signal(self, sig: signal.Signals) -> None:
        assert self.child is not None
        os.killpg(self.child.process.pid, sig)

    def kill(self) -> None:
        assert self.child is not None
        self.child.kill()


@dataclass
class WorkerProcess:
    slot: int
    id: str
    url: str
    child: Child
    journal: Path
    paused: bool = False

    def signal(self, sig: signal.Signals) -> None:
        os.killpg(self.child.process.pid, sig)


@dataclass
class Workers:
    """`sluiceway worker` processes; a slot is one worker's place in the fleet,
    refilled by a new process (a new identity) when one is killed."""

    namespace: str
    seed: int
    logs: Path
    every: list[WorkerProcess] = field(default_factory=list)
    live: dict[int, WorkerProcess] = field(default_factory=dict)

    def start(self, slot: int, url: str) -> WorkerProcess:
        incarnation = sum(1 for w in self.every if w.slot == slot) + 1
        worker_id = f"w{slot}-{incarnation}"
        journal = self.logs / f"journal-{worker_id}.jsonl"
        env = {
            **os.environ,
            "FAULT_SEED": str(self.seed),
            "FAULT_JOURNAL": str(journal),
            "SLUICEWAY_WORKER_ID": worker_id,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        }
        argv = [sys.executable, "-m", "sluiceway", "worker", WORKERS_FILE, "--url", url, "--namespace", self.namespace]
        process = WorkerProcess(slot, worker_id, url, Child(worker_id, argv, self.logs, env=env), journal)
        self.every.append(process)
        self.live[slot] = process
        return process

    def by_id(self, worker_id: str) -> WorkerProcess | None:
        return next((w for w in self.live.values() if w.id == worker_id), None)

    def stop(self) -> None:
        """All at once: each drains its long poll before it exits."""
        for worker in self.every:
            if worker.paused and worker.child.alive():
                worker.signal(signal.SIGCONT)
        stop_all([worker.child for worker in self.every])

    def journal(self) -> list[dict[str, Any]]:
        """Every line every worker process wrote, in no particular order."""
        lines: list[dict[str, Any]] = []
        for worker in self.every:
            if worker.journal.exists():
                for line in worker.journal.read_text().splitlines():
                    if line.strip():
                        lines.append(json.loads(line))
        return lines


class Db:
    """The suite's own sessions to the database under test. They retry through
    the outages the suite causes, so a probe never mistakes a restart for an
    answer."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: asyncpg.Connection | None = None

    async def fetch(self, query: str, *args: object, patience: float = 60.0) -> list[asyncpg.Record]:
        deadline = time.monotonic() + patience
        while True:
            try:
                conn = await self._connection()
                rows: list[asyncpg.Record] = await conn.fetch(query, *args, timeout=30)
                return rows
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await self.close()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def script(self, sql: str) -> None:
        """Run several statements (no retry: a script is not idempotent)."""
        conn = await self._connection()
        await conn.execute(sql)

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self.dsn, server_settings={"application_name": DRIVER}, timeout=5)
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                await conn.close(timeout=2)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()


@dataclass
class Rig:
    """Everything the drivers act on."""

    namespace: str
    postgres: LocalPostgres
    dsn: str
    kube: Kube
    control_plane: ControlPlane | None
    replicas: list[Replica]
    workers: Workers
    logs: Path

    def live_replicas(self) -> list[Replica]:
        return [r for r in self.replicas if r.alive() and not r.paused]

    def replica(self, identity: str | None) -> Replica | None:
        return next((r for r in self.replicas if r.identity == identity and r.alive()), None)

    def leader_identity(self) -> str | None:
        result = self.kube.run("get", "lease", LEASE_NAME, "-n", self.namespace, "-o", "json", check=False)
        if result.returncode != 0:
            return None
        holder: str | None = json.loads(result.stdout)["spec"].get("holderIdentity")
        return holder or None

    def stop(self) -> None:
        self.workers.stop()
        for replica in self.replicas:
            if replica.paused and replica.alive():
                replica.signal(signal.SIGCONT)
        stop_all([replica.child for replica in self.replicas if replica.child is not None])


def stop_all(children: Sequence[Child]) -> None:
    with ThreadPoolExecutor(max_workers=max(1, len(children))) as pool:
        list(pool.map(lambda child: child.stop(), children))


async def install_audit(db: Db) -> None:
    await db.script(AUDIT_SQL)
