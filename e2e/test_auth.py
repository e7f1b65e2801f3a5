"""Worker authentication and authorization against the real API server: an
operator of its own with SLUICEWAY_AUTH=kubernetes, ServiceAccount tokens
from `kubectl create token`, ordinary RBAC Roles, and API keys in Secrets."""

from __future__ import annotations

import asyncio
import http.server
import json
import secrets
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import call
from tests.support.database import Databases
from tests.support.kube import Cluster
from tests.support.operators import start_operator
from tests.support.secured import (
    API,
    STARTER_RULES,
    TASK_TYPE,
    WORKER_RULES,
    WORKFLOW,
    Secured,
    lease,
    poll,
    role,
    secured_operator,
    start_run,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def secured(cluster: Cluster, databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    accounts = {"worker": WORKER_RULES, "starter": STARTER_RULES}
    with secured_operator(cluster.kube, databases, tmp_path_factory.mktemp("operator-auth"), accounts) as secured:
        yield secured


def result(task: dict[str, Any], **output: Any) -> dict[str, Any]:
    return {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED", "output": output}


def test_health_and_the_openapi_document_stay_open(secured: Secured) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json", "/metrics"):
        status, _ = call("GET", f"{secured.url}{path}")
        assert status == 200, path


def test_no_token_is_401_and_an_invalid_one_too(secured: Secured) -> None:
    status, body = poll(secured, secured.a, None)
    assert status == 401 and body["error"] == "UNAUTHENTICATED", body
    status, body = poll(secured, secured.a, {"Authorization": "Bearer not-a-token"})
    assert status == 401 and body["error"] == "UNAUTHENTICATED", body
    status, body = poll(secured, secured.a, {"X-API-Key": "not-a-key-of-anyone-at-all"})
    assert status == 401, body


def test_a_worker_of_namespace_a_works_in_a_and_never_on_b(secured: Secured) -> None:
    s, a, b = secured, secured.a, secured.b
    worker_a = s.token(a, "worker")
    run_a, run_b = start_run(s, a, "from a"), start_run(s, b, "from b")

    status, body = poll(s, b, worker_a)
    assert status == 403, body
    assert body == {
        "error": "FORBIDDEN",
        "message": f"system:serviceaccount:{a}:worker may not poll taskdefinitions/{TASK_TYPE} in namespace {b}",
    }
    status, body = poll(s, a, s.token(a, "starter"))  # may start runs, not work on them
    assert status == 403, body

    task_a = lease(s, a, worker_a)
    assert task_a["executionId"] == run_a and task_a["input"] == {"text": "from a"}
    task_b = lease(s, b, s.token(b, "worker"))
    assert task_b["executionId"] == run_b

    # b's task, through b's paths: refused before anything is looked at.
    beat = {"taskId": task_b["taskId"], "epoch": task_b["epoch"]}
    for path, body_ in [
        (f"{task_b['taskId']}/heartbeat", beat),
        ("heartbeats", {"heartbeats": [beat]}),
        (f"{task_b['taskId']}/result", result(task_b, echoed="stolen")),
        ("results", {"results": [result(task_b, echoed="stolen")]}),
    ]:
        status, body = call("POST", f"{s.url}/v1/ns/{b}/tasks/{path}", body_, worker_a)
        assert status == 403, (path, body)
        assert body["message"].endswith(f"may not update taskdefinitions/{TASK_TYPE} in namespace {b}")
    # ... and through a's paths: not a task of namespace a.
    for path, body_ in [
        (f"{task_b['taskId']}/heartbeat", beat),
        ("heartbeats", {"heartbeats": [beat]}),
        (f"{task_b['taskId']}/result", result(task_b, echoed="stolen")),
        ("results", {"results": [result(task_b, echoed="stolen")]}),
    ]:
        status, body = call("POST", f"{s.url}/v1/ns/{a}/tasks/{path}", body_, worker_a)
        assert status != 200 or path == "heartbeats", (path, body)
        if path == "heartbeats":
            assert body == {"alive": [], "gone": [task_b["taskId"]], "errors": []}
        if path == "results":
            assert body["results"][0]["code"] == 404
    # b's lease is untouched: b's worker still holds it and completes it.
    status, body = call("POST", f"{s.url}/v1/ns/{b}/tasks/{task_b['taskId']}/heartbeat", beat, s.token(b, "worker"))
    assert status == 200, body
    status, body = call(
        "POST", f"{s.url}/v1/ns/{b}/tasks/{task_b['taskId']}/result", result(task_b, echoed="b"), s.token(b, "worker")
    )
    assert status == 200, body

    status, body = call(
        "POST",
        f"{s.url}/v1/ns/{a}/tasks/{task_a['taskId']}/heartbeat",
        {"taskId": task_a["taskId"], "epoch": task_a["epoch"]},
        worker_a,
    )
    assert status == 200, body
    status, body = call(
        "POST", f"{s.url}/v1/ns/{a}/tasks/{task_a['taskId']}/result", result(task_a, echoed="a"), worker_a
    )
    assert status == 200, body

    for namespace, run_id, echoed in ((a, run_a, "a"), (b, run_b, "b")):

        def finished(ns: str = namespace, rid: str = run_id) -> dict[str, Any] | None:
            status, body = call("GET", f"{s.url}/v1/ns/{ns}/executions/{rid}", None, s.token(ns, "starter"))
            assert status == 200, body
            return body if body["status"] != "RUNNING" else None

        run = eventually(finished, timeout=30, what=f"the run in {namespace} to finish")
        assert run["status"] == "COMPLETED" and run["output"] == {"echoed": echoed}, run
    # The starter of a may read a's runs, not b's.
    status, body = call("GET", f"{s.url}/v1/ns/{b}/executions/{run_b}", None, s.token(a, "starter"))
    assert status == 403, body


def test_an_api_key_works_as_its_service_account_until_its_secret_is_deleted(secured: Secured) -> None:
    s, a, b = secured, secured.a, secured.b
    key = secrets.token_urlsafe(32)
    name = f"key-{uuid.uuid4().hex[:6]}"
    s.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "labels": {"sluiceway.dev/api-key": "true"},
                "annotations": {"sluiceway.dev/service-account": f"{a}/worker"},
            },
            "stringData": {"key": key},
        },
        s.keys,
    )
    headers = {"X-API-Key": key}
    eventually(lambda: poll(s, a, headers)[0] == 200, timeout=10, what="the key to be accepted")

    run_id = start_run(s, a, "by key")
    task = lease(s, a, headers)
    assert task["executionId"] == run_id
    status, body = call("POST", f"{s.url}/v1/ns/{a}/tasks/{task['taskId']}/result", result(task, echoed="key"), headers)
    assert status == 200, body
    status, body = poll(s, b, headers)
    assert status == 403 and f"system:serviceaccount:{a}:worker may not poll" in body["message"], body
    status, body = call("PUT", f"{s.url}/v1/ns/{a}/semaphores/by-key", {"permits": 1}, headers)
    assert status == 403 and "API keys may not write definitions" in body["message"], body

    s.kube.delete("secret", name, s.keys)
    eventually(lambda: poll(s, a, headers)[0] == 401, timeout=10, what="the deleted key to be refused")
    logs = s.child.tail(5000)  # neither keys nor tokens are ever logged
    assert key not in logs and not any(token in logs for token in s.tokens.values())


