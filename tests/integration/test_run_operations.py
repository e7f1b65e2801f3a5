"""Pause, resume, retry, rerun, restart, logs and retention in the store, on a
real PostgreSQL, driven step by step (the decider settled between steps)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import asyncpg

from sluiceway.model.execution import LogLine, ResultStatus, RunStatus
from sluiceway.store import executions, logs, operations, retention
from sluiceway.store.deciding import DeciderConfig
from sluiceway.store.sweeping import sweep
from tests.support.store import NS, define_task, define_workflow, fetchval, lease, report, run_status, settle, start


def simple(ref: str, **inputs: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "inputParameters": inputs}


async def act(pool: asyncpg.Pool, operation: Any, *args: Any, **kwargs: Any) -> Any:
    async with pool.acquire() as conn, conn.transaction():
        return await operation(conn, NS, *args, **kwargs)


async def age(pool: asyncpg.Pool, run_id: str, seconds: float) -> None:
    """Move a run's pause, and what it parked, into the past, instead of waiting."""
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE executions SET paused_at = paused_at - make_interval(secs => $2) WHERE id = $1",
            uuid.UUID(run_id),
            seconds,
        )
        await conn.execute(
            "UPDATE parked_tasks SET available_at = available_at - make_interval(secs => $2) WHERE execution_id = $1",
            uuid.UUID(run_id),
            seconds,
        )


async def test_a_paused_run_holds_its_queue_and_moves_its_deadline_on_resume(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "paused_pay", [simple("fetch"), simple("charge")], timeoutSeconds=600, slaSeconds=300)
    run_id = await start(pool, "paused_pay")
    await settle(pool)
    [fetch] = await lease(pool, "fetch")
    deadline = (await run_status(pool, run_id)).timeout_at
    assert deadline is not None
    done = await act(pool, operations.pause, run_id, "waiting for the bank")
    assert isinstance(done, operations.Done) and done.status is RunStatus.PAUSED
    assert (await run_status(pool, run_id)).status is RunStatus.PAUSED

    # The leased task finishes and its result is recorded; nothing new is scheduled.
    assert (await report(pool, fetch, output={"total": 3})).applied
    await settle(pool)
    assert await lease(pool, "charge") == []
    assert await fetchval(pool, "SELECT count(*) FROM tasks WHERE execution_id = $1", uuid.UUID(run_id)) == 1

    # Paused for an hour: past its timeout, yet the sweeper leaves it alone.
    await age(pool, run_id, 3600)
    await sweep(pool)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.PAUSED

    resumed = await act(pool, operations.resume, run_id)
    assert isinstance(resumed, operations.Done) and resumed.status is RunStatus.RUNNING
    after = await run_status(pool, run_id)
    moved = (after.timeout_at - deadline).total_seconds()  # type: ignore[operator]
    assert 3600 <= moved < 3700, moved
    assert after.paused_seconds >= 3600 and after.sla_at is not None
    await settle(pool)
    [charge] = await lease(pool, "charge")
    assert charge.input == {}
    await report(pool, charge)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.COMPLETED


async def test_queued_tasks_are_parked_and_come_back_with_their_timers(pool: asyncpg.Pool) -> None:
    await define_task(pool, "slow_start", scheduleToStartTimeout=60)
    await define_workflow(pool, "parking", [simple("slow_start")])
    run_id = await start(pool, "parking")
    await settle(pool)
    before = await fetchval(pool, "SELECT schedule_to_start_at FROM tasks WHERE execution_id = $1", uuid.UUID(run_id))
    await act(pool, operations.pause, run_id)
    assert await lease(pool, "slow_start") == [], "a paused run's queued task is not leased"
    assert await fetchval(pool, "SELECT next_deadline FROM tasks WHERE execution_id = $1", uuid.UUID(run_id)) is None
    await age(pool, run_id, 120)
    await act(pool, operations.resume, run_id)
    after = await fetchval(pool, "SELECT schedule_to_start_at FROM tasks WHERE execution_id = $1", uuid.UUID(run_id))
    assert 120 <= (after - before).total_seconds() < 200
    assert len(await lease(pool, "slow_start")) == 1


