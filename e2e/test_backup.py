"""Backup and restore (docs/backup.md): an installation with finished runs,
runs in flight (a worker holding their leases), a Schedule that has fired and
a Trigger that has deduplicated an event is exported with `sluiceway admin
export`, everything is stopped, and `sluiceway admin import` restores it into
a NEW API server and a NEW PostgreSQL server. A new operator and worker then
finish the runs in flight, list the finished ones with their outputs, adopt
every WorkflowRun's run instead of starting a second, never fire a fire the
Schedule had made, and still know the Trigger's event."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluiceway.devenv.postgres import LocalPostgres
from tests.support.api import call
from tests.support.database import Databases, fetch
from tests.support.kube import Cluster, Kube, condition, running_cluster
from tests.support.operators import OperatorProcess, start_operator
from tests.support.processes import stop_all
from tests.support.waiting import eventually
from tests.support.workers import start_worker

API = "sluiceway.dev/v1beta1"
WORKERS = str(Path(__file__).parent / "workers" / "backup.py")
FINISHED = 3  # runs that end before the backup: 2 WorkflowRuns, 1 started through the API
HELD = 2  # runs whose task a worker holds leased when the backup is taken: 1 WorkflowRun, 1 API


def sluiceway(*argv: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env_kubeconfig = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
    done = subprocess.run(
        [sys.executable, "-m", "sluiceway", *argv, *env_kubeconfig], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"sluiceway {' '.join(argv)} exited {done.returncode}:\n{done.stderr}"
    return done


def install(kube: Kube, namespace: str) -> None:
    objects: list[tuple[str, str, dict[str, Any]]] = [
        ("TaskDefinition", "quick", {}),
        # A short lease, renewed by heartbeats while the worker lives: after
        # the restore it expires and the task is retried, as the policy says.
        ("TaskDefinition", "hold", {"responseTimeoutSeconds": 5, "retryCount": 2, "retryDelaySeconds": 0}),
        (
            "Workflow",
            "quick",
            {
                "tasks": [
                    {"name": "quick", "taskReferenceName": "q", "inputParameters": {"count": "${workflow.input.count}"}}
                ],
                "outputParameters": {"doubled": "${q.output.doubled}"},
            },
        ),
        (
            "Workflow",
            "held",
            {
                "tasks": [
                    {"name": "hold", "taskReferenceName": "h", "inputParameters": {"count": "${workflow.input.count}"}}
                ],
                "outputParameters": {"count": "${h.output.count}", "attempt": "${h.output.attempt}"},
            },
        ),
        ("Schedule", "tick", {"workflow": "quick", "every": "3s", "input": {"count": 7}}),
        ("Trigger", "on-order", {"event": "order", "workflow": "quick", "input": "{'count': event.payload.count}"}),
    ]
    for kind, name, spec in objects:
        kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)
    for kind, name, _ in objects:
        eventually(
            lambda kind=kind, name=name: (
                (c := condition(kube.get(kind.lower(), name, namespace))) and c["status"] == "True"
            ),
            timeout=60,
            what=f"{kind} {name} to be Ready",
        )


def workflow_run(kube: Kube, namespace: str, name: str, workflow: str, n: int) -> None:
    manifest = {
        "apiVersion": API,
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": workflow, "input": {"count": n}},
    }
    kube.run("create", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def execution_of(kube: Kube, namespace: str, name: str) -> str | None:
    value = ((kube.get("workflowrun", name, namespace) or {}).get("status") or {}).get("executionId")
    return str(value) if value else None


def start_run(operator: OperatorProcess, namespace: str, workflow: str, n: int) -> str:
    status, body = call(
        "POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": workflow, "input": {"count": n}}
    )
    assert status in (200, 201), body
    return str(body["id"] if isinstance(body, dict) else body)


def run_of(operator: OperatorProcess, namespace: str, run_id: str) -> dict[str, Any]:
    status, body = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}")
    assert status == 200, body
    found: dict[str, Any] = body
    return found


def listed(operator: OperatorProcess, namespace: str) -> dict[str, dict[str, Any]]:
    """Every run as `sluiceway runs list` shows it, by id."""
    shown = json.loads(
        sluiceway("runs", "list", "--all", "-o", "json", "-n", namespace, "--server", operator.api_url).stdout
    )
    items = shown["items"] if isinstance(shown, dict) else shown
    return {item["id"]: item for item in items}


def send_event(operator: OperatorProcess, namespace: str, event_id: str) -> dict[str, Any]:
    status, body = call(
        "POST",
        f"{operator.api_url}/v1/ns/{namespace}/events/order",
        {"count": 5},
        headers={"X-Sluiceway-Event-Id": event_id},
    )
    assert status in (200, 202), body
    [outcome] = [o for o in body["outcomes"] if o["trigger"] == "on-order"]
    found: dict[str, Any] = outcome
    return found


def fires(dsn: str, namespace: str) -> list[dict[str, object]]:
    # An internal invariant no API lists whole: one row per (Schedule, fire time).
    return fetch(
        dsn, "SELECT fire_at, outcome, run_id FROM schedule_fires WHERE namespace = $1 ORDER BY fire_at", namespace
    )


def started_fires(dsn: str, namespace: str) -> set[tuple[object, object]]:
    return {(row["fire_at"], row["run_id"]) for row in fires(dsn, namespace) if row["outcome"] == "started"}


def run_ids(dsn: str, namespace: str) -> set[str]:
    return {str(r["id"]) for r in fetch(dsn, "SELECT id FROM executions WHERE namespace = $1", namespace)}


@pytest.fixture
def new_database() -> Iterator[str]:
    """A second PostgreSQL server: the restore's, empty."""
    with LocalPostgres() as server:
        yield server.dsn


