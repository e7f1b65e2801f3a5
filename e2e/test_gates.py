"""Each gate's visible outcome against the real API server and the operator
process: what a kubectl user and an API caller see."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from tests.support.api import call
from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def ready(kube: Kube, kind: str, name: str, namespace: str) -> dict[str, Any]:
    return eventually(
        lambda: (
            (o := kube.get(kind, name, namespace))
            and (c := condition(o))
            and o["status"].get("observedGeneration") == o["metadata"]["generation"]
            and c
            and o
        ),
        what=f"{kind}/{name} to be reconciled",
    )


def workflow(kube: Kube, namespace: str, name: str, **spec: Any) -> None:
    spec.setdefault("tasks", [{"name": "slow_job", "taskReferenceName": "job"}])
    kube.apply(manifest("Workflow", name.replace("_", "-"), {"name": name, **spec}), namespace)
    obj = ready(kube, "workflow", name.replace("_", "-"), namespace)
    assert condition(obj)["status"] == "True", obj["status"]  # type: ignore[index]


def create_run(
    kube: Kube, namespace: str, name: str, workflow_name: str, run_input: dict[str, Any] | None = None
) -> None:
    kube.run(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(manifest("WorkflowRun", name, {"workflow": workflow_name, "input": run_input or {}})),
    )


def run_status(kube: Kube, namespace: str, name: str, phase: str | None = None) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        status = (kube.get("workflowrun", name, namespace) or {}).get("status", {})
        return status if status.get("phase") and (phase is None or status["phase"] == phase) else None

    return eventually(probe, what=f"WorkflowRun {name} phase {phase}")


def test_max_concurrent_executions_refuses_with_limit_exceeded(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    workflow(kube, namespace, "nightly_reconcile", maxConcurrentExecutions=1)
    api = f"{operator.api_url}/v1/ns/{namespace}/executions"
    status, first = call("POST", api, {"name": "nightly_reconcile"})
    assert status == 201
    status, body = call("POST", api, {"name": "nightly_reconcile"})
    assert status == 409 and body["error"] == "LIMIT_EXCEEDED" and body["control"] == "maxConcurrentExecutions"
    assert (body["limit"], body["current"]) == (1, 1)
    create_run(kube, namespace, "second-night", "nightly_reconcile")
    refused = run_status(kube, namespace, "second-night", "Refused")
    assert refused["control"] == "maxConcurrentExecutions"
    assert refused["reasonForIncompletion"].startswith("LIMIT_EXCEEDED")
    table = kube.run("get", "workflowruns", "-n", namespace).stdout
    assert "Refused" in table and "maxConcurrentExecutions" in table


def test_a_namespace_quota_refuses_with_429_and_the_reference_body(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    workflow(kube, namespace, "imports")
    kube.apply(manifest("Quota", "team-limits", {"maxConcurrentExecutions": 2}), namespace)
    ready(kube, "quota", "team-limits", namespace)
    api = f"{operator.api_url}/v1/ns/{namespace}/executions"
    assert call("POST", api, {"name": "imports"})[0] == 201
    assert call("POST", api, {"name": "imports"})[0] == 201
    status, body = call("POST", api, {"name": "imports"})
    assert status == 429 and body["control"] == "quota:team-limits"
    assert {k: body[k] for k in ("quota", "limit", "current")} == {"quota": "team-limits", "limit": 2, "current": 2}
    assert body["retryAfterSeconds"] >= 1
    create_run(kube, namespace, "one-too-many", "imports")
    refused = run_status(kube, namespace, "one-too-many", "Refused")
    assert refused["control"] == "quota:team-limits"
    assert refused["refusal"]["limit"] == 2 and refused["refusal"]["quota"] == "team-limits"
    used = eventually(
        lambda: (kube.get("quota", "team-limits", namespace) or {}).get("status", {}).get("used"),
        what="the Quota's usage",
    )
    assert used["concurrentExecutions"] == 2


def test_runs_wait_for_admission_per_key_and_are_admitted_in_turn(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    workflow(
        kube,
        namespace,
        "tenant_sync",
        rateLimitConfig={"rateLimitKey": "${workflow.input.tenantId}", "concurrentExecLimit": 1},
    )
    api = f"{operator.api_url}/v1/ns/{namespace}"
    _, first = call("POST", f"{api}/executions", {"name": "tenant_sync", "input": {"tenantId": "acme"}})
    _, second = call("POST", f"{api}/executions", {"name": "tenant_sync", "input": {"tenantId": "acme"}})
    _, other = call("POST", f"{api}/executions", {"name": "tenant_sync", "input": {"tenantId": "globex"}})
    assert (first["awaitingAdmission"], second["awaitingAdmission"], other["awaitingAdmission"]) == (False, True, False)
    _, view = call("GET", f"{api}/executions/{second['id']}")
    assert (view["status"], view["awaitingAdmission"]) == ("RUNNING", True)
    create_run(kube, namespace, "acme-3", "tenant_sync", {"tenantId": "acme"})
    waiting = eventually(lambda: (s := run_status(kube, namespace, "acme-3")).get("awaitingAdmission") and s)
    assert waiting["control"] == "rateLimitConfig"
    assert call("POST", f"{api}/executions/{first['id']}/terminate", {"reason": "done early"})[0] == 202
    admitted = eventually(
        lambda: (v := call("GET", f"{api}/executions/{second['id']}")[1]) and not v["awaitingAdmission"] and v,
        what="the second acme run to be admitted",
    )
    assert admitted["status"] == "RUNNING"
    _, third = call("GET", f"{api}/executions/{waiting['executionId']}")
    assert third["awaitingAdmission"], "admitted in order: the WorkflowRun came third"


def test_semaphore_status_shows_held_permits_and_holders(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    kube.apply(manifest("Semaphore", "legacy-erp", {"name": "legacy_erp", "permits": 2}), namespace)
    kube.apply(
        manifest("TaskDefinition", "export-report", {"name": "export_report", "semaphores": ["legacy_erp"]}), namespace
    )
    ready(kube, "semaphore", "legacy-erp", namespace)
    ready(kube, "taskdefinition", "export-report", namespace)
    workflow(kube, namespace, "exports", tasks=[{"name": "export_report", "taskReferenceName": "export"}])
    api = f"{operator.api_url}/v1/ns/{namespace}"
    for _ in range(3):
        call("POST", f"{api}/executions", {"name": "exports"})
    leased: list[dict[str, Any]] = []
    while len(leased) < 2:
        leased += call(
            "POST",
            f"{api}/tasks/poll",
            {"taskTypes": ["export_report"], "workerId": "erp-worker", "count": 5, "pollTimeoutSeconds": 5},
        )[1]["tasks"]
    assert len(leased) == 2, "two permits, two leases"
    status = eventually(
        lambda: (s := (kube.get("semaphore", "legacy-erp", namespace) or {}).get("status", {})).get("held") == 2 and s,
        what="held 2 on the Semaphore's status",
    )
    assert status["permits"] == 2 and {h["taskId"] for h in status["holders"]} == {t["taskId"] for t in leased}
    assert call("GET", f"{api}/semaphores")[1] == [{"name": "legacy_erp", "permits": 2, "held": 2}]
    line = kube.run("get", "semaphores", "-n", namespace).stdout.splitlines()[1].split()
    assert line[:3] == ["legacy-erp", "2", "2"]
    td = eventually(
        lambda: (
            (s := (kube.get("taskdefinition", "export-report", namespace) or {}).get("status", {})).get("inFlight") == 2
            and s
        ),
        what="the TaskDefinition's counts",
    )
    assert td["ready"] == 1 and td["pollers"][0]["workerId"] == "erp-worker"


class Flaky:
    """A local HTTP server answering 503 until told to recover."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        return web.json_response({"down": self.down}, status=503 if self.down else 200)