async def test_a_chain_deadline_is_not_moved_by_a_pause(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "chained", [simple("step")], timeoutSeconds=600)
    run_id = await start(pool, "chained")
    await settle(pool)
    async with pool.acquire() as conn:  # the hook issue 12 fills in: set as a chain would set it
        await conn.execute(
            "UPDATE executions SET chain_deadline_at = now() + interval '30 seconds' WHERE id = $1", uuid.UUID(run_id)
        )
    chain = (await run_status(pool, run_id)).chain_deadline_at
    await act(pool, operations.pause, run_id)
    await age(pool, run_id, 3600)
    async with pool.acquire() as conn:  # the chain's deadline passed while it was paused
        await conn.execute(
            "UPDATE executions SET chain_deadline_at = chain_deadline_at - interval '1 hour' WHERE id = $1",
            uuid.UUID(run_id),
        )
        chain = await conn.fetchval("SELECT chain_deadline_at FROM executions WHERE id = $1", uuid.UUID(run_id))
    await sweep(pool)
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.PAUSED, "its clocks wait while it is paused"
    await act(pool, operations.resume, run_id)
    view = await run_status(pool, run_id)
    assert view.chain_deadline_at == chain, "a resume never moves the chain deadline"
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.TIMED_OUT and "chain" in view.reason


async def test_pausing_a_chain_link_moves_its_run_and_sla_deadlines_but_never_the_chain_deadline(
    pool: asyncpg.Pool,
) -> None:
    """A real continue-as-new chain (issue 12): the second link carries the
    chain deadline its first link armed; a pause of that link shifts the link's
    own deadline and SLA by the paused span and leaves the chain's alone."""
    again = {"name": "again", "taskReferenceName": "again", "type": "CONTINUE_AS_NEW", "inputParameters": {}}
    await define_workflow(
        pool, "chain_link", [simple("link_step"), again], timeoutSeconds=600, slaSeconds=300, chainTimeoutSeconds=7200
    )
    first_id = await start(pool, "chain_link")
    await settle(pool)
    [step] = await lease(pool, "link_step")
    await report(pool, step)
    await settle(pool)
    first = await run_status(pool, first_id)
    assert first.status is RunStatus.COMPLETED and first.next_run_id is not None, first.reason
    link = await run_status(pool, first.next_run_id)
    chain = first.chain_deadline_at
    assert chain is not None and link.chain_deadline_at == chain and link.previous_run_id == first_id
    assert link.timeout_at is not None and link.sla_at is not None

    await act(pool, operations.pause, link.id, "a dependency is down")
    await age(pool, link.id, 1800)
    await act(pool, operations.resume, link.id)
    after = await run_status(pool, link.id)
    assert after.chain_deadline_at == chain, "a pause never moves the chain deadline"
    for before_at, after_at in ((link.timeout_at, after.timeout_at), (link.sla_at, after.sla_at)):
        moved = (after_at - before_at).total_seconds()  # type: ignore[operator]
        assert 1800 <= moved < 1900, moved


async def test_retry_starts_the_failed_task_again_and_keeps_completed_outputs(pool: asyncpg.Pool) -> None:
    await define_task(pool, "charge", retryCount=0)
    await define_workflow(pool, "retried", [simple("fetch"), simple("charge", amount="${fetch.output.total}")])
    run_id = await start(pool, "retried")
    await settle(pool)
    [fetch] = await lease(pool, "fetch")
    await report(pool, fetch, output={"total": 12})
    await settle(pool)
    [charge] = await lease(pool, "charge")
    await report(pool, charge, ResultStatus.FAILED, reason="bank down")
    await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.FAILED
    assert isinstance(await act(pool, operations.rerun, run_id, "nope", None), operations.Refused)

    done = await act(pool, operations.retry, run_id)
    assert isinstance(done, operations.Done), done
    await settle(pool)
    [again] = await lease(pool, "charge")
    assert again.attempt == 2 and again.input == {"amount": 12}
    assert len(await lease(pool, "fetch")) == 0, "fetch completed: it is not run again"
    await report(pool, again, output={"receipt": "r-2"})
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.status is RunStatus.COMPLETED and view.retries == 1 and view.ended_at is not None
    assert isinstance(await act(pool, operations.retry, run_id), operations.Refused), "a completed run: rerun it"