def test_a_backup_restores_into_a_new_cluster_and_database(
    cluster: Cluster, databases: Databases, new_database: str, tmp_path: Path
) -> None:
    if cluster.control_plane is None:
        pytest.skip("restores into a second local control plane; an existing cluster has none to spare")
    old_kube = cluster.kube
    namespace = f"backup-{uuid.uuid4().hex[:8]}"
    old_kube.run("create", "namespace", namespace)
    old_dsn = asyncio.run(databases.create("backup"))
    # A Lease of its own: in the shared cluster the session's operator holds default/sluiceway-operator,
    # and a replica that never leads never reconciles (seen in CI: nothing became Ready).
    settings = {
        "SLUICEWAY_NAMESPACES": namespace,
        "SLUICEWAY_LEADER_ELECTION_NAMESPACE": namespace,
        "SLUICEWAY_STATUS_INTERVAL": "1",
    }
    old = start_operator(
        "old-operator", old_dsn, tmp_path, kubeconfig=old_kube.kubeconfig, settings=settings, log_level="INFO"
    )
    # Answers `quick` at once, and holds every `hold` task it leases.
    holding_worker = start_worker("holder", WORKERS, old.api_url, namespace, tmp_path, env={"BACKUP_HOLD": "1"})
    try:
        install(old_kube, namespace)
        # Finished before the backup.
        workflow_run(old_kube, namespace, "done-1", "quick", 1)
        workflow_run(old_kube, namespace, "done-2", "quick", 2)
        finished = {start_run(old, namespace, "quick", 3)}
        # In flight: the holding worker leases their tasks and never answers.
        workflow_run(old_kube, namespace, "held-1", "held", 10)
        held = {start_run(old, namespace, "held", 11)}
        for name in ("done-1", "done-2"):
            eventually(lambda name=name: execution_of(old_kube, namespace, name), what=f"WorkflowRun {name} to start")
            finished.add(str(execution_of(old_kube, namespace, name)))
        eventually(lambda: execution_of(old_kube, namespace, "held-1"), what="WorkflowRun held-1 to start")
        held.add(str(execution_of(old_kube, namespace, "held-1")))
        for run_id in finished:
            eventually(
                lambda run_id=run_id: run_of(old, namespace, run_id)["status"] == "COMPLETED",
                what=f"run {run_id} to complete",
            )
        for run_id in held:
            eventually(
                lambda run_id=run_id: any(
                    t["status"] == "IN_PROGRESS" for t in run_of(old, namespace, run_id)["tasks"]
                ),
                what=f"run {run_id}'s task to be leased",
            )
        first_delivery = send_event(old, namespace, "order-1")
        assert first_delivery["outcome"] == "started"
        eventually(lambda: len(fires(old_dsn, namespace)) >= 2, timeout=30, what="the Schedule to fire twice")

        # The leases the holding worker has: read where only the database shows the epoch.
        leases = fetch(
            old_dsn,
            "SELECT id, epoch FROM tasks WHERE execution_id = ANY($1::uuid[]) AND status = 'IN_PROGRESS'",
            sorted(held),
        )
        assert (len(finished), len(held), len(leases)) == (FINISHED, HELD, HELD)
        fired_before_export = started_fires(old_dsn, namespace)
        backup = tmp_path / "backup"
        sluiceway(
            "admin", "export", str(backup), "-n", namespace, "--database-url", old_dsn, kubeconfig=old_kube.kubeconfig
        )
    finally:
        # The old installation goes, its operator clearing its finalizers first; the backup has what it had.
        old_kube.delete_sluiceway_objects(namespace, seconds=30)
        stop_all([holding_worker, old.child])
        old_kube.run("delete", "namespace", namespace, "--wait=false", check=False)

    with running_cluster() as new_cluster:
        new_kube = new_cluster.kube
        imported = sluiceway(
            "admin", "import", str(backup), "--database-url", new_database, kubeconfig=new_kube.kubeconfig
        )
        assert "now start the operator" in imported.stderr
        # What the dump holds, read before any operator runs on it. The old
        # operator ran on for a moment after the dump: its fires since are not
        # in the backup (docs/backup.md).
        fired_before = started_fires(new_database, namespace)
        assert fired_before_export <= fired_before
        runs_before = run_ids(new_database, namespace)
        assert finished | held | {first_delivery["runId"]} <= runs_before
        new = start_operator("new-operator", new_database, tmp_path, kubeconfig=new_kube.kubeconfig, settings=settings)
        worker = start_worker("new-worker", WORKERS, new.api_url, namespace, tmp_path)
        try:
            # The runs in flight complete: their leases expired, their tasks were retried.
            for run_id in held:
                eventually(
                    lambda run_id=run_id: run_of(new, namespace, run_id)["status"] == "COMPLETED",
                    timeout=90,
                    what=f"run {run_id} to resume",
                )
                assert run_of(new, namespace, run_id)["output"]["attempt"] >= 2
            # Fenced: the old worker's leases, reported on now, are stale.
            for lease in leases:
                stale = {"epoch": lease["epoch"], "status": "COMPLETED", "output": {"count": -1}}
                status, body = call("POST", f"{new.api_url}/v1/ns/{namespace}/tasks/{lease['id']}/result", stale)
                assert status == 409, body
            assert all(run_of(new, namespace, run_id)["output"]["count"] in (10, 11) for run_id in held)
            # The finished runs are listed, with their outputs.
            shown = listed(new, namespace)
            for run_id in finished:
                assert shown[run_id]["status"] == "COMPLETED"
                assert run_of(new, namespace, run_id)["output"]["doubled"] in (2, 4, 6)
            # Every WorkflowRun adopted its run: the same id, one run per WorkflowRun.
            for name in ("done-1", "done-2", "held-1"):
                eventually(
                    lambda name=name: (
                        (kube_run := new_kube.get("workflowrun", name, namespace))
                        and (kube_run.get("status") or {}).get("phase") == "Completed"
                    ),
                    timeout=60,
                    what=f"WorkflowRun {name} to show its run Completed",
                )
            adopted = {str(execution_of(new_kube, namespace, n)) for n in ("done-1", "done-2", "held-1")}
            assert adopted <= finished | held
            per_object = fetch(
                new_database,
                "SELECT resource_name, count(*) AS n FROM executions WHERE namespace = $1 AND resource_name IS NOT NULL"
                " GROUP BY resource_name",
                namespace,
            )
            assert {r["resource_name"]: r["n"] for r in per_object} == {"done-1": 1, "done-2": 1, "held-1": 1}
            # The Schedule goes on firing, and never a fire it had made.
            eventually(
                lambda: len(started_fires(new_database, namespace)) > len(fired_before), timeout=30, what="a new fire"
            )
            # The Trigger still knows the event it started a run for.
            again = send_event(new, namespace, "order-1")
            assert (again["outcome"], again["runId"]) == ("duplicate", first_delivery["runId"])
            # No run was started but the Schedule's new fires. The fires are read after the runs:
            # a scheduled run's fire row commits with it.
            runs_after = run_ids(new_database, namespace)
            fired_after = started_fires(new_database, namespace)
            assert fired_before <= fired_after, "a fire of the backup was forgotten"
            new_fires = fired_after - fired_before
            assert not {at for at, _ in new_fires} & {at for at, _ in fired_before}, "a fire was made twice"
            assert runs_before <= runs_after
            assert runs_after - runs_before <= {str(run) for _, run in new_fires}
            print(
                f"restore: {len(held)} runs resumed, {len(finished)} finished runs listed, {len(new_fires)} new fires"
            )
        finally:
            stop_all([worker, new.child])
