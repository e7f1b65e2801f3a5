"""`sluiceway why`: target parsing, the text answer and the exit codes, from
canned API bodies (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from sluiceway.cli import why
from sluiceway.cli.client import Api, CommandError, Credentials, ExitCode
from sluiceway.controls.gates import SemaphoreState
from sluiceway.controls.why import Reason, RunFacts, TaskFacts, explain
from sluiceway.runtime.main import app

RUN = "0b6f3a52-52c4-4a0e-9d4b-5c8b1f9a7e10"
OTHER = "6d1c2f4e-8f0a-4b7e-a1c3-2e9d8b7a6f54"
TASK = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

HELD = {
    "executionId": RUN,
    "workflow": "one_export",
    "status": "RUNNING",
    "awaitingAdmission": False,
    "reasons": [
        {
            "control": "semaphore:legacy_erp",
            "message": f"semaphore legacy_erp: 1/1 held by export_report {TASK} (run {OTHER})",
            "blocking": True,
            "taskId": TASK,
            "referenceName": "export",
        },
        {
            "control": "running",
            "message": "audit (audit_log) attempt 1 is leased to w1 for 3.0 s",
            "blocking": False,
            "taskId": OTHER,
            "referenceName": "audit",
        },
    ],
}
FINISHED = {
    "executionId": RUN,
    "workflow": "one_export",
    "status": "COMPLETED",
    "awaitingAdmission": False,
    "reasons": [{"control": "finished", "message": f"run {RUN} is COMPLETED", "blocking": False}],
}
ADMISSION = {
    "executionId": RUN,
    "workflow": "nightly",
    "status": "RUNNING",
    "awaitingAdmission": True,
    "reasons": [
        {
            "control": "rateLimitConfig",
            "message": "rateLimitConfig nightly key 'acme': 2/2 runs admitted; this run waits its turn",
            "blocking": True,
        }
    ],
}
RUNNING_ONLY = {
    "executionId": RUN,
    "workflow": "w",
    "status": "RUNNING",
    "awaitingAdmission": False,
    "reasons": [
        {
            "control": "wait",
            "message": "pause is waiting (a WAIT task)",
            "blocking": False,
            "taskId": TASK,
            "referenceName": "pause",
        }
    ],
}


# --- targets ---------------------------------------------------------------


def test_a_uuid_is_a_run_and_is_normalised() -> None:
    assert why.parse_target(RUN) == why.Target("run", RUN)
    assert why.parse_target(RUN.upper()) == why.Target("run", RUN)


def test_task_targets() -> None:
    assert why.parse_target(f"task/{TASK}") == why.Target("task", TASK)
    assert why.parse_target(f"tasks/{TASK}") == why.Target("task", TASK)


@pytest.mark.parametrize(
    "prefix", ["workflowrun", "WorkflowRun", "workflowruns", "wfr", "run", "workflowrun.sluiceway.dev"]
)
def test_workflow_run_targets(prefix: str) -> None:
    assert why.parse_target(f"{prefix}/order-42") == why.Target("workflowrun", "order-42")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("order-42", "is not a run id"),
        ("", "is not a run id"),
        ("task/order-42", "is not a task id"),
        ("workflowrun/Order_42", "is not a WorkflowRun name"),
        ("workflowrun/", "is not a WorkflowRun name"),
        (f"pod/{RUN}", "unknown target kind 'pod'"),
    ],
)
def test_invalid_targets_say_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(why.TargetError, match=says):
        why.parse_target(text)


def test_an_invalid_target_exits_2_with_one_line() -> None:
    result = CliRunner().invoke(app(), ["why", "nonsense", "-n", "ns", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1
    assert "task/<uuid> or workflowrun/<name>" in result.stderr


# --- the text answer and exit codes --------------------------------------


def test_a_held_run_names_the_control_and_exits_1() -> None:
    answer = why.run_answer(HELD)
    assert answer.code == 1
    assert answer.lines[0] == f"run {RUN} (one_export) is RUNNING"
    blocking, informational = answer.lines[1:]
    assert blocking.startswith("✗ semaphore:legacy_erp  export: semaphore legacy_erp: 1/1 held by export_report")
    assert informational.startswith("· running               audit (audit_log) attempt 1")


def test_a_finished_run_exits_0() -> None:
    answer = why.run_answer(FINISHED)
    assert answer.code == 0
    assert answer.lines == [f"run {RUN} (one_export) is COMPLETED", f"· finished  run {RUN} is COMPLETED"]


def test_only_informational_reasons_exit_0() -> None:
    answer = why.run_answer(RUNNING_ONLY)
    assert answer.code == 0
    assert answer.lines[1] == "· wait  pause is waiting (a WAIT task)"


def test_awaiting_admission_says_so() -> None:
    answer = why.run_answer(ADMISSION)
    assert answer.code == 1
    assert answer.lines[0] == f"run {RUN} (nightly) is RUNNING, awaiting admission"
    assert answer.lines[1].startswith("✗ rateLimitConfig  rateLimitConfig nightly key 'acme': 2/2")


def test_a_task_answer() -> None:
    body = {"taskId": TASK, "executionId": RUN, "reasons": HELD["reasons"][:1]}
    answer = why.task_answer(body)
    assert answer.code == 1
    assert answer.lines[0] == f"task {TASK} of run {RUN}"
    assert answer.lines[1].startswith("✗ semaphore:legacy_erp  export: semaphore legacy_erp")


def _body(facts: RunFacts) -> dict[str, Any]:
    """What the API serves for these facts (api/diagnostics.py)."""

    def item(r: Reason) -> dict[str, Any]:
        found: dict[str, Any] = {"control": r.control, "message": r.message, "blocking": r.blocking}
        return found | ({"taskId": r.task_id, "referenceName": r.ref} if r.task_id else {})

    return {
        "executionId": facts.execution_id,
        "workflow": facts.workflow,
        "status": facts.status,
        "awaitingAdmission": facts.awaiting_admission,
        "reasons": [item(r) for r in explain(facts)],
    }


def test_the_answer_to_what_the_controls_explain() -> None:
    held = TaskFacts(
        TASK,
        "export",
        "SIMPLE",
        "export_report",
        "SCHEDULED",
        1,
        0.0,
        recent_pollers=1,
        semaphores=[SemaphoreState("legacy_erp", 1, 1)],
        semaphore_holders={"legacy_erp": [f"export_report {OTHER}"]},
    )
    leased = TaskFacts(
        OTHER, "audit", "SIMPLE", "audit_log", "IN_PROGRESS", 2, 0.0, worker_id="w1", seconds_leased=12.0
    )
    answer = why.run_answer(_body(RunFacts(RUN, "one_export", "RUNNING", tasks=[leased, held])))
    assert answer.code == 1
    assert [line.split()[:2] for line in answer.lines[1:]] == [["✗", "semaphore:legacy_erp"], ["·", "running"]]
    assert "1/1" in answer.lines[1]
    done = why.run_answer(_body(RunFacts(RUN, "one_export", "FAILED", reason="boom")))
    assert done.code == 0 and done.lines[1] == f"· finished  run {RUN} is FAILED: boom"


# --- WorkflowRuns ----------------------------------------------------------


def test_a_workflow_run_resolves_to_its_execution_id() -> None:
    obj = {"status": {"phase": "Running", "executionId": RUN}}
    assert why.workflow_run_answer("order-42", "ns", obj) == RUN


def test_a_refused_workflow_run_prints_its_control_and_exits_0() -> None:
    obj = {
        "status": {
            "phase": "Refused",
            "control": "quota:runs",
            "reasonForIncompletion": "quota runs: 10/10 active runs in namespace ns",
        }
    }
    answer = why.workflow_run_answer("order-42", "ns", obj)
    assert isinstance(answer, why.Answer) and answer.code == 0
    assert answer.lines == [
        "workflowrun order-42 is Refused; no run was started",
        "· quota:runs  quota runs: 10/10 active runs in namespace ns",
    ]


def test_a_pending_workflow_run_prints_its_reason() -> None:
    obj = {"status": {"phase": "Pending", "reasonForIncompletion": "waiting: no workflow nightly in namespace ns"}}
    answer = why.workflow_run_answer("order-42", "ns", obj)
    assert isinstance(answer, why.Answer) and answer.code == 1
    assert answer.lines[1] == "✗ pending  waiting: no workflow nightly in namespace ns"


def test_a_workflow_run_the_operator_has_not_seen() -> None:
    answer = why.workflow_run_answer("order-42", "ns", {"metadata": {"name": "order-42"}})
    assert isinstance(answer, why.Answer) and answer.code == 1
    assert "has not started" in answer.lines[1]


def test_a_missing_workflow_run_is_an_error() -> None:
    with pytest.raises(CommandError, match="no WorkflowRun order-42 in namespace ns"):
        why.workflow_run_answer("order-42", "ns", None)


# --- settings and the whole command, with a canned API ----------------------


def test_credentials_precedence() -> None:
    assert Credentials().headers() == {}
    assert Credentials(api_key="k").headers() == {"X-API-Key": "k"}
    assert Credentials(token="t", api_key="k").headers() == {"Authorization": "Bearer t"}
    with pytest.raises(CommandError, match="cannot read the token file /nonexistent/token"):
        Credentials(token="t", token_file="/nonexistent/token").headers()


def test_addresses_are_quoted() -> None:
    api = Api("http://api:8080/")
    assert api.address("v1", "ns", "a b", "why") == "http://api:8080/v1/ns/a%20b/why"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, str]]]:
    calls: list[tuple[str, dict[str, str]]] = []

    async def get(self: Api, *segments: str, params: Any = None) -> dict[str, Any]:
        calls.append((self.address(*segments), self.credentials.headers()))
        if segments[-2] == OTHER:
            raise CommandError(
                f"no run {OTHER} in namespace team (HTTP 404 from GET {self.address(*segments)})", ExitCode.NOT_FOUND
            )
        return HELD if segments[3] == "executions" else {"taskId": TASK, "executionId": RUN, "reasons": []}

    monkeypatch.setattr(Api, "get", get)
    for name in (
        "SLUICEWAY_URL",
        "SLUICEWAY_NAMESPACE",
        "SLUICEWAY_TOKEN",
        "SLUICEWAY_TOKEN_FILE",
        "SLUICEWAY_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    return calls


def _run(*argv: str) -> Any:
    return CliRunner().invoke(app(), ["why", *argv], env={"KUBECONFIG": "/nonexistent"})


def test_the_command_prints_the_answer_and_exits_1(served: list[tuple[str, dict[str, str]]]) -> None:
    result = _run(RUN, "-n", "team", "--url", "http://api:1", "--token", "t")
    assert result.exit_code == 1
    assert served == [(f"http://api:1/v1/ns/team/executions/{RUN}/why", {"Authorization": "Bearer t"})]
    assert result.stdout.splitlines()[0] == f"run {RUN} (one_export) is RUNNING"
    assert "semaphore:legacy_erp" in result.stdout


def test_settings_from_the_environment(
    served: list[tuple[str, dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLUICEWAY_URL", "http://env:2")
    monkeypatch.setenv("SLUICEWAY_NAMESPACE", "envns")
    monkeypatch.setenv("SLUICEWAY_API_KEY", "key")
    assert _run(f"task/{TASK}").exit_code == 0
    assert served == [(f"http://env:2/v1/ns/envns/tasks/{TASK}/why", {"X-API-Key": "key"})]


def test_json_output_is_the_api_body(served: list[tuple[str, dict[str, str]]]) -> None:
    result = _run(RUN, "-n", "team", "-o", "json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == HELD
    assert served[0][0].startswith("http://127.0.0.1:8080/")


def test_not_found_exits_3_naming_the_url(served: list[tuple[str, dict[str, str]]]) -> None:
    result = _run(OTHER, "-n", "team", "--url", "http://api:1")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr == (
        f"sluiceway: no run {OTHER} in namespace team "
        f"(HTTP 404 from GET http://api:1/v1/ns/team/executions/{OTHER}/why)\n"
    )


def test_a_quarantined_run_says_so_in_its_first_line_and_exits_1() -> None:
    body = {
        "executionId": RUN,
        "workflow": "one_export",
        "status": "RUNNING",
        "quarantined": True,
        "reasons": [{"control": "quarantine", "message": f"run {RUN} is quarantined: ...", "blocking": True}],
    }
    answer = why.run_answer(body)
    assert answer.code == 1
    assert answer.lines == [
        f"run {RUN} (one_export) is RUNNING, quarantined",
        f"✗ quarantine  run {RUN} is quarantined: ...",
    ]
