"""Event-triggered starts against a real PostgreSQL and the real plane: an
event starts one run per matching Trigger with its mapped input, exactly one
per event id within the dedup window (also under concurrent deliveries from
two planes), through the Quota like any start, and every event is kept with
what each Trigger did, matched or not."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import aiohttp
import asyncpg
import kopf
import pytest
from typer.testing import CliRunner

from sluiceway.cli.client import ExitCode
from sluiceway.k8s.reconciling import changed
from sluiceway.k8s.status_reports import trigger_status
from sluiceway.model.trigger import RECENT_EVENTS, TriggerSpec
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.plane import events as publishing
from sluiceway.plane.audit import Actor
from sluiceway.runtime.main import app
from sluiceway.store import definitions, events, retention, triggers, webhooks
from tests.support.database import pool_on
from tests.support.plane import Plane, get, post
from tests.support.store import NS, define_workflow
from tests.support.waiting import eventually_async

API = f"/v1/ns/{NS}"
SENDER = Actor("orders service", "test")
ORDER = {"order": {"id": 42, "status": "paid", "total": 99}, "customer": "ada"}


async def listen(plane: Plane, name: str, **fields: Any) -> str:
    """Store a Trigger as its reconciler does; its uid."""
    uid = str(uuid.uuid4())
    spec = TriggerSpec.model_validate({"event": "order-paid", "workflow": "ship", **fields})
    async with plane.pool.acquire() as conn:
        await triggers.upsert(conn, NS, name, uid, 1, spec)
    return uid


async def ship(plane: Plane) -> None:
    await define_workflow(plane.pool, "ship", [{"name": "pack", "taskReferenceName": "pack"}])


async def publish(plane: Plane, payload: Any, event_id: str | None = None, name: str = "order-paid") -> Any:
    headers = {"X-Sluiceway-Event-Id": event_id} if event_id else {}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{plane.url}{API}/events/{name}", json=payload, headers=headers) as response,
    ):
        assert response.status == 202, await response.text()
        return await response.json()


async def runs_of(plane: Plane, workflow: str = "ship") -> list[dict[str, Any]]:
    async with plane.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, input, priority FROM executions WHERE workflow_name = $1", workflow)
    return [dict(row) for row in rows]


async def test_an_event_starts_one_run_with_its_mapped_input_audited_by_its_sender(plane: Plane) -> None:
    await ship(plane)
    await listen(
        plane,
        "ship-paid",
        condition="event.payload.order.status == 'paid'",
        input="{'orderId': event.payload.order.id, 'customer': event.payload.customer}",
        priority=1,
    )
    answer = await publish(plane, ORDER, "evt-1")
    assert answer["outcome"] == "started", answer
    [outcome] = answer["outcomes"]
    assert (outcome["trigger"], outcome["eventId"]) == ("ship-paid", "evt-1")
    [run] = await runs_of(plane)
    assert str(run["id"]) == outcome["runId"]
    assert run["input"] == {"orderId": 42, "customer": "ada"}
    assert run["priority"] == 1
    status, trail = await get(plane, f"{API}/executions/{outcome['runId']}/audit")
    assert status == 200, trail
    [entry] = trail["entries"]
    assert (entry["operation"], entry["detail"]["trigger"], entry["detail"]["eventId"]) == (
        "start",
        "ship-paid",
        "evt-1",
    )

    again = await publish(plane, ORDER, "evt-1")  # a redelivery: the same run, nothing new
    assert [(o["outcome"], o["runId"]) for o in again["outcomes"]] == [("duplicate", outcome["runId"])]
    assert len(await runs_of(plane)) == 1


async def test_a_condition_filters_and_each_trigger_is_judged_on_its_own(plane: Plane) -> None:
    await ship(plane)
    await listen(plane, "big-orders", condition="event.payload.order.total > 500")
    await listen(plane, "every-order")
    answer = await publish(plane, ORDER)
    by_trigger = {o["trigger"]: o for o in answer["outcomes"]}
    assert by_trigger["big-orders"]["outcome"] == "filtered"
    assert by_trigger["every-order"]["outcome"] == "started"
    assert by_trigger["every-order"]["eventId"].startswith("sha256:")  # no id header: the body's hash
    [run] = await runs_of(plane)
    assert run["input"] == ORDER  # no input expression: the payload


async def test_a_mapping_that_fails_on_an_event_is_recorded_naming_the_field(plane: Plane) -> None:
    await ship(plane)
    await listen(plane, "by-sku", input="{'sku': event.payload.sku}")
    answer = await publish(plane, ORDER)
    [outcome] = answer["outcomes"]
    assert (outcome["outcome"], outcome["field"]) == ("invalid", "input")
    assert await runs_of(plane) == []


async def test_concurrent_deliveries_of_one_event_id_from_two_planes_start_exactly_one_run(
    plane: Plane, database_url: str
) -> None:
    """Two planes, each with its own pool (as two replicas), deliver one event
    id 20 times at once. The dedup key is claimed under a unique constraint in
    the start's own transaction, so one delivery starts the run and the others
    find it; a replica that dies mid-publish rolls its claim back with its run."""
    await ship(plane)
    await listen(plane, "ship-paid")
    async with pool_on(database_url) as first_pool, pool_on(database_url) as second_pool:
        planes = [ExecutionPlane(first_pool), ExecutionPlane(second_pool)]

        async def deliver(at: int) -> tuple[publishing.Published, float]:
            started = time.perf_counter()
            found = await publishing.publish(
                planes[at % 2], SENDER, NS, "order-paid", ORDER, {"idempotency-key": "o-42"}, "api"
            )
            assert isinstance(found, publishing.Published)
            return found, time.perf_counter() - started

        delivered = await asyncio.gather(*(deliver(at) for at in range(20)))
    outcomes = [p.event.outcomes[0] for p, _ in delivered]
    [run] = await runs_of(plane)
    assert sorted(o["outcome"] for o in outcomes) == ["duplicate"] * 19 + ["started"]
    assert {o["runId"] for o in outcomes} == {str(run["id"])}
    worst = max(spent for _, spent in delivered)
    print(f"20 concurrent deliveries over two pools: worst {worst * 1000:.0f} ms")  # noqa: T201 - the record asked for
    async with plane.pool.acquire() as conn:
        assert len(await events.page(conn, NS, 100)) == 20  # every delivery is kept, each with its outcome


_BLOCKED_BY = "SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))"


async def test_a_delivery_whose_replica_dies_mid_publish_leaves_the_event_id_to_the_next(
    plane: Plane, database_url: str
) -> None:
    """Replica A claims the event id and writes the run, then dies before it
    commits (its backend is terminated while it waits to record the event);
    replica B's delivery of the same id, which waited on A's claim, then
    starts the one run. Nothing of A's is left."""
    await ship(plane)
    await listen(plane, "ship-paid")
    headers = {"idempotency-key": "o-crash"}
    locker = await asyncpg.connect(database_url)
    holding = locker.transaction()
    await holding.start()
    # A publish records its event last: holding the table stops A after its claim and its run.
    await locker.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
    async with pool_on(database_url) as pool_a, pool_on(database_url) as pool_b:
        delivery_a = asyncio.create_task(
            publishing.publish(ExecutionPlane(pool_a), SENDER, NS, "order-paid", ORDER, headers, "api")
        )

        async def blocked_by(pid: int) -> int | None:
            async with plane.pool.acquire() as conn:
                found: int | None = await conn.fetchval(_BLOCKED_BY, pid)
            return found

        replica_a = await eventually_async(lambda: blocked_by(locker.get_server_pid()), what="A to hold its claim")
        delivery_b = asyncio.create_task(
            publishing.publish(ExecutionPlane(pool_b), SENDER, NS, "order-paid", ORDER, headers, "api")
        )
        await eventually_async(lambda: blocked_by(replica_a), what="B to wait on A's claim")
        async with plane.pool.acquire() as conn:
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", replica_a)
        await holding.rollback()
        await locker.close()
        [died, finished_b] = await asyncio.gather(delivery_a, delivery_b, return_exceptions=True)
    assert isinstance(died, Exception), died
    assert isinstance(finished_b, publishing.Published), finished_b
    [outcome] = finished_b.event.outcomes
    [run] = await runs_of(plane)
    assert (outcome["outcome"], outcome["runId"]) == ("started", str(run["id"]))
    async with plane.pool.acquire() as conn:
        assert [e.id for e in await events.page(conn, NS, 10)] == [finished_b.event.id]


