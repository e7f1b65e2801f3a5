"""Every statement of the hot path touches one namespace: the key a store
distributed by namespace (Citus-style, docs/scaling.md) would shard by. The
test drives the hot path (starts, one and many; the decider; leases, plain
and gated, with results that lease their slot's next task; heartbeats;
retries) in two namespaces through the HTTP API, records every statement
the store runs meanwhile, and fails on any that names no namespace unless
`ACROSS_NAMESPACES` says why it may."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sluiceway.store import definitions, workflows
from sluiceway.store.database import Connection, Pool, open_pool
from tests.support.plane import Plane, execution_plane, get, post
from tests.support.waiting import eventually_async

NAMESPACES = ("tenant-a", "tenant-b")

# Statements that may read or write rows of several namespaces, each with why:
# a store distributed by namespace keeps these per shard, or on a coordinator.
ACROSS_NAMESPACES = {
    # The decider's loop, and the sweeper's and purger's: background passes over
    # every tenant's due work, which a sharded store runs once per shard.
    "FROM decide_queue": "the decide queue is the decider's, across tenants: one per shard",
    "FROM executions e": "the decider locks the due runs of its queue: those of one shard",
    "UPDATE executions e": "the decider finishes and marks the runs it locked: those of one shard",
    "FROM tasks WHERE execution_id = ANY": "the tasks of the runs the decider locked: one shard's",
    "DELETE FROM run_messages": "the messages of runs the decider just ended: one shard's",
    "execution_counts": "retry budget counters are keyed by namespace; the decider writes a batch's at once",
    "workflow_versions": "a spec is read by its key (namespace, name, version): one namespace per key",
    "min(next_deadline)": "the sweeper's next timer, across tenants: one per shard",
    "FROM rate_windows WHERE window_start": "the sweeper's clean-up of old rate windows: one per shard",
    "pg_stat_user_tables": "the statistics refresh reads the catalog, not tenants' rows",
    # Functions take the namespace as their first argument, and every statement
    # in them is keyed by it (store/schema.sql).
    "sluiceway_lease(": "sluiceway_lease($1 = namespace, ...)",
    "sluiceway_lease_within_gates(": "sluiceway_lease_within_gates($1 = namespace, ...)",
    "sluiceway_hand_over(": "sluiceway_hand_over($1 = namespace, ...)",
    "pg_try_advisory_xact_lock(hashtextextended(kind || ':' || $1": "the gates' lock keys name the namespace ($1)",
    # The process's own bookkeeping.
    "pg_notify": "a wake-up names its namespace in its payload; the channel itself is the process's",
    "INSERT INTO pollers": "poller bookkeeping, for every namespace a process served, in one statement",
}
# What names one namespace: a predicate on a namespace column, or an insert of
# rows that carry one.
_NAMESPACED = re.compile(r"\bnamespace\s*(=|IN\b)|^INSERT INTO \w+( AS \w+)? \([^)]*\bnamespace\b", re.I)
# The driver's own statements (type introspection, settings), and transaction control.
_NOT_THE_STORE = re.compile(
    r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET |RESET |SHOW |LISTEN|UNLISTEN)|typeinfo_tree|'jit'", re.I
)


class Recorder:
    def __init__(self) -> None:
        self.on = False
        self.seen: set[str] = set()

    def __call__(self, record: Any) -> None:
        if self.on:
            self.seen.add(" ".join(str(record.query).split()))


@pytest.fixture
async def recorded(database_url: str) -> AsyncIterator[tuple[Pool, Recorder]]:
    recorder = Recorder()

    async def listen(conn: Connection) -> None:
        conn.add_query_logger(recorder)

    pool = await open_pool(database_url, min_size=1, max_size=20, setup=listen)
    try:
        yield pool, recorder
    finally:
        await pool.close()


async def _define(pool: Pool, namespace: str) -> None:
    async with pool.acquire() as conn:
        await definitions.upsert_semaphore(conn, namespace, "erp", "erp", 1, 2)
        for name, spec in (
            ("plain", {}),
            ("capped", {"concurrentExecLimit": 2, "semaphores": ["erp"]}),
            (
                "metered",
                {"rateLimitPerFrequency": 100, "rateLimitFrequencySeconds": 1, "retryCount": 1, "retryDelaySeconds": 0},
            ),
        ):
            await definitions.upsert_task_definition(conn, namespace, name, name, 1, spec)
        for name in ("plain", "capped", "metered"):
            task = {"name": name, "taskReferenceName": name}
            await workflows.upsert_workflow(
                conn, namespace, name, name, 1, {"tasks": [task, {**task, "taskReferenceName": f"{name}2"}]}
            )


async def _drive(plane: Plane, namespace: str) -> None:
    api = f"/v1/ns/{namespace}"
    started = [
        (await post(plane, f"{api}/executions", {"name": name}))[1]["id"] for name in ("plain", "capped", "metered")
    ]
    status, batch = await post(plane, f"{api}/executions/starts", {"starts": [{"name": "plain"}] * 3})
    assert status == 200, batch
    started += [item["id"] for item in batch["starts"]]
    failed_once = False
    for _ in range(60):
        status, polled = await post(
            plane,
            f"{api}/tasks/poll",
            {"taskTypes": ["plain", "capped", "metered"], "workerId": "w", "count": 5, "pollTimeoutSeconds": 1},
        )
        assert status == 200, polled
        tasks = polled["tasks"]
        if not tasks:
            break
        beats = [{"taskId": t["taskId"], "epoch": t["epoch"]} for t in tasks]
        assert (await post(plane, f"{api}/tasks/heartbeats", {"heartbeats": beats}))[0] == 200
        results = []
        for task in tasks:
            outcome = "COMPLETED"
            if task["taskType"] == "metered" and not failed_once:
                outcome, failed_once = "FAILED", True  # retried: the decider's retry path
            results.append({"taskId": task["taskId"], "epoch": task["epoch"], "status": outcome, "output": {"ok": 1}})
        following = {"workerId": "w", "counts": {"plain": 2, "capped": 2}}
        status, answer = await post(plane, f"{api}/tasks/results", {"results": results, "next": following})
        assert status == 200, answer
        for task in answer.get("tasks", []):
            done = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED"}
            assert (await post(plane, f"{api}/tasks/results", {"results": [done]}))[0] == 200
    for run_id in started:

        async def ended(run_id: str = run_id) -> dict[str, Any] | None:
            _, body = await get(plane, f"{api}/executions/{run_id}?include_tasks=false")
            return body if body["status"] != "RUNNING" else None

        body = await eventually_async(ended, timeout=30, what=f"run {run_id} to end")
        assert body["status"] == "COMPLETED", body


async def test_every_hot_statement_touches_one_namespace_or_says_why(
    recorded: tuple[Pool, Recorder], database_url: str
) -> None:
    pool, recorder = recorded
    for namespace in NAMESPACES:
        await _define(pool, namespace)
    async with execution_plane(pool, database_url) as plane:
        recorder.on = True
        for namespace in NAMESPACES:
            await _drive(plane, namespace)
        recorder.on = False
    statements = {s for s in recorder.seen if not _NOT_THE_STORE.search(s)}
    assert len(statements) > 20, "the workload ran the hot path"
    unscoped = sorted(
        s for s in statements if not _NAMESPACED.search(s) and not any(key in s for key in ACROSS_NAMESPACES)
    )
    assert not unscoped, "hot statements that name no namespace:\n" + "\n\n".join(unscoped)