@pytest.fixture
def flaky() -> Iterator[Flaky]:
    server = Flaky()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner_box: list[web.AppRunner] = []

    async def serve() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        runner_box.append(runner)
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(serve()), loop.run_forever()), daemon=True)
    thread.start()
    started.wait(10)
    yield server
    asyncio.run_coroutine_threadsafe(runner_box[0].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def test_the_breaker_opens_on_503s_and_closes_after_a_successful_probe(
    kube: Kube, namespace: str, operator: OperatorProcess, flaky: Flaky
) -> None:
    kube.apply(manifest("TaskDefinition", "legacy-call", {"name": "legacy_call", "retryCount": 0}), namespace)
    ready(kube, "taskdefinition", "legacy-call", namespace)
    workflow(
        kube,
        namespace,
        "call_legacy",
        tasks=[
            {
                "name": "legacy_call",
                "taskReferenceName": "call",
                "type": "HTTP",
                "inputParameters": {"http_request": {"uri": f"http://127.0.0.1:{flaky.port}/status"}},
            }
        ],
    )
    api = f"{operator.api_url}/v1/ns/{namespace}/executions"

    def finish_one() -> dict[str, Any]:
        _, started = call("POST", api, {"name": "call_legacy"})
        return eventually(
            lambda: (v := call("GET", f"{api}/{started['id']}")[1])["status"] != "RUNNING" and v,
            what="the HTTP task's run to end",
        )

    for _ in range(3):
        assert "HTTP 503" in finish_one()["reasonForIncompletion"]
    calls = flaky.calls
    fast = finish_one()
    target = f"127.0.0.1:{flaky.port}"
    assert f"circuitBreaker:{target} open" in fast["reasonForIncompletion"] and flaky.calls == calls
    assert fast["tasks"][0]["status"] == "FAILED", "never terminally"
    status, text = call("GET", f"{operator.api_url}/metrics")
    assert f'sluiceway_circuit_breaker_state{{target="{target}"}} 2.0' in text
    flaky.down = False
    eventually(
        lambda: finish_one()["status"] == "COMPLETED", timeout=20, interval=0.5, what="a probe to succeed after openMs"
    )
    _, text = call("GET", f"{operator.api_url}/metrics")
    assert f'sluiceway_circuit_breaker_state{{target="{target}"}} 0.0' in text


def test_a_workflow_over_the_definitions_quota_is_not_ready(kube: Kube, namespace: str) -> None:
    kube.apply(manifest("Quota", "defs", {"maxWorkflowDefinitions": 1}), namespace)
    ready(kube, "quota", "defs", namespace)
    workflow(kube, namespace, "first_one")
    kube.apply(manifest("Workflow", "second-one", {"tasks": [{"name": "x", "taskReferenceName": "x"}]}), namespace)
    obj = ready(kube, "workflow", "second-one", namespace)
    cond = condition(obj)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "QuotaExceeded")
    assert "maxWorkflowDefinitions 1" in cond["message"]