async def test_a_redelivery_after_the_dedup_window_starts_a_new_run(plane: Plane) -> None:
    await ship(plane)
    await listen(plane, "ship-paid", dedupWindowSeconds=60)
    first = await publish(plane, ORDER, "evt-7")
    async with plane.pool.acquire() as conn:
        # As if the window had passed for the key (time travel in SQL, as tests/support/timetravel does for runs).
        await conn.execute("UPDATE start_requests SET created_at = created_at - interval '61 seconds'")
    second = await publish(plane, ORDER, "evt-7")
    assert [first["outcome"], second["outcome"]] == ["started", "started"]
    assert first["outcomes"][0]["runId"] != second["outcomes"][0]["runId"]
    assert len(await runs_of(plane)) == 2


async def test_a_quota_refusal_is_a_recorded_outcome_and_loses_nothing_else(plane: Plane) -> None:
    await ship(plane)
    await define_workflow(plane.pool, "audit", [{"name": "log", "taskReferenceName": "log"}])
    await listen(plane, "ship-paid")
    await listen(plane, "audit-paid", workflow="audit", eventId="'audit-' + event.id")
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "small", 1, 2, None, None, None)
    first = await publish(plane, ORDER, "evt-1")
    assert {o["outcome"] for o in first["outcomes"]} == {"started"}  # both runs fit: 2 of 2
    second = await publish(plane, {**ORDER, "n": 2}, "evt-2")
    assert second["outcome"] == "refused", second
    for outcome in second["outcomes"]:
        assert (outcome["outcome"], outcome["error"], outcome["limit"]) == ("refused", "QUOTA_EXCEEDED", 2)
        assert "maxConcurrentExecutions" in outcome["reason"]
    assert len(await runs_of(plane)) == 1 and len(await runs_of(plane, "audit")) == 1
    status, page = await get(plane, f"{API}/events?outcome=refused")
    assert status == 200 and [e["eventId"] for e in page["items"]] == ["evt-2"]
    # A refusal claims no key: once the Quota allows it, the same event id starts its run.
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "small", 2, 10, None, None, None)
    third = await publish(plane, {**ORDER, "n": 2}, "evt-2")
    assert {o["outcome"] for o in third["outcomes"]} == {"started"}


