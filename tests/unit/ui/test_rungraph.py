"""A run's graph from its definition and its tasks' latest attempts: edges as
declared, colours from statuses, and a big fan-out folded into one node."""

from __future__ import annotations

from sluiceway.model.workflow import WorkflowSpec
from sluiceway.ui.rungraph import Latest, build, group_key
from sluiceway.ui.statuses import shown

SPEC = WorkflowSpec.model_validate(
    {
        "tasks": [
            {"name": "prepare", "taskReferenceName": "prepare"},
            {
                "name": "fan",
                "taskReferenceName": "fan",
                "type": "FORK_JOIN_DYNAMIC",
                "inputParameters": {"forkTaskName": "work", "forkTaskInputs": "${workflow.input.items}"},
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
            {
                "name": "route",
                "taskReferenceName": "route",
                "type": "SWITCH",
                "expression": "big",
                "evaluatorType": "value-param",
                "decisionCases": {"big": [{"name": "approve", "taskReferenceName": "approve"}]},
            },
            {"name": "report", "taskReferenceName": "report"},
        ]
    }
)


def latest(ref: str, status: str, type: str = "SIMPLE", name: str = "work") -> Latest:
    return Latest(ref, type, name, status, 1)


def test_edges_follow_the_definition_and_statuses_colour_the_nodes() -> None:
    rows = {
        "prepare": latest("prepare", "COMPLETED"),
        "fan": latest("fan", "COMPLETED", "FORK_JOIN_DYNAMIC"),
        "fan__0": latest("fan__0", "COMPLETED"),
        "fan__1": latest("fan__1", "FAILED"),
        "join": latest("join", "IN_PROGRESS", "JOIN"),
    }
    graph = build(SPEC.tasks, rows)
    assert ("prepare", "fan") in graph.edges
    assert {("fan", "fan__0"), ("fan", "fan__1"), ("fan__0", "join"), ("fan__1", "join")} <= set(graph.edges)
    # a SWITCH without a default case goes on when no case matches
    assert {("join", "route"), ("route", "approve"), ("approve", "report"), ("route", "report")} <= set(graph.edges)
    assert graph.nodes["fan__1"].status == "FAILED" and shown("FAILED").icon == "✗"
    assert graph.nodes["report"].status == "NOT_STARTED"
    assert graph.drawing.nodes["join"].y > graph.drawing.nodes["fan__0"].y > graph.drawing.nodes["fan"].y


def test_thousands_of_branches_fold_into_one_group_with_counts() -> None:
    rows = {"fan": latest("fan", "IN_PROGRESS", "FORK_JOIN_DYNAMIC")}
    statuses = ["COMPLETED"] * 2950 + ["FAILED"] * 12 + ["IN_PROGRESS"] * 38
    rows.update({f"fan__{i}": latest(f"fan__{i}", s) for i, s in enumerate(statuses)})
    graph = build(SPEC.tasks, rows)
    group = graph.nodes[group_key("fan")]
    assert group.is_group and group.members == 3000
    assert group.counts == {"COMPLETED": 2950, "FAILED": 12, "IN_PROGRESS": 38}
    assert group.status == "FAILED"  # the worst member's
    assert group.summary() == "×3,000: 12 failed · 38 in progress · 2,950 completed"
    assert not any(key.startswith("fan__") and key != group_key("fan") for key in graph.nodes)
    assert (group_key("fan"), "join") in graph.edges
    assert len(graph.drawing.nodes) == len(graph.nodes) == 7


def test_an_expanded_group_draws_its_branches() -> None:
    rows = {f"fan__{i}": latest(f"fan__{i}", "COMPLETED") for i in range(20)}
    assert group_key("fan") in build(SPEC.tasks, rows).nodes
    assert "fan__19" in build(SPEC.tasks, rows, expanded=frozenset({"fan"})).nodes


def test_without_a_readable_definition_the_tasks_that_ran_are_still_drawn() -> None:
    rows = {"a": latest("a", "COMPLETED"), "b": latest("b", "SCHEDULED")}
    graph = build(None, rows)
    assert set(graph.nodes) == {"a", "b"} and graph.edges == []
