"""The models validate what the CRD validates, and the helpers around them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.k8s.conditions import not_ready, ready, with_condition
from sluiceway.k8s.validation import describe
from sluiceway.model.common import kube_name_for
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import WorkflowSpec
from sluiceway.runtime.settings import Settings, SettingsError


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"jitter": 1.5}, "spec.jitter"),
        ({"retryCount": 101}, "spec.retryCount"),
        ({"backoffScaleFactor": 0.5}, "spec.backoffScaleFactor"),
        ({"retryLogic": "RANDOM"}, "spec.retryLogic"),
        ({"semaphores": ["has space"]}, "spec.semaphores.0"),
        ({"pollTimeoutSeconds": 301}, "spec.pollTimeoutSeconds"),
    ],
)
def test_the_operator_refuses_what_the_schema_refuses(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as error:
        TaskDefinitionSpec.model_validate(spec)
    assert describe(error.value).startswith(f"{field}:")


def test_unset_policy_fields_stay_unset_so_defaults_can_be_layered() -> None:
    spec = TaskDefinitionSpec.model_validate({})
    assert spec.retry_count is None and spec.retry_logic is None and spec.start_to_close_timeout is None
    assert spec.response_timeout_seconds == 3600 and spec.poll_timeout_seconds == 30
    assert spec.to_wire() == {
        "description": "",
        "scheduleToStartTimeout": 0,
        "timeoutSeconds": 0,
        "heartbeatTimeout": 0,
        "scheduleToCloseTimeout": 0,
        "responseTimeoutSeconds": 3600,
        "pollTimeoutSeconds": 30,
        "timeoutPolicy": "TIME_OUT_WF",
        "concurrentExecLimit": 0,
        "rateLimitPerFrequency": 0,
        "rateLimitFrequencySeconds": 1,
        "semaphores": [],
    }


def test_workflow_task_references_must_be_unique_across_branches() -> None:
    task = {"name": "a", "taskReferenceName": "same"}
    with pytest.raises(ValidationError, match="used twice"):
        WorkflowSpec.model_validate(
            {
                "tasks": [
                    {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [[task], [task]]},
                ]
            }
        )


def test_retry_policy_written_in_a_workflow_task_is_dropped() -> None:
    spec = WorkflowSpec.model_validate(
        {
            "tasks": [
                {
                    "name": "charge",
                    "taskReferenceName": "charge",
                    "retryCount": 1,
                    "retryLogic": "FIXED",
                    "retryDelaySeconds": 9,
                },
            ]
        }
    )
    wire = spec.tasks[0].to_wire()
    assert wire["retryCount"] == 1
    assert "retryLogic" not in wire and "retryDelaySeconds" not in wire


def test_inline_refuses_javascript() -> None:
    with pytest.raises(ValidationError, match="not supported"):
        WorkflowSpec.model_validate(
            {
                "tasks": [
                    {
                        "name": "calc",
                        "taskReferenceName": "calc",
                        "type": "INLINE",
                        "inputParameters": {"evaluatorType": "javascript", "expression": "1+1"},
                    }
                ]
            }
        )


@pytest.mark.parametrize(
    ("engine", "kube"),
    [("legacy_erp", "legacy-erp"), ("ExportReport", "exportreport"), ("a.b_c", "a.b-c"), ("x__y", "x-y")],
)
def test_engine_names_map_to_kubernetes_names(engine: str, kube: str) -> None:
    assert kube_name_for(engine) == kube


def test_a_name_with_nothing_usable_is_refused() -> None:
    with pytest.raises(ValueError):
        kube_name_for("___")


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = with_condition(None, ready("Stored", "ok", 1), "2026-01-01T00:00:00Z")
    same = with_condition(first, ready("Stored", "still ok", 2), "2026-01-01T00:05:00Z")
    flipped = with_condition(same, not_ready("InvalidSpec", "bad", 3), "2026-01-01T00:09:00Z")
    assert same[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert same[0]["message"] == "still ok" and same[0]["observedGeneration"] == 2
    assert flipped[0]["lastTransitionTime"] == "2026-01-01T00:09:00Z"
    assert flipped[0]["status"] == "False"


def test_other_conditions_are_kept() -> None:
    existing = [{"type": "Progressing", "status": "True", "reason": "x"}]
    result = with_condition(existing, ready("Stored", "", 1), "t")
    assert [c["type"] for c in result] == ["Progressing", "Ready"]


def test_settings_name_the_missing_variable() -> None:
    with pytest.raises(SettingsError, match="SLUICEWAY_DATABASE_URL"):
        Settings.from_env({})
    settings = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_NAMESPACES": "a, b,"})
    assert settings.namespaces == ("a", "b")


def test_kubernetes_auth_without_kubernetes_is_refused() -> None:
    with pytest.raises(SettingsError, match="SLUICEWAY_KUBERNETES=false"):
        Settings.from_env(
            {
                "SLUICEWAY_DATABASE_URL": "postgresql://x",
                "SLUICEWAY_AUTH": "kubernetes",
                "SLUICEWAY_KUBERNETES": "false",
            }
        )


def test_timer_intervals_are_settings_and_a_bad_one_names_its_variable() -> None:
    defaults = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"})
    assert (defaults.status_interval, defaults.autoscaling_interval) == (5.0, 5.0)
    fast = Settings.from_env(
        {
            "SLUICEWAY_DATABASE_URL": "postgresql://x",
            "SLUICEWAY_STATUS_INTERVAL": "0.5",
            "SLUICEWAY_AUTOSCALING_INTERVAL": "1",
        }
    )
    assert (fast.status_interval, fast.autoscaling_interval) == (0.5, 1.0)
    for variable in ("SLUICEWAY_STATUS_INTERVAL", "SLUICEWAY_AUTOSCALING_INTERVAL"):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", variable: "0"})


def test_retention_and_windows_are_durations_and_a_bad_one_names_its_variable() -> None:
    defaults = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"})
    assert (defaults.retention, defaults.idempotency_window) == (30 * 86400, 86400)
    set_ = Settings.from_env(
        {"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_RETENTION": "14d", "SLUICEWAY_IDEMPOTENCY_WINDOW": "2h"}
    )
    assert (set_.retention, set_.idempotency_window) == (14 * 86400, 7200)
    assert Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_RETENTION": "0"}).retention == 0
    for variable, value in (
        ("SLUICEWAY_RETENTION", "forever"),
        ("SLUICEWAY_TASK_LOG_BYTES", "12"),
        ("SLUICEWAY_PURGE_BATCH", "0"),
    ):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", variable: value})


def test_the_purge_share_is_a_fraction_of_time() -> None:
    assert Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x"}).purge_share == 0.25
    with pytest.raises(SettingsError, match="SLUICEWAY_PURGE_SHARE"):
        Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_PURGE_SHARE": "1.5"})