async def test_unmatched_events_are_kept_listed_and_forgotten_after_the_retention(plane: Plane) -> None:
    unmatched = await publish(plane, {"hello": "world"}, "evt-u", name="nobody-listens")
    assert (unmatched["outcome"], unmatched["outcomes"]) == ("unmatched", [])
    await ship(plane)
    await listen(plane, "ship-paid")
    matched = await publish(plane, ORDER, "evt-m")

    status, page = await get(plane, f"{API}/events?outcome=unmatched")
    assert status == 200 and [e["id"] for e in page["items"]] == [unmatched["id"]]
    status, page = await get(plane, f"{API}/events?event=order-paid")
    assert [e["id"] for e in page["items"]] == [matched["id"]]
    status, first_page = await get(plane, f"{API}/events?limit=1")
    assert [e["id"] for e in first_page["items"]] == [matched["id"]]  # newest first
    status, second_page = await get(plane, f"{API}/events?limit=1&cursor={first_page['nextCursor']}")
    assert [e["id"] for e in second_page["items"]] == [unmatched["id"]] and second_page["nextCursor"] is None
    status, one = await get(plane, f"{API}/events/{unmatched['id']}")
    assert status == 200 and one["payload"] == {"hello": "world"} and one["source"] == "api"

    async with plane.pool.acquire() as conn:
        await conn.execute(
            "UPDATE events SET received_at = received_at - interval '8 days' WHERE id = $1", uuid.UUID(unmatched["id"])
        )
        assert await events.forget(conn, 7 * 86_400, 100) == 1
    status, _ = await get(plane, f"{API}/events/{unmatched['id']}")
    assert status == 404
    status, one = await get(plane, f"{API}/events/{matched['id']}")
    assert status == 200


