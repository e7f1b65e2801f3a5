"""Workflows (versioned definitions) and WorkflowRuns (the kubectl front door
to one run): store a Workflow and report its version; start a run for a
WorkflowRun, once; pause, resume and retry it when its spec asks; delete it
once its ttlSecondsAfterFinished has passed; end what their deletion ends.

What a WorkflowRun does to its run goes through the execution plane's
commands, as the REST API's calls do: limited and audited the same way. The
actor is the WorkflowRun's spec, naming the field manager that last changed
it (kubectl, Argo CD, Flux ...)."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import kopf

from sluiceway.controls.advice import Kind
from sluiceway.controls.payloads import Oversized
from sluiceway.engine.graph import problems
from sluiceway.k8s.reconciling import (
    Context,
    Handler,
    Lifecycle,
    context_of,
    every,
    parse,
    register_lifecycles,
    report_advice,
    report_claim,
    retrying_outages,
    set_ready,
)
from sluiceway.k8s.runs import phase_conditions
from sluiceway.kubeapi.client import KubeError
from sluiceway.model import GROUP, VERSION
from sluiceway.model.common import identity_of
from sluiceway.model.resources import WORKFLOW, WORKFLOW_RUN
from sluiceway.model.workflow import ActiveRunsPolicy, WorkflowSpec
from sluiceway.model.workflowrun import RetryOutcome, RetryStatus, RunPhase, WorkflowRunSpec
from sluiceway.plane import outcomes, runs, starts
from sluiceway.plane.audit import Actor, operator_actor
from sluiceway.store import retention, workflows

log = logging.getLogger(__name__)

_MAX_PROBLEMS = 20  # a condition message is for people; the first twenty say enough
# How often a WorkflowRun applied before its Workflow looks for it again.
WAITING_RECHECK_SECONDS = 5.0
PAUSED_BY_SPEC = "WorkflowRun spec.paused"


def spec_manager(meta: Any) -> str | None:
    """The field manager that last changed the object's spec (`kubectl`,
    `argocd-controller`, `kustomize-controller` ...), from its managedFields."""
    changes = [
        entry
        for entry in meta.get("managedFields") or []
        if isinstance(entry, dict) and "f:spec" in (entry.get("fieldsV1") or {})
    ]
    latest = max(changes, key=lambda entry: str(entry.get("time") or ""), default=None)
    return str(latest["manager"]) if latest is not None and latest.get("manager") else None


def spec_actor(name: str, meta: Any) -> Actor:
    """Who acts on a run through a WorkflowRun's spec: that spec, and who last applied it."""
    manager = spec_manager(meta)
    applied = f", applied by {manager}" if manager else ""
    return Actor(f"WorkflowRun {name} spec{applied}", "workflowrun")


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
        report_advice(patch, body, context, Kind.WORKFLOW, parsed)

    await retrying_outages(store())


async def delete_workflow(
    spec: kopf.Spec, namespace: str, name: str, memo: kopf.Memo, logger: kopf.Logger, **_: Any
) -> None:
    context = context_of(memo)
    engine_name = spec.get("name") or name
    policy = ActiveRunsPolicy(spec.get("activeRunsPolicy", ActiveRunsPolicy.FINISH.value))

    async def remove() -> None:
        async with context.pool.acquire() as conn:
            await workflows.delete_workflow(conn, namespace, name)
        if policy is ActiveRunsPolicy.TERMINATE:
            reason = f"Workflow {name} was deleted (activeRunsPolicy Terminate)"
            actor = operator_actor(f"Workflow {name} deleted")
            stopped = await runs.terminate_workflow_runs(context.plane, actor, namespace, engine_name, reason)
            logger.info(f"terminating {len(stopped)} active runs of {engine_name}")

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
        item = starts.StartItem(
            name=parsed.workflow,
            version=parsed.version,
            input=parsed.input,
            correlation_id=parsed.correlation_id,
            search_attributes=parsed.search_attributes,
            sla_seconds=parsed.sla_seconds,
            task_overrides=parsed.task_overrides or {},
            # A restored WorkflowRun adopts the run it had (docs/backup.md), never starts a second.
            run_id=identity_of(meta, uid),
            resource_name=name,
            labels=dict(meta.get("labels") or {}),
            retention_seconds=parsed.ttl_seconds_after_finished,
            priority=parsed.priority,
        )
        paused = PAUSED_BY_SPEC if parsed.paused else None
        outcome = await starts.start(context.plane, spec_actor(name, meta), namespace, item, paused=paused)
        patch.status["observedGeneration"] = int(meta.get("generation", 1))
        if parsed.retry is not None:  # present at creation: a baseline, not a request
            patch.status["retry"] = _retry_status(
                parsed.retry.generation, "Baseline", "set when the run started", context
            )
        _report_start(outcome, patch, context, namespace, name, uid)

    await retrying_outages(start())


