"""A WorkflowRun created with kubectl runs to completion on worker processes."""

from __future__ import annotations

import datetime
import json
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluiceway.devenv.processes import Child
from tests.support.api import call
from tests.support.database import fetch
from tests.support.kube import Kube
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
WORKERS = str(Path(__file__).parent / "workers" / "fulfilment.py")


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def simple(ref: str, name: str, **inputs: Any) -> dict[str, Any]:
    return {"name": name, "taskReferenceName": ref, "type": "SIMPLE", "inputParameters": inputs}


ORDER_WORKFLOW = {
    "name": "order_fulfilment",
    "tasks": [
        {
            "name": "fan_out",
            "taskReferenceName": "fan_out",
            "type": "FORK_JOIN",
            "forkTasks": [
                [simple("reserve", "reserve_stock", skus="${workflow.input.skus}")],
                [simple("charge", "charge_card", amount="${workflow.input.amount}")],
                [simple("email", "send_email", to="${workflow.input.email}")],
            ],
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        {
            "name": "route",
            "taskReferenceName": "route",
            "type": "SWITCH",
            "evaluatorType": "value-param",
            "expression": "speed",
            "inputParameters": {"speed": "${workflow.input.shipping}"},
            "decisionCases": {"express": [simple("ship", "ship_express")]},
            "defaultCase": [simple("ship_slow", "ship_standard")],
        },
        {"name": "cool_off", "taskReferenceName": "cool_off", "type": "WAIT", "inputParameters": {"duration": "1s"}},
        {
            "name": "total",
            "taskReferenceName": "total",
            "type": "INLINE",
            "inputParameters": {
                "evaluatorType": "cel",
                "expression": "input.amount * 2",
                "amount": "${charge.output.charged}",
            },
        },
    ],
    "outputParameters": {
        "reserved": "${reserve.output.reserved}",
        "charged": "${charge.output.charged}",
        "carrier": "${ship.output.carrier}",
        "doubled": "${total.output.result}",
    },
}


def run_phase(kube: Kube, name: str, namespace: str, *, terminal: bool = True) -> dict[str, Any] | None:
    obj = kube.get("workflowrun", name, namespace)
    phase = (obj or {}).get("status", {}).get("phase")
    if phase is None or (terminal and phase in ("Pending", "Running")):
        return None  # not reconciled yet (an object without a status), or not finished
    return obj


def test_a_workflow_run_created_with_kubectl_completes_on_worker_processes(
    kube: Kube, namespace: str, operator: OperatorProcess, start_worker: Callable[..., Child]
) -> None:
    kube.apply(manifest("TaskDefinition", "charge-card", {"name": "charge_card", "retryCount": 2}), namespace)
    kube.apply(manifest("Workflow", "order-fulfilment", ORDER_WORKFLOW), namespace)
    wf = eventually(
        lambda: (o := kube.get("workflow", "order-fulfilment", namespace)) and o.get("status", {}).get("version") and o,
        what="the Workflow to be stored",
    )
    assert next(c for c in wf["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    start_worker(WORKERS, namespace)
    start_worker(WORKERS, namespace)
    kube.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            manifest(
                "WorkflowRun",
                "order-42",
                {
                    "workflow": "order_fulfilment",
                    "input": {"skus": ["A1", "B2"], "amount": 21, "email": "ada@example.com", "shipping": "express"},
                },
            )
        ),
    )
    run = eventually(lambda: run_phase(kube, "order-42", namespace), timeout=60, what="the run to finish")
    status = run["status"]
    assert status["phase"] == "Completed", status
    assert status["output"] == {"reserved": ["A1:ok", "B2:ok"], "charged": 21, "carrier": "express", "doubled": 42}
    assert status["tasks"]["total"] == status["tasks"]["completed"] == 9
    assert status["workflowVersion"] == 1 and status["executionId"] == run["metadata"]["uid"]
    table = kube.run("get", "workflowruns", "-n", namespace).stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "WORKFLOW", "PHASE", "DONE", "TOTAL"]
    assert table[1].split()[:5] == ["order-42", "order_fulfilment", "Completed", "9", "9"]
    # The same run, through the HTTP API.
    with urllib.request.urlopen(f"{operator.api_url}/v1/ns/{namespace}/executions/{status['executionId']}") as r:
        body = json.load(r)
    assert body["workflowRun"] == "order-42" and body["status"] == "COMPLETED"
    refs = {t["referenceName"] for t in body["tasks"]}
    assert refs == {"fan_out", "reserve", "charge", "email", "join", "route", "ship", "cool_off", "total"}