async def test_rerun_with_new_input_and_restart_as_a_linked_run(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "rerun_me", [simple("fetch"), simple("charge", amount="${fetch.output.total}")])
    run_id = await start(pool, "rerun_me", {"order": 7})
    await settle(pool)
    for name, output in (("fetch", {"total": 5}), ("charge", {"receipt": "r-1"})):
        [leased] = await lease(pool, name)
        await report(pool, leased, output=output)
        await settle(pool)
    assert (await run_status(pool, run_id)).status is RunStatus.COMPLETED

    refused = await act(pool, operations.rerun, run_id, "refund", None)
    assert isinstance(refused, operations.Refused) and refused.reason is operations.Refusal.UNKNOWN_TASK
    done = await act(pool, operations.rerun, run_id, "charge", {"currency": "EUR"})
    assert isinstance(done, operations.Done)
    await settle(pool)
    [charge] = await lease(pool, "charge")
    assert charge.input == {"amount": 5, "currency": "EUR"} and charge.attempt == 2
    refused = await act(pool, operations.restart, run_id)
    assert isinstance(refused, operations.Refused) and refused.reason is operations.Refusal.NOT_FINISHED
    await report(pool, charge)
    await settle(pool)

    restarted = await act(pool, operations.restart, run_id, new_input={"order": 8})
    assert isinstance(restarted, executions.Started) and restarted.id != run_id
    view = await run_status(pool, restarted.id)
    assert view.restarted_from == run_id and view.input == {"order": 8}


async def test_logs_are_kept_up_to_the_cap_and_say_they_were_cut(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "chatty", [simple("talk")])
    run_id = await start(pool, "chatty")
    await settle(pool)
    [talk] = await lease(pool, "talk")
    cap = 10 * (100 + logs.LINE_OVERHEAD)
    async with pool.acquire() as conn:
        for batch in range(3):
            lines = [LogLine(level="INFO", message=f"{batch}-{i}".ljust(100, ".")) for i in range(6)]
            await logs.append(conn, NS, [(talk.task_id, lines), (str(uuid.uuid4()), lines)], cap)
        found = await logs.read(conn, uuid.UUID(run_id), cap=cap)
    messages = [e.message for e in found.entries]
    assert len(messages) == 11 and messages[-1].startswith("[log truncated"), messages
    assert messages[:10] == [f"{b}-{i}".ljust(100, ".") for b in range(2) for i in range(6)][:10]
    assert found.truncated and {e.ref for e in found.entries} == {"talk"}


async def test_retention_deletes_expired_runs_only_and_keeps_children_of_running_parents(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "short_lived", [simple("work")], retention={"seconds": 1})
    await define_workflow(
        pool,
        "parent",
        [
            {
                "name": "child",
                "taskReferenceName": "child",
                "type": "SUB_WORKFLOW",
                "subWorkflowParam": {"name": "short_lived"},
            },
            simple("after"),
        ],
    )
    config = DeciderConfig(retention_seconds=0)  # the default keeps runs: only short_lived expires
    kept = await start(pool, "parent")
    done = await start(pool, "short_lived")
    await settle(pool, config)
    for leased in await lease(pool, "work", count=5):
        await report(pool, leased)
    await settle(pool, config)
    child = await fetchval(pool, "SELECT id FROM executions WHERE parent_execution_id = $1", uuid.UUID(kept))
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE executions SET expires_at = now() - interval '1 second' WHERE expires_at IS NOT NULL"
        )
        assert await conn.fetchval("SELECT count(*) FROM executions WHERE expires_at IS NOT NULL") == 2
        purged = await retention.purge(conn, 100, 86400)
        assert purged.runs == 1 and purged.tasks == 1
        assert await conn.fetchval("SELECT count(*) FROM executions WHERE id = $1", uuid.UUID(done)) == 0
        assert await conn.fetchval("SELECT count(*) FROM tasks WHERE execution_id = $1", uuid.UUID(done)) == 0
        assert await conn.fetchval("SELECT count(*) FROM executions WHERE id = $1", child) == 1, "parent runs on"
        assert (await retention.purge(conn, 100, 86400)).runs == 0
    assert (await run_status(pool, kept)).status is RunStatus.RUNNING
    assert (await run_status(pool, kept)).expires_at is None, "a running run never expires"


