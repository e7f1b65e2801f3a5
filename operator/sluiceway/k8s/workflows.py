"""Workflows (versioned definitions) and WorkflowRuns (the kubectl front door
to one run): store a Workflow and report its version; start a run for a
WorkflowRun, once; end what their deletion ends."""

from __future__ import annotations

from typing import Any

import kopf

from sluiceway.engine.graph import problems
from sluiceway.k8s.reconciling import (
    Lifecycle,
    context_of,
    parse,
    register_lifecycles,
    report_claim,
    retrying_outages,
    set_ready,
)
from sluiceway.k8s.runs import timestamp
from sluiceway.model.execution import RunStatus
from sluiceway.model.resources import WORKFLOW, WORKFLOW_RUN
from sluiceway.model.workflow import ActiveRunsPolicy, WorkflowSpec
from sluiceway.model.workflowrun import RunPhase, WorkflowRunSpec
from sluiceway.store import executions, workflows

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
                task_overrides=parsed.task_overrides,
            )
        patch.status["observedGeneration"] = int(meta.get("generation", 1))
        if isinstance(outcome, executions.WorkflowNotFound):
            patch.status["phase"] = RunPhase.PENDING.value
            patch.status["reasonForIncompletion"] = f"waiting: {outcome.message}"
            raise kopf.TemporaryError(outcome.message, delay=10)
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
        patch.status.update(
            {
                "phase": RunPhase.RUNNING.value if not outcome.status.is_terminal() else outcome.status.value,
                "executionId": outcome.id,
                "awaitingAdmission": outcome.awaiting_admission,
                "control": "rateLimitConfig" if outcome.awaiting_admission else None,
                "startTime": timestamp(context.clock()),
                "reasonForIncompletion": None,
            }
        )

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


LIFECYCLES = (
    Lifecycle(WORKFLOW, reconcile_workflow, delete_workflow),
    Lifecycle(WORKFLOW_RUN, start_workflow_run, delete_workflow_run, spec_changes=False),
)


def register_workflows(registry: kopf.OperatorRegistry) -> None:
    register_lifecycles(registry, LIFECYCLES)