def test_a_task_that_fails_twice_retries_inside_its_backoff_band(
    kube: Kube, namespace: str, operator: OperatorProcess, start_worker: Callable[..., Child]
) -> None:
    kube.apply(
        manifest(
            "TaskDefinition",
            "flaky-call",
            {
                "name": "flaky_call",
                "retryCount": 3,
                "retryLogic": "EXPONENTIAL_BACKOFF",
                "retryDelaySeconds": 1,
                "backoffScaleFactor": 2,
                "jitter": 0.2,
            },
        ),
        namespace,
    )
    kube.apply(manifest("Workflow", "flaky", {"tasks": [simple("call", "flaky_call")]}), namespace)
    eventually(lambda: (o := kube.get("workflow", "flaky", namespace)) and o.get("status", {}).get("version"))
    start_worker(WORKERS, namespace)
    kube.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(manifest("WorkflowRun", "flaky-1", {"workflow": "flaky"})),
    )
    run = eventually(lambda: run_phase(kube, "flaky-1", namespace), timeout=60, what="the run to finish")
    assert run["status"]["phase"] == "Completed"
    with urllib.request.urlopen(
        f"{operator.api_url}/v1/ns/{namespace}/executions/{run['status']['executionId']}"
    ) as response:
        tasks = json.load(response)["tasks"]
    assert [(t["attempt"], t["status"]) for t in tasks] == [(1, "FAILED"), (2, "FAILED"), (3, "COMPLETED")]
    assert tasks[0]["reason"] == "ConnectionError: partner unavailable on attempt 1"

    def at(text: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

    gaps = [(at(b["startedAt"]) - at(a["endedAt"])).total_seconds() for a, b in zip(tasks, tasks[1:], strict=False)]
    bands = [(0.8, 1.2), (1.6, 2.4)]  # 1 s and 2 s, ±20%
    slack = 0.5  # the worker's poll answering after the task becomes leasable
    for gap, (low, high) in zip(gaps, bands, strict=False):
        assert low <= gap <= high + slack, (gaps, bands)


def test_an_invalid_workflow_graph_is_not_ready_and_says_why(kube: Kube, namespace: str) -> None:
    kube.apply(
        manifest(
            "Workflow",
            "broken",
            {
                "tasks": [
                    simple("a", "x", v="${nowhere.output.v}"),
                    {"name": "j", "taskReferenceName": "j", "type": "JOIN"},
                ]
            },
        ),
        namespace,
    )
    obj = eventually(
        lambda: (o := kube.get("workflow", "broken", namespace)) and o.get("status", {}).get("conditions") and o
    )
    ready = obj["status"]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "unknown task 'nowhere'" in ready["message"] and "JOIN without joinOn" in ready["message"]


def test_a_run_of_a_missing_workflow_waits_for_it(
    kube: Kube, namespace: str, start_worker: Callable[..., Child]
) -> None:
    kube.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(manifest("WorkflowRun", "early", {"workflow": "late_comer"})),
    )
    pending = eventually(lambda: run_phase(kube, "early", namespace, terminal=False), what="a status")
    assert pending["status"]["phase"] == "Pending"
    assert "late_comer not found" in pending["status"]["reasonForIncompletion"]
    kube.apply(
        manifest(
            "Workflow",
            "late-comer",
            {
                "name": "late_comer",
                "tasks": [
                    {
                        "name": "done",
                        "taskReferenceName": "done",
                        "type": "INLINE",
                        "inputParameters": {"evaluatorType": "cel", "expression": "'ok'"},
                    }
                ],
            },
        ),
        namespace,
    )
    run = eventually(lambda: run_phase(kube, "early", namespace), timeout=40, what="the run to start and finish")
    assert run["status"]["phase"] == "Completed" and run["status"]["output"] == {"result": "ok"}


