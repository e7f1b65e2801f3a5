"""The status mirror: writes the state of runs started by a WorkflowRun into
that object's status, coalesced. Runs change many times a second; their
WorkflowRun is written at most once per pass, and never per task."""

from __future__ import annotations

import asyncio
import logging

from sluiceway.k8s.events import EventRecorder
from sluiceway.k8s.runs import run_status
from sluiceway.kubeapi.client import KubeClient, KubeError
from sluiceway.model.common import kube_time
from sluiceway.model.execution import RunStatus
from sluiceway.model.resources import WORKFLOW_RUN
from sluiceway.model.workflowrun import STALE_MIRROR
from sluiceway.observability.logs import about
from sluiceway.store import mirroring
from sluiceway.store.database import Pool
from sluiceway.store.errors import StoreError
from sluiceway.store.runs import shown_status

log = logging.getLogger(__name__)


_ENDINGS = {
    RunStatus.COMPLETED: (False, "Completed"),
    RunStatus.FAILED: (True, "Failed"),
    RunStatus.TIMED_OUT: (True, "TimedOut"),
    RunStatus.TERMINATED: (True, "Terminated"),
}


async def mirror_once(pool: Pool, kube: KubeClient, batch: int = 100, recorder: EventRecorder | None = None) -> int:
    async with pool.acquire() as conn:
        pending = await mirroring.pending(conn, batch)
    written: list[tuple[str, int, bool]] = []
    dead: list[mirroring.DeadLetter] = []
    for run in pending:
        status = run_status(
            execution_id=run.id,
            status=shown_status(run.status, run.paused_at),
            reason=run.reason,
            awaiting_admission=run.awaiting_admission,
            version=run.workflow_version,
            output=run.output,
            created_at=run.created_at,
            ended_at=run.ended_at,
            task_counts=run.counts,
            quarantined_at=run.quarantined_at,
            quarantine_reason=run.quarantine_reason,
            paused_at=run.paused_at,
            sla_breached_at=run.sla_breached_at,
            iterations=run.iterations,
            mirror_seq=run.mirror_seq,
        )
        try:
            await kube.patch_status(WORKFLOW_RUN.plural, run.namespace, run.resource_name, status)
        except KubeError as error:
            if error.status == 422 and STALE_MIRROR in error.message:
                # A newer status is already there (written by the replica that
                # leads now): ours is history. It reports its own events.
                log.info(
                    "WorkflowRun %s/%s already shows a newer status",
                    run.namespace,
                    run.resource_name,
                    extra=about(namespace=run.namespace, run_id=run.id),
                )
                written.append((run.id, run.mirror_seq, False))
                continue
            if error.status in (400, 422):
                # The API server will never accept this write: give it up, loudly.
                log.error(
                    "dead-lettering the status of WorkflowRun %s/%s: %s",
                    run.namespace,
                    run.resource_name,
                    error.message,
                    extra=about(namespace=run.namespace, run_id=run.id),
                )
                dead.append(mirroring.DeadLetter(run.id, run.mirror_seq, run.namespace, run.resource_name))
            elif error.status != 404:  # a deleted WorkflowRun needs no status; anything else is retried
                log.warning(
                    "cannot mirror run %s into WorkflowRun %s/%s: %s",
                    run.id,
                    run.namespace,
                    run.resource_name,
                    error.message,
                )
                continue
        written.append((run.id, run.mirror_seq, run.sla_to_report))
        if recorder is not None and run.sla_to_report:
            recorder.record(
                "WorkflowRun",
                run.namespace,
                run.resource_name,
                run.id,
                True,
                "SlaBreached",
                f"run {run.id} passed its SLA at {kube_time(run.sla_breached_at)}; it runs on",
            )
        ending = _ENDINGS.get(RunStatus(run.status))
        if recorder is not None and run.quarantined_at is not None and ending is None:
            recorder.record(
                "WorkflowRun",
                run.namespace,
                run.resource_name,
                run.id,
                True,
                "Quarantined",
                f"run {run.id} is quarantined: {run.quarantine_reason}",
            )
        if recorder is not None and ending is not None:
            warning, reason = ending
            recorder.record(
                "WorkflowRun",
                run.namespace,
                run.resource_name,
                run.id,
                warning,
                reason,
                run.reason or f"run {run.id} completed",
            )
    async with pool.acquire() as conn:
        await mirroring.mark_mirrored(conn, written, dead)
    return len(pending)


async def run_mirror(
    pool: Pool,
    kube: KubeClient,
    stop: asyncio.Event,
    recorder: EventRecorder | None = None,
    interval: float = 1.0,
) -> None:
    """Mirror until `stop`; a full batch means more is waiting, so go again at once."""
    while not stop.is_set():
        try:
            busy = await mirror_once(pool, kube, recorder=recorder) >= 100
        except (OSError, StoreError) as error:
            log.warning("status mirror pass failed: %s", error)
            busy = False
        if not busy:
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass
