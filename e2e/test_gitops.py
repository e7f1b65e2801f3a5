"""GitOps: the examples applied again and again change nothing; server-side
apply works without field-manager conflicts; the operator writes only
status (and its own finalizer and bookkeeping annotations)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.support.kube import Kube, condition
from tests.support.operators import STATUS_INTERVAL
from tests.support.waiting import eventually

EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")
KINDS = "taskdefinitions,workflows,workflowruns,semaphores,quotas,webhooks"


def objects(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    listed = json.loads(kube.run("get", KINDS, "-n", namespace, "-o", "json", "--show-managed-fields").stdout)["items"]
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in listed}


def settled(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    """Every definition reconciled and the run started."""
    found = objects(kube, namespace)
    for key, obj in found.items():
        if key.startswith("WorkflowRun/"):
            if not obj.get("status", {}).get("executionId"):
                return {}
        elif not condition(obj) or obj["status"].get("observedGeneration") != obj["metadata"]["generation"]:
            return {}
    return found


def without_time_window(obj: dict[str, Any]) -> dict[str, Any]:
    """A Quota reports starts in the current clock minute: time alone changes that number."""
    status = json.loads(json.dumps(obj.get("status", {})))
    status.get("used", {}).pop("executionsThisMinute", None)
    return status


def versions(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in found.items() if not key.startswith("Quota/")}


# Longer than two status-report intervals: any report that would write has had two chances.
QUIET_WINDOW = 3 * STATUS_INTERVAL


def quiet(kube: Kube, namespace: str, window: float = QUIET_WINDOW) -> dict[str, dict[str, Any]]:
    """The objects once nothing has written them for a window longer than two
    status-report intervals: the first reports land a moment after the
    objects are reconciled."""
    deadline = time.monotonic() + 90
    previous = objects(kube, namespace)
    while time.monotonic() < deadline:
        time.sleep(window)
        current = objects(kube, namespace)
        if versions(current) == versions(previous):
            return current
        previous = current
    raise AssertionError("the examples' objects never stopped changing")


def test_applying_the_examples_twice_changes_nothing(kube: Kube, namespace: str) -> None:
    first = kube.run("apply", "-n", namespace, "-f", EXAMPLES).stdout
    assert "created" in first
    eventually(lambda: settled(kube, namespace), timeout=60, what="the examples to be reconciled")
    before = quiet(kube, namespace)
    again = kube.run("apply", "-n", namespace, "-f", EXAMPLES).stdout
    assert all(line.endswith("unchanged") for line in again.strip().splitlines()), again
    time.sleep(QUIET_WINDOW)
    after = objects(kube, namespace)
    assert before.keys() == after.keys() and len(before) >= 10
    for key, obj in before.items():
        now = after[key]
        assert now["metadata"]["generation"] == obj["metadata"]["generation"], f"{key}: a new generation"
        assert now["spec"] == obj["spec"], f"{key}: the spec changed"
        if key.startswith("Quota/"):
            assert without_time_window(now) == without_time_window(obj), f"{key}: status churn"
        else:
            assert now["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"], (
                f"{key} was written again: {json.dumps(obj.get('status'))} -> {json.dumps(now.get('status'))}"
            )


def test_server_side_apply_has_no_field_manager_conflicts(kube: Kube, namespace: str) -> None:
    for _ in range(2):
        result = kube.run(
            "apply", "--server-side", "--field-manager=argocd-controller", "-n", namespace, "-f", EXAMPLES, check=False
        )
        assert result.returncode == 0, result.stderr
        assert "conflict" not in result.stderr.lower()
        eventually(lambda: settled(kube, namespace), timeout=60, what="the examples to be reconciled")
    for key, obj in objects(kube, namespace).items():
        assert obj["metadata"]["generation"] == 1, f"{key}: re-applying made a new generation"
        managers = {m["manager"]: m for m in obj["metadata"].get("managedFields", [])}
        assert "argocd-controller" in managers
        spec_writers = [
            name
            for name, m in managers.items()
            if name != "argocd-controller" and "f:spec" in json.dumps(m.get("fieldsV1", {}))
        ]
        assert spec_writers == [], f"{key}: the spec was written by {spec_writers}"


def test_deleting_a_workflow_lets_runs_finish_or_terminates_them_as_its_policy_says(
    kube: Kube, namespace: str, operator: Any
) -> None:
    from tests.support.api import call

    api = f"{operator.api_url}/v1/ns/{namespace}/executions"
    for name, policy in (("keep-going", "Finish"), ("stop-now", "Terminate")):
        kube.apply(
            {
                "apiVersion": "sluiceway.dev/v1beta1",
                "kind": "Workflow",
                "metadata": {"name": name},
                "spec": {
                    "activeRunsPolicy": policy,
                    "tasks": [{"name": "nobody_polls", "taskReferenceName": "wait_here"}],
                },
            },
            namespace,
        )
        eventually(
            lambda name=name: (o := kube.get("workflow", name, namespace)) and o.get("status", {}).get("version"),
            what=f"Workflow {name}",
        )
    runs = {name: call("POST", api, {"name": name})[1]["id"] for name in ("keep-going", "stop-now")}
    kube.delete("workflow", "keep-going", namespace)
    kube.delete("workflow", "stop-now", namespace)
    assert kube.get("workflow", "stop-now", namespace) is None, "the finalizer let the deletion finish"
    stopped = eventually(
        lambda: (v := call("GET", f"{api}/{runs['stop-now']}")[1])["status"] == "TERMINATED" and v,
        what="the Terminate policy to end the run",
    )
    assert "activeRunsPolicy Terminate" in stopped["reasonForIncompletion"]
    time.sleep(2)
    assert call("GET", f"{api}/{runs['keep-going']}")[1]["status"] == "RUNNING", "Finish lets runs go on"
    status, body = call("POST", api, {"name": "keep-going"})
    assert status == 404 and body["error"] == "WORKFLOW_NOT_FOUND", "no new runs of a deleted Workflow"