def test_a_human_task_is_decided_by_an_authorized_person_and_recorded_as_them(secured: Secured) -> None:
    """HUMAN tasks: `update` on workflowruns named by the workflow decides them;
    who decided is the authenticated identity, recorded on the task."""
    s, a = secured, secured.a
    s.kube.run("create", "serviceaccount", "approver", "-n", a)
    approver_rules = [
        {"apiGroups": ["sluiceway.dev"], "resources": ["workflowruns"], "verbs": ["list", "get"]},
        {
            "apiGroups": ["sluiceway.dev"],
            "resources": ["workflowruns"],
            "resourceNames": ["refund_approval"],
            "verbs": ["update"],
        },
    ]
    s.kube.apply(role("sluiceway-approver", approver_rules, "approver"), a)
    approver = {"Authorization": f"Bearer {s.kube.run('create', 'token', 'approver', '-n', a).stdout.strip()}"}
    s.kube.apply(
        {
            "apiVersion": API,
            "kind": "Workflow",
            "metadata": {"name": "refund-approval"},
            "spec": {
                "name": "refund_approval",
                "tasks": [
                    {
                        "name": "approve",
                        "taskReferenceName": "approve",
                        "type": "HUMAN",
                        "inputParameters": {"amount": 30},
                    }
                ],
                "outputParameters": {"approved": "${approve.output.approved}"},
            },
        },
        a,
    )
    eventually(
        lambda: (o := s.kube.get("workflow", "refund-approval", a)) and o.get("status", {}).get("version"),
        what="the approval Workflow",
    )
    status, started = call("POST", f"{s.url}/v1/ns/{a}/executions", {"name": "refund_approval"}, s.token(a, "starter"))
    assert status == 201, started
    inbox_url = f"{s.url}/v1/ns/{a}/tasks?type=HUMAN&status=IN_PROGRESS"
    inbox = eventually(lambda: (b := call("GET", inbox_url, None, approver)[1])["items"] and b, what="the inbox")
    task = inbox["items"][0]
    assert task["executionId"] == started["id"] and task["input"] == {"amount": 30}
    decide = f"{s.url}/v1/ns/{a}/tasks/{task['taskId']}/complete"
    status, body = call("POST", decide, {"output": {"approved": True}}, s.token(a, "starter"))
    assert status == 403 and body["message"] == (
        f"system:serviceaccount:{a}:starter may not update workflowruns/refund_approval in namespace {a}"
    )
    status, body = call("POST", decide, {"output": {"approved": True}}, s.token(a, "worker"))
    assert status == 403, body
    status, body = call("POST", decide, {"output": {"approved": True}}, approver)
    assert status == 200 and body["completedBy"] == f"system:serviceaccount:{a}:approver", body
    run_url = f"{s.url}/v1/ns/{a}/executions/{started['id']}"
    done = eventually(
        lambda: (v := call("GET", run_url, None, s.token(a, "starter"))[1])["status"] != "RUNNING" and v,
        what="the approved run to end",
    )
    assert done["status"] == "COMPLETED" and done["output"] == {"approved": True}
    assert done["tasks"][0]["completedBy"] == f"system:serviceaccount:{a}:approver"
    # The audit trail names the identity of each operation.
    status, audit = call("GET", f"{run_url}/audit", None, s.token(a, "starter"))
    assert status == 200, audit
    assert [(e["operation"], e["actor"], e["via"]) for e in audit["entries"]] == [
        ("start", f"system:serviceaccount:{a}:starter", "token"),
        ("complete", f"system:serviceaccount:{a}:approver", "token"),
    ]


