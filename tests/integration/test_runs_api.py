"""Finding runs and tasks through the HTTP API on a real PostgreSQL: every
filter, keyset pages that stay stable while runs are added, the plans that
serve them, idempotent starts under concurrency, and 4xx naming the field."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import uuid
from typing import Any
from urllib.parse import urlencode

import aiohttp
import asyncpg
import pytest

from sluiceway.controls.attributes import Op, TypedFilter
from sluiceway.model.attributes import AttributeType
from sluiceway.model.execution import ResultStatus, RunStatus
from sluiceway.store import listing
from sluiceway.worker import Task, Worker
from tests.support.plane import Plane, Running, execution_plane, finished
from tests.support.store import NS, define_workflow, lease, report
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"
ORDERS = [
    {"name": "fetch", "taskReferenceName": "fetch"},
]
ATTRIBUTES = [
    {"name": "tenant", "type": "keyword", "source": "${workflow.input.tenant}"},
    {"name": "amount", "type": "double", "source": "${workflow.input.amount}"},
    {"name": "stage", "type": "keyword"},
]


async def call(plane: Plane, method: str, path: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{plane.url}{path}", json=body, headers=headers) as response,
    ):
        return response.status, await response.json()


async def runs(plane: Plane, **params: Any) -> tuple[int, Any]:
    query = urlencode(
        [(k, v) for k, values in params.items() for v in (values if isinstance(values, list) else [values])]
    )
    return await call(plane, "GET", f"{API}/executions?{query}")


async def leased(pool: asyncpg.Pool, task_type: str, count: int, worker: str = "w1") -> list[Any]:
    """Lease `count` tasks once the decider (running in the background) has queued them."""
    found: list[Any] = []

    async def all_of_them() -> list[Any] | None:
        found.extend(await lease(pool, task_type, count=count - len(found), worker=worker))
        return found if len(found) >= count else None

    return await eventually_async(all_of_them, timeout=10, what=f"{count} {task_type} tasks to be queued")


async def start(plane: Plane, name: str, **body: Any) -> str:
    status, answer = await call(plane, "POST", f"{API}/executions", {"name": name, **body})
    assert status == 201, answer
    return str(answer["id"])


async def test_every_filter_narrows_the_list(plane: Plane) -> None:
    await define_workflow(plane.pool, "orders", ORDERS, searchAttributes=ATTRIBUTES, slaSeconds=3600)
    await define_workflow(plane.pool, "other", ORDERS)
    acme = await start(plane, "orders", input={"tenant": "acme", "amount": 120}, correlationId="c-1")
    globex = await start(plane, "orders", input={"tenant": "globex", "amount": 5})
    other = await start(plane, "other", input={"tenant": "acme"})
    async with plane.pool.acquire() as conn:
        await conn.execute(
            "UPDATE executions SET status = 'FAILED', ended_at = now(), sla_breached_at = now() WHERE id = $1",
            uuid.UUID(globex),
        )
        await conn.execute("UPDATE executions SET paused_at = now() WHERE id = $1", uuid.UUID(other))

    async def ids(**params: Any) -> list[str]:
        status, body = await runs(plane, **params)
        assert status == 200, body
        return [item["id"] for item in body["items"]]

    assert await ids() == [other, globex, acme], "newest first"
    assert await ids(order="oldest") == [acme, globex, other]
    assert await ids(workflow="orders") == [globex, acme]
    assert await ids(workflow="orders", version=1) == [globex, acme]
    assert await ids(workflow="orders", version=2) == []
    assert await ids(status="FAILED") == [globex]
    assert await ids(status=["FAILED", "PAUSED"]) == [other, globex]
    assert await ids(status="RUNNING") == [acme], "a paused run is PAUSED, not RUNNING"
    assert await ids(correlationId="c-1") == [acme]
    assert await ids(slaBreached="true") == [globex]
    assert await ids(awaitingAdmission="false") == [other, globex, acme]
    assert await ids(endedAfter="2000-01-01T00:00:00Z") == [globex]
    assert await ids(startedBefore="2000-01-01T00:00:00Z") == []
    assert await ids(searchAttribute="tenant=acme") == [acme], "other declares no tenant"
    assert await ids(searchAttribute="amount>=100") == [acme]
    assert await ids(searchAttribute="tenant in (acme, globex)") == [globex, acme]
    assert await ids(searchAttribute=["tenant in (acme, globex)", "amount<10"]) == [globex]
    _, body = await runs(plane, workflow="orders", limit=1)
    assert body["items"][0]["searchAttributes"] == {"tenant": "globex", "amount": 5.0}
    assert "input" not in body["items"][0], "a list never carries payloads"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "SLEEPING"}, "status"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"startedAfter": "2026-01-01T00:00:00"}, "startedAfter"),
        ({"endedBefore": "yesterday"}, "endedBefore"),
        ({"searchAttribute": "tenant"}, "searchAttribute"),
        ({"searchAttribute": "amount>lots"}, "searchAttribute"),
        ({"parent": "x"}, "parent"),
        ({"limit": "0"}, "query.limit"),
        ({"limit": "501"}, "query.limit"),
        ({"correlationId": "a\x00b"}, "correlationId"),
    ],
)
async def test_bad_filters_are_refused_naming_the_field(plane: Plane, params: dict[str, str], field: str) -> None:
    await define_workflow(plane.pool, "orders", ORDERS, searchAttributes=ATTRIBUTES)
    status, body = await runs(plane, **params)
    assert status == 422, body
    assert body["fields"][0]["field"] == field, body


def forged_cursor(raw: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")


FORGED_CURSORS = [
    {"t": "2026-11-02T08:00:00+00:00", "i": 5, "o": "newest"},
    {"t": "2026-11-02T08:00:00+00:00", "i": {"id": 5}, "o": "newest"},
    {"t": 5, "i": "0b7e3c1a-5d2f-4e8a-9c61-2f0d8a4b7e10", "o": "newest"},
    {"t": "2026-11-02T08:00:00+00:00", "i": "0b7e3c1a-5d2f-4e8a-9c61-2f0d8a4b7e10", "o": {}},
    # Aware, but not an instant once in UTC, which is how PostgreSQL is sent it.
    {"t": "0001-01-01T00:00:00+14:00", "i": "0b7e3c1a-5d2f-4e8a-9c61-2f0d8a4b7e10", "o": "newest"},
    ["2026-11-02T08:00:00+00:00", "0b7e3c1a-5d2f-4e8a-9c61-2f0d8a4b7e10", "newest"],
]


@pytest.mark.parametrize("path", ["executions", "tasks"])
@pytest.mark.parametrize("raw", FORGED_CURSORS, ids=repr)
async def test_a_forged_cursor_of_any_shape_is_a_422_naming_the_cursor(plane: Plane, path: str, raw: Any) -> None:
    status, body = await call(plane, "GET", f"{API}/{path}?{urlencode({'cursor': forged_cursor(raw)})}")
    assert status == 422, body
    assert body["fields"][0]["field"] == "cursor", body


async def test_pages_are_stable_while_runs_are_added(plane: Plane) -> None:
    await define_workflow(plane.pool, "paged", ORDERS)
    existing = [await start(plane, "paged") for _ in range(25)]
    adding = asyncio.Event()
    added: list[str] = []

    async def keep_adding() -> None:
        while not adding.is_set():
            added.append(await start(plane, "paged"))
            await asyncio.sleep(0)

    async def adding_has_begun() -> bool:
        return bool(added)

    writer = asyncio.create_task(keep_adding())
    await eventually_async(adding_has_begun, what="the writer to add a first run")
    _, first = await runs(plane, workflow="paged", limit=6)
    pages = [first["items"]]
    cursor = first["nextCursor"]
    while cursor:
        _, page = await runs(plane, workflow="paged", limit=6, cursor=cursor)
        pages.append(page["items"])
        cursor = page["nextCursor"]
    adding.set()
    await writer
    seen = [item["id"] for page in pages for item in page]
    assert added, "runs were added while paging"
    assert len(seen) == len(set(seen)), "no run twice"
    assert set(existing) <= set(seen), "no run that existed is skipped"
    order = [
        (datetime.datetime.fromisoformat(i["startTime"].replace("Z", "+00:00")), uuid.UUID(i["id"]))
        for page in pages
        for i in page
    ]
    assert order == sorted(order, reverse=True), "the pages concatenate newest first"


async def test_concurrent_retries_of_one_start_create_one_run(plane: Plane) -> None:
    await define_workflow(plane.pool, "once", ORDERS)
    answers = await asyncio.gather(
        *(
            call(plane, "POST", f"{API}/executions", {"name": "once"}, **{"Idempotency-Key": "order-42"})
            for _ in range(12)
        )
    )
    ids = {body["id"] for _, body in answers}
    assert len(ids) == 1, answers
    assert sorted(status for status, _ in answers) == [200] * 11 + [201]
    assert [body["created"] for status, body in answers if status == 201] == [True]
    async with plane.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM executions WHERE workflow_name = 'once'") == 1
    status, body = await call(
        plane, "POST", f"{API}/executions", {"name": "once", "requestId": "order-42", "input": {"x": 1}}
    )
    assert status == 409 and body["error"] == "IDEMPOTENCY_KEY_REUSED" and body["fields"][0]["field"] == "requestId"
    status, body = await call(
        plane, "POST", f"{API}/executions", {"name": "once", "requestId": "a"}, **{"Idempotency-Key": "b"}
    )
    assert status == 422 and body["fields"][0]["field"] == "requestId"


# Far beyond the wait below: a run the decider only finds again on its recheck fails the test.
DECIDER_NEVER_RECHECKS = 3600.0


@pytest.mark.parametrize("operation", ["rerun", "retry"])
async def test_concurrent_operations_on_one_run_start_its_task_at_once(
    pool: asyncpg.Pool, database_url: str, operation: str
) -> None:
    """One of ten concurrent reruns (or retries) wins, and its run is decided
    as soon as the nine refused ones have let go of the run's row, not at the
    decider's next recheck: the decider skips a run another transaction holds
    (SKIP LOCKED), and those refusals hold it and wake nobody."""
    async with execution_plane(pool, database_url, decider_recheck=DECIDER_NEVER_RECHECKS) as plane:
        await define_workflow(pool, "again", ORDERS)
        run_id = await start(plane, "again")
        (task,) = await leased(pool, "fetch", 1)
        body = {"taskReferenceName": "fetch"} if operation == "rerun" else {}
        for _ in range(3):  # each round is one more chance for the decider to meet a refusal's lock
            await report(pool, task, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason="broken")
            assert (await finished(plane, run_id))["status"] == "FAILED"
            answers = await asyncio.gather(
                *(call(plane, "POST", f"{API}/executions/{run_id}/{operation}", body) for _ in range(10))
            )
            assert sorted(status for status, _ in answers) == [200] + [409] * 9, answers
            (task,) = await eventually_async(
                lambda: lease(pool, "fetch", count=1), timeout=30, what=f"the {operation}'s task to be leasable"
            )
            assert task.execution_id == run_id


async def test_start_refuses_attributes_that_do_not_fit_naming_them(plane: Plane) -> None:
    await define_workflow(plane.pool, "orders", ORDERS, searchAttributes=ATTRIBUTES)
    status, body = await call(
        plane, "POST", f"{API}/executions", {"name": "orders", "searchAttributes": {"amount": "lots", "colour": "red"}}
    )
    assert status == 422, body
    assert [f["field"] for f in body["fields"]] == ["searchAttributes.amount", "searchAttributes.colour"]
    async with plane.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM executions") == 0, "nothing started"


async def test_a_result_upserts_attributes_and_a_bad_one_is_refused_alone(plane: Plane) -> None:
    await define_workflow(
        plane.pool,
        "staged",
        [{"name": "a", "taskReferenceName": "a"}, {"name": "b", "taskReferenceName": "b"}],
        searchAttributes=ATTRIBUTES,
    )
    first = await start(plane, "staged")
    second = await start(plane, "staged")
    good, bad = sorted(await leased(plane.pool, "a", 2), key=lambda t: t.execution_id != first)
    status, body = await call(
        plane,
        "POST",
        f"{API}/tasks/results",
        {
            "results": [
                {
                    "taskId": good.task_id,
                    "epoch": good.epoch,
                    "status": "COMPLETED",
                    "searchAttributes": {"stage": "charged"},
                },
                {"taskId": bad.task_id, "epoch": bad.epoch, "status": "COMPLETED", "searchAttributes": {"amount": "x"}},
            ]
        },
    )
    assert status == 207, body
    assert [item["code"] for item in body["results"]] == [200, 422]
    assert body["results"][1]["fields"][0]["field"] == "searchAttributes.amount"
    _, found = await runs(plane, searchAttribute="stage=charged")
    assert [item["id"] for item in found["items"]] == [first]
    async with plane.pool.acquire() as conn:
        still = await conn.fetchval("SELECT status FROM tasks WHERE id = $1", uuid.UUID(bad.task_id))
    assert still == "IN_PROGRESS" and second, "the refused result changed nothing"


async def test_tasks_are_listed_by_status_type_worker_and_run(plane: Plane) -> None:
    await define_workflow(plane.pool, "two", [{"name": "a", "taskReferenceName": "a"}])
    runs_started = {await start(plane, "two"), await start(plane, "two")}

    async def tasks(**params: Any) -> list[tuple[str, str]]:
        status, body = await call(plane, "GET", f"{API}/tasks?{urlencode(params)}")
        assert status == 200, body
        return [(item["executionId"], item["status"]) for item in body["items"]]

    async def both_queued() -> bool:
        return len(await tasks(taskType="a")) == 2

    # The decider queues the runs' first tasks in the background: list them once both are there, or the
    # lease below may take the only one queued so far and the second would appear after the assertions.
    await eventually_async(both_queued, timeout=10, what="both runs' first tasks to be queued")
    [done] = await leased(plane.pool, "a", 1, worker="w-7")
    await report(plane.pool, done)

    assert len(await tasks(taskType="a")) == 2
    assert await tasks(workerId="w-7") == [(done.execution_id, "COMPLETED")]
    assert await tasks(status="SCHEDULED") == [(run_id, "SCHEDULED") for run_id in runs_started - {done.execution_id}]
    assert await tasks(executionId=done.execution_id) == [(done.execution_id, "COMPLETED")]
    status, body = await call(plane, "GET", f"{API}/tasks?status=NAPPING")
    assert status == 422 and body["fields"][0]["field"] == "status"


PLANS = [
    ("every run", listing.RunFilter(), "executions_page"),
    ("one workflow", listing.RunFilter(workflow="wf-3"), "executions_page_workflow"),
    ("one status", listing.RunFilter(statuses=(RunStatus.FAILED,)), "executions_page_status"),
    ("a correlation id", listing.RunFilter(correlation_id="c-77"), "executions_page_correlation"),
    ("breached SLAs", listing.RunFilter(sla_breached=True), "executions_page_sla"),
    (
        "a keyword attribute",
        listing.RunFilter(attributes=(TypedFilter("tenant", AttributeType.KEYWORD, Op.EQ, ("t-7",)),)),
        "run_attributes_keyword",
    ),
]

# 20,000 finished runs in the shapes the benchmark stores a million of.
_FILL = """
INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, correlation_id, created_at,
                        ended_at, sla_breached_at)
