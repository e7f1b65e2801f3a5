"""Every way of changing a run is audited and limited the same way, whichever
edge it came through: the REST API, the web UI, the command line (through the
API), a WorkflowRun's spec (its kopf handlers called as kopf calls them) and a
schedule. Each operation is driven through each edge that offers it, on one
execution plane (HTTP API and UI, decider, a real PostgreSQL); each case
asserts the audit row it leaves, and, for an operation that carries a
payload, that one over the namespace's limit is refused with the same
message naming the field and leaves nothing behind."""

from __future__ import annotations

import asyncio
import datetime
import html
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import asyncpg
import kopf
import pytest
from typer.testing import CliRunner

from sluiceway.controls.payloads import OPERATOR_SETTING, Oversized, PayloadLimit, json_size
from sluiceway.k8s import workflows as workflow_runs
from sluiceway.k8s.reconciling import Context
from sluiceway.model.execution import MAX_MESSAGE_BYTES
from sluiceway.model.schedule import ScheduleSpec
from sluiceway.model.trigger import TriggerSpec
from sluiceway.plane import schedules as firing
from sluiceway.runtime.main import app
from sluiceway.store import schedules, triggers, webhooks
from tests.support.plane import Plane, execution_plane, finished, get, post
from tests.support.store import NS, define_workflow, fetchval
from tests.support.ui import Browser, Page
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"
LIMIT = 600  # the operator's payload limit here: SLUICEWAY_MAX_PAYLOAD_BYTES
BIG = {"blob": "x" * LIMIT}  # over it by the quotes and the key
PERSON = ("anonymous (authentication is off)", "anonymous")  # REST, UI and CLI without authentication


def refusal(field: str, value: Any = BIG) -> str:
    """The message every edge gives for `value` over the limit in `field`."""
    return Oversized(field, json_size(value), PayloadLimit(LIMIT, OPERATOR_SETTING)).message


