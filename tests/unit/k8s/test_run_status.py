"""How a run looks in its WorkflowRun's status, quarantine included."""

from __future__ import annotations

import datetime

from sluiceway.k8s.runs import run_status
from sluiceway.model.execution import RunStatus

T0 = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)


def status(run: RunStatus, quarantined: bool, awaiting: bool = False) -> dict[str, object]:
    return run_status(
        execution_id="r1",
        status=run,
        reason="run ended" if run.is_terminal() else "",
        awaiting_admission=awaiting,
        version=1,
        output={},
        created_at=T0,
        ended_at=None,
        task_counts={"SCHEDULED": 1},
        quarantined_at=T0 if quarantined else None,
        quarantine_reason="task a attempt 1 cannot be read: KeyError: 'X'" if quarantined else None,
    )


def test_a_quarantined_run_names_the_control_and_the_reason() -> None:
    body = status(RunStatus.RUNNING, quarantined=True, awaiting=True)
    assert body["phase"] == "Running" and body["control"] == "quarantine"
    assert body["quarantinedAt"] == "2026-11-29T12:00:00Z"
    assert body["reasonForIncompletion"] == "quarantined: task a attempt 1 cannot be read: KeyError: 'X'"


def test_a_released_or_ended_run_clears_the_quarantine() -> None:
    released = status(RunStatus.RUNNING, quarantined=False)
    assert released["quarantinedAt"] is None and released["control"] is None
    ended = status(RunStatus.TERMINATED, quarantined=True)
    assert ended["quarantinedAt"] is None and ended["reasonForIncompletion"] == "run ended"


def test_a_workflow_run_shows_the_iteration_of_each_loop() -> None:
    body = run_status(
        execution_id="r1",
        status=RunStatus.RUNNING,
        reason="",
        awaiting_admission=False,
        version=1,
        output={},
        created_at=T0,
        ended_at=None,
        task_counts={"IN_PROGRESS": 2},
        iterations={"paging": 37},
    )
    assert body["iterations"] == {"paging": 37}
    assert status(RunStatus.RUNNING, quarantined=False)["iterations"] is None, "no loop, nothing to show"


def _types(body: dict[str, object]) -> dict[str, tuple[str, str]]:
    conditions = body["conditions"]
    assert isinstance(conditions, list)
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


def test_a_running_run_is_reconciling_and_not_ready() -> None:
    """kstatus reads Reconciling True as InProgress; Ready alone would not say it."""
    found = _types(status(RunStatus.RUNNING, quarantined=False))
    assert found == {"Ready": ("False", "Running"), "Reconciling": ("True", "Running")}


def test_a_completed_run_is_ready_and_a_failed_one_stalled() -> None:
    assert _types(status(RunStatus.COMPLETED, quarantined=False)) == {
        "Ready": ("True", "Completed"),
        "Reconciling": ("False", "Completed"),
        "Stalled": ("False", "Completed"),
    }
    failed = status(RunStatus.FAILED, quarantined=False)
    assert _types(failed) == {
        "Ready": ("False", "Failed"),
        "Reconciling": ("False", "Failed"),
        "Stalled": ("True", "Failed"),
    }
    conditions = failed["conditions"]
    assert isinstance(conditions, list)
    assert {c["message"] for c in conditions} == {"run ended"}