def test_the_spec_of_a_workflow_run_is_immutable(kube: Kube, namespace: str) -> None:
    kube.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(manifest("WorkflowRun", "fixed", {"workflow": "anything"})),
    )
    result = kube.run(
        "patch",
        "workflowrun",
        "fixed",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec": {"workflow": "other"}}',
        check=False,
    )
    assert result.returncode != 0 and "only paused, retry and ttlSecondsAfterFinished may change" in result.stderr


def dead_letters(api_url: str) -> float:
    status, text = call("GET", f"{api_url}/metrics")
    assert status == 200, text
    lines = [line for line in text.splitlines() if line.startswith("sluiceway_outbox_dead_lettered")]
    return sum(float(line.split()[-1]) for line in lines)


def test_a_stale_status_never_overwrites_a_newer_one(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """The status mirror is fenced by the API server, not by the Lease: each write
    carries the run's mirrorSeq and a CRD transition rule refuses a lower one. A
    replica that lost leadership while frozen (played here by resetting what the
    database says was mirrored, under a status written by a "newer leader") has
    its write refused, takes it as already written, and dead-letters nothing."""
    kube.apply(
        manifest(
            "Workflow",
            "fenced",
            {
                "name": "fenced",
                "tasks": [
                    {
                        "name": "done",
                        "taskReferenceName": "done",
                        "type": "INLINE",
                        "inputParameters": {"evaluatorType": "cel", "expression": "'ok'"},
                    }
                ],
            },
        ),
        namespace,
    )
    kube.apply(manifest("WorkflowRun", "fenced-1", {"workflow": "fenced"}), namespace)
    run = eventually(lambda: run_phase(kube, "fenced-1", namespace), timeout=60, what="the run to finish")
    seq, execution = run["status"]["mirrorSeq"], run["status"]["executionId"]
    assert run["status"]["phase"] == "Completed" and seq >= 1

    def patch(status: dict[str, Any]) -> Any:
        return kube.run(
            "patch", "workflowrun", "fenced-1", "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}), check=False,
        )  # fmt: skip

    older = patch({"mirrorSeq": seq - 1, "phase": "Running"})
    assert older.returncode != 0 and "mirrorSeq must not decrease" in older.stderr, older.stderr
    assert patch({"mirrorSeq": seq + 100, "reasonForIncompletion": "written by a newer leader"}).returncode == 0

    before = dead_letters(operator.api_url)
    fetch(operator.database_url, "UPDATE executions SET mirrored_seq = 0 WHERE id = $1", uuid.UUID(execution))
    eventually(
        lambda: fetch(operator.database_url, "SELECT 1 FROM executions WHERE id = $1 AND mirrored_seq = $2",
                      uuid.UUID(execution), seq),
        what="the stale write to be taken as written",
    )  # fmt: skip
    status = kube.get("workflowrun", "fenced-1", namespace)["status"]
    assert status["mirrorSeq"] == seq + 100 and status["reasonForIncompletion"] == "written by a newer leader"
    assert status["phase"] == "Completed"
    assert dead_letters(operator.api_url) == before, "a stale write is not a dead letter"
    assert not fetch(operator.database_url, "SELECT 1 FROM dead_letters WHERE execution_id = $1", uuid.UUID(execution))