SELECT gen_random_uuid(), $1, 'wf-' || (i % 20), 1, CASE WHEN i % 20 = 0 THEN 'FAILED' ELSE 'COMPLETED' END,
       CASE WHEN i % 10 = 0 THEN 'c-' || i END, now() - make_interval(secs => i), now() - make_interval(secs => i),
       CASE WHEN i % 100 = 0 THEN now() END
  FROM generate_series(1, 20000) AS i;
INSERT INTO run_attributes (run_id, name, namespace, created_at, type, keyword)
SELECT id, 'tenant', namespace, created_at, 'keyword', 't-' || (abs(hashtext(id::text)) % 50) FROM executions;
ANALYZE executions; ANALYZE run_attributes;
"""


@pytest.fixture
async def filled(pool: asyncpg.Pool) -> asyncpg.Pool:
    async with pool.acquire() as conn:
        await conn.execute(_FILL.replace("$1", f"'{NS}'"))
    return pool


@pytest.mark.parametrize(("what", "found", "index"), PLANS, ids=[p[0] for p in PLANS])
async def test_a_page_is_an_index_range_in_page_order(
    filled: asyncpg.Pool, what: str, found: listing.RunFilter, index: str
) -> None:
    """Each filter reads its index in page order: no Sort node, so a page
    stops after `limit` rows at any table size (the benchmark prints the same
    plans chosen on a million runs)."""
    for after in (None, listing.Position(datetime.datetime.now(datetime.UTC), uuid.uuid4())):
        sql, args = listing.runs_query(NS, found, after, 50)
        async with filled.acquire() as conn:
            plan = json.dumps(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args))
        assert f'"Index Name": "{index}"' in plan, plan
        assert '"Node Type": "Sort"' not in plan, plan


async def test_what_a_handler_logs_is_kept_after_its_worker_exits(plane: Plane) -> None:
    await define_workflow(
        plane.pool,
        "logged",
        [{"name": "talk", "taskReferenceName": "talk"}, {"name": "sync_talk", "taskReferenceName": "sync_talk"}],
    )
    worker = Worker(plane.url, NS, poll_timeout=1, log_flush_seconds=0.2)
    app_log = logging.getLogger("shop.payments")

    @worker.task("talk")
    async def talk(task: Task) -> dict[str, Any]:
        app_log.info("charging %s", 12)
        task.log("explicit line", level="debug")
        await asyncio.sleep(0.5)  # long enough for a heartbeat to ship the first lines
        app_log.warning("almost done")
        return {}

    @worker.task("sync_talk")
    def sync_talk(task: Task) -> dict[str, Any]:
        try:
            raise ValueError("boom")
        except ValueError:
            app_log.exception("handled it")
        return {}

    previous = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)
    try:
        async with Running(worker):
            run_id = await start(plane, "logged")
            body = await finished(plane, run_id)
    finally:
        logging.getLogger().setLevel(previous)
    assert body["status"] == "COMPLETED", body
    status, found = await call(plane, "GET", f"{API}/executions/{run_id}/logs")
    assert status == 200, found
    lines = [(line["referenceName"], line["level"], line["message"].splitlines()[0]) for line in found["lines"]]
    assert lines == [
        ("talk", "INFO", "charging 12"),
        ("talk", "DEBUG", "explicit line"),
        ("talk", "WARNING", "almost done"),
        ("sync_talk", "ERROR", "handled it"),
    ], lines
    assert "ValueError: boom" in found["lines"][-1]["message"], "the traceback comes along"
    task_id = found["lines"][0]["taskId"]
    _, only = await call(plane, "GET", f"{API}/tasks/{task_id}/logs?after={found['lines'][0]['id']}")
    assert [line["message"] for line in only["lines"]] == ["explicit line", "almost done"]
    _, tail = await call(plane, "GET", f"{API}/executions/{run_id}/logs?task=sync_talk&after={found['nextAfter']}")
    assert tail["lines"] == [] and tail["nextAfter"] == found["nextAfter"]