def test_a_webhook_call_needs_no_token_but_its_own_signature(secured: Secured) -> None:
    """The intake is exempt from the bearer-token middleware: a third party's
    call is verified by its signature alone."""
    s, a = secured, secured.a
    status, body = call("POST", f"{s.url}/v1/ns/{a}/webhooks/nothing-here", {"x": 1})
    assert status == 404, body  # not 401: no token is asked for; the endpoint does not exist


# -- tenant boundaries: payload limits and the egress policy ---------------------------


def test_an_input_over_the_payload_limit_is_refused_naming_the_field(secured: Secured) -> None:
    s, a = secured, secured.a
    huge = {"text": "x" * (2 * 1024 * 1024)}  # over the default 2 MiB, under the 8 MiB request limit
    start = {"name": WORKFLOW, "input": huge}
    status, body = call("POST", f"{s.url}/v1/ns/{a}/executions", start, s.token(a, "starter"))
    assert status == 413, body
    assert body["error"] == "PAYLOAD_TOO_LARGE" and body["field"] == "input" and body["limit"] == 2 * 1024 * 1024
    assert body["limitSource"] == "SLUICEWAY_MAX_PAYLOAD_BYTES", body


class _Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"reached": true}')

    def log_message(self, *_: Any) -> None:
        pass