async def test_a_verified_webhook_call_publishes_its_event(plane: Plane) -> None:
    await ship(plane)
    await listen(plane, "ship-paid", input="{'orderId': event.payload.order.id, 'from': event.source}")
    await listen(plane, "sees-the-token", condition="'x-token' in event.headers")  # the secret is hidden
    async with plane.pool.acquire() as conn:
        spec = {"token": {"header": "X-Token", "secretRef": {"name": "hook", "key": "t"}}, "event": "order-paid"}
        await webhooks.upsert(conn, NS, "payments", "payments", 1, spec)
    plane.secrets.secrets[(NS, "hook")] = {"t": b"s3cret"}
    url = f"{plane.url}{API}/webhooks/payments"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=ORDER, headers={"X-Token": "wrong"}) as refused:
            assert refused.status == 401  # unverified: nothing published
        async with http.post(url, json=ORDER, headers={"X-Token": "s3cret", "X-GitHub-Delivery": "d-1"}) as response:
            assert response.status == 200, await response.text()
            answer = await response.json()
    assert answer["matched"] == 0  # no waiting task; the event still starts its run
    event = answer["event"]
    assert (event["outcome"], event["eventId"], event["source"]) == ("started", "d-1", "webhook payments")
    assert {o["trigger"]: o["outcome"] for o in event["outcomes"]} == {
        "sees-the-token": "filtered",
        "ship-paid": "started",
    }
    [run] = await runs_of(plane)
    assert run["input"] == {"orderId": 42, "from": "webhook payments"}
    status, trail = await get(plane, f"{API}/executions/{run['id']}/audit")
    assert trail["entries"][0]["actor"] == "webhook payments (signature verified)"
    status, page = await get(plane, f"{API}/events")
    assert [e["id"] for e in page["items"]] == [event["id"]]  # the unverified call left nothing


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("POST", "/events/order-paid", b"{not json", 422, "body"),
        ("POST", "/events/Not_A_Name!", b"{}", 422, "path.name"),
        ("GET", "/events?outcome=lost", None, 422, "query.outcome"),
        ("GET", "/events?event=Bad!", None, 422, "query.event"),
        ("GET", "/events?limit=0", None, 422, "query.limit"),
        ("GET", "/events?limit=501", None, 422, "query.limit"),
        ("GET", "/events?cursor=garbage", None, 422, "cursor"),
        ("GET", "/events/not-a-uuid", None, 422, "path.event_record_id"),
    ],
)
async def test_bad_input_to_the_event_endpoints_is_refused_naming_the_field(
    plane: Plane, method: str, path: str, body: bytes | None, status: int, field: str
) -> None:
    async with aiohttp.ClientSession() as http, http.request(method, f"{plane.url}{API}{path}", data=body) as response:
        answer = await response.json()
        assert response.status == status, answer
    assert field in [f["field"] for f in answer["fields"]], answer