@dataclass
class Edges:
    plane: Plane
    browser: Browser

    async def trail(self, run_id: str) -> list[tuple[str, tuple[str, str], dict[str, Any]]]:
        """(operation, (actor, via), detail) of every audit entry of the run, oldest first."""
        status, body = await get(self.plane, f"{API}/executions/{run_id}/audit")
        assert status == 200, body
        return [(e["operation"], (e["actor"], e["via"]), e["detail"]) for e in body["entries"]]

    async def status(self, run_id: str) -> str:
        status, body = await get(self.plane, f"{API}/executions/{run_id}?include_tasks=false")
        assert status == 200, body
        return str(body["status"])

    async def start(self, workflow: str = "one", **body: Any) -> str:
        status, started = await post(self.plane, f"{API}/executions", {"name": workflow, **body})
        assert status == 201, started
        return str(started["id"])

    async def failed(self, workflow: str = "one") -> str:
        """A run whose first task failed for good: the run FAILED."""
        run_id = await self.start(workflow)
        task = await self.lease("work" if workflow == "one" else "first")
        result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "FAILED_WITH_TERMINAL_ERROR"}
        assert (await post(self.plane, f"{API}/tasks/results", {"results": [result]}))[0] == 200
        assert (await finished(self.plane, run_id))["status"] == "FAILED"
        return run_id

    async def lease(self, task_type: str) -> dict[str, Any]:
        poll = {"taskTypes": [task_type], "workerId": "w", "pollTimeoutSeconds": 10}
        status, body = await post(self.plane, f"{API}/tasks/poll", poll)
        assert status == 200 and body["tasks"], body
        task: dict[str, Any] = body["tasks"][0]
        return task

    async def ui(self, run_id: str, action: str, **form: str) -> Page:
        """An action of the run page, confirmed as a person would."""
        confirm = await self.browser.get(f"/ui/ns/{NS}/runs/{run_id}/{action}")
        assert confirm.status == 200, confirm.text[:300]
        return await self.browser.post(f"/ui/ns/{NS}/runs/{run_id}/{action}", {"csrf": confirm.csrf(), **form})

    async def cli(self, *argv: str) -> tuple[int, str]:
        """`sluiceway ...` against the plane's API (in a thread: it runs its own event loop)."""
        args = [*argv, "-n", NS, "--server", self.plane.url]
        result = await asyncio.to_thread(CliRunner().invoke, app(), args)
        return result.exit_code, result.stdout + result.stderr

    def workflow_run(self, name: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
        """kopf's keyword arguments for a WorkflowRun, with a fresh patch, on this plane."""
        uid = (status or {}).get("executionId") or str(uuid.uuid4())
        body = kopf.Body(
            {
                "apiVersion": "sluiceway.dev/v1beta1",
                "kind": "WorkflowRun",
                "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": 1},
                "spec": spec,
                "status": status or {},
            }
        )
        assert self.plane.core is not None
        return {
            "body": body,
            "spec": body.spec,
            "meta": body.meta,
            "status": body.status,
            "name": name,
            "namespace": NS,
            "uid": uid,
            "patch": kopf.Patch(),
            "memo": kopf.Memo(context=Context(plane=self.plane.core, clock=_now)),
            "logger": logging.getLogger("test"),
        }

    async def applied(self, name: str, spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A WorkflowRun created: its run's id and its spec, as the operator last saw it."""
        created = self.workflow_run(name, spec)
        await workflow_runs.start_workflow_run(**created)
        run_id = created["patch"].status["executionId"]
        return run_id, spec

    async def changed(self, name: str, run_id: str, old: dict[str, Any], new: dict[str, Any]) -> kopf.Patch:
        """The WorkflowRun's spec changed from `old` to `new` (kubectl apply, a GitOps sync)."""
        updated = self.workflow_run(name, new, {"executionId": run_id})
        await workflow_runs.operate_workflow_run(**updated, old=old)
        patch: kopf.Patch = updated["patch"]
        return patch


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def task(name: str, kind: str = "SIMPLE") -> dict[str, Any]:
    return {"name": name, "taskReferenceName": name, "type": kind}


def spec_of(name: str) -> tuple[str, str]:
    return (f"WorkflowRun {name} spec", "workflowrun")


@pytest.fixture
async def edges(pool: asyncpg.Pool, database_url: str) -> AsyncIterator[Edges]:
    async with execution_plane(pool, database_url, ui=True, max_payload_bytes=LIMIT) as plane:
        await define_workflow(pool, "one", [task("work")])
        await define_workflow(pool, "two", [task("first"), task("second")])
        browser = Browser(plane.url)
        try:
            yield Edges(plane, browser)
        finally:
            await browser.close()


# -- pause and resume ----------------------------------------------------------------

Drive = Callable[[Edges, str], Awaitable[None]]


async def _rest(edges: Edges, run_id: str, action: str, body: Any) -> None:
    status, answer = await post(edges.plane, f"{API}/executions/{run_id}/{action}", body)
    assert status in (200, 202), answer


async def _ui(edges: Edges, run_id: str, action: str, **form: str) -> None:
    page = await edges.ui(run_id, action, **form)
    assert page.status == 200 and "done=" in page.url, page.text[:300]


async def _cli(edges: Edges, *argv: str) -> None:
    code, said = await edges.cli(*argv)
    assert code == 0, said


PAUSES: dict[str, tuple[Drive, Drive]] = {
    "rest": (
        lambda e, r: _rest(e, r, "pause", {"reason": "deploy"}),
        lambda e, r: _rest(e, r, "resume", {}),
    ),
    "ui": (lambda e, r: _ui(e, r, "pause", reason="deploy"), lambda e, r: _ui(e, r, "resume")),
    "cli": (
        lambda e, r: _cli(e, "runs", "pause", r, "--reason", "deploy"),
        lambda e, r: _cli(e, "runs", "resume", r),
    ),
}


@pytest.mark.parametrize("edge", sorted(PAUSES))
async def test_pause_and_resume_leave_the_same_audit_rows_through_every_edge(edges: Edges, edge: str) -> None:
    run_id = await edges.start()
    pause, resume = PAUSES[edge]
    await pause(edges, run_id)
    assert await edges.status(run_id) == "PAUSED"
    await resume(edges, run_id)
    assert await edges.status(run_id) == "RUNNING"
    assert await edges.trail(run_id) == [
        ("start", PERSON, {"workflow": "one"}),
        ("pause", PERSON, {"reason": "deploy"}),
        ("resume", PERSON, {}),
    ]


async def test_a_workflow_run_paused_and_resumed_by_its_spec_is_audited_as_its_spec(edges: Edges) -> None:
    run_id, applied = await edges.applied("nightly", {"workflow": "one", "paused": True})
    assert await edges.status(run_id) == "PAUSED", "created paused"
    await edges.changed("nightly", run_id, applied, {"workflow": "one", "paused": False})
    assert await edges.status(run_id) == "RUNNING"
    await edges.changed("nightly", run_id, {"workflow": "one", "paused": False}, {"workflow": "one", "paused": True})
    assert await edges.trail(run_id) == [
        ("start", spec_of("nightly"), {"workflow": "one"}),
        ("pause", spec_of("nightly"), {"reason": "WorkflowRun spec.paused"}),
        ("resume", spec_of("nightly"), {}),
        ("pause", spec_of("nightly"), {"reason": "WorkflowRun spec.paused"}),
    ]


# -- retry and rerun -------------------------------------------------------------------

RETRIES: dict[str, tuple[Drive, Drive]] = {
    "rest": (
        lambda e, r: _rest(e, r, "retry", {}),
        lambda e, r: _rest(e, r, "rerun", {"taskReferenceName": "first"}),
    ),
    "ui": (lambda e, r: _ui(e, r, "retry"), lambda e, r: _ui(e, r, "rerun", task="first")),
    "cli": (
        lambda e, r: _cli(e, "runs", "retry", r),
        lambda e, r: _cli(e, "runs", "rerun", r, "--from-task", "first"),
    ),
}


async def _fail_again(edges: Edges, run_id: str) -> None:
    task = await edges.lease("first")
    result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "FAILED_WITH_TERMINAL_ERROR"}
    assert (await post(edges.plane, f"{API}/tasks/results", {"results": [result]}))[0] == 200
    assert (await finished(edges.plane, run_id))["status"] == "FAILED"


