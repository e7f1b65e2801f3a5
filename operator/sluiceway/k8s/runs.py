"""How a run looks in a WorkflowRun's status."""

from __future__ import annotations

import datetime
import json
from typing import Any

from sluiceway.k8s.conditions import not_ready, not_stalled, ready, stalled
from sluiceway.model.common import Condition, ConditionStatus, kube_time
from sluiceway.model.execution import RunStatus
from sluiceway.model.workflowrun import RunPhase, TaskCounts, WorkflowRunStatus

# Custom resources live in etcd, which is not a store for payloads: a large
# output is summarized and left to the API (Argo's 1 MB lesson).
MAX_OUTPUT_BYTES = 16 * 1024

PHASES = {
    RunStatus.RUNNING: RunPhase.RUNNING,
    RunStatus.PAUSED: RunPhase.PAUSED,
    RunStatus.COMPLETED: RunPhase.COMPLETED,
    RunStatus.FAILED: RunPhase.FAILED,
    RunStatus.TIMED_OUT: RunPhase.TIMED_OUT,
    RunStatus.TERMINATED: RunPhase.TERMINATED,
}


_ENDED_BADLY = (RunPhase.FAILED, RunPhase.TIMED_OUT, RunPhase.TERMINATED, RunPhase.REFUSED)


def phase_conditions(phase: RunPhase, message: str, since: str | None) -> list[dict[str, Any]]:
    """Ready, Reconciling and Stalled for a run's phase, as kstatus (Flux,
    cli-utils) and Argo CD read them: a run not yet ended is Reconciling
    (InProgress), a completed one Ready (Current), one that failed, timed out,
    was terminated or refused Stalled (Failed). `since` is when the run entered
    the phase (its start, or its end), the conditions' transition time."""
    text = message or f"the run is {phase.value}"
    if phase is RunPhase.COMPLETED:
        conditions = [ready("Completed", text, None), not_stalled("Completed", text, None)]
        reconciling = False
    elif phase in _ENDED_BADLY:
        conditions = [not_ready(phase.value, text, None), stalled(phase.value, text, None)]
        reconciling = False
    else:
        conditions = [not_ready(phase.value, text, None)]
        reconciling = True
    conditions.append(
        Condition(
            type="Reconciling",
            status=ConditionStatus.TRUE if reconciling else ConditionStatus.FALSE,
            reason=phase.value,
            message=text,
        )
    )
    stamped = [c.model_copy(update={"last_transition_time": since}).to_wire() for c in conditions]
    return sorted(stamped, key=lambda c: str(c.get("type")))


def bounded_output(output: dict[str, Any], execution_id: str) -> dict[str, Any]:
    size = len(json.dumps(output, separators=(",", ":")))
    if size <= MAX_OUTPUT_BYTES:
        return output
    return {
        "truncated": True,
        "bytes": size,
        "message": f"output too large for a status; read it with GET .../executions/{execution_id}",
    }


def counts(by_status: dict[str, int]) -> TaskCounts:
    total = sum(by_status.values())
    return TaskCounts(
        scheduled=by_status.get("SCHEDULED", 0),
        in_progress=by_status.get("IN_PROGRESS", 0),
        completed=by_status.get("COMPLETED", 0)
        + by_status.get("COMPLETED_WITH_ERRORS", 0)
        + by_status.get("SKIPPED", 0),
        failed=by_status.get("FAILED", 0)
        + by_status.get("FAILED_WITH_TERMINAL_ERROR", 0)
        + by_status.get("TIMED_OUT", 0),
        total=total,
    )


def run_status(
    *,
    execution_id: str,
    status: RunStatus,
    reason: str,
    awaiting_admission: bool,
    version: int,
    output: dict[str, Any],
    created_at: datetime.datetime,
    ended_at: datetime.datetime | None,
    task_counts: dict[str, int],
    quarantined_at: datetime.datetime | None = None,
    quarantine_reason: str | None = None,
    paused_at: datetime.datetime | None = None,
    sla_breached_at: datetime.datetime | None = None,
    iterations: dict[str, int] | None = None,
    mirror_seq: int | None = None,
) -> dict[str, Any]:
    """The status patch; explicit nulls clear fields that no longer apply."""
    quarantined = quarantined_at is not None and not status.is_terminal()
    paused = paused_at is not None and not status.is_terminal()
    control = "quarantine" if quarantined else "paused" if paused else "rateLimitConfig" if awaiting_admission else None
    body = WorkflowRunStatus(
        phase=PHASES[status],
        execution_id=execution_id,
        workflow_version=version,
        awaiting_admission=awaiting_admission,
        reason_for_incompletion=(f"quarantined: {quarantine_reason}" if quarantined else reason) or None,
        control=control,
        quarantined_at=kube_time(quarantined_at) if quarantined else None,
        tasks=counts(task_counts),
        iterations=iterations or None,
        start_time=kube_time(created_at),
        end_time=kube_time(ended_at),
        output=bounded_output(output, execution_id) if status.is_terminal() else None,
        paused_at=kube_time(paused_at) if paused else None,
        sla_breached_at=kube_time(sla_breached_at),
        mirror_seq=mirror_seq,
    ).model_dump(mode="json", by_alias=True)
    for written_elsewhere in ("observedGeneration", "refusal", "retry"):
        body.pop(written_elsewhere, None)
    phase = PHASES[status]
    body["conditions"] = phase_conditions(
        phase, body.get("reasonForIncompletion") or "", kube_time(ended_at if phase.is_terminal() else created_at)
    )
    return body
