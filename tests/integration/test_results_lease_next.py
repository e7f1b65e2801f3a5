"""Results that lease the next tasks in the same round trip (`next`): the slot
a result frees goes back to the worker that freed it, within the gates."""

from __future__ import annotations

import asyncio
from typing import Any

from sluiceway.controls.policy import Gates
from sluiceway.store import definitions, leasing
from sluiceway.worker import Task, Worker
from tests.support.plane import Plane, Running, finished, post
from tests.support.store import NS, define_task, define_workflow, scheduled


async def lease(plane: Plane, task_type: str, count: int) -> list[dict[str, Any]]:
    status, body = await post(
        plane,
        f"/v1/ns/{NS}/tasks/poll",
        {"taskTypes": [task_type], "workerId": "w", "count": count, "pollTimeoutSeconds": 5},
    )
    assert status == 200, body
    tasks: list[dict[str, Any]] = body["tasks"]
    return tasks


def done(task: dict[str, Any]) -> dict[str, Any]:
    return {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED"}


async def test_a_result_with_next_gets_the_slot_it_freed_and_no_more_than_the_cap_allows(plane: Plane) -> None:
    await define_task(plane.pool, "capped", concurrentExecLimit=2)
    await define_workflow(plane.pool, "one", [{"name": "capped", "taskReferenceName": "c"}])
    runs = [(await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"}))[1]["id"] for _ in range(5)]
    leased: list[dict[str, Any]] = []
    while len(leased) < 2:
        leased += await lease(plane, "capped", 2 - len(leased))
    first, second = leased
    # The decider may still be deciding the other runs: the freed slot can
    # only go to a task that is already queued.
    await scheduled(plane.pool, "capped", 3)
    # One slot freed, ten asked: the cap of 2 lets exactly one through.
    status, body = await post(
        plane,
        f"/v1/ns/{NS}/tasks/results",
        {"results": [done(first)], "next": {"workerId": "w", "counts": {"capped": 10}}},
    )
    assert status == 200, body
    assert [r["code"] for r in body["results"]] == [200]
    assert len(body["tasks"]) == 1 and body["tasks"][0]["taskType"] == "capped"
    third = body["tasks"][0]
    assert third["taskId"] not in {first["taskId"], second["taskId"]}
    # Nothing freed: nothing more to lease, and the answer says so at once.
    status, body = await post(
        plane,
        f"/v1/ns/{NS}/tasks/results",
        {"results": [done(second), done(third)], "next": {"workerId": "w", "counts": {"capped": 10}}},
    )
    assert status == 200 and len(body["tasks"]) == 2, body
    status, body = await post(
        plane,
        f"/v1/ns/{NS}/tasks/results",
        {"results": [done(t) for t in body["tasks"]], "next": {"workerId": "w", "counts": {"capped": 10}}},
    )
    assert status == 200 and body["tasks"] == [], body
    for run in runs:
        assert (await finished(plane, run))["status"] == "COMPLETED"


async def test_results_without_next_answer_as_before(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    [task] = await lease(plane, "job", 1)
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/results", {"results": [done(task)]})
    assert status == 200 and body == {"results": [{"taskId": task["taskId"], "code": 200}]}


async def test_an_invalid_next_is_refused_whole_naming_the_field_and_applies_nothing(plane: Plane) -> None:
    await define_workflow(plane.pool, "one", [{"name": "job", "taskReferenceName": "j"}])
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"})
    [task] = await lease(plane, "job", 1)
    for bad in ({"workerId": "w", "counts": {"job": 0}}, {"workerId": "w", "counts": {}}, {"counts": {"job": 1}}):
        status, body = await post(plane, f"/v1/ns/{NS}/tasks/results", {"results": [done(task)], "next": bad})
        assert status == 422 and body["error"] == "INVALID_REQUEST", body
        assert any(f["field"].startswith("next") for f in body["fields"]), body
    status, body = await post(plane, f"/v1/ns/{NS}/tasks/results", {"results": [done(task)]})
    assert status == 200, body  # the refused requests changed nothing: the lease was still ours


async def test_sdk_workers_leasing_with_their_results_keep_their_concurrency_and_the_cap(plane: Plane) -> None:
    """Two workers, three slots each, on a type capped at 4 across them: the
    most handlers running at once, per worker and in all, never passes either."""
    await define_task(plane.pool, "capped", concurrentExecLimit=4)
    await define_workflow(plane.pool, "one", [{"name": "capped", "taskReferenceName": "c"}])
    running: dict[str, int] = {"all": 0, "a": 0, "b": 0}
    worst: dict[str, int] = {"all": 0, "a": 0, "b": 0}
    workers = []
    for name in ("a", "b"):
        worker = Worker(plane.url, NS, worker_id=name, poll_timeout=1, result_batch=2)

        def handler(name: str) -> Any:
            async def work(task: Task) -> None:
                for key in ("all", name):
                    running[key] += 1
                    worst[key] = max(worst[key], running[key])
                await asyncio.sleep(0.02)
                for key in ("all", name):
                    running[key] -= 1

            return work

        worker.task("capped", concurrency=3)(handler(name))
        workers.append(worker)
    runs = [(await post(plane, f"/v1/ns/{NS}/executions", {"name": "one"}))[1]["id"] for _ in range(60)]
    async with Running(workers[0]), Running(workers[1]):
        for run in runs:
            assert (await finished(plane, run))["status"] == "COMPLETED"
    assert worst["a"] <= 3 and worst["b"] <= 3, worst
    assert worst["all"] <= 4, worst
    assert workers[0].completed + workers[1].completed == 60


async def test_next_never_waits_for_a_gate_another_transaction_holds(plane: Plane) -> None:
    """While another transaction holds a capped type's gate lock (a lease under
    it, not yet committed), a result asking `next` for that type answers at
    once without it, though the cap has room and a task is queued; a poll
    gets the task once the other transaction is over."""
    await define_task(plane.pool, "capped", concurrentExecLimit=5)
    await define_workflow(plane.pool, "gated", [{"name": "capped", "taskReferenceName": "c"}])
    await define_workflow(plane.pool, "plain", [{"name": "job", "taskReferenceName": "j"}])
    for _ in range(2):
        await post(plane, f"/v1/ns/{NS}/executions", {"name": "gated"})
    await post(plane, f"/v1/ns/{NS}/executions", {"name": "plain"})
    await scheduled(plane.pool, "capped", 2)
    [job] = await lease(plane, "job", 1)
    async with plane.pool.acquire() as conn, conn.transaction():
        held = await leasing.lease(conn, NS, "capped", "other", 1, Gates(concurrent_exec_limit=5))
        assert len(held.leases) == 1
        reply = post(
            plane,
            f"/v1/ns/{NS}/tasks/results",
            {"results": [done(job)], "next": {"workerId": "w", "counts": {"capped": 1}}},
        )
        # Waiting for the lock would wait for this transaction, which waits for the reply.
        status, body = await asyncio.wait_for(reply, 30)
        assert status == 200 and body["results"][0]["code"] == 200, body
        assert body["tasks"] == [], body
    assert len(await lease(plane, "capped", 2)) == 1  # the one left queued: the other lease is the other worker's


async def test_results_leasing_several_gated_types_at_once_never_deadlock_or_overshoot(plane: Plane) -> None:
    """Eight reporters, each batch freeing slots of three gated types (two share
    semaphores declared in opposite orders), counts in a different order each
    time, beside plain polls of the same queues: every request answers (a
    deadlock would be a 5xx), and no gate is ever exceeded."""
    async with plane.pool.acquire() as conn:
        for name in ("x", "y"):
            await definitions.upsert_semaphore(conn, NS, name, name, 1, 2)
    await define_task(plane.pool, "erp_a", semaphores=["x", "y"])
    await define_task(plane.pool, "erp_b", semaphores=["y", "x"])
    await define_task(plane.pool, "capped", concurrentExecLimit=3)
    types = ["erp_a", "erp_b", "capped"]
    for name in types:
        await define_workflow(plane.pool, f"wf_{name}", [{"name": name, "taskReferenceName": "t"}])
        for _ in range(40):
            await post(plane, f"/v1/ns/{NS}/executions", {"name": f"wf_{name}"})
    reported: list[str] = []

    async def reporter(n: int) -> None:
        held: list[dict[str, Any]] = []
        rounds = 0
        while len(reported) < 120 and rounds < 400:
            rounds += 1
            order = types[n % 3 :] + types[: n % 3]
            if not held:
                for name in order if n % 2 else order[:1]:  # plain polls, beside the leases riding on results
                    held += await lease(plane, name, 1)
                if not held:
                    await asyncio.sleep(0.01)
                    continue
            status, body = await post(
                plane,
                f"/v1/ns/{NS}/tasks/results",
                {"results": [done(t) for t in held], "next": {"workerId": f"r{n}", "counts": dict.fromkeys(order, 2)}},
            )
            assert status == 200, body
            reported.extend(t["taskId"] for t in held)
            held = body["tasks"]

    await asyncio.wait_for(asyncio.gather(*(reporter(n) for n in range(8))), 120)
    assert len(set(reported)) == 120
    async with plane.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT name, extract(epoch FROM leased_at) AS s, extract(epoch FROM ended_at) AS e FROM tasks"
            " WHERE name = ANY($1::text[])",
            types,
        )
    worst_erp = _max_overlap([(r["s"], r["e"]) for r in rows if r["name"] != "capped"])
    worst_capped = _max_overlap([(r["s"], r["e"]) for r in rows if r["name"] == "capped"])
    print(f"worst concurrent: erp (2 permits) {worst_erp}, capped (cap 3) {worst_capped}")
    assert worst_erp <= 2 and worst_capped <= 3


def _max_overlap(intervals: list[tuple[Any, Any]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    worst = current = 0
    for _, step in events:
        current += step
        worst = max(worst, current)
    return worst