def _report_start(
    outcome: starts.StartOutcome | Oversized, patch: kopf.Patch, context: Context, namespace: str, name: str, uid: str
) -> None:
    """What became of a WorkflowRun's start, on its status (and as an Event when refused)."""
    if isinstance(outcome, outcomes.WorkflowNotFound):
        # An expected wait (a Workflow applied with it, or soon after): said on the
        # WorkflowRun and looked for again every WAITING_RECHECK_SECONDS, not an error.
        if patch.status.get("phase") != RunPhase.PENDING.value:
            log.info("workflowrun %s/%s waits: %s", namespace, name, outcome.message)
        patch.status["phase"] = RunPhase.PENDING.value
        patch.status["reasonForIncompletion"] = f"waiting: {outcome.message}"
        patch.status["conditions"] = phase_conditions(RunPhase.PENDING, f"waiting: {outcome.message}", context.now())
        return
    if isinstance(outcome, outcomes.InvalidStart | outcomes.RequestReused):
        patch.status.update({"phase": RunPhase.FAILED.value, "reasonForIncompletion": outcome.message})
        patch.status["conditions"] = phase_conditions(RunPhase.FAILED, outcome.message, context.now())
        if context.events is not None:
            context.events.record("WorkflowRun", namespace, name, uid, True, "InvalidSpec", outcome.message)
        return
    if isinstance(outcome, outcomes.InvalidOverrides):
        patch.status["phase"] = RunPhase.FAILED.value
        patch.status["reasonForIncompletion"] = f"spec.{outcome.field}: {outcome.message}"
        patch.status["conditions"] = phase_conditions(
            RunPhase.FAILED, patch.status["reasonForIncompletion"], context.now()
        )
        return
    if isinstance(outcome, outcomes.QuotaExceeded | outcomes.LimitExceeded | Oversized):
        details = outcome.details()
        control = str(details.pop("control")) if isinstance(outcome, Oversized) else outcome.control
        code = "PAYLOAD_TOO_LARGE" if isinstance(outcome, Oversized) else outcome.code
        patch.status.update(
            {
                "phase": RunPhase.REFUSED.value,
                "control": control,
                "reasonForIncompletion": outcome.message,
                "refusal": {"error": code, **details},
                "conditions": phase_conditions(RunPhase.REFUSED, outcome.message, context.now()),
            }
        )
        if context.events is not None:
            context.events.record("WorkflowRun", namespace, name, uid, True, "Refused", outcome.message)
        return
    # The run's state (phase, times, admission) is the status mirror's to
    # write: a run can end before this patch lands, and a phase written
    # here would then overwrite the mirror's Completed with Running. So would
    # conditions: until the mirror's first pass (about a second) the object has
    # none, and kstatus reads it as Current (docs/gitops.md says so).
    patch.status.update({"executionId": outcome.id, "reasonForIncompletion": None})


def awaiting_workflow(status: kopf.Status, **_: Any) -> bool:
    """A WorkflowRun applied before its Workflow, not started yet."""
    return not status.get("executionId") and status.get("phase") == RunPhase.PENDING.value


async def start_waiting_workflow_run(**kwargs: Any) -> None:
    """Look again for the Workflow of a WorkflowRun that waits for it (a timer: kopf names handlers by function)."""
    await start_workflow_run(**kwargs)


async def delete_workflow_run(
    namespace: str, name: str, uid: str, status: kopf.Status, memo: kopf.Memo, **_: Any
) -> None:
    """Deleting a WorkflowRun ends its run: its permits and slots must not leak."""
    context = context_of(memo)
    execution_id = status.get("executionId") or uid

    async def stop() -> None:
        actor = operator_actor(f"WorkflowRun {name} deleted")
        await runs.terminate(context.plane, actor, namespace, str(execution_id), f"WorkflowRun {name} was deleted")

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
        actor = spec_actor(name, body.get("metadata") or {})
        if bool(was.get("paused", False)) != parsed.paused:
            if parsed.paused:
                done = await runs.pause(context.plane, actor, namespace, execution_id, PAUSED_BY_SPEC)
            else:
                done = await runs.resume(context.plane, actor, namespace, execution_id)
            if not isinstance(done, runs.Done) and context.events is not None:
                reason = "NotPaused" if parsed.paused else "NotResumed"
                context.events.record("WorkflowRun", namespace, name, uid, True, reason, done.message)
        if parsed.retry is not None and parsed.retry.generation > acted:
            retry = parsed.retry
            if retry.from_task is not None:
                outcome = await runs.rerun(context.plane, actor, namespace, execution_id, retry.from_task, retry.input)
            else:
                outcome = await runs.retry(context.plane, actor, namespace, execution_id)
            verdict = RetryOutcome.RETRIED if isinstance(outcome, runs.Done) else RetryOutcome.REFUSED
            result = _retry_status(retry.generation, verdict.value, outcome.message, context)
            patch.status["retry"] = result
            if context.events is not None:
                context.events.record(
                    "WorkflowRun",
                    namespace,
                    name,
                    uid,
                    verdict is not RetryOutcome.RETRIED,
                    "Retry" + result["outcome"],
                    f"spec.retry generation {retry.generation}: {result['message']}",
                )

    await retrying_outages(operate())
    # The change to the spec is acted on: without this, kstatus would read the
    # WorkflowRun as InProgress ("generation is 2, observed 1") forever.
    patch.status["observedGeneration"] = int(body.get("metadata", {}).get("generation", 1))


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
    every(
        registry,
        WORKFLOW_RUN,
        start_waiting_workflow_run,
        interval=WAITING_RECHECK_SECONDS,
        initial_delay=WAITING_RECHECK_SECONDS,
        when=awaiting_workflow,
    )
    every(registry, WORKFLOW_RUN, expire, interval=ttl_interval, initial_delay=ttl_interval, when=_finished_with_ttl)
