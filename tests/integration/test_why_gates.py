"""Why a task is not running, from the real store: the gates that hold a
lease back and the reasons "why" gives are the same, with the same numbers,
because both come from controls.gates."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

from sluiceway.controls.why import estimate, explain_task
from sluiceway.store import definitions, diagnostics, leasing
from sluiceway.store.database import Pool
from sluiceway.store.policies import Policies
from tests.support.store import NS, define_task, define_workflow, gates_of, settle, start_runs


async def test_why_names_the_gates_the_lease_was_held_by(pool: Pool) -> None:
    await define_task(
        pool,
        "export",
        concurrentExecLimit=1,
        rateLimitPerFrequency=1,
        rateLimitFrequencySeconds=3600,
        semaphores=["erp"],
    )
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, NS, "erp", "erp", 1, 1)
    await define_workflow(pool, "one_export", [{"name": "export", "taskReferenceName": "export"}])
    runs = await start_runs(pool, "one_export", 2)
    await settle(pool)
    gates = await gates_of(pool, "export")
    async with pool.acquire() as conn:
        taken = await leasing.lease(conn, NS, "export", "w1", 1, gates)
        held = await leasing.lease(conn, NS, "export", "w2", 1, gates)
        await leasing.record_poll(conn, NS, ["export"], "w2")  # someone polls: the gates are what hold it
        [first] = [lease.execution_id for lease in taken.leases]
        [second] = set(runs) - {first}
        facts = await diagnostics.run_facts(conn, NS, uuid.UUID(second), Policies())
    assert held.leases == []
    assert [h.control for h in held.holds] == ["concurrentExecLimit", "rateLimit", "semaphore:erp"]

    assert facts is not None
    [task] = facts.tasks
    *reasons, estimate = explain_task(task)
    assert [r.control for r in reasons] == [h.control for h in held.holds]
    # The one lease taken has not ended: nothing tells yet how long a task holds the cap's slot.
    assert estimate.control == "estimate" and not estimate.blocking
    assert "lease time unknown: no task of export finished lately" in estimate.message, estimate.message
    cap, rate, semaphore = (r.message for r in reasons)
    assert cap == "concurrentExecLimit export: 1/1 in flight"
    assert rate.startswith("rate limit export: 1/1 this window, next window in ")
    assert 0 < task.seconds_to_next_window <= 3600
    assert semaphore == f"semaphore erp: 1/1 held by export {taken.leases[0].task_id} (run {first})"


async def test_why_explains_a_bounded_number_of_a_fan_outs_tasks_and_one_task_by_ref(pool: Pool) -> None:
    """A fan-out of thousands must not make one `why` cost seconds of the shared
    database: the run's answer gathers the first `limit` active tasks and counts
    the rest, and a task's answer gathers that task only."""
    await define_task(pool, "export", concurrentExecLimit=1)
    branches = [[{"name": "export", "taskReferenceName": f"export_{i}"}] for i in range(30)]
    refs = [f"export_{i}" for i in range(30)]
    await define_workflow(
        pool,
        "wide",
        [
            {"name": "fan", "taskReferenceName": "fan", "type": "FORK_JOIN", "forkTasks": branches},
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": refs},
        ],
    )
    [run] = await start_runs(pool, "wide", 1)
    await settle(pool)
    async with pool.acquire() as conn:
        capped = await diagnostics.run_facts(conn, NS, uuid.UUID(run), Policies(), limit=10)
        one = await diagnostics.run_facts(conn, NS, uuid.UUID(run), Policies(), ref="export_7")
    assert capped is not None and one is not None
    assert len(capped.tasks) == 10 and capped.active_tasks >= 30
    assert [t.ref for t in one.tasks] == ["export_7"]


def _predicted_seconds(message: str) -> float:
    found = re.search(r"estimated lease (now|in about ([\d.]+) s)", message)
    assert found, message
    return 0.0 if found.group(1) == "now" else float(found.group(2))


async def test_a_rate_limited_backlog_is_leased_when_why_said_it_would_be(pool: Pool) -> None:
    """Predicted against actual: 9 tasks behind a limit of 2 per 2-s window,
    each estimated once, then leased by a worker polling every 50 ms. The
    tolerance is one window: a poll lands up to 50 ms after a window opens,
    and the estimate is rounded to tenths of a second."""
    window, per = 2, 2
    await define_task(pool, "metered", rateLimitPerFrequency=per, rateLimitFrequencySeconds=window)
    await define_workflow(pool, "metered_wf", [{"name": "metered", "taskReferenceName": "m"}])
    runs = await start_runs(pool, "metered_wf", 10)
    await settle(pool)
    gates = await gates_of(pool, "metered")
    async with pool.acquire() as conn:
        [first] = (await leasing.lease(conn, NS, "metered", "w", 1, gates)).leases  # the window opens
        await leasing.record_poll(conn, NS, ["metered"], "w")
        predicted: dict[str, float] = {}
        for run in set(runs) - {first.execution_id}:
            facts = await diagnostics.run_facts(conn, NS, uuid.UUID(run), Policies())
            assert facts is not None
            [task] = facts.tasks
            predicted[task.task_id] = time.monotonic() + _predicted_seconds(estimate(task))
    leased_at: dict[str, float] = {}
    deadline = time.monotonic() + 10 * window + 5
    while len(leased_at) < len(predicted) and time.monotonic() < deadline:
        async with pool.acquire() as conn:
            for lease in (await leasing.lease(conn, NS, "metered", "w", 10, gates)).leases:
                leased_at[lease.task_id] = time.monotonic()
        await asyncio.sleep(0.05)
    assert leased_at.keys() == predicted.keys()
    errors = sorted(leased_at[task] - predicted[task] for task in predicted)
    print(f"lease time minus estimate, s: {[round(e, 2) for e in errors]}")
    assert all(abs(error) <= window for error in errors), errors
