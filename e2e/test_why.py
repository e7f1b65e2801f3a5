"""`sluiceway why` against the real stack: a task held by a semaphore is named
as such (by run id, by WorkflowRun, through kubectl), and a finished run is not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
VENV_BIN = Path(sys.executable).parent


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def call(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def ready(kube: Kube, kind: str, name: str, namespace: str, *, version: bool = False) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        obj = kube.get(kind, name, namespace)
        cond = condition(obj)
        if not obj or not cond or cond["status"] != "True":
            return None
        return obj if not version or obj["status"].get("version") else None

    return eventually(probe, what=f"{kind}/{name} to be Ready")


def why(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluiceway", "why", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_why_names_the_semaphore_holding_a_task(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    api = f"{operator.api_url}/v1/ns/{namespace}"
    kube.apply(manifest("Semaphore", "erp", {"name": "legacy_erp", "permits": 1}), namespace)
    kube.apply(
        manifest("TaskDefinition", "export-report", {"name": "export_report", "semaphores": ["legacy_erp"]}), namespace
    )
    kube.apply(
        manifest("Workflow", "one-export", {"tasks": [{"name": "export_report", "taskReferenceName": "export"}]}),
        namespace,
    )
    ready(kube, "semaphore", "erp", namespace)
    ready(kube, "taskdefinition", "export-report", namespace)
    ready(kube, "workflow", "one-export", namespace, version=True)

    runs = [call("POST", f"{api}/executions", {"name": "one-export"})["id"] for _ in range(2)]
    leased = call(
        "POST",
        f"{api}/tasks/poll",
        {"taskTypes": ["export_report"], "workerId": "holder", "count": 5, "pollTimeoutSeconds": 5},
    )["tasks"]
    assert len(leased) == 1, leased  # one permit
    held = leased[0]
    holder_run = held["executionId"]
    waiting_run = next(r for r in runs if r != holder_run)

    # By run id: blocked by the semaphore, exit 1.
    result = why(waiting_run, "-n", namespace, "--url", operator.api_url)
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert lines[0] == f"run {waiting_run} (one-export) is RUNNING", result.stdout
    blocking = next(line for line in lines if "semaphore:legacy_erp" in line)
    assert blocking.startswith("✗ ") and "1/1" in blocking, result.stdout

    # The holder's own run: its task is leased, which is informational.
    result = why(holder_run, "-n", namespace, "--url", operator.api_url)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "· running" in result.stdout and "holder" in result.stdout, result.stdout

    # By task id, and as JSON.
    result = why(f"task/{held['taskId']}", "-n", namespace, "--url", operator.api_url, "-o", "json")
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert json.loads(result.stdout)["executionId"] == holder_run

    # By WorkflowRun, resolved through the Kubernetes API with $KUBECONFIG.
    kube.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(manifest("WorkflowRun", "export-3", {"workflow": "one-export"})),
    )
    eventually(
        lambda: (kube.get("workflowrun", "export-3", namespace) or {}).get("status", {}).get("executionId"),
        what="the WorkflowRun's executionId",
    )
    result = why(
        "workflowrun/export-3", "-n", namespace, "--url", operator.api_url, env={"KUBECONFIG": str(kube.kubeconfig)}
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "semaphore:legacy_erp" in result.stdout and "1/1" in result.stdout, result.stdout

    # The kubectl plugin path: `kubectl sluiceway why ...` runs `kubectl-sluiceway why ...`. kubectl
    # refuses flags before a plugin's name ("flags cannot be placed before plugin name"), so the
    # kubeconfig goes in $KUBECONFIG, which the plugin inherits.
    assert (VENV_BIN / "kubectl-sluiceway").exists(), "make test installs the package and its kubectl plugin"
    plugin = subprocess.run(
        [str(kube.kubectl_path), "sluiceway", "why", waiting_run, "-n", namespace, "--url", operator.api_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "KUBECONFIG": str(kube.kubeconfig),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )
    assert plugin.returncode == 1, (plugin.stdout, plugin.stderr)
    assert plugin.stdout.splitlines()[0] == lines[0] and "semaphore:legacy_erp" in plugin.stdout, plugin.stdout

    # Finished: complete the leased task; the run is over and nothing blocks.
    call(
        "POST",
        f"{api}/tasks/results",
        {"results": [{"taskId": held["taskId"], "epoch": held["epoch"], "status": "COMPLETED"}]},
    )
    eventually(
        lambda: call("GET", f"{api}/executions/{holder_run}")["status"] == "COMPLETED",
        what="the holder's run to complete",
    )
    result = why(holder_run, "-n", namespace, "--url", operator.api_url)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stdout.splitlines()[0] == f"run {holder_run} (one-export) is COMPLETED", result.stdout


def test_why_reports_unknown_runs_and_unreachable_apis(namespace: str, operator: OperatorProcess) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    result = why(missing, "-n", namespace, "--url", operator.api_url)
    assert result.returncode == 3 and result.stdout == ""  # not found
    assert f"no run {missing}" in result.stderr and operator.api_url in result.stderr
    result = why(missing, "-n", namespace, "--url", "http://127.0.0.1:9")
    assert result.returncode == 5 and "http://127.0.0.1:9" in result.stderr  # unreachable
