"""The decider on whole workflows, driven purely (no IO, explicit now and rng)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sluiceway.controls.budget import BudgetWindow
from sluiceway.engine.commands import ScheduleTask
from sluiceway.engine.decider import Event
from sluiceway.model.execution import RunStatus, TaskStatus
from tests.unit.engine.simulation import T0, Simulation


def simple(ref: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name or ref, "taskReferenceName": ref, "type": "SIMPLE", **extra}


def test_a_sequence_runs_in_order_and_passes_outputs_along() -> None:
    sim = Simulation(
        {
            "tasks": [
                simple("fetch", inputParameters={"id": "${workflow.input.orderId}"}),
                simple(
                    "charge",
                    inputParameters={"amount": "${fetch.output.total}", "note": "order ${workflow.input.orderId}"},
                ),
            ],
            "outputParameters": {"receipt": "${charge.output.receipt}"},
        },
        input={"orderId": 42},
    )
    sim.step(Event.STARTED)
    assert sim.active() == ["fetch"] and sim.rows["fetch"].input == {"id": 42}
    sim.worker("fetch", output={"total": 9.5})
    sim.step()
    assert sim.active() == ["charge"]
    assert sim.rows["charge"].input == {"amount": 9.5, "note": "order 42"}
    sim.worker("charge", output={"receipt": "r-1"})
    sim.step()
    assert sim.status is RunStatus.COMPLETED
    assert sim.finished is not None and sim.finished.output == {"receipt": "r-1"}


def test_the_same_snapshot_yields_the_same_commands() -> None:
    sim = Simulation({"tasks": [simple("a"), simple("b")]})
    first = sim.step()
    again = Simulation({"tasks": [simple("a"), simple("b")]}).step()
    assert [type(c) for c in first.commands] == [type(c) for c in again.commands]
    assert sim.step().commands == [], "nothing new to do while a is running"


FORK = {
    "tasks": [
        {
            "name": "fork",
            "taskReferenceName": "fork",
            "type": "FORK_JOIN",
            "forkTasks": [
                [simple("a1"), simple("a2")],
                [simple("b1")],
                [simple("c1")],
            ],
        },
        {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
        simple("after"),
    ]
}


def test_fork_runs_branches_in_parallel_and_join_waits_for_every_branch() -> None:
    sim = Simulation(FORK)
    sim.step()
    assert sim.active() == ["a1", "b1", "c1"]
    for ref in ("b1", "c1", "a1"):
        sim.worker(ref, output={"from": ref})
        sim.step()
    assert sim.active() == ["a2"], "the join still waits for the end of branch a"
    sim.worker("a2", output={"from": "a2"})
    sim.step()
    assert sim.rows["join"].status is TaskStatus.COMPLETED
    assert sim.rows["join"].output == {"a2": {"from": "a2"}, "b1": {"from": "b1"}, "c1": {"from": "c1"}}
    assert sim.active() == ["after"]


def test_join_on_named_references_only() -> None:
    workflow = {
        "tasks": [
            {
                "name": "fork",
                "taskReferenceName": "fork",
                "type": "FORK_JOIN",
                "forkTasks": [[simple("fast")], [simple("slow")]],
            },
            {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["fast"]},
            simple("after"),
        ]
    }
    sim = Simulation(workflow)
    sim.step()
    sim.worker("fast")
    sim.step()
    assert sim.active() == ["after", "slow"]


@pytest.mark.parametrize(("tier", "chosen"), [("gold", "vip"), ("basic", "standard"), ("unknown", "fallback")])
def test_switch_with_value_param(tier: str, chosen: str) -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "route",
                    "taskReferenceName": "route",
                    "type": "SWITCH",
                    "evaluatorType": "value-param",
                    "expression": "tier",
                    "inputParameters": {"tier": "${workflow.input.tier}"},
                    "decisionCases": {"gold": [simple("vip")], "basic": [simple("standard")]},
                    "defaultCase": [simple("fallback")],
                },
                simple("done"),
            ]
        },
        input={"tier": tier},
    )
    sim.step()
    assert sim.active() == [chosen]
    sim.worker(chosen)
    sim.step()
    assert sim.active() == ["done"]


def test_switch_with_cel() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "big",
                    "taskReferenceName": "big",
                    "type": "SWITCH",
                    "evaluatorType": "cel",
                    "expression": "input.amount > 100 ? 'review' : 'auto'",
                    "inputParameters": {"amount": "${workflow.input.amount}"},
                    "decisionCases": {"review": [simple("manual")], "auto": [simple("approve")]},
                },
            ]
        },
        input={"amount": 250},
    )
    sim.step()
    assert sim.active() == ["manual"]
    assert sim.rows["big"].output == {"evaluationResult": ["review"], "selectedCase": "review"}


def test_inline_cel_and_a_throwing_expression_is_terminal() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "calc",
                    "taskReferenceName": "calc",
                    "type": "INLINE",
                    "inputParameters": {
                        "evaluatorType": "cel",
                        "expression": "input.items.map(x, x * 2)",
                        "items": "${workflow.input.items}",
                    },
                },
            ]
        },
        input={"items": [1, 2, 3]},
    )
    sim.step()
    assert sim.status is RunStatus.COMPLETED and sim.rows["calc"].output == {"result": [2, 4, 6]}

    broken = Simulation(
        {
            "tasks": [
                {
                    "name": "calc",
                    "taskReferenceName": "calc",
                    "type": "INLINE",
                    "inputParameters": {"evaluatorType": "cel", "expression": "1 / input.zero", "zero": 0},
                },
            ]
        },
        definitions={"calc": {"retryCount": 5}},
    )
    broken.step()
    assert broken.status is RunStatus.FAILED
    assert broken.rows["calc"].status is TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert broken.finished is not None and "terminalError" in broken.finished.reason


def test_wait_for_a_duration_arms_only_its_own_timer() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "pause",
                    "taskReferenceName": "pause",
                    "type": "WAIT",
                    "inputParameters": {"duration": "1m 30s"},
                },
                simple("next"),
            ]
        },
        definitions={"pause": {"scheduleToStartTimeout": 5, "startToCloseTimeout": 5, "timeoutSeconds": 600}},
    )
    sim.step()
    command = next(c for c in sim.scheduled if c.ref == "pause")
    assert command.status is TaskStatus.IN_PROGRESS
    assert command.deadlines.wait_until == T0 + datetime.timedelta(seconds=90)
    assert command.deadlines.total == T0 + datetime.timedelta(seconds=600)
    assert command.deadlines.schedule_to_start is None and command.deadlines.start_to_close is None
    sim.worker("pause")  # the sweeper completes it when the wait is over
    sim.step()
    assert sim.active() == ["next"]


def test_wait_until_a_past_instant_completes_at_once() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "w",
                    "taskReferenceName": "w",
                    "type": "WAIT",
                    "inputParameters": {"until": "2020-01-01T00:00:00Z"},
                },
                simple("next"),
            ]
        }
    )
    sim.step()
    assert sim.rows["w"].status is TaskStatus.COMPLETED and sim.active() == ["next"]


def test_a_bad_wait_duration_fails_the_run_naming_it() -> None:
    sim = Simulation(
        {
            "tasks": [
                {"name": "w", "taskReferenceName": "w", "type": "WAIT", "inputParameters": {"duration": "soon"}},
            ]
        }
    )
    sim.step()
    assert sim.status is RunStatus.FAILED and sim.finished is not None and "soon" in sim.finished.reason


def test_terminate_ends_the_run_with_its_status_and_output() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "stop",
                    "taskReferenceName": "stop",
                    "type": "TERMINATE",
                    "inputParameters": {
                        "terminationStatus": "FAILED",
                        "terminationReason": "no stock",
                        "workflowOutput": {"sku": "${workflow.input.sku}"},
                    },
                },
                simple("never"),
            ]
        },
        input={"sku": "X1"},
    )
    sim.step()
    assert sim.status is RunStatus.FAILED
    assert sim.finished is not None and sim.finished.reason == "no stock" and sim.finished.output == {"sku": "X1"}
    assert "never" not in sim.rows


def test_dynamic_fork_fans_out_over_a_list_and_joins_all() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "fan",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {"forkTaskName": "resize", "forkTaskInputs": "${workflow.input.images}"},
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
            ]
        },
        input={"images": [{"url": "a"}, {"url": "b"}, "c"]},
    )
    sim.step()
    assert sim.active() == ["fan__0", "fan__1", "fan__2"]
    assert [sim.rows[f"fan__{i}"].input for i in range(3)] == [{"url": "a"}, {"url": "b"}, {"item": "c"}]
    assert {sim.rows[f"fan__{i}"].name for i in range(3)} == {"resize"}
    for i in range(3):
        sim.worker(f"fan__{i}", output={"n": i})
    sim.step()
    assert sim.status is RunStatus.COMPLETED
    assert sim.finished is not None and sim.finished.output == {f"fan__{i}": {"n": i} for i in range(3)}


def test_max_concurrent_tasks_bounds_a_fan_out_and_exempts_operators() -> None:
    sim = Simulation(
        {
            "maxConcurrentTasks": 2,
            "tasks": [
                {
                    "name": "fan",
                    "taskReferenceName": "fan",
                    "type": "FORK_JOIN_DYNAMIC",
                    "inputParameters": {"forkTaskName": "work", "forkTaskInputs": [{"i": i} for i in range(8)]},
                },
                {"name": "join", "taskReferenceName": "join", "type": "JOIN"},
            ],
        }
    )
    decision = sim.step()
    assert len(sim.active()) == 2
    assert decision.holds and decision.holds[0].control == "maxConcurrentTasks"
    worst = 0
    while sim.status is RunStatus.RUNNING:
        worst = max(worst, len(sim.active()))
        sim.worker(sim.active()[0])
        sim.step()
    assert worst == 2 and sim.status is RunStatus.COMPLETED


def test_a_failure_is_retried_with_backoff_then_succeeds() -> None:
    sim = Simulation(
        {"tasks": [simple("flaky")]},
        definitions={"flaky": {"retryCount": 3, "retryLogic": "FIXED", "retryDelaySeconds": 5, "jitter": 0}},
    )
    sim.step()
    sim.worker("flaky", TaskStatus.FAILED, reason="timeout talking to the bank")
    sim.step()
    retry = sim.scheduled[-1]
    assert (retry.ref, retry.attempt) == ("flaky", 2)
    assert retry.available_at == T0 + datetime.timedelta(seconds=5)
    assert retry.input == sim.history[0].input
    sim.worker("flaky")
    sim.step()
    assert sim.status is RunStatus.COMPLETED


def test_retries_exhausted_fail_the_run_naming_the_task() -> None:
    sim = Simulation({"tasks": [simple("flaky")]}, definitions={"flaky": {"retryCount": 1}})
    sim.step()
    sim.worker("flaky", TaskStatus.FAILED, reason="503")
    sim.step()
    sim.worker("flaky", TaskStatus.FAILED, reason="503 again")
    sim.step()
    assert sim.status is RunStatus.FAILED
    assert sim.finished is not None
    assert sim.finished.reason.startswith("task flaky (flaky) FAILED: 503 again [retryCount")


def test_only_retry_count_is_overridable_in_a_workflow_task() -> None:
    sim = Simulation({"tasks": [simple("t", retryCount=0, retryDelaySeconds=99)]}, definitions={"t": {"retryCount": 5}})
    sim.step()
    sim.worker("t", TaskStatus.FAILED, reason="x")
    sim.step()
    assert sim.status is RunStatus.FAILED, "the workflow task's retryCount 0 wins over the definition's 5"


def test_an_optional_task_is_absorbed_and_the_run_carries_on() -> None:
    sim = Simulation({"tasks": [simple("analytics", optional=True, retryCount=1), simple("next")]})
    sim.step()
    sim.worker("analytics", TaskStatus.FAILED, reason="down")
    sim.step()
    sim.worker("analytics", TaskStatus.FAILED, reason="down")
    sim.step()
    assert sim.rows["analytics"].status is TaskStatus.COMPLETED_WITH_ERRORS
    assert sim.active() == ["next"]


@pytest.mark.parametrize(("policy", "outcome"), [("TIME_OUT_WF", RunStatus.TIMED_OUT), ("RETRY", None)])
def test_a_timed_out_task_under_each_policy(policy: str, outcome: RunStatus | None) -> None:
    sim = Simulation({"tasks": [simple("slow")]}, definitions={"slow": {"timeoutPolicy": policy, "retryCount": 2}})
    sim.step()
    sim.worker("slow", TaskStatus.TIMED_OUT, reason="startToCloseTimeout: ...")
    sim.step()
    if outcome is None:
        assert sim.status is RunStatus.RUNNING and sim.rows["slow"].attempt == 2
    else:
        assert sim.status is outcome


def test_a_spent_retry_budget_fails_fast() -> None:
    sim = Simulation({"tasks": [simple("t")]}, definitions={"t": {"retryCount": 10}})
    sim.budgets = {"t": BudgetWindow(executions=50, retries=40)}
    sim.step()
    sim.worker("t", TaskStatus.FAILED, reason="x")
    sim.step()
    assert sim.status is RunStatus.FAILED and sim.finished is not None and "retryBudget" in sim.finished.reason


def test_schedule_to_close_carries_across_attempts() -> None:
    sim = Simulation(
        {"tasks": [simple("t")]},
        definitions={
            "t": {
                "retryCount": 5,
                "scheduleToCloseTimeout": 30,
                "retryLogic": "FIXED",
                "retryDelaySeconds": 20,
                "jitter": 0,
            }
        },
    )
    sim.step()
    deadline = T0 + datetime.timedelta(seconds=30)
    assert sim.scheduled[0].deadlines.schedule_to_close == deadline
    sim.worker("t", TaskStatus.FAILED, reason="x")
    sim.step()
    assert sim.scheduled[-1].attempt == 2 and sim.scheduled[-1].deadlines.schedule_to_close == deadline
    sim.advance(21)
    sim.worker("t", TaskStatus.FAILED, reason="x")
    sim.step()  # 21 + 20 > 30: the next retry would land past the deadline
    assert sim.status is RunStatus.FAILED and sim.finished is not None and "DeadlineExceeded" in sim.finished.reason


def test_the_workflow_timeout_is_armed_on_the_first_evaluation_only() -> None:
    sim = Simulation({"timeoutSeconds": 60, "tasks": [simple("t")]})
    sim.step(Event.STARTED)
    assert sim.timeout_at == T0 + datetime.timedelta(seconds=60)
    sim.advance(10)
    sim.step()
    assert sim.timeout_at == T0 + datetime.timedelta(seconds=60), "not re-armed"
    sim.advance(51)
    sim.step(Event.TIMER)
    assert sim.status is RunStatus.TIMED_OUT and sim.rows["t"].status is TaskStatus.CANCELED


def test_failure_workflow_is_named_on_failure_and_timeout() -> None:
    sim = Simulation({"failureWorkflow": "notify_oncall", "tasks": [simple("t", retryCount=0)]})
    sim.step()
    sim.worker("t", TaskStatus.FAILED_WITH_TERMINAL_ERROR, reason="bad")
    sim.step()
    assert sim.finished is not None and sim.failure_workflow() == "notify_oncall"
    assert sim.finished.failed_task_id == sim.rows["t"].id


def test_a_terminate_request_ends_the_run() -> None:
    sim = Simulation({"tasks": [simple("t")]})
    sim.step()
    sim.terminate_requested = "operator asked"
    sim.step(Event.TERMINATE)
    assert sim.status is RunStatus.TERMINATED and sim.rows["t"].status is TaskStatus.CANCELED


def test_a_run_awaiting_admission_schedules_nothing() -> None:
    sim = Simulation({"tasks": [simple("t")]})
    sim.awaiting_admission = True
    decision = sim.step()
    assert sim.rows == {} and decision.holds[0].control == "rateLimitConfig"
    sim.awaiting_admission = False
    sim.step(Event.ADMITTED)
    assert sim.active() == ["t"]


def test_sub_workflow_starts_a_child_and_waits_for_it() -> None:
    sim = Simulation(
        {
            "tasks": [
                {
                    "name": "child",
                    "taskReferenceName": "child",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": "billing", "version": 2},
                    "inputParameters": {"x": "${workflow.input.x}"},
                },
            ]
        },
        input={"x": 1},
    )
    sim.step()
    assert sim.children[0].workflow == "billing" and sim.children[0].input == {"x": 1}
    assert sim.rows["child"].status is TaskStatus.IN_PROGRESS
    sim.worker("child", output={"paid": True})  # the child's end updates the parent task
    sim.step()
    assert sim.status is RunStatus.COMPLETED


def test_deadlines_of_a_scheduled_task_follow_its_definition() -> None:
    sim = Simulation(
        {"tasks": [simple("t")]},
        definitions={
            "t": {
                "scheduleToStartTimeout": 120,
                "startToCloseTimeout": 60,
                "timeoutSeconds": 300,
                "heartbeatTimeout": 30,
            }
        },
    )
    sim.step()
    command: ScheduleTask = sim.scheduled[0]
    assert command.deadlines.schedule_to_start == T0 + datetime.timedelta(seconds=120)
    assert command.deadlines.total == T0 + datetime.timedelta(seconds=300)
    assert command.deadlines.start_to_close is None, "armed at lease, not at schedule"
