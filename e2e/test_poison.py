"""Poison input, as a user would meet it through kubectl: a Workflow with a
malformed reference is refused with Ready=False naming the task and field; a
run the decider cannot evaluate (garbage written straight into the store) is
quarantined and shown on its WorkflowRun, while the operator process keeps
running and other runs complete."""

from __future__ import annotations

import json
from typing import Any

from tests.support.api import call
from tests.support.database import fetch
from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def inline(ref: str, expression: str, **inputs: Any) -> dict[str, Any]:
    """A task the operator runs itself: no worker is needed."""
    return {
        "name": ref,
        "taskReferenceName": ref,
        "type": "INLINE",
        "inputParameters": {"evaluatorType": "cel", "expression": expression, **inputs},
    }


def test_a_poison_workflow_is_not_ready_naming_the_task_and_field(kube: Kube, namespace: str) -> None:
    kube.apply(
        manifest(
            "Workflow",
            "payments",
            {
                "tasks": [
                    {
                        "name": "charge",
                        "taskReferenceName": "charge",
                        "inputParameters": {"amount": "${workflow.input..amount}"},
                    },
                    inline("double", "input.n *", n="${charge.output.n}"),
                ],
                "outputParameters": {"receipt": "${charge.output[}"},
            },
        ),
        namespace,
    )
    ready = eventually(lambda: condition(kube.get("workflow", "payments", namespace)), what="a Ready condition")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    message = ready["message"]
    assert "tasks[charge].inputParameters.amount: cannot parse reference ${workflow.input..amount} at position 14" in (
        message
    )
    assert "tasks[double].inputParameters.expression: invalid CEL expression 'input.n *'" in message
    assert "outputParameters.receipt: cannot parse reference ${charge.output[}" in message


def _workflow_run(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    obj = kube.get("workflowrun", name, namespace)
    assert obj is not None
    return obj


def test_a_run_that_cannot_be_evaluated_is_quarantined_and_the_operator_keeps_running(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    kube.apply(manifest("Workflow", "fragile", {"tasks": [inline("calc", "input.n + 1", n=1)]}), namespace)
    kube.apply(
        manifest("Workflow", "sturdy", {"tasks": [inline("calc", "input.count * 2", count="${workflow.input.count}")]}),
        namespace,
    )
    for name in ("fragile", "sturdy"):
        eventually(
            lambda name=name: (c := condition(kube.get("workflow", name, namespace))) and c["status"] == "True",
            what=f"Workflow {name} to be Ready",
        )
    # Garbage no API could write: the stored version of `fragile` no longer parses.
    # So it goes straight into the store, the one way in for it.
    fetch(
        operator.database_url,
        "UPDATE workflow_versions SET spec = '{\"tasks\": 42}' WHERE namespace = $1 AND name = 'fragile' RETURNING 1",
        namespace,
    )
    kube.apply(manifest("WorkflowRun", "fragile-1", {"workflow": "fragile"}), namespace)

    status = eventually(
        lambda: (s := _workflow_run(kube, namespace, "fragile-1").get("status", {})).get("quarantinedAt") and s,
        timeout=60,
        what="the WorkflowRun to show its quarantine",
    )
    assert status["phase"] == "Running" and status["control"] == "quarantine"
    assert status["reasonForIncompletion"].startswith("quarantined: workflow fragile version 1 cannot be read:")

    def quarantine_event() -> dict[str, Any] | None:
        events = json.loads(kube.run("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
        return next(
            (e for e in events if e["reason"] == "Quarantined" and e["involvedObject"]["name"] == "fragile-1"), None
        )

    event = eventually(quarantine_event, what="a Quarantined Event on the WorkflowRun")
    assert event["type"] == "Warning" and "cannot be read" in event["message"]

    # The operator goes on: it is alive, and other runs complete.
    assert operator.child.alive(), operator.logs()
    for n in range(3):
        kube.apply(manifest("WorkflowRun", f"sturdy-{n}", {"workflow": "sturdy", "input": {"count": n}}), namespace)
    for n in range(3):
        done = eventually(
            lambda n=n: (
                (s := _workflow_run(kube, namespace, f"sturdy-{n}").get("status", {})).get("phase") == "Completed" and s
            ),
            timeout=60,
            what=f"sturdy-{n} to complete",
        )
        assert done["output"] == {"result": n * 2}
    run_id = status["executionId"]
    code, why = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}/why")
    assert code == 200 and why["quarantined"] is True and why["reasons"][0]["control"] == "quarantine"
    code, metrics = call("GET", f"{operator.api_url}/metrics")
    assert code == 200 and f'sluiceway_runs_quarantined_total{{namespace="{namespace}"}} 1.0' in metrics

    # Deleting the WorkflowRun ends the quarantined run (terminate still works on it).
    kube.delete("workflowrun", "fragile-1", namespace)
    eventually(
        lambda: call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}")[1]["status"] == "TERMINATED",
        what="the quarantined run to be terminated",
    )
    assert operator.child.alive(), operator.logs()
