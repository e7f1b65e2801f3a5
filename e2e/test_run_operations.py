"""Operating runs through the real API server and operator: what the docs'
examples (e2e/test_docs.py) cannot show in a few lines: clocks across a
pause, a chain deadline, the SLA reported exactly once, declarative pause,
concurrent idempotent starts and pages under concurrent starts, logs read
after the worker exited, and retention deleting only what it should."""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from sluiceway.devenv.controlplane import REPO_ROOT
from sluiceway.devenv.processes import Child
from tests.support.api import call
from tests.support.database import fetch
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
ORDERS = str(REPO_ROOT / "examples" / "15-orders.yaml")
WORKERS = str(REPO_ROOT / "examples" / "workers.py")


def manifest(kind: str, name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name, **metadata}, "spec": spec}


def wait_task(ref: str, duration: str) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": "WAIT", "inputParameters": {"duration": duration}}


def ready_workflow(kube: Kube, namespace: str, name: str, spec: dict[str, Any] | None = None) -> None:
    if spec is not None:
        kube.apply(manifest("Workflow", name, spec), namespace)
    eventually(
        lambda: (o := kube.get("workflow", name, namespace)) and o.get("status", {}).get("version"),
        what=f"workflow {name} to be stored",
    )


def sluiceway(operator: OperatorProcess, namespace: str, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluiceway", *argv, "-n", namespace, "--server", operator.api_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1", **env},
    )


def run_of(operator: OperatorProcess, namespace: str, run_id: str) -> dict[str, Any]:
    status, body = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}?include_tasks=false")
    assert status == 200, body
    return dict(body)


def ended(operator: OperatorProcess, namespace: str, run_id: str, timeout: float = 60) -> dict[str, Any]:
    return eventually(
        lambda: (r := run_of(operator, namespace, run_id))["status"] not in ("RUNNING", "PAUSED") and r,
        timeout=timeout,
        what=f"run {run_id} to end",
    )


def start(operator: OperatorProcess, namespace: str, name: str, **body: Any) -> str:
    status, answer = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": name, **body})
    assert status == 201, answer
    return str(answer["id"])


def at(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def pause(operator: OperatorProcess, namespace: str, run_id: str) -> None:
    status, body = call(
        "POST", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}/pause", {"reason": "maintenance"}
    )
    assert status == 200 and body["status"] == "PAUSED", body


def test_a_run_paused_past_its_timeout_completes_and_a_chain_deadline_ends_it(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ready_workflow(kube, namespace, "parked", {"timeoutSeconds": 6, "tasks": [wait_task("nap", "5s")]})
    run_id = start(operator, namespace, "parked")
    pause(operator, namespace, run_id)
    chained = start(operator, namespace, "parked")
    # A chain deadline is set by continue-as-new (issue 12); until then, as a chain would set it.
    fetch(
        operator.database_url,
        "UPDATE executions SET chain_deadline_at = now() + interval '3 seconds' WHERE id = $1",
        uuid.UUID(chained),
    )
    pause(operator, namespace, chained)
    deadline = at(eventually(lambda: run_of(operator, namespace, run_id).get("deadline"), what="the deadline"))
    why = sluiceway(operator, namespace, "why", run_id)
    assert why.returncode == 1 and "is PAUSED" in why.stdout and "maintenance" in why.stdout, why.stdout
    time.sleep(max(0.0, (deadline - datetime.datetime.now(datetime.UTC)).total_seconds()) + 1)
    assert run_of(operator, namespace, run_id)["status"] == "PAUSED", "past its timeout: its clocks are stopped"
    for paused in (run_id, chained):
        assert sluiceway(operator, namespace, "runs", "resume", paused).returncode == 0
    moved = run_of(operator, namespace, run_id)
    assert moved["status"] == "RUNNING" and (at(moved["deadline"]) - deadline).total_seconds() >= 1, moved
    done = ended(operator, namespace, run_id)
    assert done["status"] == "COMPLETED", done
    assert done["pausedSeconds"] >= 1
    timed_out = ended(operator, namespace, chained)
    assert timed_out["status"] == "TIMED_OUT" and "chain" in timed_out["reasonForIncompletion"], timed_out
    assert at(timed_out["chainDeadline"]) < at(timed_out["endTime"]), "a pause never moves the chain deadline"


def test_a_workflow_run_is_paused_and_resumed_by_its_spec(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ready_workflow(kube, namespace, "napping", {"tasks": [wait_task("nap", "3s"), wait_task("again", "1s")]})
    kube.apply(manifest("WorkflowRun", "nap-1", {"workflow": "napping"}), namespace)
    eventually(lambda: (kube.get("workflowrun", "nap-1", namespace) or {}).get("status", {}).get("executionId"))
    kube.run("patch", "workflowrun", "nap-1", "-n", namespace, "--type=merge", "-p", '{"spec": {"paused": true}}')
    status = eventually(
        lambda: (
            (s := (kube.get("workflowrun", "nap-1", namespace) or {}).get("status", {})).get("phase") == "Paused" and s
        ),
        what="the WorkflowRun to be Paused",
    )
    assert status["control"] == "paused" and status["pausedAt"], status
    why = sluiceway(operator, namespace, "why", "workflowrun/nap-1", KUBECONFIG=str(kube.kubeconfig))
    assert why.returncode == 1 and "✗ paused" in why.stdout, why.stdout
    time.sleep(4)  # the WAIT's 3 s pass while paused: it is held
    assert kube.get("workflowrun", "nap-1", namespace)["status"]["phase"] == "Paused"  # type: ignore[index]
    immutable = kube.run(
        "patch",
        "workflowrun",
        "nap-1",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"workflow": "x"}}',
        check=False,
    )
    assert immutable.returncode != 0 and "only paused, retry and ttlSecondsAfterFinished" in immutable.stderr
    kube.run("patch", "workflowrun", "nap-1", "-n", namespace, "--type=merge", "-p", '{"spec": {"paused": false}}')
    done = eventually(
        lambda: (
            (s := (kube.get("workflowrun", "nap-1", namespace) or {}).get("status", {})).get("phase") == "Completed"
            and s
        ),
        timeout=30,
        what="the WorkflowRun to complete",
    )
    assert done.get("pausedAt") is None