@pytest.mark.parametrize("edge", sorted(RETRIES))
async def test_retry_and_rerun_leave_the_same_audit_rows_through_every_edge(edges: Edges, edge: str) -> None:
    run_id = await edges.failed("two")
    retry, rerun = RETRIES[edge]
    await retry(edges, run_id)
    await _fail_again(edges, run_id)
    await rerun(edges, run_id)
    assert await edges.status(run_id) == "RUNNING"
    assert await edges.trail(run_id) == [
        ("start", PERSON, {"workflow": "two"}),
        ("retry", PERSON, {}),
        ("rerun", PERSON, {"taskReferenceName": "first", "newInput": False}),
    ]


async def test_a_workflow_run_retried_by_its_spec_is_audited_and_its_rerun_input_limited(edges: Edges) -> None:
    run_id, applied = await edges.applied("daily", {"workflow": "two"})
    task = await edges.lease("first")
    result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "FAILED_WITH_TERMINAL_ERROR"}
    assert (await post(edges.plane, f"{API}/tasks/results", {"results": [result]}))[0] == 200
    assert (await finished(edges.plane, run_id))["status"] == "FAILED"
    retried = {"workflow": "two", "retry": {"generation": 1}}
    patch = await edges.changed("daily", run_id, applied, retried)
    assert patch.status["retry"]["outcome"] == "Retried"
    await _fail_again(edges, run_id)
    too_large = {"workflow": "two", "retry": {"generation": 2, "fromTask": "first", "input": BIG}}
    patch = await edges.changed("daily", run_id, retried, too_large)
    assert (patch.status["retry"]["outcome"], patch.status["retry"]["message"]) == ("Refused", refusal("input"))
    assert await edges.status(run_id) == "FAILED", "the refused rerun changed nothing"
    rerun = {"workflow": "two", "retry": {"generation": 3, "fromTask": "first", "input": {"small": 1}}}
    patch = await edges.changed("daily", run_id, too_large, rerun)
    assert patch.status["retry"]["outcome"] == "Retried"
    assert await edges.trail(run_id) == [
        ("start", spec_of("daily"), {"workflow": "two"}),
        ("retry", spec_of("daily"), {}),
        ("rerun", spec_of("daily"), {"taskReferenceName": "first", "newInput": True}),
    ]