async def test_a_finished_run_expires_after_its_workflows_retention(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "kept_a_day", [simple("work")], retention={"seconds": 86400, "failedSeconds": 600})
    run_id = await start(pool, "kept_a_day")
    await settle(pool)
    [work] = await lease(pool, "work")
    await report(pool, work, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason="no")
    await settle(pool)
    view = await run_status(pool, run_id)
    assert view.expires_at is not None and view.ended_at is not None
    assert abs((view.expires_at - view.ended_at).total_seconds() - 600) < 5, "a failure keeps failedSeconds"
    assert view.expires_at > datetime.datetime.now(datetime.UTC)


async def test_a_task_handed_back_while_its_run_is_paused_waits_for_the_resume(pool: asyncpg.Pool) -> None:
    await define_workflow(pool, "handed_back", [simple("work")])
    run_id = await start(pool, "handed_back")
    await settle(pool)
    [work] = await lease(pool, "work")
    await act(pool, operations.pause, run_id)
    # Its worker shuts down and hands the task back with a zero snooze.
    assert (await report(pool, work, ResultStatus.IN_PROGRESS, callback_after_seconds=0)).applied
    assert await lease(pool, "work") == [], "held with the paused run, not leased again"
    await act(pool, operations.resume, run_id)
    [again] = await lease(pool, "work")
    assert again.task_id == work.task_id and again.epoch == work.epoch + 1


async def test_a_task_interrupted_while_its_run_is_paused_waits_and_comes_back_as_its_next_attempt(
    pool: asyncpg.Pool,
) -> None:
    """A graceful shutdown (issue 11's INTERRUPTED) during a pause: parked like
    a snooze, and leased after the resume as the next attempt, as it would be
    without the pause."""
    await define_workflow(pool, "interrupted_in_pause", [simple("work")])
    run_id = await start(pool, "interrupted_in_pause")
    await settle(pool)
    [work] = await lease(pool, "work")
    await act(pool, operations.pause, run_id)
    assert (await report(pool, work, ResultStatus.INTERRUPTED)).applied
    assert await lease(pool, "work") == [], "held with the paused run, not leased again"
    await act(pool, operations.resume, run_id)
    [again] = await lease(pool, "work")
    assert again.task_id == work.task_id and again.attempt == work.attempt + 1


async def test_the_purger_prunes_schedule_fires_older_than_the_retention_but_never_a_buffered_one(
    pool: asyncpg.Pool,
) -> None:
    day = datetime.timedelta(days=1)
    now = datetime.datetime.now(datetime.UTC)
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO schedules (namespace, name, uid, generation, spec) VALUES ($1, 'nightly', 'uid-1', 1, '{}')",
            NS,
        )
        fires = [(now - 40 * day, "started"), (now - 39 * day, "buffered"), (now - 2 * day, "skipped")]
        for fire_at, outcome in fires:
            await conn.execute(
                "INSERT INTO schedule_fires (namespace, schedule, fire_at, kind, outcome, handled_at)"
                " VALUES ($1, 'nightly', $2, 'scheduled', $3, $2)",
                NS,
                fire_at,
                outcome,
            )
        kept_for_ever = await retention.purge(conn, 100, 86400, retention_seconds=0)
        assert kept_for_ever.fires == 0, "a retention of 0 keeps everything"
        purged = await retention.purge(conn, 100, 86400, retention_seconds=30 * 86400)
        left = await conn.fetch("SELECT outcome FROM schedule_fires WHERE namespace = $1 ORDER BY fire_at", NS)
    assert purged.fires == 1
    assert [r["outcome"] for r in left] == ["buffered", "skipped"], "a buffered fire is pending work: kept"
