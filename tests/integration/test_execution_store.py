"""The execution plane on a real PostgreSQL: runs, leases, results, timers."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from sluiceway.model.execution import ResultStatus, RunStatus, TaskStatus
from sluiceway.store import executions, results, runs
from sluiceway.store.deciding import DeciderConfig, Pass, decide_pass
from sluiceway.store.sweeping import sweep
from tests.support.store import (
    NS,
    define_task,
    define_workflow,
    lease,
    report,
    run_status,
    settle,
    start,
)
from tests.support.timetravel import time_passes


async def test_a_run_completes_through_leases_and_results(pool: asyncpg.Pool) -> None:
    await define_workflow(
        pool,
        "order",
        [
            {"name": "fetch", "taskReferenceName": "fetch", "inputParameters": {"id": "${workflow.input.id}"}},
            {"name": "charge", "taskReferenceName": "charge", "inputParameters": {"amount": "${fetch.output.total}"}},
        ],
    )
    run_id = await start(pool, "order", {"id": 7})
    await settle(pool)
    [fetch] = await lease(pool, "fetch")
    assert fetch.input == {"id": 7} and fetch.epoch == 1 and fetch.attempt == 1
    assert await lease(pool, "fetch") == [], "a leased task is not handed out again"
    assert (await report(pool, fetch, output={"total": 12})).applied
    await settle(pool)
    [charge] = await lease(pool, "charge")
    assert charge.input == {"amount": 12}
    await report(pool, charge, output={"ok": True})
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.COMPLETED and view.output == {"ok": True}
    async with pool.acquire() as conn:
        assert await runs.task_counts(conn, run_id) == {"COMPLETED": 2}


async def test_a_result_for_a_finished_attempt_changes_nothing(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "one", [{"name": "job", "taskReferenceName": "job"}])
    await start(pool, "one")
    await settle(pool)
    [job] = await lease(pool, "job")
    assert (await report(pool, job, output={"first": 1})).applied
    second = await report(pool, job, ResultStatus.FAILED, reason="late duplicate")
    assert second.verdict is results.Verdict.NOT_LEASED and "COMPLETED" in (second.error or "")
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT status, output FROM tasks WHERE id = $1::uuid", job.task_id)
    assert (row["status"], row["output"]) == ("COMPLETED", {"first": 1})


async def test_a_stale_epoch_is_refused_after_a_snooze_and_release(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "snoozy", [{"name": "poller", "taskReferenceName": "p"}])
    await start(pool, "snoozy")
    await settle(pool)
    [first] = await lease(pool, "poller")
    assert (await report(pool, first, ResultStatus.IN_PROGRESS, callback_after_seconds=0.2)).applied
    await time_passes(pool, 0.3)
    [again] = await lease(pool, "poller", worker="w2")
    assert again.task_id == first.task_id and again.epoch == first.epoch + 1
    assert again.attempt == 1, "a snooze spends no attempt"
    stale = await report(pool, first, output={"from": "old worker"})
    assert stale.verdict is results.Verdict.NOT_LEASED and "stale epoch" in (stale.error or "")
    assert (await report(pool, again, output={"from": "new worker"})).applied


async def test_unknown_and_foreign_tasks_are_404(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "one", [{"name": "job", "taskReferenceName": "job"}])
    await start(pool, "one")
    await settle(pool)
    [job] = await lease(pool, "job")
    from sluiceway.model.execution import TaskResult
    from sluiceway.store import results

    async with pool.acquire() as conn, conn.transaction():
        foreign = await results.apply_results(
            conn, "other-namespace", [TaskResult(task_id=job.task_id, epoch=job.epoch, status=ResultStatus.COMPLETED)]
        )
        # The API refuses such an id with 422; the store must still not trip over one.
        bogus = await results.apply_results(
            conn,
            NS,
            [
                TaskResult.model_construct(
                    task_id="not-a-uuid",
                    epoch=1,
                    status=ResultStatus.COMPLETED,
                    output={},
                    reason="",
                    retry_after_seconds=None,
                    callback_after_seconds=None,
                )
            ],
        )
    assert foreign[job.task_id].verdict is results.Verdict.NO_SUCH_TASK, (
        "a worker of one namespace cannot complete another's task"
    )
    assert bogus["not-a-uuid"].verdict is results.Verdict.NO_SUCH_TASK


async def test_a_dead_worker_is_reclaimed_after_heartbeat_timeout_and_retried(pool: asyncpg.Pool) -> None:
    await define_task(
        pool, "batch", heartbeatTimeout=1, retryCount=2, retryLogic="FIXED", retryDelaySeconds=0.5, jitter=0
    )
    await define_workflow(pool, "nightly", [{"name": "batch", "taskReferenceName": "b"}])
    run_id = await start(pool, "nightly")
    await settle(pool)
    [dying] = await lease(pool, "batch", worker="doomed")
    assert dying.heartbeat_timeout == 1
    await time_passes(pool, 1.3)  # the worker never beats again
    report_ = await sweep(pool)
    assert [e.missed.value for e in report_.expired] == ["heartbeatTimeout"]
    await settle(pool)
    async with pool.acquire() as conn:
        attempts = await conn.fetch(
            "SELECT attempt, status, reason, available_at - $2::timestamptz AS after"
            " FROM tasks WHERE execution_id = $1::uuid ORDER BY attempt",
            run_id,
            await conn.fetchval("SELECT ended_at FROM tasks WHERE id = $1::uuid", dying.task_id),
        )
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "FAILED"), (2, "SCHEDULED")]
    assert attempts[0]["reason"].startswith("WorkerLost")
    assert attempts[1]["after"].total_seconds() >= 0.5 - 0.05, "the reclaim follows the task's own backoff"
    late = await report(pool, dying, output={"too": "late"})
    assert late.verdict is results.Verdict.NOT_LEASED, "the dead worker's lease was fenced off"
    await time_passes(pool, 0.5)
    [retry] = await lease(pool, "batch", worker="healthy")
    assert retry.attempt == 2
    await report(pool, retry)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.COMPLETED


async def test_heartbeats_keep_a_lease_alive(pool: asyncpg.Pool) -> None:
    from sluiceway.store import leasing

    await define_task(pool, "long", heartbeatTimeout=1)
    await define_workflow(pool, "longrun", [{"name": "long", "taskReferenceName": "l"}])
    await start(pool, "longrun")
    await settle(pool)
    [task] = await lease(pool, "long")
    for _ in range(4):  # two seconds in all, twice the heartbeat timeout
        await time_passes(pool, 0.5)
        async with pool.acquire() as conn:
            alive = await leasing.heartbeat(conn, NS, [(task.task_id, task.epoch)])
        assert alive == {task.task_id}
        assert (await sweep(pool)).expired == []
    async with pool.acquire() as conn:
        assert await leasing.heartbeat(conn, NS, [(task.task_id, task.epoch + 1)]) == set(), "wrong epoch"


async def test_concurrent_pollers_never_lease_a_task_twice(pool: asyncpg.Pool) -> None:
    await define_workflow(
        pool,
        "fan",
        [
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {"forkTaskName": "unit", "forkTaskInputs": "${workflow.input.items}"},
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        ],
    )
    await start(pool, "fan", {"items": [{"i": i} for i in range(1500)]})
    await settle(pool)
    leased: list[str] = []

    async def poller(n: int) -> None:
        while True:
            got = await lease(pool, "unit", count=1 + n % 7, worker=f"w{n}")
            if not got:
                return
            leased.extend(t.task_id for t in got)

    await asyncio.gather(*(poller(n) for n in range(16)))
    assert len(leased) == 1500
    assert len(set(leased)) == 1500, "a task was leased twice"


async def test_start_to_close_times_out_and_the_run_times_out_under_time_out_wf(pool: asyncpg.Pool) -> None:
    await define_task(pool, "slow", startToCloseTimeout=1, retryCount=3)
    await define_workflow(pool, "wf", [{"name": "slow", "taskReferenceName": "s"}])
    run_id = await start(pool, "wf")
    await settle(pool)
    await lease(pool, "slow")
    await time_passes(pool, 1.2)
    assert [e.status for e in (await sweep(pool)).expired] == [TaskStatus.TIMED_OUT]
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.TIMED_OUT, "a timeout buys no retry under TIME_OUT_WF"
    assert "startToCloseTimeout" in view.reason


async def test_the_workflow_timeout_fires_from_its_timer(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "bounded", [{"name": "never", "taskReferenceName": "n"}], timeoutSeconds=1)
    run_id = await start(pool, "bounded")
    await settle(pool)
    await time_passes(pool, 1.2)
    assert (await sweep(pool)).runs_timed_out == 1
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.TIMED_OUT
    async with pool.acquire() as conn:
        assert await runs.task_counts(conn, run_id) == {"CANCELED": 1}


async def test_terminating_a_run_cancels_its_tasks_and_child_runs(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "child", [{"name": "deep", "taskReferenceName": "d"}])
    await define_workflow(
        pool,
        "parent",
        [
            {"name": "sub", "taskReferenceName": "sub", "type": "SUB_WORKFLOW", "subWorkflowParam": {"name": "child"}},
        ],
    )
    run_id = await start(pool, "parent")
    await settle(pool)
    async with pool.acquire() as conn:
        child_id = await conn.fetchval("SELECT id FROM executions WHERE parent_execution_id = $1::uuid", run_id)
        assert child_id is not None
        async with conn.transaction():
            assert await executions.request_termination(conn, NS, run_id, "operator said stop")
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.TERMINATED
    assert (await run_status(pool, str(child_id))).status is RunStatus.TERMINATED


async def test_a_sub_workflow_result_flows_to_the_parent(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "billing", [{"name": "bill", "taskReferenceName": "bill"}])
    await define_workflow(
        pool,
        "checkout",
        [
            {
                "name": "sub",
                "taskReferenceName": "sub",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": "billing"},
            },
            {"name": "ship", "taskReferenceName": "ship", "inputParameters": {"paid": "${sub.output.paid}"}},
        ],
    )
    run_id = await start(pool, "checkout")
    await settle(pool)
    [bill] = await lease(pool, "bill")
    await report(pool, bill, output={"paid": True})
    await settle(pool)
    [ship] = await lease(pool, "ship")
    assert ship.input == {"paid": True}
    await report(pool, ship)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.COMPLETED


async def test_failure_workflow_starts_with_the_failed_run(pool: asyncpg.Pool) -> None:
    await define_workflow(
        pool,
        "oncall",
        [{"name": "page", "taskReferenceName": "page", "inputParameters": {"about": "${workflow.input.workflowId}"}}],
    )
    await define_workflow(
        pool, "fragile", [{"name": "x", "taskReferenceName": "x", "retryCount": 0}], failureWorkflow="oncall"
    )
    run_id = await start(pool, "fragile")
    await settle(pool)
    [x] = await lease(pool, "x")
    await report(pool, x, ResultStatus.FAILED, reason="boom")
    await settle(pool)
    [page] = await lease(pool, "page")
    assert page.input == {"about": run_id}


async def test_starting_an_unknown_workflow_says_so(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        outcome = await executions.start_run(conn, NS, "ghost", None, {})
    assert isinstance(outcome, executions.WorkflowNotFound) and outcome.message == "workflow ghost not found"


async def test_a_changed_workflow_gets_a_new_version_and_running_runs_keep_theirs(pool: asyncpg.Pool) -> None:
    v1 = await define_workflow(pool, "evolving", [{"name": "old", "taskReferenceName": "t"}])
    first = await start(pool, "evolving")
    v1_again = await define_workflow(pool, "evolving", [{"name": "old", "taskReferenceName": "t"}])
    v2 = await define_workflow(pool, "evolving", [{"name": "new", "taskReferenceName": "t"}])
    assert (v1, v1_again, v2) == (1, 1, 2)
    second = await start(pool, "evolving")
    await settle(pool)
    assert [t.ref for t in await lease(pool, "old")] == ["t"]
    assert [t.ref for t in await lease(pool, "new")] == ["t"]
    assert (await run_status(pool, first)).workflow_version == 1
    assert (await run_status(pool, second)).workflow_version == 2


async def test_a_pass_that_meets_only_a_due_run_another_transaction_holds_says_so(
    pool: asyncpg.Pool, database_url: str
) -> None:
    """SKIP LOCKED passes over a run another transaction holds (an operation,
    a result, another decider), and its holder may let go without queueing
    anything: the pass says the run was held, for the loop to look again
    soon instead of at its recheck."""
    await define_workflow(pool, "held", [{"name": "fetch", "taskReferenceName": "fetch"}])
    run_id = await start(pool, "held")
    config = DeciderConfig()
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM executions WHERE id = $1 FOR UPDATE", uuid.UUID(run_id))
            assert await decide_pass(pool, config) == Pass(decided=0, held=True)
    finally:
        await holder.close()
    assert await decide_pass(pool, config) == Pass(decided=1, held=False)
    assert await decide_pass(pool, config) == Pass(decided=0, held=False), "nothing due: nothing held"