async def test_a_rerun_or_restart_over_the_payload_limit_is_refused_alike_by_rest_and_cli(edges: Edges) -> None:
    run_id = await edges.failed("two")
    rerun = {"taskReferenceName": "first", "input": BIG}
    status, answer = await post(edges.plane, f"{API}/executions/{run_id}/rerun", rerun)
    assert (status, answer["error"], answer["field"], answer["message"]) == (
        413,
        "PAYLOAD_TOO_LARGE",
        "input",
        refusal("input"),
    )
    code, said = await edges.cli("runs", "rerun", run_id, "--from-task", "first", "--input", _json(BIG))
    assert code != 0 and says(said, refusal("input"))
    status, answer = await post(edges.plane, f"{API}/executions/{run_id}/restart", {"input": BIG})
    assert (status, answer["field"], answer["message"]) == (413, "input", refusal("input"))
    code, said = await edges.cli("runs", "restart", run_id, "--input", _json(BIG))
    assert code != 0 and says(said, refusal("input"))
    assert await edges.status(run_id) == "FAILED"
    assert await edges.trail(run_id) == [("start", PERSON, {"workflow": "two"})], "nothing refused is recorded"


# -- terminate and restart -------------------------------------------------------------

TERMINATIONS: dict[str, Drive] = {
    "rest": lambda e, r: _rest(e, r, "terminate", {"reason": "enough"}),
    "ui": lambda e, r: _ui(e, r, "terminate", reason="enough"),
    "cli": lambda e, r: _cli(e, "runs", "terminate", r, "--reason", "enough"),
}


@pytest.mark.parametrize("edge", sorted(TERMINATIONS))
async def test_terminate_leaves_the_same_audit_row_through_every_edge(edges: Edges, edge: str) -> None:
    run_id = await edges.start()
    await TERMINATIONS[edge](edges, run_id)
    assert (await finished(edges.plane, run_id))["status"] == "TERMINATED"
    assert await edges.trail(run_id) == [
        ("start", PERSON, {"workflow": "one"}),
        ("terminate", PERSON, {"reason": "enough"}),
    ]


@pytest.mark.parametrize("edge", ["rest", "cli"])
async def test_restart_is_recorded_on_both_runs_through_every_edge(edges: Edges, edge: str) -> None:
    run_id = await edges.failed()
    if edge == "rest":
        status, answer = await post(edges.plane, f"{API}/executions/{run_id}/restart", {})
        assert status == 201, answer
        new_run = answer["id"]
    else:
        code, said = await edges.cli("runs", "restart", run_id, "-o", "name")
        assert code == 0, said
        new_run = said.split()[0]
    detail = {"restartedFrom": run_id, "newRun": new_run}
    assert (await edges.trail(run_id))[-1] == ("restart", PERSON, detail)
    assert await edges.trail(new_run) == [("restart", PERSON, detail)]


# -- starts ----------------------------------------------------------------------------


