"""Every page of the UI through a real HTTP server over a real PostgreSQL:
what it shows in each state, the actions behind their confirmations and CSRF
tokens, and the refusals (4xx pages naming what was wrong, nothing changed)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from sluiceway.api.services import Services
from sluiceway.controls.policy import Gates
from sluiceway.model.execution import ResultStatus, RunStatus
from sluiceway.model.schedule import ScheduleSpec
from sluiceway.plane import Plane
from sluiceway.store import definitions, leasing, schedules
from tests.support.store import NS, define_task, define_workflow, lease, report, run_status, settle, start
from tests.support.ui import Browser, serve_ui
from tests.support.waiting import eventually_async


def simple(ref: str, **inputs: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "inputParameters": inputs}


FAN = [
    simple("prepare"),
    {
        "name": "fan",
        "taskReferenceName": "fan",
        "type": "FORK_JOIN_DYNAMIC",
        "inputParameters": {"forkTaskName": "work", "forkTaskInputs": "${workflow.input.items}"},
    },
    {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
    simple("report"),
]


@pytest.fixture
async def browser(pool: asyncpg.Pool) -> AsyncIterator[Browser]:
    async with serve_ui(Services(Plane(pool))) as base:
        found = Browser(base)
        yield found
        await found.close()


def statuses(html: str) -> dict[str, str]:
    """data-ref -> data-status of every graph node."""
    return dict(re.findall(r'data-ref="([^"]+)" data-status="([^"]+)"', html))


async def test_the_runs_list_filters_counts_and_pages(pool: asyncpg.Pool, browser: Browser) -> None:
    await define_workflow(pool, "orders", [simple("pick")])
    await define_workflow(pool, "refunds", [simple("refund")])
    orders = [await start(pool, "orders") for _ in range(53)]
    refund = await start(pool, "refunds")
    await settle(pool)
    [picked] = await lease(pool, "pick", count=1)
    await report(pool, picked, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason="card declined")
    await settle(pool)

    page = await browser.get(f"/ui/ns/{NS}/runs")
    assert page.status == 200
    assert page.text.count('name="id"') == 50  # one page, newest first
    assert refund in page.text
    assert re.search(r"failed</span> <strong>1</strong>", page.text)
    assert re.search(r"running</span> <strong>53</strong>", page.text)
    older = re.search(r'href="([^"]+)" rel="next"', page.text)
    assert older
    second = await browser.get(older.group(1).replace("&amp;", "&"))
    assert second.text.count('name="id"') == 4
    assert not set(re.findall(r'value="([0-9a-f-]{36})"', page.text)) & set(
        re.findall(r'value="([0-9a-f-]{36})"', second.text)
    )

    failed = await browser.get(f"/ui/ns/{NS}/runs?status=FAILED")
    assert failed.text.count('name="id"') == 1 and "card declined" in failed.text
    assert picked.execution_id in failed.text
    only_refunds = await browser.get(f"/ui/ns/{NS}/runs?workflow=refunds")
    assert only_refunds.text.count('name="id"') == 1 and refund in only_refunds.text
    assert orders[0] not in only_refunds.text
    recent = await browser.get(f"/ui/ns/{NS}/runs?since=15m&slaBreached=no")
    assert recent.text.count('name="id"') == 50


async def test_bad_filters_and_names_are_refused_with_a_page_naming_them(browser: Browser) -> None:
    bad_time = await browser.get(f"/ui/ns/{NS}/runs?startedAfter=yesterday")
    assert bad_time.status == 422 and "startedAfter" in bad_time.text
    bad_workflow = await browser.get(f"/ui/ns/{NS}/runs?workflow=Not%20A%20Name")
    assert bad_workflow.status == 422 and "workflow" in bad_workflow.text
    bad_attribute = await browser.get(f"/ui/ns/{NS}/runs?attr=%3D%3D")
    assert bad_attribute.status == 422 and "searchAttribute" in bad_attribute.text
    assert (await browser.get(f"/ui/ns/{NS}/runs/not-a-uuid")).status == 404
    assert (await browser.get(f"/ui/ns/{NS}/runs/{uuid.uuid4()}")).status == 404
    assert (await browser.get("/ui/ns/Bad_NS/runs")).status == 404
    assert (await browser.get(f"/ui/ns/{NS}/runs/{uuid.uuid4()}/explode")).status == 404


async def test_a_run_page_colours_its_graph_folds_a_fan_out_and_pages_its_branches(
    pool: asyncpg.Pool, browser: Browser
) -> None:
    await define_workflow(pool, "fanout", FAN)
    run_id = await start(pool, "fanout", {"items": [{"n": i} for i in range(150)]})
    await settle(pool)
    [prepare] = await lease(pool, "prepare")
    await report(pool, prepare, output={"ready": True})
    await settle(pool)
    # By branch number: branches made together are leased in no particular order (docs/priority.md).
    work = sorted(await lease(pool, "work", count=150), key=lambda task: int(task.ref.split("__")[1]))
    for item in work[:140]:
        await report(pool, item)
    for item in work[140:145]:
        await report(pool, item, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason="bad row")
    await settle(pool)

    page = await browser.get(f"/ui/ns/{NS}/runs/{run_id}")
    assert page.status == 200
    found = statuses(page.text)
    assert found["prepare"] == "COMPLETED" and found["report"] == "NOT_STARTED"
    assert found["fan__*"] == "FAILED_WITH_TERMINAL_ERROR"  # the worst branch's colour, and its counts in words
    # the failures failed the run, which canceled the branches still in flight
    assert "×150: 5 failed (terminal) · 5 canceled · 140 completed" in page.text
    assert not any(ref.startswith("fan__") and ref != "fan__*" for ref in found)
    assert "✓" in page.text and "✗" in page.text  # an icon beside every colour
    assert 'class="gantt-row"' in page.text and "fan branches" in page.text

    group = await browser.get(f"/ui/ns/{NS}/runs/{run_id}?group=fan&gstatus=FAILED")
    assert "fan__140" in group.text and "fan__144" in group.text and "fan__3<" not in group.text
    paged = await browser.get(f"/ui/ns/{NS}/runs/{run_id}?group=fan&gpage=1")
    assert "page 2 of 2" in paged.text and ">fan__100<" in paged.text and ">fan__99<" not in paged.text
    expanded = await browser.get(f"/ui/ns/{NS}/runs/{run_id}?expand=fan")
    assert statuses(expanded.text)["fan__149"] == "CANCELED"

    panel = await browser.get(f"/ui/ns/{NS}/runs/{run_id}/tasks/fan__141", **{"HX-Request": "true"})
    assert "bad row" in panel.text and "epoch 1" in panel.text and "w1" in panel.text
    direct = await browser.get(f"/ui/ns/{NS}/runs/{run_id}/tasks/prepare")
    assert direct.url.endswith(f"/runs/{run_id}?task=prepare#task") or "task=prepare" in direct.url
    assert "&#34;ready&#34;: true" in direct.text  # the output, escaped


async def test_a_run_page_shows_one_moment_of_its_run_in_the_header_and_the_why(
    pool: asyncpg.Pool, browser: Browser
) -> None:
    """A decision lands while the page is being read (as right after a HUMAN
    task is completed from the UI, whose redirect reads the run as the decider
    ends it): the header and the "why" still tell the same status. The page's
    reads are made to straddle the decision's commit: the decision holds a
    lock on a table the page reads after the run and before the why."""
    await define_workflow(pool, "one", [simple("pick")])
    run_id = await start(pool, "one")
    await settle(pool)
    async with pool.acquire() as decision:
        deciding = decision.transaction()
        await deciding.start()
        await decision.execute("LOCK TABLE workflow_versions IN ACCESS EXCLUSIVE MODE")
        await decision.execute(
            "UPDATE executions SET status = 'COMPLETED', ended_at = now() WHERE id = $1", uuid.UUID(run_id)
        )
        reading = asyncio.create_task(browser.get(f"/ui/ns/{NS}/runs/{run_id}"))

        async def page_waits_for_the_decision() -> bool:
            async with pool.acquire() as conn:
                return bool(
                    await conn.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND query LIKE '%workflow_versions%' AND pid <> pg_backend_pid()"
                    )
                )

        await eventually_async(page_waits_for_the_decision, what="the page to read past the run's row")
        await deciding.commit()
    page = await reading
    assert page.status == 200, page.text
    title = re.search(r'<h1 id="run-title">(.*?)</h1>', page.text, re.S)
    why = re.search(r'<section aria-labelledby="why-title">(.*?)</section>', page.text, re.S)
    assert title and why, page.text
    header_says_completed = "completed" in title.group(1)
    why_says_completed = f"run {run_id} is COMPLETED" in why.group(1)
    assert header_says_completed == why_says_completed, (title.group(1), why.group(1))


async def test_retry_from_failed_needs_a_confirmation_and_a_csrf_token(pool: asyncpg.Pool, browser: Browser) -> None:
    await define_task(pool, "charge", retryCount=0)
    await define_workflow(pool, "pay", [simple("charge")])
    run_id = await start(pool, "pay")
    await settle(pool)
    [charge] = await lease(pool, "charge")
    await report(pool, charge, ResultStatus.FAILED, reason="bank down")
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.FAILED

    run_page = await browser.get(f"/ui/ns/{NS}/runs/{run_id}")
    assert "Retry from failed" in run_page.text and "bank down" in run_page.text
    confirm = await browser.get(f"/ui/ns/{NS}/runs/{run_id}/retry")
    assert f"This will retry run <code>{run_id}</code>" in confirm.text

    forged = await browser.post(f"/ui/ns/{NS}/runs/{run_id}/retry", {"csrf": "x" * 43})
    assert forged.status == 403 and "CSRF" in forged.text
    assert (await run_status(pool, run_id)).status is RunStatus.FAILED

    done = await browser.post(f"/ui/ns/{NS}/runs/{run_id}/retry", {"csrf": confirm.csrf()})
    assert done.status == 200 and "retry:" in done.text
    assert (await run_status(pool, run_id)).status is RunStatus.RUNNING

    again = await browser.post(f"/ui/ns/{NS}/runs/{run_id}/retry", {"csrf": confirm.csrf()})
    assert again.status == 409 and "NOT_FINISHED" in again.text or again.status == 409


async def test_pause_resume_terminate_and_rerun_from_a_task(pool: asyncpg.Pool, browser: Browser) -> None:
    await define_workflow(pool, "two", [simple("first"), simple("second")])
    run_id = await start(pool, "two")
    await settle(pool)
    csrf = (await browser.get(f"/ui/ns/{NS}/runs/{run_id}/pause")).csrf()
    await browser.post(f"/ui/ns/{NS}/runs/{run_id}/pause", {"csrf": csrf, "reason": "bank holiday"})
    paused = await browser.get(f"/ui/ns/{NS}/runs/{run_id}")
    assert "bank holiday" in paused.text and "Resume" in paused.text
    assert (await run_status(pool, run_id)).status is RunStatus.PAUSED
    await browser.post(f"/ui/ns/{NS}/runs/{run_id}/resume", {"csrf": csrf})
    assert (await run_status(pool, run_id)).status is RunStatus.RUNNING

    [first] = await lease(pool, "first")
    await report(pool, first, output={"a": 1})
    await settle(pool)
    [second] = await lease(pool, "second")
    await report(pool, second)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.COMPLETED
    rerun = await browser.post(f"/ui/ns/{NS}/runs/{run_id}/rerun", {"csrf": csrf, "task": "second"})
    assert rerun.status == 200
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.RUNNING
    unknown = await browser.post(f"/ui/ns/{NS}/runs/{run_id}/rerun", {"csrf": csrf, "task": "nope"})
    assert unknown.status in (409, 422)

    await browser.post(f"/ui/ns/{NS}/runs/{run_id}/terminate", {"csrf": csrf})
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.TERMINATED


async def test_bulk_terminate_by_filter_states_how_many_runs_first(pool: asyncpg.Pool, browser: Browser) -> None:
    await define_workflow(pool, "batch", [simple("step")])
    await define_workflow(pool, "keep", [simple("step")])
    batch = [await start(pool, "batch") for _ in range(7)]
    keep = await start(pool, "keep")
    await settle(pool)
    runs = await browser.get(f"/ui/ns/{NS}/runs?workflow=batch")
    confirm = await browser.post(
        f"/ui/ns/{NS}/bulk",
        {"csrf": runs.csrf(), "action": "terminate", "scope": "filter", "filter": "?workflow=batch"},
    )
    assert "This will terminate <strong>7 runs</strong>" in confirm.text
    assert all(run_id in confirm.text for run_id in batch) and keep not in confirm.text
    ids = re.findall(r'name="id" value="([^"]+)"', confirm.text)
    done = await browser.post(f"/ui/ns/{NS}/bulk/terminate", [("csrf", runs.csrf()), *(("id", i) for i in ids)])
    assert "<strong>7</strong> done" in done.text
    await settle(pool)
    assert {(await run_status(pool, r)).status for r in batch} == {RunStatus.TERMINATED}
    assert (await run_status(pool, keep)).status is RunStatus.RUNNING

    selection = await browser.post(
        f"/ui/ns/{NS}/bulk", [("csrf", runs.csrf()), ("action", "pause"), ("scope", "selection"), ("id", keep)]
    )
    assert f"This will pause run <code>{keep}</code>" in selection.text


async def test_gates_show_queues_caps_and_who_holds_a_semaphore(pool: asyncpg.Pool, browser: Browser) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, NS, "legacy_erp", "legacy-erp", 1, 1)
    await define_task(pool, "export", semaphores=["legacy_erp"], concurrentExecLimit=3)
    await define_workflow(pool, "exports", [simple("export")])
    holder = await start(pool, "exports")
    waiting = await start(pool, "exports")
    await settle(pool)
    async with pool.acquire() as conn, conn.transaction():
        leased = await leasing.lease(
            conn, NS, "export", "erp-worker", 5, Gates(concurrent_exec_limit=3, semaphores=("legacy_erp",))
        )
    assert len(leased.leases) == 1
    page = await browser.get(f"/ui/ns/{NS}/gates")
    assert page.status == 200
    assert "1/1 permits held" in page.text and "none free" in page.text
    assert f"run {leased.leases[0].execution_id[:8]}" in page.text
    assert "1/3 in flight" in page.text
    other = waiting if leased.leases[0].execution_id == holder else holder
    run = await browser.get(f"/ui/ns/{NS}/runs/{other}?task=export")
    assert "semaphore legacy_erp: 1/1 held by export" in run.text


def caps_section(html: str) -> str:
    """The gates page's table of caps and rate windows."""
    return html[html.index('id="caps-title"') : html.index('id="sem-title"')]


