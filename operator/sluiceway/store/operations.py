"""Operations on runs: pause, resume, retry from the failure, rerun from a
task, restart as a new run. Each is one transaction holding the run's row
lock, so it never interleaves with the decider deciding that run.

- **Pause**: the run schedules nothing new (the decider sees `paused_at`);
  its queued and waiting tasks are parked (their rows hold a far-future
  availability and no timers; `parked_tasks` keeps what they had), so nothing
  leases or expires them; tasks already leased run on and their results are
  recorded. The run's deadline and SLA do not fire while it is paused.
- **Resume**: the clocks move forward by the paused span (pure arithmetic in
  `controls.pausing`), parked tasks come back with their timers moved by the
  same span, and the decider takes the run up again.
- **Retry / rerun**: the run is RUNNING again; the tasks they start afresh are
  recorded as superseded (history the decider no longer walks), the rest keep
  their outputs. Start gates apply again, as for a start.
- **Restart**: a new run of the same workflow, linked by `restarted_from`.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import asyncpg

from sluiceway.controls.pausing import RunClocks, resumed
from sluiceway.engine.reruns import Latest, RerunError, rerun_scope, retry_scope
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.store import admission, attributes, executions, wakeups, workflows

# Where a parked task waits: far enough that nothing is due, finite so that
# arithmetic on it never fails.
PARKED_UNTIL = datetime.datetime(9000, 1, 1, tzinfo=datetime.UTC)


class Refusal(StrEnum):
    NOT_FOUND = "NOT_FOUND"
    NOT_RUNNING = "NOT_RUNNING"  # pause or resume a run that has ended
    NOT_FINISHED = "NOT_FINISHED"  # retry, rerun or restart a run that is still running
    COMPLETED = "COMPLETED"  # retry a run that completed: nothing failed
    NOTHING_TO_RETRY = "NOTHING_TO_RETRY"
    CHILD_RUN = "CHILD_RUN"  # a sub-workflow's run is retried through its parent
    UNKNOWN_TASK = "UNKNOWN_TASK"
    UNREADABLE = "UNREADABLE"  # the run's workflow version cannot be read
    NOT_A_HUMAN_TASK = "NOT_A_HUMAN_TASK"  # a person's decision on a task that is not HUMAN
    NOT_WAITING = "NOT_WAITING"  # a person's decision on a HUMAN task that was decided, timed out or canceled


@dataclass(frozen=True)
class Refused:
    reason: Refusal
    message: str


@dataclass(frozen=True)
class Done:
    id: str
    status: RunStatus
    message: str = ""


Outcome = Done | Refused | admission.Refusal

_LOCK = """
SELECT id, namespace, workflow_name, workflow_version, status, input, correlation_id, paused_at, timeout_at,
       sla_at, sla_breached_at, sla_seconds, chain_deadline_at, parent_execution_id, superseded, input_overrides,
       priority, now() AS now
  FROM executions WHERE id = $1 AND namespace = $2
   FOR UPDATE
"""


async def _lock(conn: asyncpg.Connection, namespace: str, run_id: str) -> asyncpg.Record | None:
    try:
        key = uuid.UUID(run_id)
    except ValueError:
        return None
    row: asyncpg.Record | None = await conn.fetchrow(_LOCK, key, namespace)
    return row


def missing(namespace: str, run_id: str) -> Refused:
    return Refused(Refusal.NOT_FOUND, f"no run {run_id} in namespace {namespace}")


# -- pause and resume ---------------------------------------------------------------

_PAUSE = """
UPDATE executions SET paused_at = now(), pause_reason = $2, mirror_seq = mirror_seq + 1 WHERE id = $1
"""
# Queued tasks and what waits (WAIT, a child run) are parked; leased ones run on.
# A task handed back during the pause had its delay counted from then: it is
# parked as if handed back when the pause began, since resuming adds the whole
# paused span (for the run's own park the difference is zero).
_PARK = """
WITH since AS (SELECT coalesce(now() - paused_at, interval '0') AS paused FROM executions WHERE id = $1),
parked AS (
    INSERT INTO parked_tasks (task_id, execution_id, status, available_at, schedule_to_start_at, total_at,
                              schedule_to_close_at, wait_until, close_deadline)
    SELECT id, execution_id, status, available_at - since.paused, schedule_to_start_at - since.paused, total_at,
           schedule_to_close_at, wait_until, close_deadline
      FROM tasks, since
     WHERE execution_id = $1 AND ($3::uuid IS NULL OR id = $3)
       AND (status = 'SCHEDULED' OR (status = 'IN_PROGRESS' AND executor = 'engine'))
    ON CONFLICT (task_id) DO NOTHING
    RETURNING task_id
)
UPDATE tasks SET available_at = $2, schedule_to_start_at = NULL, total_at = NULL, schedule_to_close_at = NULL,
       wait_until = NULL
 WHERE id IN (SELECT task_id FROM parked)
"""
_RESUME = """
UPDATE executions
   SET paused_at = NULL, pause_reason = NULL, paused_seconds = paused_seconds + $2, timeout_at = $3, sla_at = $4,
       mirror_seq = mirror_seq + 1
 WHERE id = $1
