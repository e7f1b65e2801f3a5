"""The HTTP API and the worker SDK together, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from sluiceway.runtime import loops
from sluiceway.worker import RetryAfter, Task, TerminalError, Worker
from tests.support.plane import Plane, Running, finished, get, post
from tests.support.store import NS, define_task, define_workflow
from tests.support.waiting import eventually_async


async def test_a_run_started_over_http_completes_on_sdk_workers(plane: Plane) -> None:
    await define_workflow(
        plane.pool,
        "greet",
        [
            {"name": "hello", "taskReferenceName": "hello", "inputParameters": {"who": "${workflow.input.who}"}},
            {"name": "shout", "taskReferenceName": "shout", "inputParameters": {"text": "${hello.output.text}"}},
        ],
    )
    worker = Worker(plane.url, NS, poll_timeout=2)

    @worker.task("hello", concurrency=2)
    async def hello(task: Task) -> dict[str, Any]:
        return {"text": f"hello {task.input['who']}"}

    @worker.task("shout")
    def shout(task: Task) -> dict[str, Any]:  # sync handlers run in threads
        return {"text": task.input["text"].upper()}

    async with Running(worker):
        status, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "greet", "input": {"who": "ada"}})
        assert status == 201 and started["status"] == "RUNNING"
        run = await finished(plane, started["id"])
    assert run["status"] == "COMPLETED" and run["output"] == {"text": "HELLO ADA"}
    assert [t["referenceName"] for t in run["tasks"]] == ["hello", "shout"]


async def test_retries_land_inside_the_backoff_band(plane: Plane) -> None:
    await define_task(
        plane.pool,
        "flaky",
        retryCount=3,
        retryLogic="EXPONENTIAL_BACKOFF",
        retryDelaySeconds=1,
        backoffScaleFactor=2,
        jitter=0.2,
    )
    await define_workflow(plane.pool, "retrying", [{"name": "flaky", "taskReferenceName": "f"}])
    calls: list[float] = []
    worker = Worker(plane.url, NS, poll_timeout=5)

    @worker.task("flaky")
    async def flaky(task: Task) -> dict[str, Any]:
        calls.append(time.monotonic())
        if task.attempt < 3:
            raise RuntimeError(f"attempt {task.attempt} fails")
        return {"attempt": task.attempt}

    async with Running(worker):
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "retrying"})
        run = await finished(plane, started["id"])
    assert run["status"] == "COMPLETED" and run["output"] == {"attempt": 3}
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    # Delay before retry 1 is 1 s ±20%, before retry 2 is 2 s ±20%; allow scheduling slack on top.
    assert 0.8 <= gaps[0] <= 1.2 + 0.5, gaps
    assert 1.6 <= gaps[1] <= 2.4 + 0.5, gaps
    assert [t["status"] for t in run["tasks"]] == ["FAILED", "FAILED", "COMPLETED"]
    assert run["tasks"][0]["reason"] == "RuntimeError: attempt 1 fails"


async def test_terminal_errors_and_non_retryable_reasons_are_not_retried(plane: Plane) -> None:
    await define_task(plane.pool, "charge", retryCount=5, nonRetryableErrors=["card_declined"])
    await define_workflow(plane.pool, "pay", [{"name": "charge", "taskReferenceName": "c"}])
    await define_workflow(plane.pool, "pay2", [{"name": "validate", "taskReferenceName": "v", "retryCount": 5}])
    worker = Worker(plane.url, NS, poll_timeout=2)

    @worker.task("charge")
    async def charge(task: Task) -> None:
        raise RuntimeError("Stripe error: card_declined (do_not_honor)")

    @worker.task("validate")
    async def validate(task: Task) -> None:
        raise TerminalError("amount must be positive")

    async with Running(worker):
        _, a = await post(plane, f"/v1/ns/{NS}/executions", {"name": "pay"})
        _, b = await post(plane, f"/v1/ns/{NS}/executions", {"name": "pay2"})
        first, second = await finished(plane, a["id"]), await finished(plane, b["id"])
    assert first["status"] == "FAILED" and len(first["tasks"]) == 1
    assert "nonRetryableErrors" in first["reasonForIncompletion"]
    assert second["status"] == "FAILED" and len(second["tasks"]) == 1
    assert second["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR"


async def test_retry_after_is_honored_exactly(plane: Plane) -> None:
    await define_task(plane.pool, "metered", retryCount=2, retryDelaySeconds=30, jitter=0.2)
    await define_workflow(plane.pool, "meter", [{"name": "metered", "taskReferenceName": "m"}])
    calls: list[float] = []
    worker = Worker(plane.url, NS, poll_timeout=5)

    @worker.task("metered")
    async def metered(task: Task) -> dict[str, Any]:
        calls.append(time.monotonic())
        if task.attempt == 1:
            raise RetryAfter(0.7)  # not the policy's 30 s ±20%
        return {}

    async with Running(worker):
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "meter"})
        run = await finished(plane, started["id"])
    assert run["status"] == "COMPLETED"
    assert 0.7 <= calls[1] - calls[0] <= 0.7 + 0.5


async def test_a_429_is_retried_indefinitely_by_the_server_past_retry_count(plane: Plane) -> None:
    """The rate-limit classifier's verdict is `indefinite`: the server retries
    with no attempt ceiling (the attempt number climbs, retryCount 0 is not
    spent), honouring Retry-After exactly (seed 002)."""
    from sluiceway.worker import rate_limit_aware_classifier

    class Http429(Exception):
        status = 429
        headers = {"Retry-After": "0.5"}

    await define_workflow(plane.pool, "limited", [{"name": "partner", "taskReferenceName": "p", "retryCount": 0}])
    seen: list[int] = []
    worker = Worker(plane.url, NS, poll_timeout=5, classifier=rate_limit_aware_classifier)

    @worker.task("partner")
    async def partner(task: Task) -> dict[str, Any]:
        seen.append(task.attempt)
        if len(seen) < 3:
            raise Http429()
        return {"ok": True}

    async with Running(worker):
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "limited"})
        run = await finished(plane, started["id"])
    assert run["status"] == "COMPLETED", "retryCount 0, yet two 429s did not fail it"
    assert seen == [1, 2, 3]
    assert [t["status"] for t in run["tasks"]] == ["FAILED", "FAILED", "COMPLETED"]


async def test_stale_results_get_409_over_http(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    leased: list[dict[str, Any]] = []
    while len(leased) < 2:
        status, body = await post(
            plane,
            f"/v1/ns/{NS}/tasks/poll",
            {"taskTypes": ["job"], "workerId": "w", "count": 2, "pollTimeoutSeconds": 5},
        )
        assert status == 200
        leased += body["tasks"]
    task, other = leased
    stale = {"taskId": task["taskId"], "epoch": task["epoch"] + 7, "status": "COMPLETED"}
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/{task['taskId']}/result", stale)
    assert status == 409 and body["error"] == "STALE_LEASE" and "stale epoch" in body["message"]
    status, body = await post(
        plane, f"/v1/ns/{NS}/tasks/heartbeats", {"heartbeats": [{"taskId": task["taskId"], "epoch": task["epoch"] + 7}]}
    )
    assert status == 200 and body == {"alive": [], "gone": [task["taskId"]], "errors": []}
    good = {"taskId": other["taskId"], "epoch": other["epoch"], "status": "COMPLETED"}
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/results", {"results": [good, stale]})
    assert status == 207
    assert [r["code"] for r in body["results"]] == [200, 409]


async def lease_tasks(plane: Plane, task_type: str, count: int) -> list[dict[str, Any]]:
    leased: list[dict[str, Any]] = []
    while len(leased) < count:
        status, body = await post(
            plane,
            f"/v1/ns/{NS}/tasks/poll",
            {"taskTypes": [task_type], "workerId": "w", "count": count - len(leased), "pollTimeoutSeconds": 5},
        )
        assert status == 200
        leased += body["tasks"]
    return leased


async def test_a_result_batch_applies_the_good_items_and_refuses_each_bad_one(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    for _ in range(3):
        await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    # The lease order among runs decided in one pass is not their start order: follow the tasks.
    first, second, third = await lease_tasks(plane, "job", 3)
    batch = [
        {"taskId": first["taskId"], "epoch": first["epoch"], "status": "COMPLETED", "output": {"n": 1}},
        # The case: a Retry-After of 999999999 s turned into a snooze beyond the bound.
        {"taskId": second["taskId"], "epoch": second["epoch"], "status": "IN_PROGRESS", "callbackAfterSeconds": 1e9},
        {"taskId": "not-a-task", "epoch": 1, "status": "COMPLETED"},
        {"taskId": third["taskId"], "epoch": 2**40, "status": "COMPLETED"},
        {"taskId": third["taskId"], "epoch": third["epoch"], "status": "DONE"},
        "not even an object",
        {"taskId": first["taskId"], "epoch": first["epoch"], "status": "FAILED"},
    ]
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/results", {"results": batch})
    assert status == 207, body
    outcomes = body["results"]
    assert [o["code"] for o in outcomes] == [200, 422, 422, 422, 422, 422, 422]
    assert [o["taskId"] for o in outcomes] == [*(item.get("taskId") for item in batch[:5]), None, first["taskId"]]
    named = [o["fields"][0]["field"] for o in outcomes[1:]]
    assert named == ["callbackAfterSeconds", "taskId", "epoch", "status", "item", "taskId"]
    assert "callbackAfterSeconds" in outcomes[1]["error"] and "more than once" in outcomes[6]["error"]
    # The good item was applied; the refused ones changed nothing and can still be reported.
    assert (await finished(plane, first["executionId"]))["status"] == "COMPLETED"
    fixed = [
        {"taskId": second["taskId"], "epoch": second["epoch"], "status": "COMPLETED"},
        {"taskId": third["taskId"], "epoch": third["epoch"], "status": "COMPLETED"},
    ]
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/results", {"results": fixed})
    assert status == 200 and [o["code"] for o in body["results"]] == [200, 200]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"results": "a list it is not"}, "results"),
        ({"results": []}, "results"),
        ({"results": [{}] * 1001}, "results"),
        ({"outcomes": [{}]}, "results"),
        (["a", "list"], "body"),
    ],
)
async def test_an_invalid_result_envelope_is_refused_whole(plane: Plane, body: Any, field: str) -> None:
    status, answer = await post(plane, f"/v1/ns/{NS}/tasks/results", body)
    assert status == 422 and answer["error"] == "INVALID_REQUEST"
    assert field in [f["field"] for f in answer["fields"]], answer


async def test_a_heartbeat_batch_renews_the_good_items_and_lists_the_bad_ones(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    (task,) = await lease_tasks(plane, "job", 1)
    beats = [
        {"taskId": task["taskId"], "epoch": task["epoch"]},
        {"taskId": task["taskId"].upper().replace("-", ""), "epoch": -1},
        {"epoch": 1},
    ]
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/heartbeats", {"heartbeats": beats})
    assert status == 207, body
    assert body["alive"] == [task["taskId"]] and body["gone"] == []
    assert [(e["taskId"], e["code"], e["fields"][0]["field"]) for e in body["errors"]] == [
        (beats[1]["taskId"], 422, "epoch"),
        (None, 422, "taskId"),
    ]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("executions", {"input": {}}, "name"),
        ("executions", {"name": "x", "version": 0}, "version"),
        ("tasks/poll", {"taskTypes": [], "workerId": "w"}, "taskTypes"),
        ("executions", {"name": "x", "version": 2**31}, "version"),
        ("executions", {"name": "x", "correlationId": "nul\u0000"}, "correlationId"),
        ("executions", {"name": "x", "input": {"deep": 2**64}}, "input"),
        ("tasks/poll", {"taskTypes": ["a"], "workerId": "w", "count": 5000}, "count"),
        ("tasks/poll", {"taskTypes": ["a", "a"], "workerId": "w"}, "taskTypes"),
        ("tasks/poll", {"taskTypes": ["a"], "workerId": "w\u0000"}, "workerId"),
        (f"tasks/{'0' * 32}/result", {"taskId": "0" * 32, "epoch": 2**31, "status": "COMPLETED"}, "epoch"),
        (f"tasks/{'0' * 32}/result", {"taskId": "1" * 32, "epoch": 1, "status": "COMPLETED"}, "taskId"),
        ("tasks/not-a-uuid/heartbeat", {"taskId": "0" * 32, "epoch": 1}, "path.task_id"),
        ("executions/not-a-uuid/terminate", {}, "path.execution_id"),
    ],
)
async def test_invalid_requests_are_422_naming_the_field(
    plane: Plane, path: str, body: dict[str, Any], field: str
) -> None:
    status, answer = await post(plane, f"/v1/ns/{NS}/{path}", body)
    assert status == 422 and answer["error"] == "INVALID_REQUEST"
    assert field in [f["field"] for f in answer["fields"]], answer


async def test_a_long_poll_is_answered_as_soon_as_a_task_is_ready(plane: Plane) -> None:
    await define_workflow(plane.pool, "later", [{"name": "soon", "taskReferenceName": "s"}])
    started = time.monotonic()
    poll = asyncio.create_task(
        post(plane, f"/v1/ns/{NS}/tasks/poll", {"taskTypes": ["soon"], "workerId": "w", "pollTimeoutSeconds": 20})
    )
    await asyncio.sleep(0.5)
    assert not poll.done()
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "later"})
    status, body = await asyncio.wait_for(poll, 10)
    assert status == 200 and len(body["tasks"]) == 1
    assert time.monotonic() - started < 5, "the poll waited for its timeout instead of the task"


async def test_idle_polls_sharing_an_empty_queue_each_get_a_task_started_later(plane: Plane) -> None:
    """Idle polls of one queue take the first poll's "empty" as theirs (they
    do not each ask the database); a task that becomes ready still reaches one
    of them at once, and the next task the next one."""
    await define_workflow(plane.pool, "quietly", [{"name": "quiet", "taskReferenceName": "q"}])
    body = {"taskTypes": ["quiet"], "pollTimeoutSeconds": 60}
    polls = [
        asyncio.create_task(post(plane, f"/v1/ns/{NS}/tasks/poll", {**body, "workerId": f"w{n}"})) for n in range(5)
    ]
    await asyncio.sleep(1.0)  # the polls are waiting, the queue known empty
    assert not any(poll.done() for poll in polls)
    for started in range(1, 3):
        await post(plane, f"/v1/ns/{NS}/executions", {"name": "quietly"})
        done, _ = await asyncio.wait(polls, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1, f"run {started}: no poll was answered within 30 s of its 60-s timeout"
        status, answer = done.pop().result()
        assert status == 200 and len(answer["tasks"]) == 1
        polls = [poll for poll in polls if not poll.done()]
    for poll in polls:
        poll.cancel()


async def test_unknown_workflow_and_run_are_404(plane: Plane) -> None:
    status, body = await post(plane, f"/v1/ns/{NS}/executions", {"name": "ghost"})
    assert status == 404 and body["error"] == "WORKFLOW_NOT_FOUND"
    status, _ = await get(plane, f"/v1/ns/{NS}/executions/00000000-0000-0000-0000-000000000000")
    assert status == 404


async def test_terminate_and_force_decide(plane: Plane) -> None:
    await define_workflow(plane.pool, "idle", [{"name": "nobody", "taskReferenceName": "n"}])
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "idle"})
    status, _ = await post(plane, f"/v1/ns/{NS}/executions/{started['id']}/decide", {})
    assert status == 202
    status, _ = await post(plane, f"/v1/ns/{NS}/executions/{started['id']}/terminate", {"reason": "not needed"})
    assert status == 202
    run = await finished(plane, started["id"])
    assert run["status"] == "TERMINATED" and run["reasonForIncompletion"] == "not needed"
    status, body = await post(plane, f"/v1/ns/{NS}/executions/{started['id']}/terminate", {})
    assert status == 409 and body["error"] == "NOT_RUNNING"


async def test_graceful_shutdown_hands_back_unfinished_work(plane: Plane) -> None:
    await define_workflow(plane.pool, "slowrun", [{"name": "slow", "taskReferenceName": "s"}])
    entered = asyncio.Event()
    worker = Worker(plane.url, NS, poll_timeout=2, shutdown_grace=0.5)

    @worker.task("slow")
    async def slow(task: Task) -> None:
        entered.set()
        await asyncio.sleep(3600)

    running = Running(worker)
    async with running:
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "slowrun"})
        await asyncio.wait_for(entered.wait(), 10)
    # The task went back to the queue at once, not after the one-hour lease.
    status, body = await post(
        plane, f"/v1/ns/{NS}/tasks/poll", {"taskTypes": ["slow"], "workerId": "next", "pollTimeoutSeconds": 5}
    )
    assert status == 200 and len(body["tasks"]) == 1
    # Seed 002: the interrupted attempt is spent, so the replacement runs the next one.
    assert body["tasks"][0]["attempt"] == 2 and body["tasks"][0]["epoch"] == 2
    _, run = await get(plane, f"/v1/ns/{NS}/executions/{started['id']}")
    assert run["tasks"][0]["interruptCount"] == 1


async def test_the_worker_protocol_is_in_the_served_openapi_document(plane: Plane) -> None:
    status, document = await get(plane, "/openapi.json")
    assert status == 200
    paths = document["paths"]
    for path in (
        "/v1/ns/{namespace}/tasks/poll",
        "/v1/ns/{namespace}/tasks/results",
        "/v1/ns/{namespace}/tasks/heartbeats",
        "/v1/ns/{namespace}/tasks/{task_id}/result",
        "/v1/ns/{namespace}/executions",
        "/v1/ns/{namespace}/executions/{execution_id}/decide",
    ):
        assert path in paths, path
    poll = paths["/v1/ns/{namespace}/tasks/poll"]["post"]
    assert "long poll" in poll["summary"].lower()
    schemas = document["components"]["schemas"]
    assert "epoch" in schemas["LeasedTask"]["properties"]
    assert "callbackAfterSeconds" in schemas["TaskResult"]["properties"]
    # The bounds the store holds, and the per-item batch answers, are documented.
    assert schemas["TaskResult"]["properties"]["epoch"]["maximum"] == 2**31 - 1
    assert schemas["TaskResult"]["properties"]["callbackAfterSeconds"]["anyOf"][0]["maximum"] == 31_536_000
    assert schemas["PollRequest"]["properties"]["taskTypes"]["uniqueItems"] is True
    for batch in ("results", "heartbeats"):
        answers = paths[f"/v1/ns/{{namespace}}/tasks/{batch}"]["post"]["responses"]
        assert {"200", "207", "422"} <= set(answers), batch
        assert answers["422"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert "422" in schemas["ItemOutcome"]["properties"]["code"]["description"]


async def test_the_metrics_that_move_first_are_exported(plane: Plane) -> None:
    """Their names; tests/integration/test_metrics.py asserts their values."""
    await loops.publish_database_metrics(plane.pool)  # as the leader does every few seconds
    async with aiohttp.ClientSession() as http, http.get(f"{plane.url}/metrics") as response:
        text = await response.text()
    for name in (
        "sluiceway_decide_queue_oldest_seconds",
        "sluiceway_timers_overdue",
        "sluiceway_outbox_dead_lettered",
        "sluiceway_lease_seconds_bucket",
        "sluiceway_complete_seconds_bucket",
        "sluiceway_gate_holds_total",
        "sluiceway_decisions_total",
    ):
        assert name in text, name
    for labelled in ("sluiceway_tasks_ready", "sluiceway_tasks_delayed", "sluiceway_circuit_breaker_state"):
        assert f"# TYPE {labelled} gauge" in text, labelled


# --- The SDK never drops a result ---------------------------------------------


class FlakyProxy:
    """A real HTTP hop between a worker and the API that fails the first
    `failures` result reports (a 503, then a dropped connection, alternately),
    as a restarting API server or a broken load balancer would."""

    def __init__(self, upstream: str, failures: int) -> None:
        self.upstream = upstream
        self.failures = failures
        self.reports = 0
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> FlakyProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.forward)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    async def forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path.endswith("/tasks/results"):
            self.reports += 1
            if self.reports <= self.failures:
                if self.reports % 2:
                    return web.json_response({"error": "UNAVAILABLE", "message": "restarting"}, status=503)
                assert request.transport is not None
                request.transport.close()  # the connection drops mid-request
                return web.Response()
        async with (
            aiohttp.ClientSession() as http,
            http.request(request.method, f"{self.upstream}{request.path_qs}", data=body, headers=request.headers) as up,
        ):
            return web.Response(body=await up.read(), status=up.status, content_type=up.content_type)


async def test_the_sdk_retries_results_through_transport_errors_and_5xx(
    plane: Plane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluiceway.worker")
    await define_workflow(plane.pool, "steady", [{"name": "steady", "taskReferenceName": "s"}])
    async with FlakyProxy(plane.url, failures=4) as proxy:
        worker = Worker(proxy.url, NS, poll_timeout=2)

        @worker.task("steady")
        async def steady(task: Task) -> dict[str, Any]:
            return {"secret": "hunter2"}

        async with Running(worker):
            _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "steady"})
            run = await finished(plane, started["id"])
    assert run["status"] == "COMPLETED" and run["output"] == {"secret": "hunter2"}
    assert proxy.reports == 5, "four failed reports, then the one that was applied"
    task = run["tasks"][0]
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 4
    assert all(f"run {run['id']} task {task['taskId']} epoch 1" in message for message in retries), retries
    assert not any("hunter2" in r.getMessage() for r in caplog.records), "a payload was logged"


async def test_a_result_the_server_refuses_is_reported_failed_with_the_reason(
    plane: Plane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluiceway.worker")
    await define_workflow(plane.pool, "refused", [{"name": "nul", "taskReferenceName": "n", "retryCount": 0}])
    worker = Worker(plane.url, NS, poll_timeout=2)

    @worker.task("nul")
    async def nul(task: Task) -> dict[str, Any]:
        return {"text": "PostgreSQL cannot store \x00"}

    async with Running(worker):
        _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "refused"})
        run = await finished(plane, started["id"])
    (task,) = run["tasks"]
    assert run["status"] == "FAILED" and task["status"] == "FAILED"
    assert task["reason"].startswith("the server refused the worker's result")
    assert "output" in task["reason"] and "NUL" in task["reason"], task["reason"]
    refusals = [r.getMessage() for r in caplog.records if "refused as invalid" in r.getMessage()]
    assert refusals == [
        f"run {run['id']} task {task['taskId']} epoch 1: COMPLETED result refused as invalid "
        f"(output: Value error, text must not contain NUL characters); reporting it FAILED with the reason"
    ]


async def test_the_sdk_clamps_what_it_sends_to_the_api_bounds(plane: Plane) -> None:
    from sluiceway.worker import rate_limit_aware_classifier

    class Http429(Exception):
        status = 429
        headers = {"Retry-After": "999999999"}

    await define_workflow(plane.pool, "clamped", [{"name": "partner", "taskReferenceName": "p"}])
    await define_workflow(plane.pool, "wordy", [{"name": "wordy", "taskReferenceName": "w", "retryCount": 0}])
    worker = Worker(plane.url, NS, poll_timeout=2, classifier=rate_limit_aware_classifier)

    @worker.task("partner")
    async def partner(task: Task) -> None:
        raise Http429()

    @worker.task("wordy")
    async def wordy(task: Task) -> None:
        raise RuntimeError("x" * 20_000)

    async with Running(worker):
        _, snoozing = await post(plane, f"/v1/ns/{NS}/executions", {"name": "clamped"})
        _, failing = await post(plane, f"/v1/ns/{NS}/executions", {"name": "wordy"})

        async def snoozed() -> dict[str, Any] | None:
            _, run = await get(plane, f"/v1/ns/{NS}/executions/{snoozing['id']}")
            later = [t for t in run["tasks"] if t["status"] == "SCHEDULED" and t["availableAt"] > t["scheduledAt"]]
            return later[0] if later else None

        # The case: a Retry-After of 999999999 s is sent clamped to the API's bound (a year), not a
        # refused batch, and the server clamps that hint to its ceiling (SLUICEWAY_MAX_RETRY_BACKOFF, 24 h).
        snoozed_task = await eventually_async(snoozed, timeout=20, what="the task to be snoozed")
        failed = await finished(plane, failing["id"])
    later = datetime.datetime.fromisoformat(snoozed_task["availableAt"]) - datetime.datetime.now(datetime.UTC)
    assert 86_000 <= later.total_seconds() <= 86_400, snoozed_task["availableAt"]
    reason = failed["tasks"][0]["reason"]
    assert len(reason) == 8192 and reason.endswith("x [truncated]") and reason.startswith("RuntimeError: xxx")
