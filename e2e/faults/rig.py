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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from sluiceway.devenv.controlplane import REPO_ROOT, ControlPlane
from sluiceway.devenv.postgres import LocalPostgres
from sluiceway.devenv.processes import Child, free_port
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess, start_operator
from tests.support.patroni import PatroniCluster
from tests.support.processes import stop_all
from tests.support.workers import start_worker

WORKERS_FILE = str(Path(__file__).parent / "workers.py")
AUDIT_SQL = (Path(__file__).parent / "audit.sql").read_text()
DRIVER = "fault-driver"  # application_name of the suite's own sessions: never terminated by a fault
LEASE_NAME = "sluiceway-operator"
# What a restart or a terminated session looks like to the suite's own sessions (the
# store's StoreUnavailable, for the same outage classes); anything else is an answer.
UNAVAILABLE = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
)


class Replica:
    """One operator replica. Each start is a new incarnation with a new
    identity, as a rescheduled pod gets a new name, so a restart has to win
    the Lease like any other replica."""

    def __init__(self, base: str, database_url: str, kubeconfig: Path, settings: dict[str, str], logs: Path) -> None:
        self.base = base
        self.port = free_port()
        self.database_url = database_url
        self.kubeconfig = kubeconfig
        self.settings = settings
        self.logs = logs
        self.incarnation = 0
        self.process: OperatorProcess | None = None
        self.paused = False

    @property
    def identity(self) -> str:
        return f"{self.base}-{self.incarnation}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def child(self) -> Child | None:
        return self.process.child if self.process is not None else None

    def start(self) -> None:
        self.incarnation += 1
        self.process = start_operator(
            self.identity,
            self.database_url,
            self.logs,
            kubeconfig=self.kubeconfig,
            port=self.port,
            log_level="INFO",
            settings={**self.settings, "SLUICEWAY_POD_NAME": self.identity},
            timeout=90,
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.killpg(self.process.child.process.pid, sig)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()


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
            "FAULT_SEED": str(self.seed),
            "FAULT_JOURNAL": str(journal),
            "SLUICEWAY_WORKER_ID": worker_id,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        }
        child = start_worker(worker_id, WORKERS_FILE, url, self.namespace, self.logs, env=env)
        process = WorkerProcess(slot, worker_id, url, child, journal)
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
    postgres: LocalPostgres | PatroniCluster
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


async def install_audit(db: Db) -> None:
    await db.script(AUDIT_SQL)