async def test_a_start_is_audited_and_its_input_limited_alike_through_every_edge(edges: Edges) -> None:
    """REST (one and many), CLI, a WorkflowRun and a schedule: each start that
    created a run is recorded on it; an input over the limit is refused with
    the same message, and no run is created."""
    runs_before = await fetchval(edges.plane.pool, "SELECT count(*) FROM executions")
    status, answer = await post(edges.plane, f"{API}/executions", {"name": "one", "input": BIG})
    assert (status, answer["field"], answer["message"]) == (413, "input", refusal("input"))
    status, answer = await post(edges.plane, f"{API}/executions/starts", {"starts": [{"name": "one", "input": BIG}]})
    assert status == 207 and (answer["starts"][0]["code"], answer["starts"][0]["message"]) == (413, refusal("input"))
    code, said = await edges.cli("runs", "start", "one", "--input", _json(BIG))
    assert code != 0 and says(said, refusal("input"))
    refused = edges.workflow_run("big", {"workflow": "one", "input": BIG})
    await workflow_runs.start_workflow_run(**refused)
    assert refused["patch"].status["phase"] == "Refused"
    assert refused["patch"].status["reasonForIncompletion"] == refusal("input")
    assert refused["patch"].status["refusal"]["error"] == "PAYLOAD_TOO_LARGE"
    await add_schedule(edges.plane.pool, "big", input=BIG, workflow="one", cron=["@daily"])
    status, fire = await post(edges.plane, f"{API}/schedules/big/trigger", {})
    assert (status, fire["outcome"], fire["reason"]) == (201, "refused", refusal("spec.input"))
    assert await fetchval(edges.plane.pool, "SELECT count(*) FROM executions") == runs_before

    by_rest = await edges.start(input={"a": 1})
    status, answer = await post(edges.plane, f"{API}/executions/starts", {"starts": [{"name": "one"}]})
    by_batch = answer["starts"][0]["id"]
    code, said = await edges.cli("runs", "start", "one", "-p", "a=1", "-o", "name")
    assert code == 0, said
    by_cli = said.split()[0]
    by_spec, _ = await edges.applied("weekly", {"workflow": "one"})
    await add_schedule(edges.plane.pool, "small", workflow="one", cron=["@daily"])
    status, fire = await post(edges.plane, f"{API}/schedules/small/trigger", {})
    assert fire["outcome"] == "started", fire
    for run_id, who in ((by_rest, PERSON), (by_batch, PERSON), (by_cli, PERSON), (by_spec, spec_of("weekly"))):
        assert await edges.trail(run_id) == [("start", who, {"workflow": "one"})]
    [(operation, who, detail)] = await edges.trail(fire["runId"])
    assert (operation, who, detail["schedule"], detail["kind"]) == ("start", PERSON, "small", "trigger")


async def test_the_scheduler_s_own_fires_are_audited_as_the_scheduler_and_limited(edges: Edges) -> None:
    # Their hour's fire is due, and still within the catch-up window.
    await add_schedule(edges.plane.pool, "hourly", workflow="one", cron=["@hourly"], catchupWindowSeconds=3600)
    await add_schedule(
        edges.plane.pool, "heavy", workflow="one", cron=["@hourly"], catchupWindowSeconds=3600, input=BIG
    )
    due = "UPDATE schedules SET due_at = now(), next_fire_at = date_trunc('hour', now()) RETURNING 1"
    await fetchval(edges.plane.pool, due)
    assert edges.plane.core is not None
    report = await firing.fire_due(edges.plane.core)
    fires = {fire.schedule: fire for fire in report.fires}
    assert (fires["heavy"].outcome, fires["heavy"].reason) == ("refused", refusal("spec.input"))
    started = fires["hourly"]
    assert started.outcome == "started" and started.run_id is not None
    [(operation, who, detail)] = await edges.trail(started.run_id)
    assert (operation, who, detail["schedule"]) == ("start", ("sluiceway scheduler", "schedule"), "hourly")


