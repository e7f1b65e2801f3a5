"""Checks made when a Workflow is applied: every reference and expression is
parsed, and each problem names the task and the field."""

from __future__ import annotations

from typing import Any

import pytest

from sluiceway.engine.graph import problems
from sluiceway.model.workflow import WorkflowSpec


def simple(ref: str, **extra: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def check(spec: dict[str, Any]) -> list[str]:
    return problems(WorkflowSpec.model_validate(spec))


def test_a_sound_workflow_has_no_problems() -> None:
    spec = {
        "tasks": [
            simple("fetch", inputParameters={"id": "${workflow.input.id}", "all": ["${workflow.input.items[0].x}"]}),
            {
                "name": "route",
                "taskReferenceName": "route",
                "type": "SWITCH",
                "evaluatorType": "cel",
                "expression": "input.total > 10",
                "inputParameters": {"total": "${fetch.output.total}"},
                "decisionCases": {"true": [simple("big")]},
            },
            {
                "name": "calc",
                "taskReferenceName": "calc",
                "type": "INLINE",
                "inputParameters": {"expression": "input.n * 2", "n": "${fetch.output.n}"},
            },
            {"name": "pause", "taskReferenceName": "pause", "type": "WAIT", "inputParameters": {"duration": "5m"}},
        ],
        "outputParameters": {"total": "total ${fetch.output.total}"},
        "rateLimitConfig": {"rateLimitKey": "${workflow.input.tenant}", "concurrentExecLimit": 1},
    }
    assert check(spec) == []


BAD = "${workflow.input..amount}"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"tasks": [simple("charge", inputParameters={"amount": BAD})]},
            "tasks[charge].inputParameters.amount: cannot parse reference ${workflow.input..amount} at position 14",
        ),
        (
            {"tasks": [simple("charge", inputParameters={"lines": [{"amount": f"total {BAD}"}]})]},
            "tasks[charge].inputParameters.lines[0].amount: cannot parse reference",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "fork",
                        "taskReferenceName": "fork",
                        "type": "FORK_JOIN",
                        "forkTasks": [[simple("a")], [simple("deep", inputParameters={"x": "${a.output[}"})]],
                    },
                    {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
                ]
            },
            "tasks[deep].inputParameters.x: cannot parse reference ${a.output[} at position 8",
        ),
        (
            {"tasks": [simple("a")], "outputParameters": {"total": BAD}},
            "outputParameters.total: cannot parse reference",
        ),
        (
            {
                "tasks": [simple("a")],
                "rateLimitConfig": {"rateLimitKey": "tenant-${workflow.input.}", "concurrentExecLimit": 1},
            },
            "rateLimitConfig.rateLimitKey: cannot parse reference",
        ),
        (
            {
                "tasks": [simple("a")],
                "rateLimitConfig": {"rateLimitKey": "${a.output.tenant}", "concurrentExecLimit": 1},
            },
            "rateLimitConfig.rateLimitKey: a run's key can only refer to workflow.input, not 'a'",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "route",
                        "taskReferenceName": "route",
                        "type": "SWITCH",
                        "evaluatorType": "cel",
                        "expression": "input.total >",
                        "defaultCase": [simple("b")],
                    }
                ]
            },
            "tasks[route].expression: invalid CEL expression 'input.total >'",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "route",
                        "taskReferenceName": "route",
                        "type": "SWITCH",
                        "evaluatorType": "value-param",
                        "expression": "tier",
                        "inputParameters": {"tier": "${workflow.input.tier..x}"},
                        "defaultCase": [simple("b")],
                    }
                ]
            },
            "tasks[route].inputParameters.tier: cannot parse reference",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "calc",
                        "taskReferenceName": "calc",
                        "type": "INLINE",
                        "inputParameters": {"expression": "size(input.items"},
                    }
                ]
            },
            "tasks[calc].inputParameters.expression: invalid CEL expression",
        ),
        (
            {"tasks": [simple("a", inputParameters={"v": "${nowhere.output.v}"})]},
            "tasks[a].inputParameters: refers to unknown task 'nowhere'",
        ),
        (
            {"tasks": [simple("a"), {"name": "j", "taskReferenceName": "j", "type": "JOIN"}]},
            "tasks[j]: a JOIN without joinOn must directly follow a FORK_JOIN or FORK_JOIN_DYNAMIC",
        ),
        (
            {"tasks": [simple("a"), {"name": "j", "taskReferenceName": "j", "type": "JOIN", "joinOn": ["zz"]}]},
            "tasks[j].joinOn: names unknown task 'zz'",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "stop",
                        "taskReferenceName": "stop",
                        "type": "TERMINATE",
                        "inputParameters": {"terminationStatus": "DONE"},
                    }
                ]
            },
            "tasks[stop].inputParameters.terminationStatus: must be COMPLETED, FAILED or TERMINATED",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "w",
                        "taskReferenceName": "w",
                        "type": "WAIT",
                        "inputParameters": {"duration": "5 fortnights"},
                    }
                ]
            },
            "tasks[w].inputParameters.duration: cannot read duration '5 fortnights'",
        ),
        (
            {
                "tasks": [
                    {"name": "w", "taskReferenceName": "w", "type": "WAIT", "inputParameters": {"until": "tomorrow"}}
                ]
            },
            "tasks[w].inputParameters.until: cannot read instant 'tomorrow'",
        ),
        (
            {
                "tasks": [
                    {
                        "name": "fan",
                        "taskReferenceName": "fan",
                        "type": "FORK_JOIN_DYNAMIC",
                        "inputParameters": {"forkTaskName": "not a name!", "forkTaskInputs": []},
                    }
                ]
            },
            "tasks[fan].inputParameters.forkTaskName: 'not a name!' is not a task type name",
        ),
    ],
)
def test_each_problem_names_the_task_and_the_field(spec: dict[str, Any], expected: str) -> None:
    found = check(spec)
    assert any(p.startswith(expected) for p in found), found


def test_values_resolved_at_run_time_are_not_judged_at_apply_time() -> None:
    spec = {
        "tasks": [
            {
                "name": "w",
                "taskReferenceName": "w",
                "type": "WAIT",
                "inputParameters": {"duration": "${workflow.input.pause}"},
            },
            {
                "name": "stop",
                "taskReferenceName": "stop",
                "type": "TERMINATE",
                "inputParameters": {"terminationStatus": "${workflow.input.status}"},
            },
        ]
    }
    assert check(spec) == []


def test_every_problem_is_reported_not_only_the_first() -> None:
    spec = {"tasks": [simple("a", inputParameters={"x": BAD, "y": "${a..b}"})], "outputParameters": {"z": "${[0]}"}}
    assert len(check(spec)) == 3