async def test_a_payload_over_the_namespace_limit_is_refused_and_kept_nowhere(plane: Plane) -> None:
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "tight", 1, None, None, None, None, max_payload_bytes=1024)
    status, answer = await post(plane, f"{API}/events/order-paid", {"blob": "x" * 2048})
    assert status == 413, answer
    assert answer["field"] == "payload"
    async with plane.pool.acquire() as conn:
        assert await events.page(conn, NS, 10) == []


async def cli(plane: Plane, *argv: str) -> tuple[int, list[str], str]:
    """`sluiceway events ...` against the plane, as a person runs it (in a thread: it runs its own loop)."""
    args = ["events", *argv, "-n", NS, "--server", plane.url]
    result = await asyncio.to_thread(CliRunner().invoke, app(), args)
    return result.exit_code, result.stdout.splitlines(), result.stderr


async def test_the_events_command_sends_lists_and_shows_what_each_trigger_did(plane: Plane) -> None:
    await ship(plane)
    await listen(plane, "ship-paid", condition="event.payload.order.status == 'paid'")
    code, lines, said = await cli(
        plane, "send", "order-paid", "--payload", '{"order": {"status": "paid"}}', "--id", "e1"
    )
    assert code == 0, said
    assert lines[0].startswith("event order-paid ") and lines[0].endswith(": started")
    assert lines[2].startswith("  trigger ship-paid: started run ")
    code, lines, _ = await cli(plane, "send", "order-paid", "--payload", '{"order": {"status": "open"}}')
    assert lines[2] == "  trigger ship-paid: filtered (condition event.payload.order.status == 'paid' is false)"
    code, lines, _ = await cli(plane, "send", "nobody-listens")
    assert lines[-1] == "  no Trigger listens to this event"

    code, lines, _ = await cli(plane, "list")
    assert code == 0 and lines[0].split() == ["ID", "EVENT", "RECEIVED", "OUTCOME", "RUNS"]
    assert [line.split()[3] for line in lines[1:]] == ["unmatched", "filtered", "started"]
    code, lines, _ = await cli(plane, "list", "--outcome", "started", "-o", "name")
    [started_id] = lines
    code, lines, _ = await cli(plane, "get", started_id)
    assert code == 0 and "event id e1, from api" in lines[1]
    code, _, said = await cli(plane, "get", str(uuid.uuid4()))
    assert code == ExitCode.NOT_FOUND and "(HTTP 404" in said, said
    code, _, said = await cli(plane, "send", "order-paid", "--payload", "[1, 2]")
    assert code == ExitCode.USAGE and "--payload must be a JSON object" in said, said


async def test_the_purger_deletes_events_older_than_the_event_retention_only(plane: Plane) -> None:
    old = await publish(plane, {"n": 1}, "old", name="nobody-listens")
    new = await publish(plane, {"n": 2}, "new", name="nobody-listens")
    async with plane.pool.acquire() as conn:
        moved = "UPDATE events SET received_at = received_at - interval '2 hours' WHERE id = $1"
        await conn.execute(moved, uuid.UUID(old["id"]))
        assert (await retention.purge(conn, 100, 86_400, 0, 0)).events == 0  # 0: no event retention asked
        assert (await retention.purge(conn, 100, 86_400, 0, 3600)).events == 1
        assert [e.id for e in await events.page(conn, NS, 10)] == [new["id"]]