async def test_an_event_triggered_start_is_audited_and_limited_alike_by_rest_the_cli_and_a_webhook(
    edges: Edges,
) -> None:
    """An event published by REST, by the CLI (through REST) and by a verified
    Webhook call starts its run audited as `start` by the sender; a payload
    over the limit is refused with the same message naming the field and
    starts nothing."""
    spec = TriggerSpec.model_validate({"event": "ping", "workflow": "one"})
    hook = {"token": {"header": "X-Token", "secretRef": {"name": "hook", "key": "t"}}, "event": "ping"}
    async with edges.plane.pool.acquire() as conn:
        await triggers.upsert(conn, NS, "on-ping", str(uuid.uuid4()), 1, spec)
        await webhooks.upsert(conn, NS, "pinger", "pinger", 1, hook)
    edges.plane.secrets.secrets[(NS, "hook")] = {"t": b"s3cret"}
    runs_before = await fetchval(edges.plane.pool, "SELECT count(*) FROM executions")
    status, answer = await post(edges.plane, f"{API}/events/ping", BIG)
    assert (status, answer["field"], answer["message"]) == (413, "payload", refusal("payload"))
    code, said = await edges.cli("events", "send", "ping", "--payload", _json(BIG))
    assert code != 0 and says(said, refusal("payload"))
    webhook = f"{edges.plane.url}{API}/webhooks/pinger"
    async with aiohttp.ClientSession() as http, http.post(webhook, json=BIG, headers={"X-Token": "s3cret"}) as response:
        assert response.status == 413 and (await response.json())["message"] == refusal("body")
    assert await fetchval(edges.plane.pool, "SELECT count(*) FROM executions") == runs_before

    status, by_rest = await post(edges.plane, f"{API}/events/ping", {"via": "rest"})
    assert status == 202, by_rest
    code, said = await edges.cli("events", "send", "ping", "--payload", '{"via": "cli"}', "-o", "json")
    assert code == 0, said
    by_cli = json.loads(said)
    async with (
        aiohttp.ClientSession() as http,
        http.post(webhook, json={"via": "webhook"}, headers={"X-Token": "s3cret"}) as response,
    ):
        assert response.status == 200
        by_webhook = (await response.json())["event"]
    signature = ("webhook pinger (signature verified)", "signature")
    for event, who in ((by_rest, PERSON), (by_cli, PERSON), (by_webhook, signature)):
        [outcome] = event["outcomes"]
        assert outcome["outcome"] == "started", event
        detail = {"workflow": "one", "trigger": "on-ping", "event": "ping", "eventId": event["eventId"]}
        assert await edges.trail(outcome["runId"]) == [("start", who, detail)]


# -- messages, HUMAN decisions, webhooks ---------------------------------------------------


async def test_a_message_is_audited_and_limited_alike_by_rest_and_the_ui(edges: Edges) -> None:
    run_id = await edges.start()
    status, queued = await post(edges.plane, f"{API}/executions/{run_id}/messages", {"n": 1})
    assert status == 202, queued
    page = await edges.ui(run_id, "message", message='{"n": 2}')
    assert page.status == 200 and "done=" in page.url, page.text[:300]
    status, refused = await post(edges.plane, f"{API}/executions/{run_id}/messages", BIG)
    assert (status, refused["error"], refused["field"], refused["message"]) == (
        413,
        "PAYLOAD_TOO_LARGE",
        "body",
        refusal("body"),
    )
    page = await edges.ui(run_id, "message", message=_json(BIG))
    assert page.status == 413 and says(page.text, refusal("body"))
    entries = await edges.trail(run_id)
    assert [(operation, who) for operation, who, _ in entries] == [("start", PERSON), ("message", PERSON)] + [
        ("message", PERSON)
    ]
    assert [detail["bytes"] for _, _, detail in entries[1:]] == [json_size({"n": 1}), json_size({"n": 2})]


async def test_a_message_over_the_message_limit_names_its_field_size_and_limit(
    pool: asyncpg.Pool, database_url: str
) -> None:
    """Under a payload limit higher than the message limit, a message's own
    limit refuses it, with the same structured fields as any refusal."""
    async with execution_plane(pool, database_url) as plane:
        await define_workflow(pool, "one", [task("work")])
        status, started = await post(plane, f"{API}/executions", {"name": "one"})
        message = {"blob": "x" * MAX_MESSAGE_BYTES}
        status, refused = await post(plane, f"{API}/executions/{started['id']}/messages", message)
    assert status == 413
    assert {k: refused[k] for k in ("error", "control", "field", "size", "limit")} == {
        "error": "PAYLOAD_TOO_LARGE",
        "control": "maxPayloadBytes",
        "field": "body",
        "size": json_size(message),
        "limit": MAX_MESSAGE_BYTES,
    }
    assert str(MAX_MESSAGE_BYTES) in refused["limitSource"]