async def test_held_back_is_shown_only_for_ready_tasks_behind_a_closed_gate(
    pool: asyncpg.Pool, browser: Browser
) -> None:
    await define_task(pool, "capped", concurrentExecLimit=1)
    await define_task(pool, "roomy", concurrentExecLimit=5)
    await define_task(pool, "idle", concurrentExecLimit=5)
    await define_task(pool, "paced", rateLimitPerFrequency=1, rateLimitFrequencySeconds=60)
    await define_workflow(pool, "one_capped", [simple("capped")])
    await define_workflow(pool, "one_roomy", [simple("roomy")])
    await define_workflow(pool, "one_paced", [simple("paced")])
    for workflow in ("one_capped", "one_capped", "one_roomy", "one_roomy", "one_paced"):
        await start(pool, workflow)
    await settle(pool)
    async with pool.acquire() as conn, conn.transaction():
        taken = await leasing.lease(conn, NS, "capped", "w1", 5, Gates(concurrent_exec_limit=1))
        # The window a lease of `paced` spent a day ago: spent, but not the current one.
        await conn.execute(
            "INSERT INTO rate_windows VALUES ($1, 'paced', date_trunc('minute', now()) - interval '1 day', 1)", NS
        )
    assert len(taken.leases) == 1, "the cap of one is full; the other capped task is ready and held back"

    caps = caps_section((await browser.get(f"/ui/ns/{NS}/gates")).text)
    link = r'<code>(\w+)</code> <a href="[^"]+taskType=\1&amp;status=SCHEDULED[^"]*">(\d+) held back'
    held = re.findall(link, caps)
    assert held == [("capped", "1")], "only the type whose cap is full holds a ready task back"
    assert "by <code>concurrentExecLimit</code>" in caps
    assert "<code>idle</code></td>" in caps, "a gated type with no task has no link"
    assert "<code>roomy</code></td>" in caps, "ready tasks under an open gate are not held back"
    assert "<code>paced</code></td>" in caps and "0/1 per 60 s" in caps, "a past window spent nothing of this one"


