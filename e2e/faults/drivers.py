"""The load driver and the fault driver. Both draw every choice from one
seeded RNG each, so a seed replays the same plan: which runs, which faults in
which order, which targets among those that qualify. Timing on a loaded
machine still varies between replays; the invariants hold for every
interleaving, which is the point."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg

from e2e.faults.rig import DRIVER, Db, Replica, Rig, WorkerProcess
from e2e.faults.workload import WORKFLOW
from sluiceway.devenv.postgres import LocalPostgres
from tests.support.patroni import PatroniCluster

API = "sluiceway.dev/v1beta1"
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)

WORKER_KILL = "worker_sigkill"
WORKER_PAUSE = "worker_sigstop_past_lease"
LEADER_KILL = "leader_sigkill"
LEADER_PAUSE = "leader_sigstop"
DB_SESSIONS = "pg_terminate_backend"
DB_RESTART = "postgres_immediate_restart"
APISERVER_RESTART = "apiserver_restart"
TERMINATE_RACE = "terminate_racing_release"
KINDS = (
    WORKER_KILL,
    WORKER_PAUSE,
    LEADER_KILL,
    LEADER_PAUSE,
    DB_SESSIONS,
    DB_RESTART,
    APISERVER_RESTART,
    TERMINATE_RACE,
)
# With PostgreSQL under Patroni (a primary and a synchronous standby; e2e/faults/test_failover.py).
PRIMARY_KILL = "primary_host_sigkill"
SWITCHOVER = "patroni_switchover"
FAILOVER_KINDS = (PRIMARY_KILL, SWITCHOVER, WORKER_KILL, LEADER_KILL, DB_SESSIONS)
# Past the Lease's 10 s duration, so the other replica takes over while this one is frozen.
LEADER_PAUSE_SECONDS = 12.0


# --- load -----------------------------------------------------------------------


@dataclass
class Start:
    """One logical start: the same correlationId on every retry."""

    key: str
    acked: str | None = None  # the run id from a 201
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    refused: int | None = None  # a 4xx: the API said no and created nothing


@dataclass
class LoadLog:
    starts: list[Start] = field(default_factory=list)
    terminates: dict[str, int] = field(default_factory=dict)  # run id -> the API's answer
    workflow_runs: list[str] = field(default_factory=list)  # names the API server accepted

    def acked(self) -> dict[str, Start]:
        return {s.acked: s for s in self.starts if s.acked}


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    async with session.post(url, json=body, timeout=HTTP_TIMEOUT) as response:
        try:
            payload = await response.json(content_type=None)
        except (ValueError, aiohttp.ContentTypeError):
            payload = None
        return response.status, payload if isinstance(payload, dict) else None


class LoadDriver:
    """Starts runs through the HTTP API at a steady pace, terminates a seeded
    share of them, and creates WorkflowRuns with kubectl."""

    def __init__(self, rig: Rig, rng: random.Random, session: aiohttp.ClientSession) -> None:
        self.rig, self.rng, self.session = rig, rng, session
        self.log = LoadLog()
        self._pending: list[asyncio.Task[None]] = []

    async def run(self, runs: int, workflow_runs: int, seconds: float, terminate_share: float) -> None:
        kube_times = sorted(self.rng.uniform(0, seconds) for _ in range(workflow_runs))
        self._pending.append(asyncio.create_task(self._workflow_runs(kube_times)))
        started = time.monotonic()
        for index in range(runs):
            await asyncio.sleep(max(0.0, started + index * seconds / runs - time.monotonic()))
            start = Start(key=f"load-{index}")
            self.log.starts.append(start)
            terminate_after = self.rng.uniform(0.2, 4.0) if self.rng.random() < terminate_share else None
            order = self.rng.random()
            self._pending.append(asyncio.create_task(self._start(start, order, terminate_after)))
        await asyncio.gather(*self._pending)

    async def probe(self, key: str) -> Start:
        """One more start, tracked like the load's (the invariants count it)."""
        start = Start(key=key)
        self.log.starts.append(start)
        await self._start(start, 0.0, None)
        return start

    def _replica_order(self, draw: float) -> list[Replica]:
        replicas = list(self.rig.replicas)
        return replicas if draw < 0.5 else replicas[::-1]

    async def _start(self, start: Start, draw: float, terminate_after: float | None) -> None:
        body = {"name": WORKFLOW, "input": {"order": start.key}, "correlationId": start.key}
        deadline = time.monotonic() + 90
        while start.acked is None and start.refused is None and time.monotonic() < deadline:
            replica = self._replica_order(draw)[start.attempts % 2]
            start.attempts += 1
            try:
                status, payload = await _post(
                    self.session, f"{replica.url}/v1/ns/{self.rig.namespace}/executions", body
                )
            except (TimeoutError, aiohttp.ClientError) as error:
                start.errors.append(type(error).__name__)
                await asyncio.sleep(0.5)
                continue
            if status == 201 and payload is not None:
                start.acked = str(payload["id"])
            elif 400 <= status < 500:
                start.refused = status
            else:
                start.errors.append(f"HTTP {status}")
                await asyncio.sleep(0.5)
        if start.acked and terminate_after is not None:
            await asyncio.sleep(terminate_after)
            await self.terminate(start.acked)

    async def terminate(self, run_id: str) -> int:
        """Terminate through whichever replica answers; the answer (202, or
        409 when the run had already ended) is logged."""
        for attempt in range(20):
            replica = self.rig.replicas[attempt % 2]
            try:
                status, _ = await _post(
                    self.session,
                    f"{replica.url}/v1/ns/{self.rig.namespace}/executions/{run_id}/terminate",
                    {"reason": "terminated by the fault suite"},
                )
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.5)
                continue
            if status < 500:
                self.log.terminates[run_id] = status
                return status
            await asyncio.sleep(0.5)
        self.log.terminates[run_id] = 0
        return 0

    async def _workflow_runs(self, times: list[float]) -> None:
        started = time.monotonic()
        for index, at in enumerate(times):
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            name = f"kube-run-{index}"
            await asyncio.to_thread(self._create_workflow_run, name)

    def _create_workflow_run(self, name: str) -> None:
        """Retry until the API server has it: it may be restarting."""
        manifest = {
            "apiVersion": API,
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": {"workflow": WORKFLOW, "input": {"order": name}},
        }
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            result = self.rig.kube.run(
                "create", "-n", self.rig.namespace, "-f", "-", input=json.dumps(manifest), check=False
            )
            if result.returncode == 0 or "AlreadyExists" in result.stderr:
                self.log.workflow_runs.append(name)
                return
            time.sleep(0.5)
        raise AssertionError(f"the API server never accepted WorkflowRun {name}")