def test_http_tasks_to_loopback_the_api_server_and_pods_are_refused_and_an_allowed_host_works(
    secured: Secured,
) -> None:
    s, a = secured, secured.a
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), _Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    allowed = f"http://127.0.0.2:{server.server_address[1]}/"
    api_server = s.kube.run("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    try:
        for name, uri, what in (
            ("loopback", allowed, "127.0.0.2 is loopback"),
            ("apiserver", f"{api_server}/api", "is loopback"),  # the test's API server listens on loopback
            ("pod", "http://10.244.3.7/", "in the cluster's pod range"),
        ):
            run = http_run(s, a, name, uri)
            assert run["status"] == "FAILED", run
            assert run["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR", run
            reason = run["tasks"][0]["reason"]
            assert reason.startswith("egress policy: ") and what in reason, reason
        s.kube.apply(
            {
                "apiVersion": API,
                "kind": "Quota",
                "metadata": {"name": "egress"},
                "spec": {"allowedEgress": ["127.0.0.2"]},
            },
            a,
        )
        # The Quota takes effect within the operator's few seconds of caching: start until one run completes.
        done = eventually(
            lambda: (r := http_run(s, a, "allowed", allowed))["status"] == "COMPLETED" and r,
            timeout=60,
            what="a call to the allowed host to complete",
        )
        assert done["tasks"][0]["output"]["response"]["body"] == {"reached": True}
    finally:
        server.shutdown()


def http_run(s: Secured, namespace: str, name: str, uri: str) -> dict[str, Any]:
    """Run a one-HTTP-task Workflow calling `uri`, as the starter; the finished run."""
    workflow = f"call_{name}"
    s.kube.apply(
        {
            "apiVersion": API,
            "kind": "Workflow",
            "metadata": {"name": workflow.replace("_", "-")},
            "spec": {
                "name": workflow,
                "tasks": [
                    {
                        "name": "call",
                        "taskReferenceName": "call",
                        "type": "HTTP",
                        "inputParameters": {"http_request": {"uri": uri, "method": "GET"}},
                    }
                ],
            },
        },
        namespace,
    )
    resource = workflow.replace("_", "-")
    eventually(
        lambda: (o := s.kube.get("workflow", resource, namespace)) and o.get("status", {}).get("version"),
        what=f"the Workflow {workflow}",
    )
    starts = f"{s.url}/v1/ns/{namespace}/executions"
    status, started = call("POST", starts, {"name": workflow}, s.token(namespace, "starter"))
    assert status == 201, started
    url = f"{s.url}/v1/ns/{namespace}/executions/{started['id']}"
    found: dict[str, Any] = eventually(
        lambda: (v := call("GET", url, None, s.token(namespace, "starter"))[1])["status"] != "RUNNING" and v,
        timeout=60,
        what=f"the run of {workflow} to end",
    )
    return found


def test_a_burst_from_one_identity_gets_429_while_other_identities_and_workers_are_served(
    secured: Secured, databases: Databases, tmp_path: Any
) -> None:
    """An operator of its own with a small identity bucket (it refills one
    token a minute, so no timing decides the count): the 21st request of one
    ServiceAccount is refused with Retry-After; another identity, and the
    same namespace's worker protocol, are still served. Failed
    authentications have a small bucket per address too."""
    s, a, b = secured, secured.a, secured.b
    database = asyncio.run(databases.create("e2e_rate"))
    limits = {
        "identity": {"perSecond": 1 / 60, "burst": 20},
        "namespace": {"perSecond": 1000, "burst": 1000},
        "failedAuthentication": {"perSecond": 1 / 60, "burst": 3},
    }
    limited = start_operator(
        "operator-rate",
        database,
        tmp_path,
        kubeconfig=s.kube.kubeconfig,
        settings={
            "SLUICEWAY_AUTH": "kubernetes",
            "SLUICEWAY_API_RATE_LIMITS": json.dumps(limits),
            "SLUICEWAY_LEADER_ELECTION": "false",
            "SLUICEWAY_NAMESPACES": "nobody-watches-this",  # its reconcilers stay out of the other operator's way
        },
    )
    try:
        missing = f"{limited.api_url}/v1/ns/{a}/executions/{uuid.uuid4()}"
        answers = [call("GET", missing, None, s.token(a, "starter")) for _ in range(22)]
        assert [status for status, _ in answers] == [404] * 20 + [429] * 2, answers
        refused = answers[-1][1]
        assert refused["error"] == "RATE_LIMITED" and refused["bucket"] == "identity", refused
        assert f"system:serviceaccount:{a}:starter" in refused["message"] and refused["retryAfterSeconds"] >= 1
        assert call("GET", missing.replace(f"/ns/{a}/", f"/ns/{b}/"), None, s.token(b, "starter"))[0] == 404
        status, body = call(
            "POST",
            f"{limited.api_url}/v1/ns/{a}/tasks/poll",
            {"taskTypes": [TASK_TYPE], "workerId": "e2e-rate", "pollTimeoutSeconds": 0},
            s.token(a, "worker"),
        )
        assert status == 200, body
        # Made-up tokens: three 401s, then 429 without asking the API server; a reviewed token still works.
        made_up = [call("GET", missing, None, {"Authorization": f"Bearer made-up-{i}"}) for i in range(4)]
        assert [status for status, _ in made_up] == [401] * 3 + [429], made_up
        assert made_up[-1][1]["bucket"] == "failedAuthentication" and made_up[-1][1]["retryAfterSeconds"] >= 1
        assert call("GET", missing.replace(f"/ns/{a}/", f"/ns/{b}/"), None, s.token(b, "starter"))[0] == 404
    finally:
        limited.child.stop()
        asyncio.run(databases.drop(database))


def test_deciding_a_task_of_another_namespace_tells_nothing_about_it(secured: Secured) -> None:
    """Whether a task id exists in b, and whether it is a HUMAN task, is told
    (404, 409) only to a caller who may read b's runs; a caller with no right
    in b gets 403 either way (it used to get 404 and 409, found by the
    tenancy fuzz pass)."""
    s, a, b = secured, secured.a, secured.b
    run_b = start_run(s, b, "not a HUMAN task")
    url = f"{s.url}/v1/ns/{b}/executions/{run_b}"
    run = eventually(
        lambda: (v := call("GET", url, None, s.token(b, "starter"))[1])["tasks"] and v, what="b's task to be scheduled"
    )
    simple, missing = run["tasks"][0]["taskId"], str(uuid.uuid4())
    for task_id, told in ((simple, 409), (missing, 404)):
        for decision in ("complete", "reject"):
            decide = f"{s.url}/v1/ns/{b}/tasks/{task_id}/{decision}"
            status, body = call("POST", decide, {"output": {}, "reason": "x"}, s.token(a, "starter"))
            assert status == 403, body
            assert body["message"] == f"system:serviceaccount:{a}:starter may not get workflowruns in namespace {b}"
            status, body = call("POST", decide, {"output": {}, "reason": "x"}, s.token(b, "starter"))
            assert status == told, body
