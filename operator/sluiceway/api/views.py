"""The API's answers built from the store's rows: a run with its tasks, a
page of runs or tasks, a page of log lines. Times go on the wire as
`model.common.wire_time` writes them."""

from __future__ import annotations

from typing import Any

from sluiceway.model.common import wire_time
from sluiceway.model.execution import (
    ExecutionView,
    LogEntry,
    LogPage,
    RunPage,
    RunSummary,
    TaskPage,
    TaskSummary,
    TaskView,
)
from sluiceway.plane import finding
from sluiceway.plane.finding import Order
from sluiceway.store import listing, logs, runs


def _summary(row: listing.RunRow) -> RunSummary:
    return RunSummary(
        id=row.id,
        workflow_name=row.workflow_name,
        workflow_version=row.workflow_version,
        status=row.status,
        awaiting_admission=row.awaiting_admission,
        reason_for_incompletion=row.reason,
        correlation_id=row.correlation_id,
        parent_workflow_id=row.parent_execution_id,
        workflow_run=row.resource_name,
        start_time=wire_time(row.created_at) or "",
        end_time=wire_time(row.ended_at),
        paused_at=wire_time(row.paused_at),
        sla_breached_at=wire_time(row.sla_breached_at),
        quarantined=row.quarantined,
        search_attributes=row.attributes,
        priority=row.priority,
    )


def run_page(page: finding.Page, order: Order) -> RunPage:
    return RunPage(
        items=[_summary(row) for row in page.rows],
        next_cursor=finding.encode_cursor(page.next, order) if page.next is not None else None,
    )


def execution(
    run: runs.RunView, tasks: list[runs.TaskView], search_attributes: dict[str, Any], archived: bool = False
) -> ExecutionView:
    """A run and its tasks as `GET .../executions/{id}` answers (`archived`: read from the archive)."""
    superseded = run.superseded or {}
    return ExecutionView(
        id=run.id,
        namespace=run.namespace,
        workflow_name=run.workflow_name,
        workflow_version=run.workflow_version,
        status=run.status,
        awaiting_admission=run.awaiting_admission,
        reason_for_incompletion=run.reason,
        correlation_id=run.correlation_id,
        parent_workflow_id=run.parent_execution_id,
        workflow_run=run.resource_name,
        restarted_from=run.restarted_from,
        request_id=run.request_id,
        input=run.input,
        output=run.output,
        start_time=wire_time(run.created_at) or "",
        end_time=wire_time(run.ended_at),
        search_attributes=search_attributes,
        paused_at=wire_time(run.paused_at),
        pause_reason=run.pause_reason,
        paused_seconds=round(run.paused_seconds, 3),
        deadline=wire_time(run.timeout_at),
        sla_seconds=run.sla_seconds,
        sla_deadline=wire_time(run.sla_at),
        sla_breached_at=wire_time(run.sla_breached_at),
        retries=run.retries,
        expires_at=wire_time(run.expires_at),
        quarantined_at=wire_time(run.quarantined_at),
        quarantine_reason=run.quarantine_reason,
        schedule=run.schedule_name,
        chain_id=run.chain_id,
        previous_run_id=run.previous_run_id,
        next_run_id=run.next_run_id,
        chain_deadline=wire_time(run.chain_deadline_at),
        priority=run.priority,
        archived=archived,
        tasks=[
            TaskView(
                task_id=t.id,
                reference_name=t.ref,
                task_type=t.name,
                type=t.type,
                status=t.status,
                attempt=t.attempt,
                reason=t.reason,
                worker_id=t.worker_id,
                scheduled_at=wire_time(t.created_at) or "",
                available_at=wire_time(t.available_at) or "",
                started_at=wire_time(t.leased_at),
                ended_at=wire_time(t.ended_at),
                input=t.input,
                output=t.output,
                sub_workflow_id=t.child_execution_id,
                superseded=t.attempt <= superseded.get(t.ref, 0),
                loop=t.loop_ref,
                iteration=t.iteration,
                snooze_count=t.snooze_count,
                interrupt_count=t.interrupt_count,
                completed_by=t.completed_by,
                priority=t.priority,
            )
            for t in tasks
        ],
    )


def log_page(found: logs.Logs, after: int) -> LogPage:
    return LogPage(
        lines=[
            LogEntry(
                id=e.id,
                task_id=e.task_id,
                reference_name=e.ref,
                attempt=e.attempt,
                at=wire_time(e.at) or "",
                logged_at=wire_time(e.logged_at),
                level=e.level,
                message=e.message,
            )
            for e in found.entries
        ],
        next_after=found.entries[-1].id if found.entries else (after or None),
        truncated=found.truncated,
    )


def task_page(page: finding.Page, order: Order) -> TaskPage:
    return TaskPage(
        items=[
            TaskSummary(
                task_id=t.id,
                execution_id=t.execution_id,
                reference_name=t.ref,
                task_type=t.name,
                type=t.type,
                status=t.status,
                attempt=t.attempt,
                worker_id=t.worker_id,
                scheduled_at=wire_time(t.created_at) or "",
                started_at=wire_time(t.leased_at),
                ended_at=wire_time(t.ended_at),
                reason=t.reason,
                workflow_name=t.workflow_name,
                input=t.input or {},
                completed_by=t.completed_by,
                priority=t.priority,
            )
            for t in page.rows
        ],
        next_cursor=finding.encode_cursor(page.next, order) if page.next is not None else None,
    )