async def test_a_quota_shows_each_limit_it_sets_and_never_an_empty_entry(pool: asyncpg.Pool, browser: Browser) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "payloads", 1, None, None, None, None, max_payload_bytes=1_048_576)
        await definitions.upsert_quota(conn, NS, "schedules", 1, None, None, None, 4)
        await definitions.upsert_quota(conn, NS, "weights", 1, None, None, None, None, dispatch_weight=3)
    page = (await browser.get(f"/ui/ns/{NS}/gates")).text
    quotas = page[page.index('id="quota-title"') :]
    entries = dict(re.findall(r"<h3>(\w+)</h3>\s*<ul class=\"plain\">(.*?)</ul>", quotas, re.S))
    assert set(entries) == {"payloads", "schedules", "weights"}
    assert "payload limit: 1,048,576 bytes" in entries["payloads"]
    assert 'aria-label="schedules"></meter> 0/4' in entries["schedules"]
    assert "sets no run, definition, schedule or payload limit" in entries["weights"]
    assert all("<li" in entry for entry in entries.values()), "no Quota shows as an empty entry"


async def test_definitions_show_the_effective_policy_and_the_yaml_of_each_version(
    pool: asyncpg.Pool, browser: Browser
) -> None:
    await define_task(pool, "charge", retryCount=7)
    await define_workflow(pool, "pay", [simple("charge")])
    await define_workflow(pool, "hurry", [simple("charge")], timeoutSeconds=60)
    page = await browser.get(f"/ui/ns/{NS}/definitions")
    assert page.status == 200 and "retry_count: 7" in page.text and "retryCount: 7" in page.text
    # The policy advisor, next to each definition: charge has no scheduleToStartTimeout.
    assert "1 policy warning" in page.text
    assert "<code>spec.scheduleToStartTimeout</code> <small>worker-schedule-to-start</small>" in page.text
    # and hurry's timeout against charge's stored retries: 0.8 + 1.6 + ... + 51.2 s of backoff before the 7th.
    assert "<code>spec.timeoutSeconds</code> <small>retries-outlive-workflow-timeout</small>" in page.text
    assert "its last 1 retry can never run" in page.text
    workflow = await browser.get(f"/ui/ns/{NS}/workflows/pay")
    assert "taskReferenceName: charge" in workflow.text and "v1" in workflow.text
    assert (await browser.get(f"/ui/ns/{NS}/workflows/nope")).status == 404
    home = await browser.get("/ui")
    assert home.url.endswith(f"/ui/ns/{NS}/runs")  # the one namespace there is


async def test_a_human_task_is_completed_from_its_page_and_bad_output_is_refused(
    pool: asyncpg.Pool, browser: Browser
) -> None:
    gate = {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN", "inputParameters": {"amount": 40}}
    await define_workflow(pool, "refund", [gate, simple("pay", approved="${approve.output.approved}")])
    run_id = await start(pool, "refund")
    await settle(pool)
    panel = await browser.get(f"/ui/ns/{NS}/runs/{run_id}?task=approve")
    link = re.search(r'href="(/ui/ns/[^"]+/human/[^"]+)"', panel.text)
    assert link, "a waiting HUMAN task offers a decision"
    form = await browser.get(link.group(1))
    assert "&#34;amount&#34;: 40" in form.text

    not_json = await browser.post(link.group(1), {"csrf": form.csrf(), "decision": "complete", "output": "{oops"})
    assert not_json.status == 422 and "output: not JSON" in not_json.text
    no_reason = await browser.post(link.group(1), {"csrf": form.csrf(), "decision": "reject", "output": "{}"})
    assert no_reason.status == 422 and "reason" in no_reason.text

    done = await browser.post(
        link.group(1), {"csrf": form.csrf(), "decision": "complete", "output": '{"approved": true}'}
    )
    assert done.status == 200 and "approve: completed by anonymous" in done.text
    await settle(pool)
    [pay] = await lease(pool, "pay")
    assert pay.input == {"approved": True}
    again = await browser.post(link.group(1), {"csrf": form.csrf(), "decision": "complete", "output": "{}"})
    assert again.status == 409


async def test_schedules_show_their_next_fires(pool: asyncpg.Pool, browser: Browser) -> None:
    await define_workflow(pool, "report", [simple("export")])
    spec = ScheduleSpec.model_validate({"workflow": "report", "cron": ["0 6 * * *"]})
    async with pool.acquire() as conn:
        await schedules.upsert_schedule(conn, NS, "daily", str(uuid.uuid4()), 1, spec)
    page = await browser.get(f"/ui/ns/{NS}/schedules")
    assert page.status == 200 and "daily" in page.text
    assert len(re.findall(r"\d{4}-\d\d-\d\d 06:00:00 UTC", page.text)) == 5
    assert "No fire yet." in page.text and "cron:" in page.text


async def test_the_tasks_page_lists_what_a_queue_holds_back_and_the_human_inbox(
    pool: asyncpg.Pool, browser: Browser
) -> None:
    gate = {"name": "approve", "taskReferenceName": "approve", "type": "HUMAN"}
    await define_workflow(pool, "queued", [simple("slow")])
    await define_workflow(pool, "asks", [gate])
    queued = await start(pool, "queued")
    asks = await start(pool, "asks")
    await settle(pool)
    gates = await browser.get(f"/ui/ns/{NS}/gates")
    link = re.search(r'href="(/ui/ns/[^"]+/tasks\?taskType=slow&amp;status=SCHEDULED[^"]*)"', gates.text)
    assert link, "a queue's ready count links to the tasks it holds"
    held = await browser.get(link.group(1).replace("&amp;", "&"))
    assert queued in held.text and asks not in held.text
    inbox = await browser.get(f"/ui/ns/{NS}/tasks?type=HUMAN&status=IN_PROGRESS&order=oldest")
    assert asks in inbox.text and queued not in inbox.text
    assert (await browser.get(f"/ui/ns/{NS}/tasks?type=NOPE")).status == 422
    assert (await browser.get(f"/ui/ns/{NS}/tasks?status=NOPE")).status == 422


async def test_a_message_sent_from_the_ui_is_taken_by_the_run(pool: asyncpg.Pool, browser: Browser) -> None:
    inbox = {"name": "inbox", "taskReferenceName": "inbox", "type": "PULL_WORKFLOW_MESSAGES"}
    await define_workflow(pool, "chat", [inbox, simple("answer", got="${inbox.output.messages}")])
    run_id = await start(pool, "chat")
    await settle(pool)
    confirm = await browser.get(f"/ui/ns/{NS}/runs/{run_id}/message")
    assert 'name="message"' in confirm.text
    bad = await browser.post(f"/ui/ns/{NS}/runs/{run_id}/message", {"csrf": confirm.csrf(), "message": "{nope"})
    assert bad.status == 422 and "not JSON" in bad.text
    sent = await browser.post(
        f"/ui/ns/{NS}/runs/{run_id}/message", {"csrf": confirm.csrf(), "message": '{"text": "where is my order?"}'}
    )
    assert sent.status == 200 and "handed to a waiting task" in sent.text
    await settle(pool)
    [answer] = await lease(pool, "answer")
    assert [m["payload"] for m in answer.input["got"]] == [{"text": "where is my order?"}]


async def test_nothing_sent_to_the_ui_makes_it_answer_5xx(pool: asyncpg.Pool, browser: Browser) -> None:
    await define_workflow(pool, "pay", [simple("charge")])
    run_id = await start(pool, "pay")
    await settle(pool)
    csrf = (await browser.get(f"/ui/ns/{NS}/runs")).csrf()
    run = f"/ui/ns/{NS}/runs/{run_id}"
    gets = [
        f"/ui/ns/{NS}/runs?cursor=garbage",
        f"/ui/ns/{NS}/runs?cursor=" + "A" * 600,
        f"/ui/ns/{NS}/runs?status=NOPE&since=never&slaBreached=maybe&awaitingAdmission=%00",
        f"/ui/ns/{NS}/runs?parent=nope&restartedFrom=%00",
        f"/ui/ns/{NS}/runs?attr=tenant%3D%00&attr=" + "x" * 5000,
        f"{run}?group=charge&gpage=-3&gstatus=%00&expand=%00&task=%00",
        f"{run}?gpage=99999999999999999999&group=nope",
        f"{run}?task=" + "a" * 300,
        f"{run}/tasks/%00",
        f"{run}/rerun?task=%00",
        f"/ui/ns/{NS}/tasks?cursor=%00&order=sideways&workerId=%00",
        f"/ui/ns/{NS}/human/nope",
        f"/ui/ns/{NS}/human/{uuid.uuid4()}",
        f"/ui/ns/{NS}/workflows/%00",
        "/ui/login?next=//evil.example&why=<script>",
        "/ui?ns=..%2F..",
    ]
    for path in gets:
        page = await browser.get(path)
        assert page.status < 500, (path, page.status, page.text[:300])
        assert "<script>" not in page.text.split("</head>", 1)[1].replace("<script src", ""), path
    posts: list[tuple[str, list[tuple[str, str]]]] = [
        (f"{run}/pause", [("csrf", csrf), ("reason", "x" * 5000)]),
        (f"{run}/rerun", [("csrf", csrf), ("task", "../../etc")]),
        (f"{run}/message", [("csrf", csrf), ("message", "1" * 70_000)]),
        (f"/ui/ns/{NS}/bulk", [("csrf", csrf), ("action", "retry"), ("scope", "selection"), ("id", "nope")]),
        (f"/ui/ns/{NS}/bulk", [("csrf", csrf), ("action", "explode")]),
        (f"/ui/ns/{NS}/bulk", [("csrf", csrf), ("action", "pause"), ("scope", "filter"), ("filter", "?cursor=%00")]),
        (f"/ui/ns/{NS}/bulk/retry", [("csrf", csrf), ("id", str(uuid.uuid4())), ("id", "nope")]),
        (f"/ui/ns/{NS}/human/{uuid.uuid4()}", [("csrf", csrf), ("decision", "complete")]),
        ("/ui/login", [("csrf", csrf), ("token", "x"), ("next", "https://evil.example")]),
    ]
    for path, form in posts:
        page = await browser.post(path, form)
        assert page.status < 500, (path, page.status, page.text[:300])
    paused = await run_status(pool, run_id)  # the long reason was cut to what the API keeps
    assert paused.status is RunStatus.PAUSED and paused.pause_reason == "x" * 1024


async def test_a_run_page_links_the_runs_of_its_chain(pool: asyncpg.Pool, browser: Browser) -> None:
    again = {
        "name": "again",
        "taskReferenceName": "again",
        "type": "CONTINUE_AS_NEW",
        "inputParameters": {"input": {"more": "no"}},
    }
    switch = {
        "name": "more",
        "taskReferenceName": "more",
        "type": "SWITCH",
        "evaluatorType": "value-param",
        "expression": "more",
        "inputParameters": {"more": "${workflow.input.more}"},
        "decisionCases": {"yes": [again]},
    }
    await define_workflow(pool, "loop", [switch])
    first = await start(pool, "loop", {"more": "yes"})
    await settle(pool)
    following = (await run_status(pool, first)).next_run_id
    assert following is not None
    page = await browser.get(f"/ui/ns/{NS}/runs/{first}")
    assert f"continued as {following[:8]}" in page.text
    second = await browser.get(f"/ui/ns/{NS}/runs/{following}")
    assert f"continued from {first[:8]}" in second.text