# --- faults -----------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    at: float  # seconds since the load began
    detail: str


@dataclass
class FaultLog:
    injected: list[Fault] = field(default_factory=list)
    # (task id, epoch) a SIGSTOPped worker held when frozen, and when it was thawed (epoch seconds)
    paused_leases: list[tuple[str, int, str]] = field(default_factory=list)
    thawed_at: dict[str, float] = field(default_factory=dict)
    # (task id, epoch, the API's code for the item): stale results replayed on purpose
    stale_replays: list[tuple[str, int, int]] = field(default_factory=list)
    raced_runs: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    # seconds from a primary's death (or a switchover's request) to the next task transition committed
    resumed_after: dict[str, list[float]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.injected))


def plan(rng: random.Random, count: int, kinds_: tuple[str, ...] = KINDS) -> list[str]:
    """`count` faults: every kind at least once (when count allows), the rest
    drawn at random, all in a seeded order."""
    kinds = list(kinds_)
    rng.shuffle(kinds)
    chosen = kinds[:count] + [rng.choice(kinds_) for _ in range(max(0, count - len(kinds)))]
    rng.shuffle(chosen)
    return chosen


class FaultDriver:
    def __init__(self, rig: Rig, rng: random.Random, db: Db, load: LoadDriver, session: aiohttp.ClientSession) -> None:
        self.rig, self.rng, self.db, self.load, self.session = rig, rng, db, load, session
        self.log = FaultLog()
        self.began = time.monotonic()

    async def run(self, kinds: list[str], gap: tuple[float, float]) -> None:
        routines = {
            WORKER_KILL: self.worker_kill,
            WORKER_PAUSE: self.worker_pause,
            LEADER_KILL: self.leader_kill,
            LEADER_PAUSE: self.leader_pause,
            DB_SESSIONS: self.db_sessions,
            DB_RESTART: self.db_restart,
            APISERVER_RESTART: self.apiserver_restart,
            TERMINATE_RACE: self.terminate_race,
            PRIMARY_KILL: self.primary_kill,
            SWITCHOVER: self.switchover,
        }
        for kind in kinds:
            await asyncio.sleep(self.rng.uniform(*gap))
            at = round(time.monotonic() - self.began, 1)
            detail = await routines[kind]()
            if kind in self.log.unavailable:
                print(f"  fault skipped at {at:6.1f}s {kind}: {detail}")
                continue
            self.log.injected.append(Fault(kind, at, detail))
            print(f"  fault {len(self.log.injected):3d} at {at:6.1f}s {kind}: {detail}")

    # -- workers -------------------------------------------------------------

    async def _leases_by_worker(self) -> dict[str, list[tuple[str, int]]]:
        rows = await self.db.fetch(
            "SELECT worker_id, id::text AS id, epoch FROM tasks WHERE status = 'IN_PROGRESS' AND type = 'SIMPLE'"
        )
        held: dict[str, list[tuple[str, int]]] = {}
        for row in rows:
            held.setdefault(row["worker_id"], []).append((row["id"], row["epoch"]))
        return held

    async def _busy_worker(self) -> tuple[WorkerProcess, list[tuple[str, int]]]:
        """A live worker that holds leases right now (waiting briefly for one to)."""
        deadline = time.monotonic() + 10
        while True:
            held = await self._leases_by_worker()
            candidates = sorted(
                (w for w in self.rig.workers.live.values() if held.get(w.id) and not w.paused), key=lambda w: w.id
            )
            if candidates or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        if not candidates:
            live = sorted((w for w in self.rig.workers.live.values() if not w.paused), key=lambda w: w.id)
            worker = self.rng.choice(live)
            return worker, []
        worker = self.rng.choice(candidates)
        return worker, held[worker.id]

    async def _replace(self, worker: WorkerProcess) -> WorkerProcess:
        await asyncio.sleep(self.rng.uniform(0.2, 1.0))
        return self.rig.workers.start(worker.slot, worker.url)

    async def worker_kill(self) -> str:
        worker, held = await self._busy_worker()
        worker.child.kill()
        replacement = await self._replace(worker)
        return f"killed {worker.id} holding {len(held)} leases; {replacement.id} replaces it"

    async def worker_pause(self) -> str:
        worker, held = await self._busy_worker()
        worker.signal(signal.SIGSTOP)
        worker.paused = True
        frozen = time.monotonic()
        # Thaw only once every lease it held has been taken back: its results are late by then.
        over = not held
        while not over and time.monotonic() - frozen < 60:
            rows = await self.db.fetch(
                "SELECT count(*) AS n FROM tasks t JOIN unnest($1::uuid[], $2::int[]) AS h(id, epoch)"
                " ON t.id = h.id AND t.epoch = h.epoch WHERE t.status = 'IN_PROGRESS'",
                [uuid.UUID(t) for t, _ in held],
                [e for _, e in held],
            )
            over = rows[0]["n"] == 0
            if not over:
                await asyncio.sleep(0.1)
        worker.signal(signal.SIGCONT)
        worker.paused = False
        self.log.thawed_at[worker.id] = time.time()
        took = f"froze {worker.id} holding {len(held)} leases for {time.monotonic() - frozen:.1f}s"
        if not held:
            return took
        if not over:  # only leases known to be over are late; a timeout here claims nothing
            return f"{took}, and they were still leased when it was thawed"
        self.log.paused_leases += [(task, epoch, worker.id) for task, epoch in held]
        task, epoch = held[0]
        code = await self._replay_stale_result(task, epoch)
        self.log.stale_replays.append((task, epoch, code))
        return f"{took}; a replayed result of epoch {epoch} got {code}"

    async def _replay_stale_result(self, task_id: str, epoch: int) -> int:
        """What the frozen worker would send: a COMPLETED result under its old epoch."""
        body = {"results": [{"taskId": task_id, "epoch": epoch, "status": "COMPLETED", "output": {"late": True}}]}
        for attempt in range(20):
            replica = self.rig.replicas[attempt % 2]
            try:
                status, payload = await _post(
                    self.session, f"{replica.url}/v1/ns/{self.rig.namespace}/tasks/results", body
                )
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.5)
                continue
            if status < 500 and payload is not None:
                return int(payload["results"][0]["code"])
            await asyncio.sleep(0.5)
        return 0

    async def terminate_race(self) -> str:
        """Kill a worker, and terminate a run of its the instant that run's lease
        is taken back: the terminate races the decider scheduling the retry
        and another worker leasing it."""
        worker, held = await self._busy_worker()
        worker.child.kill()
        replacement = await self._replace(worker)
        if not held:
            return f"killed {worker.id}, which held nothing to race; {replacement.id} replaces it"
        ids = [uuid.UUID(t) for t, _ in held]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = await self.db.fetch(
                "SELECT execution_id::text AS run FROM tasks WHERE id = ANY($1) AND status <> 'IN_PROGRESS' LIMIT 1",
                ids,
            )
            if rows:
                run = rows[0]["run"]
                code = await self.load.terminate(run)
                self.log.raced_runs.append(run)
                return f"killed {worker.id}; terminated run {run} as its lease expired ({code})"
            await asyncio.sleep(0.02)
        return f"killed {worker.id}; no lease came back within 30 s"

    # -- replicas ------------------------------------------------------------

    async def _leader(self) -> Replica:
        identity = await asyncio.to_thread(self.rig.leader_identity)
        leader = self.rig.replica(identity)
        if leader is None or leader.paused:
            leader = self.rng.choice(self.rig.live_replicas())
        return leader

    async def leader_kill(self) -> str:
        leader = await self._leader()
        old = leader.identity
        leader.kill()
        await asyncio.sleep(self.rng.uniform(0.5, 3.0))
        await asyncio.to_thread(leader.start)
        holder = await asyncio.to_thread(self.rig.leader_identity)
        return f"killed {old}; restarted as {leader.identity}; the Lease is held by {holder}"

    async def leader_pause(self) -> str:
        leader = await self._leader()
        leader.signal(signal.SIGSTOP)
        leader.paused = True
        await asyncio.sleep(LEADER_PAUSE_SECONDS)
        holder = await asyncio.to_thread(self.rig.leader_identity)
        leader.signal(signal.SIGCONT)
        leader.paused = False
        return f"froze {leader.identity} for {LEADER_PAUSE_SECONDS:.0f}s; the Lease was then held by {holder}"

    # -- PostgreSQL and the API server ---------------------------------------

    async def db_sessions(self) -> str:
        count = self.rng.randint(1, 6)
        rows = await self.db.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
            " AND application_name <> $1 AND pid <> pg_backend_pid() ORDER BY pid",
            DRIVER,
        )
        pids = [r["pid"] for r in rows]
        victims = self.rng.sample(pids, min(count, len(pids)))
        await self.db.fetch("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", victims)
        return f"terminated {len(victims)} of {len(pids)} sessions"

    async def db_restart(self) -> str:
        assert isinstance(self.rig.postgres, LocalPostgres), "the Patroni rig restarts by switchover"
        began = time.monotonic()
        await self.db.close()
        await asyncio.to_thread(self.rig.postgres.restart)
        return f"immediate restart, accepting again after {time.monotonic() - began:.1f}s"

    async def _resumed(self, kind: str, since: float) -> float:
        """How long after `since` dispatch works again: a probe run started
        (retried through the outage as any start) has its first task leased."""
        start = await self.load.probe(f"probe-{kind}-{len(self.log.resumed_after.get(kind, []))}")
        leased: list[asyncpg.Record] = []
        while start.acked and not leased and time.monotonic() - since < 180:
            leased = await self.db.fetch(
                "SELECT 1 FROM fault_task_history WHERE execution_id = $1 AND new_status = 'IN_PROGRESS' LIMIT 1",
                uuid.UUID(start.acked),
                patience=120,
            )
            if not leased:
                await asyncio.sleep(0.1)
        took = time.monotonic() - since
        self.log.resumed_after.setdefault(kind, []).append(round(took, 1) if leased else -1)
        return took

    async def primary_kill(self) -> str:
        cluster = self.rig.postgres
        assert isinstance(cluster, PatroniCluster), "a primary to kill needs the Patroni rig"
        primary = await asyncio.to_thread(cluster.primary)
        assert primary is not None, "no primary"
        began = time.monotonic()
        cluster.kill_host(primary)
        await self.db.close()
        promoted = await asyncio.to_thread(cluster.wait_primary_other_than, primary.name, 90)
        promoted_after = time.monotonic() - began
        resumed = await self._resumed(PRIMARY_KILL, began)
        # The dead host comes back as a standby (rewound), so the next fault finds two again.
        cluster.start_host(primary)
        await asyncio.to_thread(cluster.wait_healthy, 180)
        return (
            f"killed primary {primary.name}; {promoted.name} promoted after {promoted_after:.1f}s, "
            f"dispatch resumed after {resumed:.1f}s; {primary.name} rejoined after {time.monotonic() - began:.1f}s"
        )

    async def switchover(self) -> str:
        cluster = self.rig.postgres
        assert isinstance(cluster, PatroniCluster), "a switchover needs the Patroni rig"
        began = time.monotonic()
        old, new = await asyncio.to_thread(cluster.switchover, 90)
        resumed = await self._resumed(SWITCHOVER, began)
        await asyncio.to_thread(cluster.wait_healthy, 180)
        return f"switched over from {old} to {new}; dispatch resumed after {resumed:.1f}s"

    async def apiserver_restart(self) -> str:
        if self.rig.control_plane is None:
            self.log.unavailable.append(APISERVER_RESTART)
            return "not injected: the cluster is not one this suite started (SLUICEWAY_E2E_KUBECONFIG)"
        began = time.monotonic()
        await asyncio.to_thread(self.rig.control_plane.restart_apiserver)
        return f"SIGKILL and restart, ready again after {time.monotonic() - began:.1f}s"