def test_an_sla_breach_is_reported_once_and_logs_outlive_the_worker(
    kube: Kube, namespace: str, operator: OperatorProcess, start_worker: Callable[..., Child]
) -> None:
    kube.run("apply", "-n", namespace, "-f", ORDERS)
    ready_workflow(kube, namespace, "orders")
    worker = start_worker(WORKERS, namespace)
    spec = {
        "workflow": "orders",
        "slaSeconds": 1,
        "input": {"tenant": "acme", "amount": 3, "items": ["a", "b"], "shippingSeconds": 3},
    }
    kube.apply(manifest("WorkflowRun", "slow-1", spec, labels={"team": "web"}), namespace)
    status = eventually(
        lambda: (
            (s := (kube.get("workflowrun", "slow-1", namespace) or {}).get("status", {})).get("phase") == "Completed"
            and s
        ),
        timeout=60,
        what="the run to complete",
    )
    assert status["slaBreachedAt"], status
    time.sleep(3)  # a few more mirror passes: none may report it again

    def events() -> list[dict[str, Any]]:
        listed = json.loads(kube.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
        return [e for e in listed if e.get("reason") == "SlaBreached"]

    found = eventually(events, what="the SlaBreached Event")
    assert len(found) == 1 and found[0].get("count", 1) == 1, found
    assert found[0]["involvedObject"]["name"] == "slow-1" and found[0]["type"] == "Warning"
    _, metrics = call("GET", f"{operator.api_url}/metrics")
    line = f'sluiceway_workflow_sla_breached_total{{namespace="{namespace}",workflow="orders"}}'
    assert f"{line} 1.0" in metrics, [m for m in metrics.splitlines() if "sla_breached" in m]
    listed = sluiceway(operator, namespace, "runs", "list", "--sla-breached", "-a", "team=web", "-o", "name")
    assert listed.stdout.split() == [status["executionId"]], listed

    # What the handlers logged is kept by the server: read once the worker is gone.
    worker.stop()
    assert not worker.alive()
    logs = sluiceway(operator, namespace, "logs", status["executionId"])
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        "[reserve#1] INFO reserving 2 items",
        "[pay#1] INFO charging 3 to visa",
        "[ship#1] INFO parcel with 2 items handed to the carrier",
    ], logs.stdout


def test_concurrent_retries_start_one_run_and_pages_hold_under_concurrent_starts(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ready_workflow(kube, namespace, "held", {"tasks": [wait_task("nap", "60s")]})
    url = f"{operator.api_url}/v1/ns/{namespace}/executions"
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: call("POST", url, {"name": "held", "requestId": "order-7"}), range(8)))
    assert len({body["id"] for _, body in answers}) == 1, answers
    assert sorted(status for status, _ in answers) == [200] * 7 + [201]
    existing = [start(operator, namespace, "held") for _ in range(14)] + [answers[0][1]["id"]]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        adding = pool.submit(lambda: [start(operator, namespace, "held") for _ in range(10)])
        seen: list[str] = []
        cursor = None
        while True:
            query = "?workflow=held&limit=4" + (f"&cursor={cursor}" if cursor else "")
            status, page = call("GET", url + query)
            assert status == 200, page
            seen += [item["id"] for item in page["items"]]
            cursor = page["nextCursor"]
            if not cursor:
                break
        added = adding.result()
    assert len(seen) == len(set(seen)) and set(existing) <= set(seen), (len(seen), len(existing), len(added))


def test_retention_deletes_expired_runs_only(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ready_workflow(kube, namespace, "brief", {"retention": {"seconds": 1}, "tasks": [wait_task("nap", "0s")]})
    ready_workflow(kube, namespace, "kept", {"tasks": [wait_task("nap", "0s")]})
    ready_workflow(
        kube,
        namespace,
        "parent",
        {
            "retention": {"seconds": 1},
            "tasks": [
                {
                    "name": "child",
                    "taskReferenceName": "child",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "brief"},
                },
                wait_task("linger", "4s"),
            ],
        },
    )
    brief, kept, parent = (start(operator, namespace, name) for name in ("brief", "kept", "parent"))
    assert ended(operator, namespace, kept)["expiresAt"], "the operator's default applies"
    eventually(
        lambda: call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{brief}")[0] == 404,
        timeout=30,
        what="the expired run to be deleted",
    )
    child = eventually(
        lambda: (
            (c := call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions?parent={parent}")[1]["items"])
            and c[0]["status"] == "COMPLETED"
            and c[0]["id"]
        ),
        what="the child run to complete",
    )
    time.sleep(2.5)  # past the child's retention, while its parent still lingers
    assert call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{child}")[0] == 200, "its parent runs on"
    assert ended(operator, namespace, parent)["status"] == "COMPLETED"
    eventually(
        lambda: call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{child}")[0] == 404,
        timeout=30,
        what="the child to be deleted once its parent ended",
    )
    assert run_of(operator, namespace, kept)["status"] == "COMPLETED", "a run within its retention stays"
    _, tasks = call("GET", f"{operator.api_url}/v1/ns/{namespace}/tasks?executionId={brief}")
    assert tasks["items"] == [], "its tasks went with it"
