"""Workflows (versioned definitions) and WorkflowRuns (the kubectl front door
to one run): store a Workflow and report its version; start a run for a
WorkflowRun, once; pause, resume and retry it when its spec asks; delete it
once its ttlSecondsAfterFinished has passed; end what their deletion ends."""

from __future__ import annotations

import datetime
from typing import Any

import kopf

from sluiceway.engine.graph import problems
from sluiceway.k8s.reconciling import (
    Context,
    Handler,
    Lifecycle,
    context_of,
    parse,
    register_lifecycles,
    report_claim,
    retrying_outages,
    set_ready,
)
from sluiceway.kubeapi.client import KubeError
from sluiceway.model import GROUP, VERSION
from sluiceway.model.execution import RunStatus
from sluiceway.model.resources import WORKFLOW, WORKFLOW_RUN
from sluiceway.model.workflow import ActiveRunsPolicy, WorkflowSpec
from sluiceway.model.workflowrun import RetryOutcome, RetryStatus, RunPhase, WorkflowRunSpec
from sluiceway.store import executions, operations, retention, workflows

_MAX_PROBLEMS = 20  # a condition message is for people; the first twenty say enough


async def reconcile_workflow(
    body: kopf.Body, meta: kopf.Meta, namespace: str, name: str, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    context = context_of(memo)
    parsed = parse(WorkflowSpec, body, patch, context)
    if parsed is None:
        return
    found = problems(parsed)
    if found:
        more = f"; and {len(found) - _MAX_PROBLEMS} more" if len(found) > _MAX_PROBLEMS else ""
        set_ready(patch, body, context, False, "InvalidSpec", "; ".join(found[:_MAX_PROBLEMS]) + more)
        return
    engine_name = parsed.name or name

    async def store() -> None:
        async with context.pool.acquire() as conn:
            try:
                claim, version = await workflows.upsert_workflow(
                    conn, namespace, engine_name, name, int(meta["generation"]), parsed.to_wire()
                )
            except workflows.DefinitionQuotaExceeded as refused:
                set_ready(patch, body, context, False, "QuotaExceeded", str(refused))
                return
        patch.status["workflowName"] = engine_name
        if claim.is_ours(name):
            patch.status["version"] = version
        report_claim(patch, body, context, claim, f"workflow {engine_name}", f"starts new runs on version {version}")

    await retrying_outages(store())


async def delete_workflow(
    spec: kopf.Spec, namespace: str, name: str, memo: kopf.Memo, logger: kopf.Logger, **_: Any
) -> None:
    context = context_of(memo)
    engine_name = spec.get("name") or name
    policy = ActiveRunsPolicy(spec.get("activeRunsPolicy", ActiveRunsPolicy.FINISH.value))

    async def remove() -> None:
        async with context.pool.acquire() as conn, conn.transaction():
            await workflows.delete_workflow(conn, namespace, name)
            if policy is ActiveRunsPolicy.TERMINATE:
                stopped = await executions.terminate_all(
                    conn, namespace, engine_name, f"Workflow {name} was deleted (activeRunsPolicy Terminate)"
                )
                logger.info(f"terminating {stopped} active runs of {engine_name}")

    await retrying_outages(remove())


async def start_workflow_run(
    body: kopf.Body,
    meta: kopf.Meta,
    status: kopf.Status,
    namespace: str,
    name: str,
    uid: str,
    patch: kopf.Patch,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    context = context_of(memo)
    if status.get("executionId") or status.get("phase") == RunPhase.REFUSED.value:
        return  # already started (or refused): a WorkflowRun starts one run, once
    parsed = parse(WorkflowRunSpec, body, patch, context)
    if parsed is None:
        patch.status["phase"] = RunPhase.FAILED.value
        return

    async def start() -> None:
        async with context.pool.acquire() as conn, conn.transaction():
            outcome = await executions.start_run(
                conn,
                namespace,
                parsed.workflow,
                parsed.version,
                parsed.input,
                correlation_id=parsed.correlation_id,
                run_id=uid,
                resource_name=name,
                search_attributes=parsed.search_attributes,
                labels=dict(meta.get("labels") or {}),
                sla_seconds=parsed.sla_seconds,
                retention_seconds=parsed.ttl_seconds_after_finished,
                task_overrides=parsed.task_overrides,
            )
            if isinstance(outcome, executions.Started) and parsed.paused:
                await operations.pause(conn, namespace, outcome.id, "WorkflowRun spec.paused")
        patch.status["observedGeneration"] = int(meta.get("generation", 1))
        if parsed.retry is not None:  # present at creation: a baseline, not a request
            patch.status["retry"] = _retry_status(
                parsed.retry.generation, "Baseline", "set when the run started", context
            )
        if isinstance(outcome, executions.WorkflowNotFound):
            patch.status["phase"] = RunPhase.PENDING.value
            patch.status["reasonForIncompletion"] = f"waiting: {outcome.message}"
            raise kopf.TemporaryError(outcome.message, delay=10)
        if isinstance(outcome, executions.InvalidStart | executions.RequestReused):
            patch.status.update({"phase": RunPhase.FAILED.value, "reasonForIncompletion": outcome.message})
            if context.events is not None:
                context.events.record("WorkflowRun", namespace, name, uid, True, "InvalidSpec", outcome.message)
            return
        if isinstance(outcome, executions.InvalidOverrides):
            patch.status["phase"] = RunPhase.FAILED.value
            patch.status["reasonForIncompletion"] = f"spec.{outcome.field}: {outcome.message}"
            return
        if isinstance(outcome, executions.Refused):
            patch.status.update(
                {
                    "phase": RunPhase.REFUSED.value,
                    "control": outcome.control,
                    "reasonForIncompletion": outcome.message,
                    "refusal": {"error": outcome.code, **outcome.details()},
                }
            )
            if context.events is not None:
                context.events.record("WorkflowRun", namespace, name, uid, True, "Refused", outcome.message)
            return
        # The run's state (phase, times, admission) is the status mirror's to
        # write: a run can end before this patch lands, and a phase written
        # here would then overwrite the mirror's Completed with Running.
        patch.status.update({"executionId": outcome.id, "reasonForIncompletion": None})

    await retrying_outages(start())


async def delete_workflow_run(
    namespace: str, name: str, uid: str, status: kopf.Status, memo: kopf.Memo, **_: Any
) -> None:
    """Deleting a WorkflowRun ends its run: its permits and slots must not leak."""
    context = context_of(memo)
    execution_id = status.get("executionId") or uid

    async def stop() -> None:
        async with context.pool.acquire() as conn, conn.transaction():
            run = await executions.get_run(conn, namespace, execution_id)
            if run is not None and run.status is RunStatus.RUNNING:
                await executions.request_termination(conn, namespace, run.id, f"WorkflowRun {name} was deleted")

    await retrying_outages(stop())


def _retry_status(generation: int, outcome: str, message: str, context: Context) -> dict[str, Any]:
    return RetryStatus(generation=generation, outcome=outcome, message=message, time=context.now()).to_wire()


async def operate_workflow_run(
    body: kopf.Body,
    status: kopf.Status,
    namespace: str,
    name: str,
    uid: str,
    patch: kopf.Patch,
    memo: kopf.Memo,
    old: Any,
    **_: Any,
) -> None:
    """The declarative operations, acted on when the spec changes them:
    `paused` pauses or resumes the run; a new `retry.generation` retries it
    from the failure (or reruns it from `retry.fromTask`), once, with the
    outcome in `status.retry`. Pausing and resuming by API or CLI are left
    alone until the spec changes `paused` again."""
    context = context_of(memo)
    execution_id = status.get("executionId")
    if not execution_id:
        return  # not started yet: the start reads the spec
    parsed = parse(WorkflowRunSpec, body, patch, context)
    if parsed is None:
        return
    was = (old or {}) if isinstance(old, dict) else {}
    acted = int((status.get("retry") or {}).get("generation") or 0)

    async def operate() -> None:
        async with context.pool.acquire() as conn, conn.transaction():
            if bool(was.get("paused", False)) != parsed.paused:
                if parsed.paused:
                    done = await operations.pause(conn, namespace, execution_id, "WorkflowRun spec.paused")
                else:
                    done = await operations.resume(conn, namespace, execution_id)
                if not isinstance(done, operations.Done) and context.events is not None:
                    reason = "NotPaused" if parsed.paused else "NotResumed"
                    context.events.record("WorkflowRun", namespace, name, uid, True, reason, done.message)
            if parsed.retry is not None and parsed.retry.generation > acted:
                retry = parsed.retry
                if retry.from_task is not None:
                    outcome = await operations.rerun(conn, namespace, execution_id, retry.from_task, retry.input)
                else:
                    outcome = await operations.retry(conn, namespace, execution_id)
                if isinstance(outcome, operations.Done):
                    result = _retry_status(retry.generation, RetryOutcome.RETRIED.value, outcome.message, context)
                else:
                    result = _retry_status(retry.generation, RetryOutcome.REFUSED.value, outcome.message, context)
                patch.status["retry"] = result
                if context.events is not None:
                    context.events.record(
                        "WorkflowRun",
                        namespace,
                        name,
                        uid,
                        result["outcome"] != RetryOutcome.RETRIED.value,
                        "Retry" + result["outcome"],
                        f"spec.retry generation {retry.generation}: {result['message']}",
                    )

    await retrying_outages(operate())


def ttl_due(spec: kopf.Spec, status: kopf.Status, now: datetime.datetime) -> bool:
    """Has a WorkflowRun's ttlSecondsAfterFinished passed since its run ended?"""
    ttl = spec.get("ttlSecondsAfterFinished")
    ended = status.get("endTime")
    if ttl is None or not ended or not RunPhase(status.get("phase", "Pending")).is_terminal():
        return False
    ended_at = datetime.datetime.fromisoformat(str(ended).replace("Z", "+00:00"))
    return now >= ended_at + datetime.timedelta(seconds=int(ttl))


async def expire_workflow_run(
    spec: kopf.Spec, status: kopf.Status, namespace: str, name: str, memo: kopf.Memo, logger: kopf.Logger, **_: Any
) -> None:
    """Delete a finished WorkflowRun once its ttlSecondsAfterFinished has
    passed, and let the purger delete its run's history with it."""
    context = context_of(memo)
    if context.kube is None or not ttl_due(spec, status, context.clock()):
        return
    execution_id = status.get("executionId")

    async def expire() -> None:
        if execution_id:
            async with context.pool.acquire() as conn:
                await retention.expire_now(conn, namespace, str(execution_id))

    await retrying_outages(expire())
    try:
        if await context.kube.delete(WORKFLOW_RUN.plural, namespace, name):
            logger.info(f"ttlSecondsAfterFinished {spec.get('ttlSecondsAfterFinished')} passed: deleted")
    except KubeError as error:
        raise kopf.TemporaryError(f"cannot delete WorkflowRun {name}: {error.message}", delay=30) from error


def _finished_with_ttl(spec: kopf.Spec, status: kopf.Status, **_: Any) -> bool:
    phase = status.get("phase")
    return spec.get("ttlSecondsAfterFinished") is not None and phase is not None and RunPhase(phase).is_terminal()


LIFECYCLES = (
    Lifecycle(WORKFLOW, reconcile_workflow, delete_workflow),
    Lifecycle(WORKFLOW_RUN, start_workflow_run, delete_workflow_run, spec_changes=False),
)


def register_workflows(registry: kopf.OperatorRegistry, ttl_interval: float = 5.0) -> None:
    register_lifecycles(registry, LIFECYCLES)
    operate: Handler = operate_workflow_run
    expire: Handler = expire_workflow_run
    kopf.on.update(GROUP, VERSION, WORKFLOW_RUN.plural, field="spec", registry=registry)(operate)
    kopf.timer(
        GROUP,
        VERSION,
        WORKFLOW_RUN.plural,
        interval=ttl_interval,
        initial_delay=ttl_interval,
        when=_finished_with_ttl,
        registry=registry,
    )(expire)
