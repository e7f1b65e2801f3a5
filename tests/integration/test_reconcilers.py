"""The kopf handlers below e2e: each is called directly, as kopf calls it,
with a body and a `kopf.Patch`, against a real PostgreSQL; the tests assert
on the patch (what the operator would write to `status`) and on the rows."""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any

import asyncpg
import kopf
import pytest

from sluiceway.k8s import definitions, status_reports, workflows
from sluiceway.k8s import schedules as schedule_handlers
from sluiceway.k8s.events import EventRecorder
from sluiceway.k8s.reconciling import Context
from sluiceway.model.resources import (
    QUOTA,
    SCHEDULE,
    SEMAPHORE,
    TASK_DEFINITION,
    TRIGGER,
    WORKFLOW,
    WORKFLOW_RUN,
    ResourceKind,
)
from sluiceway.plane import Plane
from sluiceway.store import definitions as stored
from sluiceway.store import diagnostics, executions, runs, triggers

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
NAMESPACE = "team-a"


def handler_kwargs(
    kind: ResourceKind, name: str, spec: dict[str, Any], pool: asyncpg.Pool, *, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    """kopf's keyword arguments for one object, with a fresh patch."""
    body = kopf.Body(
        {
            "apiVersion": "sluiceway.dev/v1beta1",
            "kind": kind.kind,
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": str(uuid.uuid4()), "generation": 1},
            "spec": spec,
            "status": status or {},
        }
    )
    return {
        "body": body,
        "spec": body.spec,
        "meta": body.meta,
        "status": body.status,
        "name": name,
        "namespace": NAMESPACE,
        "uid": body.meta.uid,
        "patch": kopf.Patch(),
        "memo": kopf.Memo(context=Context(plane=Plane(pool), clock=lambda: NOW)),
        "logger": logging.getLogger("test"),
    }


def ready(patch: kopf.Patch) -> dict[str, Any]:
    conditions = patch.status["conditions"]
    found: dict[str, Any] = next(c for c in conditions if c["type"] == "Ready")
    return found


async def test_a_task_definition_is_stored_and_reported_ready(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(TASK_DEFINITION, "charge-card", {"name": "charge_card", "retryCount": 5}, pool)
    await definitions.reconcile_task_definition(**kwargs)
    patch = kwargs["patch"]
    assert patch.status["taskType"] == "charge_card" and patch.status["observedGeneration"] == 1
    assert ready(patch) | {"lastTransitionTime": None} == {
        "type": "Ready",
        "status": "True",
        "reason": "Stored",
        "message": "task type charge_card is active",
        "observedGeneration": 1,
        "lastTransitionTime": None,
    }
    async with pool.acquire() as conn:
        row = await stored.get_task_definition(conn, NAMESPACE, "charge_card")
    assert row is not None and row.resource_name == "charge-card" and row.spec["retryCount"] == 5


async def test_a_second_object_for_a_taken_name_is_a_name_conflict_and_changes_nothing(pool: asyncpg.Pool) -> None:
    await definitions.reconcile_task_definition(
        **handler_kwargs(TASK_DEFINITION, "charge-card", {"name": "charge_card", "retryCount": 5}, pool)
    )
    impostor = handler_kwargs(TASK_DEFINITION, "impostor", {"name": "charge_card", "retryCount": 0}, pool)
    await definitions.reconcile_task_definition(**impostor)
    condition = ready(impostor["patch"])
    assert (condition["status"], condition["reason"]) == ("False", "NameConflict")
    assert condition["message"] == "task type charge_card is already defined by TaskDefinition charge-card"
    async with pool.acquire() as conn:
        row = await stored.get_task_definition(conn, NAMESPACE, "charge_card")
    assert row is not None and row.resource_name == "charge-card" and row.spec["retryCount"] == 5


async def test_an_invalid_spec_is_refused_naming_the_field_and_nothing_is_stored(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(TASK_DEFINITION, "charge-card", {"retryCount": -1}, pool)
    await definitions.reconcile_task_definition(**kwargs)
    condition = ready(kwargs["patch"])
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert "retryCount" in condition["message"]
    assert "taskType" not in kwargs["patch"].status
    async with pool.acquire() as conn:
        assert await stored.list_task_definitions(conn, NAMESPACE) == []


async def test_deleting_a_task_definition_forgets_it(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(TASK_DEFINITION, "echo", {}, pool)
    await definitions.reconcile_task_definition(**kwargs)
    await definitions.delete_task_definition(**kwargs)
    async with pool.acquire() as conn:
        assert await stored.get_task_definition(conn, NAMESPACE, "echo") is None


async def test_a_quota_is_stored_and_its_usage_reported_only_when_it_changes(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(QUOTA, "default", {"maxConcurrentExecutions": 3, "maxExecutionsPerMinute": 60}, pool)
    await definitions.reconcile_quota(**kwargs)
    condition = ready(kwargs["patch"])
    assert (condition["status"], condition["reason"], condition["message"]) == ("True", "Stored", "quota is enforced")
    async with pool.acquire() as conn:
        rows = await diagnostics.quota_rows(conn, NAMESPACE)
    assert [(r.name, r.max_concurrent_executions, r.max_executions_per_minute) for r in rows] == [("default", 3, 60)]

    first = handler_kwargs(QUOTA, "default", {}, pool)
    await status_reports.report_quota(**first)
    used = first["patch"].status["used"]
    assert used["concurrentExecutions"] == 0 and used["workflowDefinitions"] == 0
    again = handler_kwargs(QUOTA, "default", {}, pool, status={"used": used})
    await status_reports.report_quota(**again)
    assert dict(again["patch"]) == {}, "an unchanged report writes nothing"


async def test_a_semaphore_is_stored_with_its_permits(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(SEMAPHORE, "db", {"permits": 4}, pool)
    await definitions.reconcile_semaphore(**kwargs)
    assert kwargs["patch"].status["semaphoreName"] == "db" and kwargs["patch"].status["permits"] == 4
    assert ready(kwargs["patch"])["message"] == "semaphore db has 4 permits"
    async with pool.acquire() as conn:
        found = await diagnostics.semaphores(conn, NAMESPACE, "db")
    assert [(s.name, s.permits, s.held) for s in found] == [("db", 4, 0)]


async def _store_workflow(pool: asyncpg.Pool) -> None:
    workflow = handler_kwargs(
        WORKFLOW, "export", {"tasks": [{"name": "nobody_polls", "taskReferenceName": "wait_here"}]}, pool
    )
    await workflows.reconcile_workflow(**workflow)
    assert workflow["patch"].status["version"] == 1 and ready(workflow["patch"])["status"] == "True"


async def test_a_workflow_run_starts_one_run_with_its_uid(pool: asyncpg.Pool) -> None:
    await _store_workflow(pool)
    kwargs = handler_kwargs(WORKFLOW_RUN, "export-1", {"workflow": "export", "input": {"day": "monday"}}, pool)
    await workflows.start_workflow_run(**kwargs)
    status = kwargs["patch"].status
    assert status["executionId"] == kwargs["uid"]
    assert "phase" not in status, "the run's state is the status mirror's: the run may have ended already"
    async with pool.acquire() as conn:
        run = await runs.get_run(conn, NAMESPACE, kwargs["uid"])
    assert run is not None and run.resource_name == "export-1" and run.input == {"day": "monday"}


async def test_a_workflow_run_starts_its_run_at_its_priority(pool: asyncpg.Pool) -> None:
    await _store_workflow(pool)
    kwargs = handler_kwargs(WORKFLOW_RUN, "export-urgent", {"workflow": "export", "priority": 1}, pool)
    await workflows.start_workflow_run(**kwargs)
    async with pool.acquire() as conn:
        run = await runs.get_run(conn, NAMESPACE, kwargs["uid"])
    assert run is not None and run.priority == 1


async def test_a_workflow_run_over_a_quota_is_refused_with_the_quotas_answer(pool: asyncpg.Pool) -> None:
    await definitions.reconcile_quota(**handler_kwargs(QUOTA, "default", {"maxConcurrentExecutions": 1}, pool))
    await _store_workflow(pool)
    first = handler_kwargs(WORKFLOW_RUN, "export-1", {"workflow": "export"}, pool)
    await workflows.start_workflow_run(**first)
    assert first["patch"].status["executionId"] == first["uid"]
    second = handler_kwargs(WORKFLOW_RUN, "export-2", {"workflow": "export"}, pool)
    await workflows.start_workflow_run(**second)
    status = second["patch"].status
    assert (status["phase"], status["control"]) == ("Refused", "quota:default")
    assert status["refusal"]["limit"] == 1 and status["refusal"]["current"] == 1
    async with pool.acquire() as conn:
        assert await runs.get_run(conn, NAMESPACE, second["uid"]) is None


async def test_a_workflow_run_of_an_unknown_workflow_waits_saying_so_and_starts_once_it_exists(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    """Applied before its Workflow (one `kubectl apply` of both): an expected
    wait, said on the WorkflowRun and logged at INFO, not an error kopf retries."""
    early = handler_kwargs(WORKFLOW_RUN, "early", {"workflow": "export"}, pool)
    with caplog.at_level(logging.INFO):
        await workflows.start_workflow_run(**early)
    status = early["patch"].status
    assert status["phase"] == "Pending" and "export" in status["reasonForIncompletion"]
    assert "executionId" not in status
    said = [r for r in caplog.records if "early" in r.getMessage()]
    assert said and {r.levelno for r in said} == {logging.INFO}, [r.getMessage() for r in caplog.records]
    assert workflows.awaiting_workflow(status=status), "its timer looks again"
    await _store_workflow(pool)
    again = handler_kwargs(WORKFLOW_RUN, "early", {"workflow": "export"}, pool, status=dict(status))
    again["uid"] = early["uid"]
    await workflows.start_waiting_workflow_run(**again)
    assert again["patch"].status["executionId"] == early["uid"]
    assert not workflows.awaiting_workflow(status={**status, **again["patch"].status})


async def test_a_workflow_with_a_broken_reference_is_an_invalid_spec_and_is_not_stored(pool: asyncpg.Pool) -> None:
    spec = {
        "tasks": [{"name": "charge", "taskReferenceName": "charge", "inputParameters": {"amount": "${nobody.output}"}}]
    }
    kwargs = handler_kwargs(WORKFLOW, "payments", spec, pool)
    await workflows.reconcile_workflow(**kwargs)
    condition = ready(kwargs["patch"])
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert "tasks[charge].inputParameters: refers to unknown task 'nobody'" in condition["message"]
    assert "version" not in kwargs["patch"].status
    async with pool.acquire() as conn:
        outcome = await executions.start_run(conn, NAMESPACE, "payments", None, {})
    assert isinstance(outcome, executions.WorkflowNotFound)


async def test_a_schedule_over_max_schedules_is_refused_naming_the_quota_and_the_count_is_reported(
    pool: asyncpg.Pool,
) -> None:
    await definitions.reconcile_quota(**handler_kwargs(QUOTA, "limits", {"maxSchedules": 1}, pool))
    first = handler_kwargs(SCHEDULE, "hourly", {"workflow": "report", "cron": ["@hourly"]}, pool)
    await schedule_handlers.reconcile_schedule(**first)
    assert ready(first["patch"])["status"] == "True" and ready(first["patch"])["reason"] == "Scheduled"
    second = handler_kwargs(SCHEDULE, "daily", {"workflow": "report", "cron": ["@daily"]}, pool)
    with pytest.raises(kopf.TemporaryError):  # tried again later: a slot frees when a Schedule goes
        await schedule_handlers.reconcile_schedule(**second)
    refused = ready(second["patch"])
    assert (refused["status"], refused["reason"], refused["message"]) == (
        "False",
        "QuotaExceeded",
        "quota limits: maxSchedules 1 reached (1 defined)",
    )
    assert second["patch"].status["refusal"] == {
        "error": "QUOTA_EXCEEDED",
        "quota": "limits",
        "field": "maxSchedules",
        "limit": 1,
        "current": 1,
        "retryAfterSeconds": 0,
    }
    async with pool.acquire() as conn:
        assert (await diagnostics.usage(conn, NAMESPACE)).schedules == 1
    report = handler_kwargs(QUOTA, "limits", {"maxSchedules": 1}, pool)
    await status_reports.report_quota(**report)
    assert report["patch"].status["used"]["schedules"] == 1


async def test_a_schedule_with_a_bad_expression_is_an_invalid_spec_naming_it_and_is_not_stored(
    pool: asyncpg.Pool,
) -> None:
    kwargs = handler_kwargs(SCHEDULE, "broken", {"workflow": "report", "cron": ["@hourly", "61 * * * *"]}, pool)
    await schedule_handlers.reconcile_schedule(**kwargs)
    assert ready(kwargs["patch"])["reason"] == "InvalidSpec"
    assert ready(kwargs["patch"])["message"] == "cron[1]: minute '61' is not in 0-59"
    async with pool.acquire() as conn:
        assert (await diagnostics.usage(conn, NAMESPACE)).schedules == 0


async def test_a_schedule_reports_its_next_five_fires_and_its_runs(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(SCHEDULE, "ticks", {"workflow": "report", "every": "1h"}, pool)
    await schedule_handlers.reconcile_schedule(**kwargs)
    report = handler_kwargs(SCHEDULE, "ticks", {"workflow": "report", "every": "1h"}, pool)
    await status_reports.report_schedule(**report)
    status = report["patch"].status
    upcoming = [datetime.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in status["nextFireTimes"]]
    gaps = {b - a for a, b in zip(upcoming, upcoming[1:], strict=False)}
    assert len(upcoming) == 5 and gaps == {datetime.timedelta(hours=1)}
    assert upcoming[0].minute == upcoming[0].second == 0
    assert (status["activeRuns"], status["suspended"], status["runsStarted"], status["recent"]) == (0, False, 0, [])


class RecordedEvents(EventRecorder):
    """The recorder the handlers are given, keeping what they ask it to post
    (posting to an API server is e2e's business, and rate limits are its own)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.posted: list[tuple[str, str, bool, str, str]] = []

    def record(self, kind: str, namespace: str, name: str, uid: str, warning: bool, reason: str, message: str) -> None:
        self.posted.append((kind, name, warning, reason, message))


def policy_warnings(patch: kopf.Patch) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in patch.status["conditions"] if c["type"] == "PolicyWarnings")
    return found


async def test_a_definitions_policy_findings_are_a_condition_and_one_event_when_they_change(
    pool: asyncpg.Pool,
) -> None:
    events = RecordedEvents()

    async def apply(spec: dict[str, Any], status: dict[str, Any] | None = None) -> kopf.Patch:
        kwargs = handler_kwargs(WORKFLOW, "orders", spec, pool, status=status)
        kwargs["memo"].context.events = events
        await workflows.reconcile_workflow(**kwargs)
        patch: kopf.Patch = kwargs["patch"]
        return patch

    tasks = [{"name": "take_payment", "taskReferenceName": "pay"}]
    flagged = await apply({"timeoutSeconds": 600, "slaSeconds": 600, "tasks": tasks})
    assert ready(flagged)["status"] == "True"  # a warning, not a refusal: the Workflow is stored
    condition = policy_warnings(flagged)
    assert (condition["status"], condition["reason"]) == ("True", "Findings")
    assert condition["message"].startswith("spec.slaSeconds: slaSeconds 600 is not below timeoutSeconds 600")
    assert "Harvest Reliability knobs, Soft SLA" in condition["message"]
    warnings = [e for e in events.posted if e[3] == "PolicyWarning"]
    assert warnings == [("Workflow", "orders", True, "PolicyWarning", condition["message"])]

    # A resync of the same spec, with the condition already written: no new Event.
    await apply({"timeoutSeconds": 600, "slaSeconds": 600, "tasks": tasks}, status=dict(flagged.status))
    assert [e for e in events.posted if e[3] == "PolicyWarning"] == warnings

    fixed = await apply({"timeoutSeconds": 600, "slaSeconds": 300, "tasks": tasks}, status=dict(flagged.status))
    assert (policy_warnings(fixed)["status"], policy_warnings(fixed)["reason"]) == ("False", "NoFindings")
    assert [e for e in events.posted if e[3] == "PolicyWarning"] == warnings


async def test_a_task_definition_alone_is_advised_without_guessing_its_namespaces_semaphores(
    pool: asyncpg.Pool,
) -> None:
    spec = {"name": "export_report", "semaphores": ["legacy_erp"], "retryKind": "indefinite"}
    kwargs = handler_kwargs(TASK_DEFINITION, "export-report", spec, pool)
    await definitions.reconcile_task_definition(**kwargs)
    message = policy_warnings(kwargs["patch"])["message"]
    assert "spec.scheduleToStartTimeout:" in message and "spec.timeBudgetSeconds:" in message
    assert "legacy_erp" not in message  # the Semaphore may well exist: `sluiceway lint` relates them


async def test_a_trigger_is_stored_under_its_event_and_forgotten_when_deleted(pool: asyncpg.Pool) -> None:
    kwargs = handler_kwargs(
        TRIGGER, "ship-paid", {"event": "order-paid", "workflow": "ship", "condition": "event.payload.paid"}, pool
    )
    await definitions.reconcile_trigger(**kwargs)
    assert (ready(kwargs["patch"])["status"], ready(kwargs["patch"])["reason"]) == ("True", "Listening")
    assert kwargs["patch"].status["event"] == "order-paid"
    async with pool.acquire() as conn:
        [found] = await triggers.of_event(conn, NAMESPACE, "order-paid")
        assert (found.name, found.uid) == ("ship-paid", kwargs["uid"])
        assert found.spec is not None and found.spec.condition == "event.payload.paid"
    await definitions.delete_trigger(**kwargs)
    async with pool.acquire() as conn:
        assert await triggers.of_event(conn, NAMESPACE, "order-paid") == []


@pytest.mark.parametrize("field", ["condition", "input", "eventId"])
async def test_a_trigger_whose_cel_does_not_compile_is_invalid_naming_the_field(pool: asyncpg.Pool, field: str) -> None:
    kwargs = handler_kwargs(TRIGGER, "broken", {"event": "e", "workflow": "w", field: "event.payload.("}, pool)
    await definitions.reconcile_trigger(**kwargs)
    condition = ready(kwargs["patch"])
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert field in condition["message"]
    async with pool.acquire() as conn:
        assert await triggers.of_event(conn, NAMESPACE, "e") == []