async def test_each_triggers_activity_is_summed_from_the_events_still_kept(plane: Plane) -> None:
    """What a Trigger's status shows (k8s.status_reports): one statement for
    every Trigger of the namespace, counting only the events still kept."""
    await ship(plane)
    await listen(plane, "ship-paid", condition="event.payload.order.status == 'paid'")
    await listen(plane, "by-sku", input="{'sku': event.payload.sku}")
    first = await publish(plane, ORDER, "evt-1")
    newest = await publish(plane, ORDER, "evt-2")
    await publish(plane, ORDER, "evt-2")  # a redelivery
    await publish(plane, {"order": {"status": "open"}}, "evt-3")
    await publish(plane, {"hello": "world"}, "evt-u", name="nobody-listens")
    started = {o["trigger"]: o["runId"] for o in newest["outcomes"] if o["outcome"] == "started"}

    async with plane.pool.acquire() as conn:
        found = await events.activity(conn, NS)
        assert set(found) == {"ship-paid", "by-sku"}  # no Trigger listens to `nobody-listens`
        ship_paid = found["ship-paid"]
        assert ship_paid.events == 4 and ship_paid.counts == {"started": 2, "duplicate": 1, "filtered": 1}
        assert ship_paid.last_run_id == started["ship-paid"]
        last_event = await conn.fetchval("SELECT max(received_at) FROM events WHERE name = 'order-paid'")
        assert ship_paid.last_event_at == last_event
        assert found["by-sku"].counts == {"invalid": 4} and found["by-sku"].last_run_id is None

        # The purger forgets the oldest: the counts cover what is kept.
        await conn.execute(
            "UPDATE events SET received_at = received_at - interval '8 days' WHERE id = $1", uuid.UUID(first["id"])
        )
        assert await events.forget(conn, 7 * 86_400, 100) == 1
        kept = (await events.activity(conn, NS))["ship-paid"]
        assert kept.events == 3 and kept.counts == {"started": 1, "duplicate": 1, "filtered": 1}
        assert await events.activity(conn, "elsewhere") == {}

        # A Trigger counts the events of the name it listens to now; a deleted one is gone.
        await triggers.upsert(conn, NS, "by-sku", str(uuid.uuid4()), 2, TriggerSpec(event="sku-added", workflow="ship"))
        assert set(await events.activity(conn, NS)) == {"ship-paid"}
        await triggers.delete(conn, NS, "ship-paid")
        assert await events.activity(conn, NS) == {}


async def test_a_triggers_activity_reads_its_newest_events_only_and_keeps_its_last_run(plane: Plane) -> None:
    """However many events are kept, a Trigger's status reads the newest
    `recent` of its name (RECENT_EVENTS by default): the counts stop there,
    and a run started before them stays its last run in status."""
    await ship(plane)
    await listen(plane, "ship-paid", condition="event.payload.order.status == 'paid'")
    await publish(plane, ORDER, "evt-1")
    newest = await publish(plane, ORDER, "evt-2")
    [run] = [o["runId"] for o in newest["outcomes"] if o["outcome"] == "started"]
    async with plane.pool.acquire() as conn:
        before = await events.activity(conn, NS, recent=3)
    assert before["ship-paid"].last_run_id == run
    status = trigger_status(before["ship-paid"])  # as the status report last wrote it

    for n in range(4):
        await publish(plane, {"order": {"status": "open"}}, f"open-{n}")
    async with plane.pool.acquire() as conn:
        after = (await events.activity(conn, NS, recent=3))["ship-paid"]
        assert after.events == 3 and after.counts == {"filtered": 3}  # 6 kept, the newest 3 read
        assert after.last_run_id is None
        patch = kopf.Patch()
        changed(patch, status, trigger_status(after))
        assert "lastRunId" not in patch.status and status["lastRunId"] == run  # not erased
        assert patch.status["recent"] == {"events": 3, "started": 0, "duplicate": 0, "filtered": 3, "refused": 0,
                                          "invalid": 0}  # fmt: skip

        # By default the newest RECENT_EVENTS: more kept events do not make more counted.
        await conn.execute(
            """INSERT INTO events (id, namespace, name, event_id, source, payload, outcomes, kinds)
               SELECT gen_random_uuid(), $1, 'order-paid', 'bulk-' || i, 'api', '{}',
                      '[{"trigger": "ship-paid", "outcome": "filtered"}]', '{filtered}'
                 FROM generate_series(1, $2::int) i""",
            NS,
            RECENT_EVENTS + 10,
        )
        found = (await events.activity(conn, NS))["ship-paid"]
        assert found.events == RECENT_EVENTS and found.counts == {"filtered": RECENT_EVENTS}
