"""Continue-as-new and chain deadlines in the pure decider: a run ends by
continuing as new with new input, the chain's deadline is armed once at the
chain's first run and carried verbatim, a run's own timeout is re-anchored at
each link, and `${workflow.deadlineFraction}` tells a loop its budget is
nearly spent."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sluiceway.controls.chains import chain_timeout_seconds, deadline_fraction, next_run_id
from sluiceway.controls.policy import OperatorDefaults
from sluiceway.engine.commands import ArmChainDeadline, ArmRunTimeout, ContinueAsNew
from sluiceway.engine.graph import problems
from sluiceway.model.execution import RunStatus, TaskStatus
from sluiceway.model.workflow import WorkflowSpec
from sluiceway.runtime.settings import Settings, SettingsError
from tests.unit.engine.simulation import T0, Simulation

HOUR = datetime.timedelta(hours=1)


@pytest.mark.parametrize(
    ("declared", "ceiling", "effective"),
    [(0, None, 0), (600, None, 600), (600, 3600, 600), (7200, 3600, 3600), (0, 3600, 3600)],
)
def test_the_operator_ceiling_caps_a_chain_timeout_and_is_the_default_of_none(
    declared: int, ceiling: int | None, effective: int
) -> None:
    assert chain_timeout_seconds(declared, ceiling) == effective


@pytest.mark.parametrize(
    ("left", "timeout", "fraction"),
    [(None, 100, 0.0), (100.0, 100, 0.0), (20.0, 100, 0.8), (-5.0, 100, 1.0), (50.0, 0, 0.0)],
)
def test_the_deadline_fraction_is_the_share_of_the_run_budget_used(
    left: float | None, timeout: int, fraction: float
) -> None:
    timeout_at = None if left is None else T0 + datetime.timedelta(seconds=left)
    assert deadline_fraction(timeout_at, timeout, T0) == pytest.approx(fraction)


def loop(**workflow: Any) -> dict[str, Any]:
    """Sync a page, then continue as new from the next cursor."""
    return {
        "tasks": [
            {
                "name": "sync_page",
                "taskReferenceName": "page",
                "inputParameters": {"cursor": "${workflow.input.cursor}"},
            },
            {
                "name": "again",
                "taskReferenceName": "again",
                "type": "CONTINUE_AS_NEW",
                "inputParameters": {
                    "input": {"cursor": "${page.output.next}"},
                    "workflowOutput": {"done": "${page.output.next}"},
                },
            },
        ],
        **workflow,
    }


def test_a_run_continues_as_new_with_new_input_and_carries_the_chain() -> None:
    sim = Simulation(loop(chainTimeoutSeconds=86400, timeoutSeconds=3600), input={"cursor": 0})
    first = sim.step()
    assert ArmChainDeadline(T0 + 24 * HOUR) in first.commands and ArmRunTimeout(T0 + HOUR) in first.commands
    sim.advance(30)
    sim.worker("page", output={"next": 5})
    sim.step()
    assert sim.status is RunStatus.COMPLETED and sim.finished is not None
    assert sim.finished.reason == f"continued as new: run {next_run_id('run-1')}" and sim.finished.output == {"done": 5}
    assert sim.rows["again"].output == {"nextRunId": next_run_id("run-1")}
    assert sim.consequences == [ContinueAsNew("wf", {"cursor": 5}, next_run_id("run-1"), "run-1", T0 + 24 * HOUR)]


def test_a_later_link_keeps_the_chain_deadline_and_re_anchors_its_own_timeout() -> None:
    later = T0 + 5 * HOUR
    sim = Simulation(
        loop(chainTimeoutSeconds=86400, timeoutSeconds=3600),
        input={"cursor": 5},
        previous_run_id="run-0",
        chain_id="run-first",
        chain_deadline_at=T0 + 24 * HOUR,
    )
    sim.now = later
    decision = sim.step()
    assert ArmRunTimeout(later + HOUR) in decision.commands
    assert not [c for c in decision.commands if isinstance(c, ArmChainDeadline)], "the chain's deadline is carried"
    sim.worker("page", output={"next": 9})
    sim.step()
    [continued] = sim.consequences
    assert isinstance(continued, ContinueAsNew)
    assert (continued.chain_id, continued.chain_deadline_at) == ("run-first", T0 + 24 * HOUR)


def test_the_chain_deadline_ends_the_running_link_timed_out_before_its_own_timeout() -> None:
    sim = Simulation(
        loop(timeoutSeconds=3600),
        previous_run_id="run-0",
        chain_id="run-first",
        chain_deadline_at=T0 + datetime.timedelta(minutes=10),
    )
    sim.step()
    sim.advance(600)
    sim.step()
    assert sim.status is RunStatus.TIMED_OUT and sim.finished is not None and sim.finished.by_chain_deadline
    assert sim.finished.reason.startswith("the chain's deadline passed")
    assert sim.rows["page"].status is TaskStatus.CANCELED and sim.consequences == []


def test_a_runs_own_timeout_is_not_a_chain_timeout() -> None:
    sim = Simulation(loop(timeoutSeconds=60))
    sim.step()
    sim.advance(61)
    sim.step()
    assert sim.status is RunStatus.TIMED_OUT and sim.finished is not None and not sim.finished.by_chain_deadline


def test_the_operator_ceiling_arms_a_chain_deadline_for_a_workflow_that_sets_none() -> None:
    sim = Simulation(loop(), defaults=OperatorDefaults(max_chain_timeout_seconds=7200))
    assert ArmChainDeadline(T0 + 2 * HOUR) in sim.step().commands
    capped = Simulation(loop(chainTimeoutSeconds=86400), defaults=OperatorDefaults(max_chain_timeout_seconds=7200))
    assert ArmChainDeadline(T0 + 2 * HOUR) in capped.step().commands
    assert not [c for c in Simulation(loop()).step().commands if isinstance(c, ArmChainDeadline)]


def test_continuing_with_an_input_that_is_not_an_object_fails_the_task_naming_the_field() -> None:
    workflow = loop()
    workflow["tasks"][1]["inputParameters"]["input"] = "${page.output.next}"
    sim = Simulation(workflow)
    sim.step()
    sim.worker("page", output={"next": 5})
    sim.step()
    assert sim.rows["again"].status is TaskStatus.FAILED_WITH_TERMINAL_ERROR
    assert "tasks[again].inputParameters.input must resolve to an object, got a int" in sim.rows["again"].reason
    assert sim.status is RunStatus.FAILED and sim.consequences == []


def test_a_loop_can_read_its_deadline_fraction_and_checkpoint_before_the_deadline() -> None:
    sim = Simulation(
        {
            "timeoutSeconds": 100,
            "tasks": [
                {"name": "work", "taskReferenceName": "work"},
                {
                    "name": "late",
                    "taskReferenceName": "late",
                    "type": "INLINE",
                    "inputParameters": {"expression": "workflow.deadlineFraction > 0.8"},
                },
            ],
        }
    )
    sim.step()
    sim.advance(85)
    sim.worker("work")
    sim.step()
    assert sim.rows["late"].output == {"result": True}


def test_a_continue_as_new_whose_input_is_written_as_no_object_is_refused_when_applied() -> None:
    workflow = WorkflowSpec.model_validate(loop())
    assert problems(workflow) == []
    broken = loop()
    broken["tasks"][1]["inputParameters"]["input"] = [1, 2]
    assert problems(WorkflowSpec.model_validate(broken)) == [
        "tasks[again].inputParameters.input: must be an object (the next run's input)"
    ]


@pytest.mark.parametrize(("value", "seconds"), [("86400", 86400), ("30d", 2_592_000), ("1h 30m", 5400)])
def test_the_chain_ceiling_is_read_in_seconds_or_as_a_duration(value: str, seconds: int) -> None:
    settings = Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_MAX_CHAIN_TIMEOUT": value})
    assert settings.operator_defaults().max_chain_timeout_seconds == seconds


def test_an_unreadable_chain_ceiling_is_refused_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match="^SLUICEWAY_MAX_CHAIN_TIMEOUT: cannot read duration 'soon'"):
        Settings.from_env({"SLUICEWAY_DATABASE_URL": "postgresql://x", "SLUICEWAY_MAX_CHAIN_TIMEOUT": "soon"})
