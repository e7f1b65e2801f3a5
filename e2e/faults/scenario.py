"""One fault scenario from start to verdict: bring the rig up, define a
workload that exercises every gate, run the load and the faults together,
let the runs settle, check the invariants, and report."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from e2e.faults.drivers import API, KINDS, FaultDriver, LoadDriver, plan
from e2e.faults.invariants import PHASES, Violations, check_all
from e2e.faults.rig import Db, Replica, Rig, Workers, install_audit
from e2e.faults.workload import COMMON, GATES, TASK_DEFINITIONS, WORKFLOW, WORKFLOW_SPEC
from sluiceway.devenv.controlplane import ControlPlane
from sluiceway.devenv.postgres import LocalPostgres
from tests.support.kube import Kube, condition
from tests.support.patroni import PatroniCluster
from tests.support.waiting import eventually


@dataclass(frozen=True)
class Scenario:
    seed: int
    runs: int  # started through the HTTP API
    workflow_runs: int  # started as WorkflowRun objects
    load_seconds: float
    faults: int
    fault_gap: tuple[float, float]
    workers: int = 4
    terminate_share: float = 0.05
    settle_seconds: float = 120.0
    kinds: tuple[str, ...] = KINDS
    database: str = "local"  # or "patroni": a primary and a synchronous standby (tests/support/patroni.py)


@dataclass
class Report:
    scenario: Scenario
    faults: dict[str, int] = field(default_factory=dict)
    not_injected: list[str] = field(default_factory=list)  # kinds this cluster cannot take
    runs: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    violations: Violations = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def failures(self) -> list[str]:
        return [f"{name}: {v}" for name, found in self.violations.items() for v in found]

    def render(self) -> str:
        s = self.scenario
        lines = [
            f"fault suite: seed {s.seed} (replay with SLUICEWAY_FAULT_SEED={s.seed})",
            f"  faults injected: {sum(self.faults.values())} {json.dumps(self.faults, sort_keys=True)}",
            f"  runs: {json.dumps(self.runs, sort_keys=True)}",
            f"  task attempts: {json.dumps(self.tasks, sort_keys=True)}",
        ]
        lines += [f"  {name}: {json.dumps(value, sort_keys=True, default=str)}" for name, value in self.figures.items()]
        lines.append(f"  timings (s): {json.dumps({k: round(v, 1) for k, v in self.timings.items()})}")
        for name, found in self.violations.items():
            lines.append(
                f"  [{'ok' if not found else 'VIOLATED'}] {name}" + "".join(f"\n      {v}" for v in found[:10])
            )
        lines.append(f"  invariant violations: {sum(len(v) for v in self.violations.values())}")
        return "\n".join(lines)


def seed_from_environment() -> int:
    configured = os.environ.get("SLUICEWAY_FAULT_SEED")
    return int(configured) if configured else random.SystemRandom().randrange(1, 2**31)


def _manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _define(kube: Kube, namespace: str) -> None:
    kube.apply(_manifest("Semaphore", "legacy-erp", {"name": GATES.semaphore, "permits": GATES.permits}), namespace)
    objects = [("semaphore", "legacy-erp")]
    for name, extra in TASK_DEFINITIONS.items():
        resource = name.replace("_", "-")
        kube.apply(_manifest("TaskDefinition", resource, {"name": name, **COMMON, **extra}), namespace)
        objects.append(("taskdefinition", resource))
    kube.apply(_manifest("Workflow", WORKFLOW.replace("_", "-"), WORKFLOW_SPEC), namespace)
    objects.append(("workflow", WORKFLOW.replace("_", "-")))
    for kind, name in objects:
        found = eventually(
            lambda kind=kind, name=name: (c := condition(kube.get(kind, name, namespace))) and c,
            timeout=60,
            what=f"{kind}/{name} to be reconciled",
        )
        assert found["status"] == "True", f"{kind}/{name}: {found}"


async def _settle(rig: Rig, db: Db, load_names: list[str], seconds: float) -> float:
    """Wait until every run has ended and every WorkflowRun shows it; return how long it took."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        running = (await db.fetch("SELECT count(*) AS n FROM executions WHERE status = 'RUNNING'"))[0]["n"]
        if running == 0 and await asyncio.to_thread(_mirrored, rig, load_names):
            break
        await asyncio.sleep(0.5)
    return time.monotonic() - began


def _mirrored(rig: Rig, names: list[str]) -> bool:
    result = rig.kube.run("get", "workflowruns", "-n", rig.namespace, "-o", "json", check=False)
    if result.returncode != 0:
        return False
    phases = {o["metadata"]["name"]: o.get("status", {}).get("phase") for o in json.loads(result.stdout)["items"]}
    return all(phases.get(name) in PHASES.values() for name in names)


