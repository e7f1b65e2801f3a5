"""The operator's logs never carry payloads or secrets: a value planted in a
run's input, a worker's output and log, a failed task's output and an HTTP
task's header and body is driven through the operator (logging at DEBUG),
then its whole log is scanned for it. Its lines are JSON, and the lines about
these runs name them in fields."""

from __future__ import annotations

import json
import uuid
from typing import Any

from e2e.test_gates import manifest
from sluiceway.devenv.processes import free_port
from tests.support.api import call
from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually


def test_a_planted_secret_never_reaches_the_operator_log(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    secret = f"planted-{uuid.uuid4().hex}"
    api = f"{operator.api_url}/v1/ns/{namespace}"
    closed = f"http://127.0.0.1:{free_port()}/hook?token={secret}"  # nothing listens: the call fails
    specs: dict[str, dict[str, Any]] = {
        "carry": {"tasks": [{"name": "carry_job", "taskReferenceName": "job",
                             "inputParameters": {"token": "${workflow.input.token}"}}]},
        "call": {"tasks": [{"name": "notify", "taskReferenceName": "notify", "type": "HTTP", "inputParameters": {
            "http_request": {"uri": closed, "method": "POST", "headers": {"Authorization": f"Bearer {secret}"},
                             "body": {"token": secret}}}}]},
    }  # fmt: skip
    for name, spec in specs.items():
        kube.apply(manifest("Workflow", name, {"name": name, **spec}), namespace)
    for name in specs:
        eventually(
            lambda name=name: (c := condition(kube.get("workflow", name, namespace))) and c["status"] == "True",
            what=f"Workflow {name} to be Ready",
        )
    runs = []
    for name in ("carry", "carry", "call"):
        status, body = call("POST", f"{api}/executions", {"name": name, "input": {"token": secret}})
        assert status == 201, body
        runs.append(body["id"])
    leased: list[dict[str, Any]] = []
    while len(leased) < 2:
        poll = {"taskTypes": ["carry_job"], "workerId": "e2e", "count": 2 - len(leased), "pollTimeoutSeconds": 10}
        status, body = call("POST", f"{api}/tasks/poll", poll)
        assert status == 200, body
        leased += body["tasks"]
    assert all(t["input"]["token"] == secret for t in leased), "the payload did travel"
    done, failed = leased
    results = [
        {"taskId": done["taskId"], "epoch": done["epoch"], "status": "COMPLETED", "output": {"echo": secret},
         "logs": [{"message": f"using {secret}", "level": "INFO"}]},
        {"taskId": failed["taskId"], "epoch": failed["epoch"], "status": "FAILED_WITH_TERMINAL_ERROR",
         "output": {"echo": secret}, "reason": "the partner refused"},
    ]  # fmt: skip
    status, body = call("POST", f"{api}/tasks/results", {"results": results})
    assert status == 200 and all(r["code"] == 200 for r in body["results"]), body

    def ended(run_id: str) -> dict[str, Any] | None:
        view: dict[str, Any] = call("GET", f"{api}/executions/{run_id}")[1]
        return view if view["status"] != "RUNNING" else None

    outcomes = [eventually(lambda r=r: ended(r), timeout=60, what=f"run {r} to end")["status"] for r in runs]
    assert sorted(outcomes) == ["COMPLETED", "FAILED", "FAILED"], outcomes

    log = operator.child.log_path.read_text(errors="replace")
    assert secret not in log, [line for line in log.splitlines() if secret in line][:3]
    structured = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert structured, "the operator logs JSON lines"
    about = [line for line in structured if line.get("run_id") in runs]
    assert about and all(line["trace_id"] == uuid.UUID(line["run_id"]).hex for line in about), (
        "lines about these runs name them"
    )
