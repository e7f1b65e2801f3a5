"""The rest of the workflow language in the pure decider: DO_WHILE, the
waiting types (webhook, person, messages), and dynamic forks of task specs.
What the model refuses is in tests/unit/model/test_language.py, what `why`
says of these types in tests/unit/controls/test_why_language.py."""

from __future__ import annotations

from typing import Any

import pytest

from sluiceway.engine.commands import DecideAgain, PruneIterations, ScheduleTask
from sluiceway.engine.decider import ITERATIONS_PER_PASS, Event
from sluiceway.engine.graph import problems
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import WorkflowSpec
from tests.unit.engine.simulation import Simulation


def simple(ref: str, **extra: Any) -> dict[str, Any]:
    return {"name": ref, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def loop(body: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "loop", "taskReferenceName": "loop", "type": "DO_WHILE", "loopOver": body, **extra}


# -- DO_WHILE ----------------------------------------------------------------------


def test_a_loop_runs_its_tasks_as_ref__n_until_the_condition_is_false() -> None:
    sim = Simulation(
        {
            "tasks": [
                loop(
                    [simple("check", inputParameters={"n": "${loop.output.iteration}"})],
                    loopCondition="tasks.check.output.done == false",
                    maxIterations=10,
                ),
                simple("after", inputParameters={"last": "${check.output.n}"}),
            ]
        }
    )
    sim.step(Event.STARTED)
    assert sim.active() == ["check__1", "loop"] and sim.rows["check__1"].input == {"n": 1}
    assert sim.rows["check__1"].iteration == 1 and sim.rows["check__1"].loop == "loop"
    for n in (1, 2):
        sim.worker(f"check__{n}", output={"done": False, "n": n})
        sim.step()
        assert sim.active() == [f"check__{n + 1}", "loop"], "the next iteration starts in the same pass"
        assert sim.rows["loop"].output["iteration"] == n + 1
    sim.worker("check__3", output={"done": True, "n": 3})
    sim.step()
    looped = sim.rows["loop"]
    assert looped.status is TaskStatus.COMPLETED
    assert looped.output == {
        "iteration": 3,
        "1": {"check": {"done": False, "n": 1}},
        "2": {"check": {"done": False, "n": 2}},
        "3": {"check": {"done": True, "n": 3}},
    }
    assert sim.active() == ["after"] and sim.rows["after"].input == {"last": 3}, "outside, a ref is its last iteration"


def test_a_loop_over_items_runs_once_per_item_with_the_item_in_scope() -> None:
    sim = Simulation(
        {
            "tasks": [
                loop(
                    [simple("ship", inputParameters={"order": "${loop.output.item}", "i": "${loop.output.index}"})],
                    inputParameters={"items": "${workflow.input.orders}"},
                    maxIterations=5,
                )
            ]
        },
        input={"orders": ["a", "b"]},
    )
    sim.step(Event.STARTED)
    assert sim.rows["ship__1"].input == {"order": "a", "i": 0}
    sim.worker("ship__1")
    sim.step()
    assert sim.rows["ship__2"].input == {"order": "b", "i": 1}
    sim.worker("ship__2")
    sim.step()
    assert sim.status is RunStatus.COMPLETED and sim.rows["loop"].output["iteration"] == 2


def test_more_items_than_max_iterations_fail_the_loop_naming_the_field() -> None:
    sim = Simulation(
        {"tasks": [loop([simple("x")], inputParameters={"items": [1, 2, 3]}, maxIterations=2)]},
    )
    sim.step(Event.STARTED)
    assert sim.status is RunStatus.FAILED and "more than maxIterations 2" in sim.finished.reason  # type: ignore[union-attr]


def test_reaching_max_iterations_with_the_condition_true_fails_the_loop() -> None:
    sim = Simulation(
        {
            "tasks": [
                loop(
                    [{"name": "i", "taskReferenceName": "i", "type": "INLINE", "inputParameters": {"expression": "1"}}],
                    loopCondition="true",
                    maxIterations=3,
                )
            ]
        }
    )
    sim.step(Event.STARTED)
    assert sim.status is RunStatus.FAILED
    assert "maxIterations 3 reached" in sim.finished.reason  # type: ignore[union-attr]


def test_a_loop_condition_that_is_not_a_bool_fails_the_loop_terminally() -> None:
    sim = Simulation({"tasks": [loop([simple("x")], loopCondition="'yes'", maxIterations=3)]})
    sim.step(Event.STARTED)
    sim.worker("x__1")
    sim.step()
    assert sim.status is RunStatus.FAILED and "loopCondition must be true or false" in sim.finished.reason  # type: ignore[union-attr]


def test_keep_last_n_prunes_older_iterations_and_summarizes_them() -> None:
    sim = Simulation({"tasks": [loop([simple("step")], loopCondition="iteration < 6", maxIterations=100, keepLastN=2)]})
    sim.step(Event.STARTED)
    for n in range(1, 7):
        sim.worker(f"step__{n}", output={"n": n})
        decision = sim.step()
        if n >= 2 and n < 6:
            assert PruneIterations("loop", n) in decision.commands
        assert len([r for r in sim.rows.values() if r.loop == "loop"]) <= 2
    done = sim.rows["loop"]
    assert done.status is TaskStatus.COMPLETED
    assert done.output["iteration"] == 6 and set(done.output) == {"iteration", "5", "6", "summarized"}
    assert done.output["summarized"] == {"iterations": 4, "tasks": {"COMPLETED": 4}}


def test_a_loop_of_engine_tasks_advances_a_bounded_number_of_iterations_per_pass() -> None:
    inline = {"name": "i", "taskReferenceName": "i", "type": "INLINE", "inputParameters": {"expression": "1"}}
    sim = Simulation({"tasks": [loop([inline], loopCondition="iteration < 120", maxIterations=200, keepLastN=5)]})
    first = sim.step(Event.STARTED)
    assert any(isinstance(c, DecideAgain) for c in first.commands)
    assert sim.rows["loop"].output["iteration"] == ITERATIONS_PER_PASS + 1
    sim.settle()
    assert sim.status is RunStatus.COMPLETED and sim.rows["loop"].output["iteration"] == 120
    assert len(sim.rows) == 1 + 5, "the loop and the five iterations it keeps"


def test_a_failed_iteration_task_is_retried_inside_its_iteration() -> None:
    sim = Simulation(
        {"tasks": [loop([simple("x")], loopCondition="iteration < 2", maxIterations=5)]},
        definitions={"x": {"retryCount": 1, "retryDelaySeconds": 0, "jitter": 0}},
    )
    sim.step(Event.STARTED)
    sim.worker("x__1", TaskStatus.FAILED, reason="flaky")
    sim.step()
    retry = sim.scheduled[-1]
    assert (retry.ref, retry.attempt, retry.loop, retry.iteration) == ("x__1", 2, "loop", 1)


def test_start_overrides_of_an_inner_reference_cover_every_iteration() -> None:
    from sluiceway.model.execution import TaskOverride

    sim = Simulation({"tasks": [loop([simple("x")], loopCondition="iteration < 3", maxIterations=5)]})
    snapshot = sim.snapshot

    def with_override() -> Any:
        from dataclasses import replace

        return replace(snapshot(), task_overrides={"x": TaskOverride(start_to_close_timeout=9)})

    sim.snapshot = with_override  # type: ignore[method-assign]
    sim.step(Event.STARTED)
    sim.worker("x__1")
    sim.step()
    assert [s.timeouts.start_to_close for s in sim.scheduled] == [9, 9]


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        (loop([simple("x")], maxIterations=3), "needs a loopCondition, inputParameters.items, or both"),
        (loop([simple("x")], maxIterations=3, loopCondition="iteration <"), "loopCondition"),
        (
            loop(
                [loop([simple("y")], maxIterations=2, loopCondition="true") | {"taskReferenceName": "inner"}],
                maxIterations=3,
                loopCondition="true",
            ),
            "not supported",
        ),
    ],
)
def test_loop_problems_are_reported_when_the_workflow_is_applied(task: dict[str, Any], problem: str) -> None:
    found = problems(WorkflowSpec.model_validate({"tasks": [task]}))
    assert any(problem in p for p in found), found


# -- waiting types --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "stored"),
    [
        (
            {
                "type": "WAIT_FOR_WEBHOOK",
                "webhook": "orders-paid",
                "inputParameters": {"matches": {"orderId": "${workflow.input.id}"}},
            },
            {"matches": {"orderId": 42}, "webhook": "orders-paid"},
        ),
        ({"type": "HUMAN", "inputParameters": {"amount": "${workflow.input.id}"}}, {"amount": 42}),
        ({"type": "PULL_WORKFLOW_MESSAGES", "batchSize": 5}, {"batchSize": 5}),
    ],
)
def test_waiting_types_wait_in_progress_with_only_their_total_budget(
    task: dict[str, Any], stored: dict[str, Any]
) -> None:
    sim = Simulation(
        {"tasks": [{"name": "w", "taskReferenceName": "w", **task}]},
        input={"id": 42},
        definitions={
            "w": {"timeoutSeconds": 600, "scheduleToStartTimeout": 5, "startToCloseTimeout": 5, "heartbeatTimeout": 5}
        },
    )
    decision = sim.step(Event.STARTED)
    [scheduled] = [c for c in decision.commands if isinstance(c, ScheduleTask)]
    assert scheduled.status is TaskStatus.IN_PROGRESS and scheduled.input == stored
    d = scheduled.deadlines
    assert d.total is not None and (d.schedule_to_start, d.start_to_close, d.heartbeat) == (None, None, None)
    sim.worker("w", output={"payload": {"ok": True}})
    sim.step()
    assert sim.status is RunStatus.COMPLETED


def test_a_webhook_wait_with_matches_of_the_wrong_shape_fails_naming_it() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "w",
                    "taskReferenceName": "w",
                    "type": "WAIT_FOR_WEBHOOK",
                    "webhook": "h",
                    "inputParameters": {"matches": "${workflow.input.m}"},
                }
            ]
        },
        input={"m": 7},
    )
    sim.step(Event.STARTED)
    assert sim.status is RunStatus.FAILED and "inputParameters.matches must be an object" in sim.finished.reason  # type: ignore[union-attr]


# -- dynamic forks of task specs ---------------------------------------------------------


def test_a_dynamic_fork_of_task_specs_runs_different_types_per_branch_and_joins_them() -> None:
    branches = [
        {"name": "charge", "taskReferenceName": "pay"},
        [{"name": "pick"}, {"name": "pack", "inputParameters": {"from": "${fan__1__0.output.box}"}}],
        {"name": "n", "type": "INLINE", "inputParameters": {"expression": "2 + 3"}},
    ]
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "fan",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {"forkTasks": "${workflow.input.branches}"},
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
            ]
        },
        input={"branches": branches},
        definitions={"charge": {"startToCloseTimeout": 77}},
    )
    sim.step(Event.STARTED)
    assert sim.active() == ["fan__1__0", "pay"] and sim.rows["fan__2"].output == {"result": 5}
    assert next(s for s in sim.scheduled if s.ref == "pay").timeouts.start_to_close == 77
    sim.worker("pay", output={"paid": True})
    sim.worker("fan__1__0", output={"box": "B7"})
    sim.step()
    assert sim.active() == ["fan__1__1"] and sim.rows["fan__1__1"].input == {"from": "B7"}
    sim.worker("fan__1__1", output={"packed": True})
    sim.step()
    assert sim.status is RunStatus.COMPLETED
    assert sim.rows["join"].output == {"pay": {"paid": True}, "fan__1__1": {"packed": True}, "fan__2": {"result": 5}}


@pytest.mark.parametrize(
    ("fork_tasks", "problem"),
    [
        ("not a list", "must resolve to a list of task specs"),
        ([7], "must be a task spec"),
        ([{"name": "a", "taskReferenceName": "fan"}], "already used"),
        ([{"name": "a", "type": "NOPE"}], "type"),
        (
            [
                {
                    "name": "l",
                    "type": "DO_WHILE",
                    "loopOver": [{"name": "x", "taskReferenceName": "x"}],
                    "maxIterations": 1,
                    "loopCondition": "false",
                }
            ],
            "cannot be forked",
        ),
        ([[]], "empty branch"),
    ],
)
def test_bad_fork_task_specs_fail_the_fork_terminally_naming_the_field(fork_tasks: Any, problem: str) -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "fan",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {"forkTasks": "${workflow.input.f}"},
                },
                {"name": "j", "taskReferenceName": "j", "type": "JOIN"},
            ]
        },
        input={"f": fork_tasks},
    )
    sim.step(Event.STARTED)
    assert sim.status is RunStatus.FAILED
    reason = sim.finished.reason  # type: ignore[union-attr]
    assert "inputParameters.forkTasks" in reason and problem in reason, reason


def test_children_of_a_fork_named_in_its_own_pass_ask_for_their_policy() -> None:
    """The decider says which policies it lacked; the store decides again with them."""
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "fan",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {"forkTaskName": "resize", "forkTaskInputs": [1]},
                },
                {"name": "j", "taskReferenceName": "j", "type": "JOIN"},
            ]
        }
    )
    assert "resize" in sim.step(Event.STARTED).needs


# -- CONTAINER ---------------------------------------------------------------------------


def container_task(env: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "resize",
        "taskReferenceName": "resize",
        "type": "CONTAINER",
        "inputParameters": {"size": "${workflow.input.size}"},
        "container": {"image": "localhost/tools:1", "env": env},
    }


def test_a_container_step_keeps_its_spec_on_its_row_with_env_values_resolved_as_inputs() -> None:
    env = [
        {"name": "MODE", "value": "mode-${workflow.input.mode}"},
        {"name": "SIZES", "value": "${workflow.input.sizes}"},
        {"name": "MISSING", "value": "${workflow.input.missing}"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
    ]
    sim = Simulation({"tasks": [container_task(env)]}, input={"size": 3, "mode": "fast", "sizes": [1, 2]})
    sim.step(Event.STARTED)
    row = sim.rows["resize"]
    assert row.input["size"] == 3
    assert row.input["container"]["env"] == [
        {"name": "MODE", "value": "mode-fast"},
        {"name": "SIZES", "value": "[1,2]"},
        {"name": "MISSING", "value": ""},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token", "optional": False}}},
    ]


def test_a_container_env_value_that_cannot_be_resolved_fails_the_task_naming_it() -> None:
    sim = Simulation({"tasks": [container_task([{"name": "MODE", "value": "${workflow.input.}"}])]}, input={"size": 1})
    sim.step(Event.STARTED)
    assert sim.status is RunStatus.FAILED
    assert "tasks[resize].container.env[MODE].value" in sim.finished.reason  # type: ignore[union-attr]