async def _figures(db: Db, rig: Rig, journal: list[dict[str, Any]], report: Report) -> None:
    runs = await db.fetch("SELECT status, count(*) AS n FROM executions GROUP BY status")
    report.runs = {r["status"]: int(r["n"]) for r in runs}
    report.runs["total"] = sum(int(r["n"]) for r in runs)
    tasks = await db.fetch("SELECT type, status, count(*) AS n FROM tasks GROUP BY type, status")
    simple = {r["status"]: int(r["n"]) for r in tasks if r["type"] == "SIMPLE"}
    report.tasks = {"worker attempts": sum(simple.values()), **{f"worker {k}": v for k, v in simple.items()}}
    report.tasks["all rows"] = sum(int(r["n"]) for r in tasks)
    # A task's work done to the end under two task ids: a side effect keyed by the task id would have
    # happened twice, one keyed by run and reference name once. What the docs tell workers rests on this.
    finished: dict[tuple[str, str], set[str]] = {}
    refs = {r["task"]: r["ref"] for r in await db.fetch("SELECT id::text AS task, ref FROM tasks")}
    for j in journal:
        if j["ev"] == "done" and j["outcome"] == "completed":
            finished.setdefault((j["run"], refs.get(j["task"], "?")), set()).add(j["task"])
    report.figures["deliveries"] = {
        "handler runs": sum(1 for j in journal if j["ev"] == "start"),
        "tasks whose work completed under two or more task ids": sum(1 for ids in finished.values() if len(ids) > 1),
        "worker processes": len(rig.workers.every),
    }


async def run_scenario(scenario: Scenario, kube: Kube, control_plane: ControlPlane | None, logs: Path) -> Report:
    began = time.monotonic()
    namespace = f"faults-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", namespace)
    with _database(scenario) as postgres:
        settings = {
            "SLUICEWAY_NAMESPACES": namespace,
            "SLUICEWAY_LEADER_ELECTION_NAMESPACE": namespace,
            "SLUICEWAY_DB_POOL_SIZE": "10",
        }
        replicas = [Replica(name, postgres.dsn, kube.kubeconfig, settings, logs) for name in ("op-a", "op-b")]
        rig = Rig(
            namespace=namespace,
            postgres=postgres,
            dsn=postgres.dsn,
            kube=kube,
            control_plane=control_plane,
            replicas=replicas,
            workers=Workers(namespace, scenario.seed, logs),
            logs=logs,
        )
        db = Db(postgres.dsn)
        try:
            report = await _run(scenario, rig, db)
        finally:
            await db.close()
            # While the replicas still run, so they clear their finalizers.
            kube.delete_sluiceway_objects(namespace, seconds=30)
            rig.stop()
            kube.run("delete", "namespace", namespace, "--wait=false", check=False)
    report.timings["total"] = time.monotonic() - began
    return report


def _database(scenario: Scenario) -> LocalPostgres | PatroniCluster:
    if scenario.database == "patroni":
        return PatroniCluster()
    # synchronous_commit on: an acknowledged commit survives a crash of PostgreSQL, which the suite
    # causes. fsync stays off: the suite crashes processes, never the machine.
    return LocalPostgres(settings={"synchronous_commit": "on"})


async def _run(scenario: Scenario, rig: Rig, db: Db) -> Report:
    report = Report(scenario)
    rng_load, rng_faults = random.Random(f"{scenario.seed}:load"), random.Random(f"{scenario.seed}:faults")
    began = time.monotonic()
    await asyncio.to_thread(rig.replicas[0].start)
    await install_audit(db)
    await asyncio.to_thread(rig.replicas[1].start)
    await asyncio.to_thread(_define, rig.kube, rig.namespace)
    for slot in range(scenario.workers):
        rig.workers.start(slot, rig.replicas[slot % 2].url)
    report.timings["setup"] = time.monotonic() - began
    print(f"\nfault suite: seed {scenario.seed}, namespace {rig.namespace}, logs in {rig.logs}")
    async with aiohttp.ClientSession() as session:
        load = LoadDriver(rig, rng_load, session)
        faults = FaultDriver(rig, rng_faults, db, load, session)
        kinds = plan(rng_faults, scenario.faults, scenario.kinds)
        loaded = time.monotonic()
        await asyncio.gather(
            load.run(scenario.runs, scenario.workflow_runs, scenario.load_seconds, scenario.terminate_share),
            faults.run(kinds, scenario.fault_gap),
        )
        report.timings["load and faults"] = time.monotonic() - loaded
        report.timings["settle"] = await _settle(rig, db, load.log.workflow_runs, scenario.settle_seconds)
        journal = rig.workers.journal()
        checked = time.monotonic()
        report.violations, figures = await check_all(rig, db, GATES, load.log, faults.log, journal)
        report.timings["checks"] = time.monotonic() - checked
    report.faults = faults.log.counts()
    report.not_injected = sorted(set(faults.log.unavailable))
    report.figures.update(figures)
    report.figures["raced terminates"] = len(faults.log.raced_runs)
    if faults.log.resumed_after:
        report.figures["dispatch resumed after (s)"] = faults.log.resumed_after
    report.figures["terminates"] = {str(k): v for k, v in _tally(load.log.terminates.values()).items()}
    await _figures(db, rig, journal, report)
    return report


def _tally(values: Any) -> dict[Any, int]:
    counts: dict[Any, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts
