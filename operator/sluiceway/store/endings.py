"""Runs ending, and the runs a run starts or tells, in the decider's
transaction: a finished run's row, its active tasks cancelled, its child runs
terminated, its retention set; then what the decider said follows from the
end (tell the parent, admit the next run of the key, start the failure
workflow, continue as new). And a SUB_WORKFLOW task's child run started."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import asyncpg

from sluiceway.engine.commands import AdmitNext, Consequence, ContinueAsNew, FinishRun, NotifyParent, StartChild
from sluiceway.engine.snapshot import RunSnapshot
from sluiceway.store import admission, executions, sql, wakeups

log = logging.getLogger(__name__)

# Finished runs are deleted this long after they end unless their workflow
# (spec.retention) or WorkflowRun (ttlSecondsAfterFinished) says otherwise; 0 keeps them.
DEFAULT_RETENTION_SECONDS = 30 * 86_400


@dataclass(frozen=True)
class Finishing:
    """A run the decision ends, and what follows from its end: applied only if it does end."""

    run_id: str
    namespace: str
    finish: FinishRun
    consequences: list[Consequence] = field(default_factory=list)


@dataclass(frozen=True)
class _Ended:
    """A row of _FINISH: how one run ends."""

    id: sql.Uuid
    status: sql.Text
    reason: sql.Text
    output: sql.Json
    failed_task_id: sql.Uuid | None

    @classmethod
    def of(cls, finishing: Finishing) -> _Ended:
        finish = finishing.finish
        failed = uuid.UUID(finish.failed_task_id) if finish.failed_task_id else None
        return cls(uuid.UUID(finishing.run_id), finish.status.value, finish.reason, finish.output, failed)


# A run's retention starts when it ends: its own (or its workflow's) for its
# outcome, else the operator's default ($6); 0 keeps it for ever. The runs that
# ended are announced on ENDED_CHANNEL in the same statement (no round trip of
# its own): whoever waits for them to end wakes once they commit.
_FINISH = f"""
WITH ended AS (
UPDATE executions e
   SET status = f.status, reason = f.reason, output = f.output, failed_task_id = f.failed_task_id,
       ended_at = now(), timeout_at = NULL, mirror_seq = e.mirror_seq + 1, evaluated = true,
       expires_at = (SELECT CASE WHEN keep > 0 THEN now() + make_interval(secs => keep) END
                       FROM coalesce(CASE WHEN f.status = 'COMPLETED' THEN e.retain_seconds
                                          ELSE coalesce(e.retain_failed_seconds, e.retain_seconds) END,
                                     $6::int) AS keep)
  FROM {sql.unnest(_Ended, "f")}
 WHERE e.id = f.id AND e.status = 'RUNNING'
RETURNING e.id
), announced AS ({wakeups.ended_sql("ended")}
)
SELECT id, (SELECT count(*) FROM announced) FROM ended
"""
_CANCEL_ACTIVE = f"""
WITH cancelled AS (
    UPDATE tasks SET status = 'CANCELED', ended_at = now(), reason = 'run ended',
           schedule_to_start_at = NULL, start_to_close_at = NULL, total_at = NULL, heartbeat_at = NULL,
           lease_expires_at = NULL, schedule_to_close_at = NULL, wait_until = NULL
     WHERE execution_id = ANY($1) AND status IN ('SCHEDULED', 'IN_PROGRESS')
    RETURNING child_execution_id, namespace, name, CASE WHEN status = 'CANCELED' THEN holds END AS holds
), freed AS ({wakeups.released("cancelled")}
)
SELECT child_execution_id, (SELECT count(*) FROM freed) FROM cancelled
"""
# A finished run takes no more messages: those nobody took go with it.
_DROP_MESSAGES = "DELETE FROM run_messages WHERE execution_id = ANY($1)"
_TERMINATE_CHILDREN = """
UPDATE executions SET terminate_requested = $2
 WHERE id = ANY($1) AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""
_NOTIFY_PARENT_TASK = """
UPDATE tasks SET status = $2, output = $3, reason = $4, ended_at = now(), total_at = NULL
 WHERE id = $1 AND status = 'IN_PROGRESS'
"""


async def finish_runs(
    conn: asyncpg.Connection,
    finishes: list[Finishing],
    retention_seconds: int = DEFAULT_RETENTION_SECONDS,
) -> list[str]:
    """End runs and everything hanging off them, in the decider's transaction:
    cancel their active tasks, terminate their child runs, then apply what the
    decider said follows from each end (tell the parent, admit the next run of
    the key, start the failure workflow). The common case (no parent, no
    children, no consequence) costs two statements for the whole batch.
    Returns the ids of the runs that ended (a run that had already ended is
    left alone, and so are its consequences)."""
    ending = [_Ended.of(finishing) for finishing in finishes]
    ended = {str(row["id"]) for row in await conn.fetch(_FINISH, *sql.arrays(ending, _Ended), retention_seconds)}
    if not ended:
        return []
    cancelled = await conn.fetch(_CANCEL_ACTIVE, [uuid.UUID(run_id) for run_id in ended])
    await conn.execute(_DROP_MESSAGES, [uuid.UUID(run_id) for run_id in ended])
    children = [r["child_execution_id"] for r in cancelled if r["child_execution_id"] is not None]
    if children:
        stopped = await conn.fetch(_TERMINATE_CHILDREN, children, "the parent run ended")
        await executions.enqueue_decides(conn, [r["id"] for r in stopped], "terminate")
    admitted: list[uuid.UUID] = []
    for finishing in finishes:
        if finishing.run_id in ended:
            for command in finishing.consequences:
                admitted += await _follow(conn, finishing, command)
    await executions.enqueue_decides(conn, admitted, "admitted")
    return sorted(ended)


async def _follow(conn: asyncpg.Connection, finishing: Finishing, command: Consequence) -> list[uuid.UUID]:
    """Apply one consequence of a run's end; return the runs it admitted."""
    if isinstance(command, AdmitNext):
        return await admission.admit_waiting(conn, finishing.namespace, command.workflow, command.key, command.limit)
    if isinstance(command, NotifyParent):
        await conn.execute(
            _NOTIFY_PARENT_TASK, uuid.UUID(command.parent_task_id), command.status.value, command.output, command.reason
        )
        await executions.enqueue_decide(conn, command.parent_run_id, "child_finished")
        return []
    if isinstance(command, ContinueAsNew):
        await _continue_as_new(conn, finishing, command)
        return []
    started = await executions.start_run(conn, finishing.namespace, command.workflow, None, command.input)
    if not isinstance(started, executions.Started):
        log.warning("run %s: failureWorkflow %s not started: %s", finishing.run_id, command.workflow, started.message)
    return []


_CONTINUED = "SELECT correlation_id, schedule_name, priority FROM executions WHERE id = $1"
_NOT_CONTINUED = "UPDATE executions SET reason = $2 WHERE id = $1"


async def _continue_as_new(conn: asyncpg.Connection, finishing: Finishing, command: ContinueAsNew) -> None:
    """Start the next link of the chain, in the transaction that ended this
    one: on the latest version, with the chain's id and deadline, and the
    same correlation id and schedule (whose overlap policy sees the chain as
    one run). A start the gates refuse leaves the chain ended here, said in
    the ended run's reason."""
    previous = await conn.fetchrow(_CONTINUED, uuid.UUID(finishing.run_id))
    started = await executions.start_run(
        conn,
        finishing.namespace,
        command.workflow,
        None,
        command.input,
        correlation_id=previous["correlation_id"],
        run_id=command.run_id,
        schedule=previous["schedule_name"],
        priority=previous["priority"],
        chain=executions.ChainLink(uuid.UUID(command.chain_id), uuid.UUID(finishing.run_id), command.chain_deadline_at),
    )
    if not isinstance(started, executions.Started):
        log.warning("run %s: could not continue as new: %s", finishing.run_id, started.message)
        await conn.execute(_NOT_CONTINUED, uuid.UUID(finishing.run_id), f"could not continue as new: {started.message}")


_LINK_CHILD = "UPDATE tasks SET child_execution_id = $2 WHERE id = $1"
_CHILD_NOT_STARTED = """
UPDATE tasks SET status = 'FAILED_WITH_TERMINAL_ERROR', reason = $2, ended_at = now() WHERE id = $1
"""


async def start_child(conn: asyncpg.Connection, parent: RunSnapshot, child: StartChild, parent_task: uuid.UUID) -> None:
    """Start the child run of a SUB_WORKFLOW task (`parent_task`, just scheduled)."""
    outcome = await executions.start_run(
        conn,
        parent.namespace,
        child.workflow,
        child.version,
        child.input,
        parent=(uuid.UUID(parent.id), parent_task),
        priority=parent.priority,  # a child is as urgent as the run that waits for it
    )
    if isinstance(outcome, executions.Started):
        await conn.execute(_LINK_CHILD, parent_task, uuid.UUID(outcome.id))
        return
    # The child could not start: the SUB_WORKFLOW task fails terminally, the decider takes it from there.
    await conn.execute(_CHILD_NOT_STARTED, parent_task, f"SUB_WORKFLOW: {outcome.message}")
    await executions.enqueue_decide(conn, parent.id, "child_finished")