def test_the_reference_rest_surface_writes_through_kubernetes(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    api = f"{operator.api_url}/v1/ns/{namespace}"
    status, body = call(
        "POST",
        f"{api}/metadata/task-definitions",
        {
            "name": "charge",
            "retryCount": 5,
            "retryLogic": "EXPONENTIAL_BACKOFF",
            "retryDelaySeconds": 2,
            "backoffScaleFactor": 2,
            "maxRetryDelaySeconds": 300,
            "jitter": 0.2,
            "retryBudget": 0.3,
            "nonRetryableErrors": ["card_declined", "INVALID_ARGUMENT"],
        },
    )
    assert status == 200 and body["status"]["ready"], body
    obj = kube.get("taskdefinition", "charge", namespace)
    assert obj is not None and obj["spec"]["retryCount"] == 5, "the cluster holds the definition"
    status, got = call("GET", f"{api}/metadata/task-definitions/charge")
    assert status == 200 and got["nonRetryableErrors"] == ["card_declined", "INVALID_ARGUMENT"]
    status, body = call(
        "POST", f"{api}/metadata/task-definitions", {"name": "export_report", "semaphores": ["legacy_erp"]}
    )
    assert status == 200 and body["resource"] == "export-report"
    assert kube.get("taskdefinition", "export-report", namespace)["spec"]["name"] == "export_report"  # type: ignore[index]
    status, body = call("POST", f"{api}/metadata/task-definitions", {"name": "bad", "jitter": 1.5})
    assert status == 422 and "jitter" in body["message"]
    assert kube.get("taskdefinition", "bad", namespace) is None, "nothing half-written"
    status, body = call("PUT", f"{api}/semaphores/legacy_erp", {"permits": 4})
    assert status == 200 and body["resource"] == "legacy-erp"
    assert call("GET", f"{api}/semaphores")[1] == [{"name": "legacy_erp", "permits": 4, "held": 0}]
    status, body = call(
        "PUT",
        f"{api}/quotas",
        {
            "maxConcurrentExecutions": 5000,
            "maxExecutionsPerMinute": 2000,
            "maxWorkflowDefinitions": 500,
            "maxSchedules": 100,
        },
    )
    assert status == 200 and kube.get("quota", "default", namespace) is not None
    status, quotas = call("GET", f"{api}/quotas")
    assert quotas["maxExecutionsPerMinute"] == 2000 and quotas["used"]["concurrentExecutions"] == 0
