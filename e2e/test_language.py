"""The rest of the workflow language end to end: the real API server, the
operator as a process, workers and callers in other processes (a worker, this
test calling webhooks and sending messages, a gRPC server, a callback receiver)."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sluiceway.controls.webhooks import signed_headers, verify
from sluiceway.devenv.processes import Child
from sluiceway.model.webhook import WebhookSpec
from tests.support.api import call
from tests.support.grpc_shop import SERVICE, Shop
from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

API = "sluiceway.dev/v1beta1"
WORKERS = str(Path(__file__).parent / "workers" / "language.py")
SECRET = "e2e-webhook-secret-0123456789"


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def workflow(kube: Kube, namespace: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply(manifest("Workflow", name.replace("_", "-"), {"name": name, **spec}), namespace)
    eventually(
        lambda: (o := kube.get("workflow", name.replace("_", "-"), namespace)) and o.get("status", {}).get("version"),
        what=f"Workflow {name}",
    )


def start(operator: OperatorProcess, namespace: str, name: str, input: dict[str, Any] | None = None) -> str:
    status, body = call(
        "POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": name, "input": input or {}}
    )
    assert status == 201, body
    run_id: str = body["id"]
    return run_id


def finished(operator: OperatorProcess, namespace: str, run_id: str, timeout: float = 60) -> dict[str, Any]:
    url = f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}"
    found: dict[str, Any] = eventually(
        lambda: (v := call("GET", url)[1])["status"] != "RUNNING" and v, timeout=timeout, what=f"run {run_id} to end"
    )
    return found


def waiting(operator: OperatorProcess, namespace: str, run_id: str, ref: str) -> dict[str, Any]:
    url = f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}"
    found: dict[str, Any] = eventually(
        lambda: next(
            (t for t in call("GET", url)[1]["tasks"] if t["referenceName"] == ref and t["status"] == "IN_PROGRESS"),
            None,
        ),
        what=f"{ref} to wait",
    )
    return found


def secret(kube: Kube, namespace: str, name: str, **data: str) -> None:
    literal = [f"--from-literal={k}={v}" for k, v in data.items()]
    kube.run("create", "secret", "generic", name, "-n", namespace, *literal)
    kube.run("label", "secret", name, "-n", namespace, "sluiceway.dev/secret=true")


def test_a_thousand_iterations_keep_the_run_small_and_a_worker_loop_runs_by_iteration(
    kube: Kube, namespace: str, operator: OperatorProcess, start_worker: Callable[..., Child]
) -> None:
    workflow(
        kube,
        namespace,
        "counter",
        {
            "tasks": [
                {
                    "name": "loop",
                    "taskReferenceName": "loop",
                    "type": "DO_WHILE",
                    "loopCondition": "iteration < 1000",
                    "maxIterations": 1000,
                    "keepLastN": 10,
                    "loopOver": [
                        {
                            "name": "double",
                            "taskReferenceName": "double",
                            "type": "INLINE",
                            "inputParameters": {"expression": "input.i * 2", "i": "${loop.output.iteration}"},
                        }
                    ],
                }
            ],
            "outputParameters": {"last": "${double.output.result}"},
        },
    )
    workflow(
        kube,
        namespace,
        "pages",
        {
            "tasks": [
                {
                    "name": "paging",
                    "taskReferenceName": "paging",
                    "type": "DO_WHILE",
                    "loopCondition": "tasks.page.output.more",
                    "maxIterations": 100,
                    "keepLastN": 3,
                    "loopOver": [
                        {
                            "name": "fetch_page",
                            "taskReferenceName": "page",
                            "inputParameters": {"page": "${paging.output.iteration}", "pages": 25},
                        }
                    ],
                }
            ],
        },
    )
    start_worker(WORKERS, namespace)
    started = time.monotonic()
    counter = start(operator, namespace, "counter")
    counted = finished(operator, namespace, counter)
    assert counted["output"] == {"last": 2000}, counted["status"] + counted["reasonForIncompletion"]
    engine_seconds = time.monotonic() - started
    pages = start(operator, namespace, "pages")
    view = finished(operator, namespace, pages)
    worker_seconds = time.monotonic() - started - engine_seconds
    assert view["status"] == "COMPLETED", view
    # A run's view lists every task the run keeps: what keepLastN pruned is gone from it.
    kept = {counter: len(counted["tasks"]), pages: len(view["tasks"])}
    print(
        f"\nDO_WHILE 1000 iterations keepLastN 10: {kept[counter]} tasks kept, {engine_seconds:.1f} s; "
        f"25 worker iterations keepLastN 3: {kept[pages]} tasks kept, {worker_seconds:.1f} s"
    )
    assert kept[counter] == 11 and kept[pages] == 4
    refs = sorted(t["referenceName"] for t in view["tasks"])
    assert refs == ["page__23", "page__24", "page__25", "paging"]
    assert {t["iteration"] for t in view["tasks"] if t["loop"] == "paging"} == {23, 24, 25}


def test_a_signed_webhook_completes_only_the_matching_task_and_a_forged_one_nothing(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    secret(kube, namespace, "payments", secret=SECRET)
    kube.apply(
        manifest("Webhook", "orders-paid", {"hmac": {"secretRef": {"name": "payments", "key": "secret"}}}), namespace
    )
    hook = eventually(
        lambda: (o := kube.get("webhook", "orders-paid", namespace)) and condition(o) and o, what="Webhook"
    )
    assert condition(hook)["status"] == "True" and hook["status"]["path"] == f"v1/ns/{namespace}/webhooks/orders-paid"
    workflow(
        kube,
        namespace,
        "checkout",
        {
            "tasks": [
                {
                    "name": "wait_paid",
                    "taskReferenceName": "paid",
                    "type": "WAIT_FOR_WEBHOOK",
                    "webhook": "orders-paid",
                    "inputParameters": {"matches": {"orderId": "${workflow.input.orderId}"}},
                }
            ],
            "outputParameters": {"amount": "${paid.output.payload.amount}"},
        },
    )
    runs = {order: start(operator, namespace, "checkout", {"orderId": order}) for order in (42, 43)}
    for run_id in runs.values():
        waiting(operator, namespace, run_id, "paid")
    _, why = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{runs[42]}/why")
    assert "waiting for webhook orders-paid matching orderId=42 since" in why["reasons"][0]["message"]
    body = json.dumps({"orderId": 42, "amount": 99}).encode()
    url = f"{operator.api_url}/{hook['status']['path']}"

    def deliver(headers: dict[str, str]) -> tuple[int, Any]:
        request = urllib.request.Request(url, data=body, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    forged = signed_headers(b"guessed", int(time.time()), body)
    assert deliver(forged)[0] == 401
    assert call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{runs[42]}")[1]["status"] == "RUNNING"
    status, answer = deliver(signed_headers(SECRET.encode(), int(time.time()), body))
    assert status == 200 and [t["executionId"] for t in answer["tasks"]] == [runs[42]]
    assert finished(operator, namespace, runs[42])["output"] == {"amount": 99}
    assert call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{runs[43]}")[1]["status"] == "RUNNING"


def test_messages_sent_by_a_caller_arrive_in_order_each_once(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    workflow(
        kube,
        namespace,
        "chat",
        {
            "tasks": [
                {"name": "gate", "taskReferenceName": "gate", "type": "HUMAN"},
                {"name": "pull", "taskReferenceName": "first", "type": "PULL_WORKFLOW_MESSAGES", "batchSize": 3},
                {"name": "pull", "taskReferenceName": "second", "type": "PULL_WORKFLOW_MESSAGES", "batchSize": 3},
            ],
            "outputParameters": {"first": "${first.output.messages}", "second": "${second.output.messages}"},
        },
    )
    run_id = start(operator, namespace, "chat")
    gate = waiting(operator, namespace, run_id, "gate")  # the run holds here while messages queue up
    for n in range(1, 6):
        status, _ = call("POST", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}/messages", {"n": n})
        assert status == 202
    assert call("POST", f"{operator.api_url}/v1/ns/{namespace}/tasks/{gate['taskId']}/complete", {})[0] == 200
    view = finished(operator, namespace, run_id)
    got = [[m["payload"]["n"] for m in view["output"][k]] for k in ("first", "second")]
    assert got == [[1, 2, 3], [4, 5]]


@pytest.fixture
def shop() -> Iterator[Shop]:
    with Shop() as server:
        yield server


def test_grpc_calls_are_classified_by_status_code_and_trip_the_breaker_of_their_service(
    kube: Kube, namespace: str, operator: OperatorProcess, shop: Shop
) -> None:
    kube.apply(manifest("TaskDefinition", "reserve", {"retryCount": 0}), namespace)

    def grpc_workflow(name: str, answer: str) -> None:
        workflow(
            kube,
            namespace,
            name,
            {
                "tasks": [
                    {
                        "name": "reserve",
                        "taskReferenceName": "reserve",
                        "type": "GRPC",
                        "grpc": {"target": f"127.0.0.1:{shop.port}", "service": SERVICE, "method": "Reserve"},
                        "inputParameters": {"request": {"sku": "${workflow.input.sku}", "answer": answer}},
                    }
                ]
            },
        )

    grpc_workflow("reserve_ok", "OK")
    grpc_workflow("reserve_bad", "INVALID_ARGUMENT")
    grpc_workflow("reserve_down", "UNAVAILABLE")
    ok = finished(operator, namespace, start(operator, namespace, "reserve_ok", {"sku": "A1"}))
    assert ok["status"] == "COMPLETED" and ok["output"]["response"] == {"reservation": "reserved A1"}
    bad = finished(operator, namespace, start(operator, namespace, "reserve_bad", {"sku": "A1"}))
    assert bad["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR" and "INVALID_ARGUMENT" in bad["tasks"][0]["reason"]
    unavailable = 0
    for _ in range(6):  # server failures open the breaker of shop.Inventory (failureRatio 0.5, minimumRequests 3)
        down = finished(operator, namespace, start(operator, namespace, "reserve_down", {"sku": "A1"}))
        reason = down["tasks"][0]["reason"]
        assert down["tasks"][0]["status"] == "FAILED", "never terminal: UNAVAILABLE and an open breaker are retryable"
        if "circuitBreaker" in reason:
            break
        assert "UNAVAILABLE" in reason
        unavailable += 1
    assert unavailable == 2, "ok, INVALID_ARGUMENT (the service answered) and two UNAVAILABLE: 2/4 opens it"
    calls = shop.calls
    fast = finished(operator, namespace, start(operator, namespace, "reserve_ok", {"sku": "A1"}))
    assert f"circuitBreaker:{SERVICE} open" in fast["reasonForIncompletion"] and shop.calls == calls
    with urllib.request.urlopen(f"{operator.api_url}/metrics") as response:
        metrics = response.read().decode()
    assert f'sluiceway_circuit_breaker_state{{target="grpc:{SERVICE}"}} 2.0' in metrics


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: list[tuple[bool, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        spec = WebhookSpec.model_validate({"hmac": {"secretRef": {"name": "x", "key": "y"}}})
        headers = {k.lower(): v for k, v in self.headers.items()}
        ok = verify(spec, SECRET.encode(), headers, body, time.time()) is None
        _Receiver.received.append((ok, body))
        self.send_response(200 if ok else 401)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


def test_a_webhook_task_sends_a_callback_signed_with_a_secret_from_kubernetes(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        secret(kube, namespace, "callbacks", key=SECRET)
        workflow(
            kube,
            namespace,
            "notify",
            {
                "tasks": [
                    {
                        "name": "notify",
                        "taskReferenceName": "notify",
                        "type": "WEBHOOK",
                        "signing": {"secretRef": {"name": "callbacks", "key": "key"}},
                        "inputParameters": {
                            "url": f"http://127.0.0.1:{server.server_address[1]}/hook",
                            "body": {"order": "${workflow.input.order}"},
                        },
                    }
                ]
            },
        )
        view = finished(operator, namespace, start(operator, namespace, "notify", {"order": 5}))
        assert view["status"] == "COMPLETED", view
        assert _Receiver.received == [(True, b'{"order":5}')]
    finally:
        server.shutdown()


def test_kubectl_refuses_a_loop_without_its_bound_and_a_task_without_its_type_is_simple(
    kube: Kube, namespace: str
) -> None:
    """The CRD's CEL rules, at `kubectl apply`: a DO_WHILE needs maxIterations,
    a Webhook exactly one way to verify; a task without a type is SIMPLE."""
    unbounded = manifest(
        "Workflow",
        "unbounded",
        {
            "tasks": [
                {
                    "name": "l",
                    "taskReferenceName": "l",
                    "type": "DO_WHILE",
                    "loopOver": [{"name": "x", "taskReferenceName": "x"}],
                    "loopCondition": "true",
                }
            ]
        },
    )
    refused = kube.apply(unbounded, namespace, check=False)
    assert refused.returncode != 0 and "a DO_WHILE needs loopOver and maxIterations" in refused.stderr
    too_many = manifest("Workflow", "too-many", {"tasks": [{**unbounded["spec"]["tasks"][0], "maxIterations": 10_001}]})
    refused = kube.apply(too_many, namespace, check=False)
    assert refused.returncode != 0 and "maxIterations" in refused.stderr
    both = manifest(
        "Webhook",
        "both",
        {"hmac": {"secretRef": {"name": "s", "key": "k"}}, "token": {"secretRef": {"name": "s", "key": "k"}}},
    )
    refused = kube.apply(both, namespace, check=False)
    assert refused.returncode != 0 and "set exactly one of hmac and token" in refused.stderr
    untyped = manifest("Workflow", "untyped", {"tasks": [{"name": "x", "taskReferenceName": "x"}]})
    assert kube.apply(untyped, namespace, check=False).returncode == 0