async def test_a_human_decision_is_audited_and_limited_alike_by_rest_and_the_ui(edges: Edges) -> None:
    await define_workflow(
        edges.plane.pool,
        "approval",
        [task("ok", "HUMAN"), task("ok2", "HUMAN")],
    )
    run_id = await edges.start("approval")
    first = await _waiting(edges, run_id, "ok")
    status, refused = await post(edges.plane, f"{API}/tasks/{first}/complete", {"output": BIG})
    assert (status, refused["field"], refused["message"]) == (413, "output", refusal("output"))
    form = await edges.browser.get(f"/ui/ns/{NS}/human/{first}")
    page = await edges.browser.post(
        f"/ui/ns/{NS}/human/{first}", {"csrf": form.csrf(), "decision": "complete", "output": _json(BIG)}
    )
    assert page.status == 413 and says(page.text, refusal("output")), "the UI keeps the limit the API keeps"
    assert await edges.trail(run_id) == [("start", PERSON, {"workflow": "approval"})], "nothing was decided"
    page = await edges.browser.post(
        f"/ui/ns/{NS}/human/{first}", {"csrf": form.csrf(), "decision": "complete", "output": '{"approved": true}'}
    )
    assert page.status == 200, page.text[:300]
    second = await _waiting(edges, run_id, "ok2")
    status, done = await post(edges.plane, f"{API}/tasks/{second}/complete", {"output": {"approved": True}})
    assert status == 200, done
    assert await edges.trail(run_id) == [
        ("start", PERSON, {"workflow": "approval"}),
        ("complete", PERSON, {"taskId": first, "taskReferenceName": "ok"}),
        ("complete", PERSON, {"taskId": second, "taskReferenceName": "ok2"}),
    ]


async def test_a_webhook_call_over_the_payload_limit_is_refused_and_completes_nothing(edges: Edges) -> None:
    await define_workflow(
        edges.plane.pool,
        "paid",
        [{"name": "paid", "taskReferenceName": "paid", "type": "WAIT_FOR_WEBHOOK", "webhook": "payments"}],
    )
    async with edges.plane.pool.acquire() as conn:
        spec = {"token": {"header": "X-Token", "secretRef": {"name": "hook", "key": "t"}}}
        await webhooks.upsert(conn, NS, "payments", "payments", 1, spec)
    edges.plane.secrets.secrets[(NS, "hook")] = {"t": b"s3cret"}
    run_id = await edges.start("paid")
    await _waiting(edges, run_id, "paid")
    headers = {"X-Token": "s3cret"}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{edges.plane.url}{API}/webhooks/payments", json=BIG, headers=headers) as response:
            assert response.status == 413
            refused = await response.json()
        assert (refused["field"], refused["message"]) == ("body", refusal("body"))
        async with http.post(f"{edges.plane.url}{API}/webhooks/payments", json={"ok": 1}, headers=headers) as response:
            assert response.status == 200 and (await response.json())["matched"] == 1
    assert await edges.trail(run_id) == [
        ("start", PERSON, {"workflow": "paid"}),
        ("webhook", ("webhook payments (signature verified)", "signature"), {"taskReferenceName": "paid"}),
    ]


async def _waiting(edges: Edges, run_id: str, ref: str) -> str:
    async def probe() -> str | None:
        status, body = await get(edges.plane, f"{API}/executions/{run_id}")
        found = [t for t in body["tasks"] if t["referenceName"] == ref and t["status"] == "IN_PROGRESS"]
        return str(found[0]["taskId"]) if found else None

    return await eventually_async(probe, timeout=20, what=f"{ref} to wait")


def _json(value: Any) -> str:
    return json.dumps(value)


def says(text: str, message: str) -> bool:
    """Whether `text` (a command's output wrapped to a terminal, an HTML page) says `message`."""
    return "".join(message.split()) in "".join(html.unescape(text).split())


async def add_schedule(pool: asyncpg.Pool, name: str, **fields: Any) -> None:
    """Store a Schedule of this namespace as its reconciler does."""
    spec = ScheduleSpec.model_validate(fields)
    async with pool.acquire() as conn:
        assert await schedules.upsert_schedule(conn, NS, name, str(uuid.uuid4()), 1, spec) is None
