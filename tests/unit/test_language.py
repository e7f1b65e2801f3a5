"""The rest of the workflow language in the pure decider: DO_WHILE, the
waiting types (webhook, person, messages), and dynamic forks of task specs."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.controls.why import TaskFacts, explain_task
from sluiceway.engine.commands import DecideAgain, PruneIterations, ScheduleTask
from sluiceway.engine.decider import ITERATIONS_PER_PASS, Event
from sluiceway.engine.graph import problems
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import WorkflowSpec
from tests.unit.simulation import Simulation


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


def test_a_loop_without_max_iterations_is_refused_by_the_model() -> None:
    with pytest.raises(ValidationError, match="maxIterations"):
        WorkflowSpec.model_validate({"tasks": [loop([simple("x")], loopCondition="true")]})
    with pytest.raises(ValidationError, match="less than or equal to 10000"):
        WorkflowSpec.model_validate({"tasks": [loop([simple("x")], loopCondition="true", maxIterations=10_001)]})
    with pytest.raises(ValidationError, match="keepLastN cannot exceed"):
        WorkflowSpec.model_validate(
            {"tasks": [loop([simple("x")], loopCondition="true", maxIterations=3, keepLastN=4)]}
        )


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


# -- why -------------------------------------------------------------------------------

AT = datetime.datetime(2026, 11, 29, 10, 2, 3, tzinfo=datetime.UTC)


def facts(type_: str, **extra: Any) -> TaskFacts:
    values: dict[str, Any] = {
        "task_id": "t1",
        "ref": "w",
        "type": type_,
        "name": "w",
        "status": "IN_PROGRESS",
        "attempt": 1,
        "seconds_until_available": 0,
        "scheduled_at": AT,
    }
    return TaskFacts(**{**values, **extra})


def test_why_names_the_webhook_its_matches_and_since_when() -> None:
    [reason] = explain_task(
        facts(
            "WAIT_FOR_WEBHOOK", input={"webhook": "orders-paid", "matches": {"orderId": 42}}, seconds_until_timeout=90
        )
    )
    assert reason.message == (
        "waiting for webhook orders-paid matching orderId=42 since 10:02:03Z; timeoutSeconds ends the wait in 90 s"
    )
    assert not reason.blocking
    [missing] = explain_task(facts("WAIT_FOR_WEBHOOK", input={"webhook": "typo"}, webhook_defined=False))
    assert missing.blocking and "does not exist" in missing.message


def test_why_for_people_messages_loops_and_iterations() -> None:
    assert "waits for a person" in explain_task(facts("HUMAN"))[0].message
    [messages] = explain_task(facts("PULL_WORKFLOW_MESSAGES", input={"batchSize": 5}, queued_messages=0))
    assert "batchSize 5, 0 queued" in messages.message
    [looping] = explain_task(facts("DO_WHILE", output={"iteration": 37}, max_iterations=1000, keep_last_n=10))
    assert looping.message == "w is on iteration 37 of at most 1000, keeping the last 10"
    [inner] = explain_task(
        facts("SIMPLE", status="SCHEDULED", attempt=2, seconds_until_available=20, iteration=37, previous_reason="429")
    )
    assert inner.control == "retryBackoff" and "(iteration 37)" in inner.message and "after: 429" in inner.message
