"""The fault suite's checks can fail: each is shown a history that breaks its
invariant (written straight into a real PostgreSQL with the audit installed)
and must say so, and a history that keeps it and must pass it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.faults import invariants
from e2e.faults.drivers import FaultLog, LoadLog, Publish, Start
from e2e.faults.rig import Db, install_audit
from e2e.faults.workload import FLAKY_REASON, GATES
from sluiceway.controls.triggers import dedup_key


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Db]:
    db = Db(database_url)  # a migrated database of the test's own
    await install_audit(db)
    yield db
    await db.close()


async def _run(db: Db, status: str = "RUNNING") -> str:
    run = str(uuid.uuid4())
    await db.fetch(
        "INSERT INTO executions (id, namespace, workflow_name, workflow_version, status) VALUES ($1, 'ns', 'w', 1, $2)",
        uuid.UUID(run),
        status,
    )
    return run


async def _task(db: Db, run: str, name: str, ref: str | None = None, attempt: int = 1) -> str:
    task = str(uuid.uuid4())
    await db.fetch(
        "INSERT INTO tasks (id, execution_id, namespace, ref, type, name, attempt, status, first_scheduled_at,"
        " available_at) VALUES ($1, $2, 'ns', $3, 'SIMPLE', $4, $5, 'SCHEDULED', now(), now())",
        uuid.UUID(task),
        uuid.UUID(run),
        ref or name,
        name,
        attempt,
    )
    return task


async def _lease(db: Db, task: str, worker: str = "w", holds: list[str] | None = None, at: str = "now()") -> None:
    await db.fetch(
        f"UPDATE tasks SET status = 'IN_PROGRESS', epoch = epoch + 1, worker_id = $2, holds = $3, leased_at = {at}"
        " WHERE id = $1",
        uuid.UUID(task),
        worker,
        holds,
    )


async def _end(db: Db, task: str, status: str = "COMPLETED", reason: str = "") -> None:
    await db.fetch("UPDATE tasks SET status = $2, reason = $3 WHERE id = $1", uuid.UUID(task), status, reason)


def _done(task: str, epoch: int, worker: str = "w", outcome: str = "completed", at: float = 0.0) -> dict[str, Any]:
    return {"ev": "done", "task": task, "epoch": epoch, "worker": worker, "outcome": outcome, "at": at}


async def test_semaphore_peak_counts_holders_at_one_instant(db: Db) -> None:
    run = await _run(db)
    tasks = [await _task(db, run, "erp_export", f"t{i}") for i in range(3)]
    await _lease(db, tasks[0], holds=[GATES.semaphore])
    await _lease(db, tasks[1], holds=[GATES.semaphore])
    await _end(db, tasks[0])
    await _lease(db, tasks[2], holds=[GATES.semaphore])
    assert await invariants.peak_within(db, GATES.semaphore, GATES.permits, semaphore=True) == ([], 2)
    over = await _task(db, run, "erp_import", "t3")
    await _lease(db, over, holds=[GATES.semaphore])
    violations, peak = await invariants.peak_within(db, GATES.semaphore, GATES.permits, semaphore=True)
    assert peak == 3 and len(violations) == 1


async def test_a_cap_above_its_limit_is_found(db: Db) -> None:
    run = await _run(db)
    for i in range(GATES.cap + 1):
        await _lease(db, await _task(db, run, GATES.capped, f"c{i}"))
    violations, peak = await invariants.peak_within(db, GATES.capped, GATES.cap, semaphore=False)
    assert peak == GATES.cap + 1 and violations


async def test_a_rate_window_above_its_limit_is_found(db: Db) -> None:
    run = await _run(db)
    for i in range(GATES.rate):
        await _lease(db, await _task(db, run, GATES.rated, f"r{i}"), at="'2030-01-01T00:00:00.5Z'")
    assert await invariants.rate_within(db, GATES) == ([], GATES.rate)
    await _lease(db, await _task(db, run, GATES.rated, "late"), at="'2030-01-01T00:00:00.9Z'")
    violations, busiest = await invariants.rate_within(db, GATES)
    assert busiest == GATES.rate + 1 and violations


async def test_a_move_out_of_a_terminal_state_is_found(db: Db) -> None:
    run = await _run(db)
    task = await _task(db, run, "prepare")
    await _lease(db, task)
    await _end(db, task, "TIMED_OUT")
    assert await invariants.attempts_end_once(db) == []
    await _end(db, task, "COMPLETED")  # a late result applied after the attempt had ended
    violations = await invariants.attempts_end_once(db)
    assert any("TIMED_OUT@1 -> COMPLETED@1" in v for v in violations), violations


async def test_two_successful_attempts_of_one_task_are_found(db: Db) -> None:
    run = await _run(db)
    for attempt in (1, 2):
        task = await _task(db, run, "prepare", attempt=attempt)
        await _lease(db, task)
        await _end(db, task)
    assert len(await invariants.one_success_per_task(db)) == 1


async def test_a_completion_nobody_performed_and_a_lease_nobody_granted_are_found(db: Db) -> None:
    run = await _run(db)
    task = await _task(db, run, "prepare")
    await _lease(db, task, worker="w1")
    await _end(db, task)
    assert await invariants.completions_are_real(db, [_done(task, 1, "w1")]) == []
    assert await invariants.completions_are_real(db, []) != []
    assert await invariants.completions_are_real(db, [_done(task, 1, "w2")]) != []
    started = {"ev": "start", "task": task, "epoch": 2, "worker": "w1"}
    assert await invariants.leases_are_real(db, [started]) != []


async def test_an_applied_late_result_is_found_and_an_expiry_is_not_one(db: Db) -> None:
    run = await _run(db)
    task = await _task(db, run, "flaky")
    await _lease(db, task, worker="w1")
    faults = FaultLog(paused_leases=[(task, 1, "w1")], thawed_at={"w1": 100.0})
    late_failure = _done(task, 1, "w1", outcome="failed", at=101.0)
    await _end(db, task, "FAILED", "heartbeatTimeout: the worker is gone")  # the operator took the lease back
    violations, figures = await invariants.late_results_refused(db, faults, [late_failure])
    assert violations == [] and figures["finished after the thaw and refused"] == 1
    other = await _task(db, run, "flaky", "again")
    await _lease(db, other, worker="w1")
    await _end(db, other, "FAILED", f"ConnectionError: {FLAKY_REASON} on attempt 1")
    faults = FaultLog(paused_leases=[(other, 1, "w1")], thawed_at={"w1": 100.0})
    violations, _ = await invariants.late_results_refused(db, faults, [_done(other, 1, "w1", "failed", 101.0)])
    assert violations, "the worker's own late failure was applied"
    faults.stale_replays.append((other, 1, 200))
    violations, _ = await invariants.late_results_refused(db, faults, [])
    assert violations


async def test_an_attempt_created_after_its_run_was_terminated_is_found(db: Db) -> None:
    run = await _run(db)
    raced = await _task(db, run, "prepare")
    await db.fetch("UPDATE executions SET status = 'TERMINATED' WHERE id = $1", uuid.UUID(run))
    await _lease(db, raced)  # leased between the run's end and the cancel, in one transaction...
    await _end(db, raced, "CANCELED")  # ...and cancelled by it: allowed
    assert await invariants.terminated_never_ran_again(db) == []
    await _task(db, run, "prepare", "retry")
    assert len(await invariants.terminated_never_ran_again(db)) == 1


async def test_a_sdk_error_is_a_violation_and_a_warning_is_not(db: Db) -> None:
    warning = {"ev": "log", "level": "WARNING", "message": "poll failed; retrying", "worker": "w1"}
    expired = {
        "ev": "log",
        "level": "ERROR",
        "message": "task t: result could not be delivered before the lease ran out",
    }
    error = {"ev": "log", "level": "ERROR", "message": "t: even a bare FAILED was refused: x; dropped", "worker": "w1"}
    violations, figures = invariants.sdk_never_gave_up([warning, {**expired, "worker": "w2"}])
    assert violations == [] and figures == {"warnings (retries)": 1, "results given up after their lease ran out": 1}
    violations, _ = invariants.sdk_never_gave_up([warning, error])
    assert violations == ["w1: t: even a bare FAILED was refused: x; dropped"]


async def _run_with(db: Db, *, request_id: str | None = None, schedule: str | None = None) -> str:
    run = await _run(db, "COMPLETED")
    await db.fetch(
        "UPDATE executions SET request_id = $2, schedule_name = $3 WHERE id = $1", uuid.UUID(run), request_id, schedule
    )
    return run


async def test_two_runs_for_one_request_id_are_found(db: Db) -> None:
    first = await _run_with(db, request_id="load-0")
    load = LoadLog(starts=[Start("load-0", acked=first, attempts=2), Start("load-1", attempts=3)])
    assert (await invariants.one_run_per_request(db, load))[0] == []
    second = await _run_with(db, request_id="load-1")
    await _run_with(db, request_id="load-1")
    found, figures = await invariants.one_run_per_request(db, load)
    assert len(found) == 1 and "requestId 'load-1' has 2 runs" in found[0], found
    assert figures["duplicate runs"] == 1
    load.starts[1].acked = str(uuid.uuid4())  # acknowledged as a run that is not the one
    found, _ = await invariants.one_run_per_request(db, load)
    assert any("start load-1 was acknowledged" in v and second in v for v in found), found


async def test_two_runs_for_one_event_id_are_found(db: Db) -> None:
    key = dedup_key("uid-1", "evt-0")
    run = await _run_with(db, request_id=key)
    load = LoadLog(events=[Publish("evt-0", outcome={"outcome": "started", "runId": run})])
    assert (await invariants.one_run_per_event(db, load, "uid-1"))[0] == []
    await _run_with(db, request_id=key)
    found, _ = await invariants.one_run_per_event(db, load, "uid-1")
    assert any("2 runs for one (Trigger, event id)" in v for v in found), found


async def test_a_scheduled_run_no_fire_names_is_found(db: Db) -> None:
    run = await _run_with(db, schedule="tick")
    await db.fetch(
        "INSERT INTO schedule_fires (namespace, schedule, fire_at, kind, outcome, run_id)"
        " VALUES ('ns', 'tick', now(), 'scheduled', 'started', $1)",
        uuid.UUID(run),
    )
    found, figures = await invariants.one_run_per_fire(db)
    assert found == [] and figures == {"started": 1}
    second = await _run_with(db, schedule="tick")  # a second run of the same fire: no fire row can name it
    found, _ = await invariants.one_run_per_fire(db)
    assert found == [f"run without a started fire: schedule tick run {second}"], found
