"""The models validate what the CRD validates, and the helpers around them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.k8s.validation import describe
from sluiceway.model.common import kube_name_for
from sluiceway.model.taskdefinition import TaskDefinitionSpec
from sluiceway.model.workflow import RateLimitConfig, WorkflowSpec


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


def test_an_admission_limit_is_read_through_the_model_even_from_a_spec_that_no_longer_parses() -> None:
    assert RateLimitConfig.limit_in({"rateLimitKey": "${workflow.input.tenant}", "concurrentExecLimit": 3}) == 3
    assert RateLimitConfig.limit_in(None) is None
    for broken in ({"concurrentExecLimit": 3}, {"rateLimitKey": "k", "concurrentExecLimit": 0}, "3", []):
        assert RateLimitConfig.limit_in(broken) is None, broken