"""
# Back where they were, moved by the pause; a task that changed meanwhile
# (canceled by a terminate, a WAIT completed by a result) keeps its own timers.
_UNPARK = f"""
WITH restored AS (DELETE FROM parked_tasks WHERE execution_id = $1 RETURNING *),
back AS (
    UPDATE tasks t
       SET available_at = greatest(r.available_at, $3) + $2,  -- a backoff keeps what it had left
           schedule_to_start_at = CASE WHEN t.status = r.status THEN r.schedule_to_start_at + $2 END,
           total_at = CASE WHEN t.status = r.status THEN r.total_at + $2 ELSE t.total_at END,
           schedule_to_close_at = CASE WHEN t.status = r.status THEN r.schedule_to_close_at + $2 END,
           wait_until = CASE WHEN t.status = r.status THEN r.wait_until + $2 END,
           close_deadline = CASE WHEN t.status = r.status THEN r.close_deadline + $2 ELSE t.close_deadline END
      FROM restored r
     WHERE t.id = r.task_id
    RETURNING t.namespace, t.name, t.executor, t.status
)
SELECT {wakeups.notify_ready_sql("queue")} FROM (
    SELECT DISTINCT CASE WHEN executor = 'worker' THEN {wakeups.ready_payload_sql("namespace", "name")}
                         ELSE {wakeups.SYSTEM_PAYLOAD_SQL} END AS queue
      FROM back WHERE status = 'SCHEDULED' AND executor <> 'engine'
) queues
"""


async def pause(conn: asyncpg.Connection, namespace: str, run_id: str, reason: str = "") -> Outcome:
    """Pause a running run (in the caller's transaction); pausing a paused run changes nothing."""
    run = await _lock(conn, namespace, run_id)
    if run is None:
        return missing(namespace, run_id)
    if run["status"] != RunStatus.RUNNING.value:
        return Refused(Refusal.NOT_RUNNING, f"run {run_id} is {run['status']}: only a running run can be paused")
    if run["paused_at"] is not None:
        return Done(str(run["id"]), RunStatus.PAUSED, "already paused")
    await conn.execute(_PAUSE, run["id"], reason)
    await park(conn, run["id"])
    return Done(str(run["id"]), RunStatus.PAUSED)


async def park(conn: asyncpg.Connection, run_id: uuid.UUID, task_id: uuid.UUID | None = None) -> None:
    """Set a paused run's queued and waiting tasks aside (or one of them: a
    task its worker handed back while the run was paused)."""
    await conn.execute(_PARK, run_id, PARKED_UNTIL, task_id)


async def resume(conn: asyncpg.Connection, namespace: str, run_id: str) -> Outcome:
    """Resume a paused run; resuming a run that is not paused changes nothing."""
    run = await _lock(conn, namespace, run_id)
    if run is None:
        return missing(namespace, run_id)
    if run["status"] != RunStatus.RUNNING.value:
        return Refused(Refusal.NOT_RUNNING, f"run {run_id} is {run['status']}: there is nothing to resume")
    if run["paused_at"] is None:
        return Done(str(run["id"]), RunStatus.RUNNING, "not paused")
    now: datetime.datetime = run["now"]
    before = RunClocks(
        timeout_at=run["timeout_at"],
        sla_at=run["sla_at"],
        sla_breached=run["sla_breached_at"] is not None,
        chain_deadline_at=run["chain_deadline_at"],
    )
    after = resumed(before, run["paused_at"], now)
    span = max(now - run["paused_at"], datetime.timedelta(0))
    await conn.execute(_RESUME, run["id"], span.total_seconds(), after.timeout_at, after.sla_at)
    await conn.execute(_UNPARK, run["id"], span, run["paused_at"])
    await executions.enqueue_decide(conn, run["id"], "resumed")
    return Done(str(run["id"]), RunStatus.RUNNING)


# -- retry, rerun, restart -----------------------------------------------------------

_LATEST = """
SELECT DISTINCT ON (ref) ref, status, attempt FROM tasks WHERE execution_id = $1 ORDER BY ref, attempt DESC
"""
_REOPEN = """
UPDATE executions
   SET status = 'RUNNING', reason = '', output = '{}', failed_task_id = NULL, ended_at = NULL,
       terminate_requested = NULL, evaluated = false, timeout_at = NULL, quarantined_at = NULL,
       quarantine_reason = NULL, expires_at = NULL, paused_at = NULL, pause_reason = NULL,
       superseded = superseded || $2, input_overrides = $3, retries = retries + 1,
       admission_key = $4, awaiting_admission = $5, mirror_seq = mirror_seq + 1,
       sla_at = CASE WHEN sla_breached_at IS NULL AND sla_seconds > 0
                     THEN now() + make_interval(secs => sla_seconds) ELSE sla_at END
 WHERE id = $1
"""


def _visible(rows: list[asyncpg.Record], superseded: dict[str, int]) -> dict[str, Latest]:
    return {
        row["ref"]: Latest(TaskStatus(row["status"]), row["attempt"])
        for row in rows
        if row["attempt"] > superseded.get(row["ref"], 0)
    }


def _not_finished(run: asyncpg.Record, what: str) -> Refused | None:
    if run["status"] == RunStatus.RUNNING.value:
        return Refused(
            Refusal.NOT_FINISHED, f"run {run['id']} is still running: terminate it or let it end before you {what}"
        )
    return None


async def retry(conn: asyncpg.Connection, namespace: str, run_id: str) -> Outcome:
    """Take up a run that FAILED, TIMED_OUT or was TERMINATED from where it failed."""
    run = await _lock(conn, namespace, run_id)
    if run is None:
        return missing(namespace, run_id)
    refused = _not_finished(run, "retry it")
    if refused is not None:
        return refused
    if run["status"] == RunStatus.COMPLETED.value:
        return Refused(Refusal.COMPLETED, f"run {run_id} completed: rerun it from a task, or restart it")
    if run["parent_execution_id"] is not None:
        return Refused(
            Refusal.CHILD_RUN,
            f"run {run_id} is a sub-workflow of run {run['parent_execution_id']}: retry that run, which starts "
            "a new child where this one failed",
        )
    superseded = dict(run["superseded"])
    scope = retry_scope(_visible(await conn.fetch(_LATEST, run["id"]), superseded))
    if not scope and run["status"] == RunStatus.FAILED.value:
        return Refused(
            Refusal.NOTHING_TO_RETRY,
            f"run {run_id} has no failed task to retry (a TERMINATE task ended it): rerun it from a task, or "
            "restart it",
        )
    return await _reopen(conn, run, scope, dict(run["input_overrides"]))


async def rerun(
    conn: asyncpg.Connection, namespace: str, run_id: str, ref: str, new_input: dict[str, Any] | None
) -> Outcome:
    """Run a finished run again from one task, optionally with new input for it."""
    run = await _lock(conn, namespace, run_id)
    if run is None:
        return missing(namespace, run_id)
    refused = _not_finished(run, "rerun it")
    if refused is not None:
        return refused
    found = await workflows.find_version(conn, namespace, run["workflow_name"], run["workflow_version"])
    spec = found.spec if found is not None else None
    if spec is None:
        return Refused(
            Refusal.UNREADABLE,
            f"workflow {run['workflow_name']} version {run['workflow_version']} cannot be read: restart the run "
            "on the latest version instead",
        )
    superseded = dict(run["superseded"])
    try:
        scope = rerun_scope(spec, ref, _visible(await conn.fetch(_LATEST, run["id"]), superseded))
    except RerunError as error:
        return Refused(Refusal.UNKNOWN_TASK, str(error))
    overrides = {k: v for k, v in dict(run["input_overrides"]).items() if k != ref}
    if new_input is not None:
        overrides[ref] = new_input
    return await _reopen(conn, run, scope, overrides)


async def _reopen(
    conn: asyncpg.Connection, run: asyncpg.Record, scope: dict[str, int], overrides: dict[str, Any]
) -> Outcome:
    namespace, name = run["namespace"], run["workflow_name"]
    found = await workflows.find_version(conn, namespace, name, run["workflow_version"])
    spec = found.spec if found is not None else None  # None: the decider quarantines it, as for a start
    refusal: admission.Refusal | None = await admission.check_quotas(conn, namespace)
    if refusal is None and spec is not None:
        refusal = await admission.check_max_concurrent(conn, namespace, name, spec)
    if refusal is not None:
        return refusal
    admitted = (
        await admission.admit(conn, namespace, name, spec, run["input"]) if spec else admission.Admission(None, False)
    )
    await conn.execute(_REOPEN, run["id"], scope, overrides, admitted.key, admitted.awaiting)
    await executions.enqueue_decide(conn, run["id"], "started")
    started = ", ".join(sorted(scope)) or "nothing (it starts where it stopped)"
    return Done(str(run["id"]), RunStatus.RUNNING, f"starting afresh: {started}")


async def restart(
    conn: asyncpg.Connection,
    namespace: str,
    run_id: str,
    *,
    new_input: dict[str, Any] | None = None,
    latest_version: bool = False,
    request_id: str | None = None,
    idempotency_window: float = executions.IDEMPOTENCY_WINDOW_SECONDS,
) -> executions.StartOutcome | Refused:
    """Start a finished run again from the beginning, as a new run linked to it."""
    run = await _lock(conn, namespace, run_id)
    if run is None:
        return missing(namespace, run_id)
    refused = _not_finished(run, "restart it")
    if refused is not None:
        return refused
    outcome = await executions.start_run(
        conn,
        namespace,
        run["workflow_name"],
        None if latest_version else run["workflow_version"],
        new_input if new_input is not None else dict(run["input"]),
        correlation_id=run["correlation_id"],
        request_id=request_id,
        restarted_from=run["id"],
        idempotency_window=idempotency_window,
        priority=run["priority"],
    )
    if isinstance(outcome, executions.Started) and outcome.created:
        created_at = await conn.fetchval("SELECT created_at FROM executions WHERE id = $1", uuid.UUID(outcome.id))
        mine = await attributes.of_runs(conn, namespace, [uuid.UUID(outcome.id)])
        await attributes.copy(conn, run["id"], uuid.UUID(outcome.id), created_at, mine[uuid.UUID(outcome.id)])
    return outcome
