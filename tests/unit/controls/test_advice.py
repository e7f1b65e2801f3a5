"""The policy advisor: each rule fires on its bad example, naming the field and
quoting its seed rule, and is silent on the good one; the rules that relate
objects say nothing when the other object is not in the set; an object that
does not parse is an error naming its field; every shipped example lints clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.controls import advice
from sluiceway.controls.advice import Declared, Finding, Severity, advise, declared

EXAMPLES = Path(__file__).parents[3] / "examples"
# Findings the shipped examples keep on purpose, with the reason.
EXPECTED_IN_EXAMPLES = {
    # The docs pages run this file's orders with workers they start along the
    # way (docs/runs.md, operations.md, logs.md): a starvation deadline added
    # here would change what those pages print, which only the e2e doctests
    # check. The finding is the advice those pages should be read with.
    ("15-orders.yaml", "take-payment", advice.WORKER_SCHEDULE_TO_START.id),
}


def obj(kind: str, name: str, namespace: str | None = None, /, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "sluiceway.dev/v1beta1", "kind": kind, "metadata": metadata, "spec": spec}


def parsed(*documents: dict[str, Any]) -> list[Declared]:
    found = []
    for document in documents:
        result = declared(document, "test.yaml")
        assert isinstance(result, Declared), result
        found.append(result)
    return found


def lint(*documents: dict[str, Any], **options: Any) -> list[Finding]:
    return advise(parsed(*documents), **options)


def rules(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.name, f.field, f.rule) for f in findings]


WATCHED = {"scheduleToStartTimeout": 60}  # a worker's TaskDefinition that passes the first rule
SIMPLE = {"name": "charge", "taskReferenceName": "charge"}


# Each rule: the objects that break it, the finding (object, field, rule), and the objects that do not.
CASES: list[tuple[str, list[dict[str, Any]], tuple[str, str, str], list[dict[str, Any]]]] = [
    (
        "a worker task with no scheduleToStartTimeout",
        [obj("TaskDefinition", "charge")],
        ("charge", "spec.scheduleToStartTimeout", "worker-schedule-to-start"),
        [obj("TaskDefinition", "charge", **WATCHED)],
    ),
    (
        "retries whose shortest delays outlive the workflow timeout",
        [
            obj("TaskDefinition", "charge", retryCount=5, retryDelaySeconds=100, jitter=0, **WATCHED),
            obj("Workflow", "pay", timeoutSeconds=600, tasks=[SIMPLE]),
        ],
        ("pay", "spec.timeoutSeconds", "retries-outlive-workflow-timeout"),
        [
            obj("TaskDefinition", "charge", retryCount=5, retryDelaySeconds=10, jitter=0, **WATCHED),
            obj("Workflow", "pay", timeoutSeconds=600, tasks=[SIMPLE]),
        ],
    ),
    (
        "an SLA at the timeout",
        [obj("Workflow", "pay", timeoutSeconds=600, slaSeconds=600, tasks=[SIMPLE])],
        ("pay", "spec.slaSeconds", "sla-at-timeout"),
        [obj("Workflow", "pay", timeoutSeconds=600, slaSeconds=300, tasks=[SIMPLE])],
    ),
    (
        "a semaphore referenced and never declared",
        [obj("TaskDefinition", "export", semaphores=["legacy_erp"], **WATCHED)],
        ("export", "spec.semaphores[0]", "undeclared-semaphore"),
        [
            obj("TaskDefinition", "export", semaphores=["legacy_erp"], **WATCHED),
            obj("Semaphore", "legacy-erp", name="legacy_erp", permits=4),
        ],
    ),
    (
        "a semaphore of 0 permits",
        [obj("Semaphore", "erp", permits=0)],
        ("erp", "spec.permits", "gate-never-admits"),
        [obj("Semaphore", "erp", permits=1)],
    ),
    (
        "a quota of 0 runs",
        [obj("Quota", "default", maxConcurrentExecutions=0)],
        ("default", "spec.maxConcurrentExecutions", "quota-never-admits"),
        [obj("Quota", "default", maxConcurrentExecutions=1)],
    ),
    (
        "a schedule window shorter than its interval",
        [
            obj(
                "Schedule",
                "hourly",
                workflow="pay",
                every="1h",
                startAt="2026-03-01T10:05:00Z",
                endAt="2026-03-01T10:55:00Z",
            )
        ],
        ("hourly", "spec.endAt", "window-without-fire"),
        [
            obj(
                "Schedule",
                "hourly",
                workflow="pay",
                every="1h",
                startAt="2026-03-01T10:05:00Z",
                endAt="2026-03-01T11:05:00Z",
            )
        ],
    ),
    (
        "an indefinite retry without a time budget",
        [obj("TaskDefinition", "sync", retryKind="indefinite", **WATCHED)],
        ("sync", "spec.timeBudgetSeconds", "indefinite-without-budget"),
        [obj("TaskDefinition", "sync", retryKind="indefinite", timeBudgetSeconds=7200, **WATCHED)],
    ),
    (
        "a time budget on a transient retry",
        [obj("TaskDefinition", "sync", timeBudgetSeconds=7200, **WATCHED)],
        ("sync", "spec.timeBudgetSeconds", "time-budget-ignored"),
        [obj("TaskDefinition", "sync", **WATCHED)],
    ),
    (
        "a task rate limit below the schedule's fire rate",
        [
            obj("TaskDefinition", "charge", rateLimitPerFrequency=10, rateLimitFrequencySeconds=60, **WATCHED),
            obj("Workflow", "pay", tasks=[SIMPLE, {**SIMPLE, "taskReferenceName": "again"}]),
            obj("Schedule", "often", workflow="pay", every="10s"),
        ],
        ("often", "spec.every", "rate-below-fire-rate"),
        [
            obj("TaskDefinition", "charge", rateLimitPerFrequency=12, rateLimitFrequencySeconds=60, **WATCHED),
            obj("Workflow", "pay", tasks=[SIMPLE, {**SIMPLE, "taskReferenceName": "again"}]),
            obj("Schedule", "often", workflow="pay", every="10s"),
        ],
    ),
    (
        "a quota's runs per minute below the schedules' fire rate",
        [
            obj("Quota", "default", maxExecutionsPerMinute=1),
            obj("Schedule", "a", workflow="pay", cron=["* * * * *"]),
            obj("Schedule", "b", workflow="pay", every="30s"),
        ],
        ("default", "spec.maxExecutionsPerMinute", "quota-below-fire-rate"),
        [
            obj("Quota", "default", maxExecutionsPerMinute=3),
            obj("Schedule", "a", workflow="pay", cron=["* * * * *"]),
            obj("Schedule", "b", workflow="pay", every="30s"),
        ],
    ),
]


@pytest.mark.parametrize(("bad", "finding", "good"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_rule_fires_on_its_bad_example_and_is_silent_on_the_good_one(
    bad: list[dict[str, Any]], finding: tuple[str, str, str], good: list[dict[str, Any]]
) -> None:
    found = lint(*bad)
    assert rules(found) == [finding]
    assert found[0].severity is Severity.WARNING
    assert lint(*good) == []


@pytest.mark.parametrize("rule", advice.RULES, ids=lambda r: r.id)
def test_every_finding_quotes_its_rule_and_the_document_it_comes_from(rule: advice.Rule) -> None:
    cited = (
        "node-flow Execution controls",
        "TaskQ Retry system",
        "Harvest Reliability knobs",
        "the CRD",
        "Schedule spec",
    )
    assert rule.source.startswith(cited)
    found = Finding("Workflow", "w", "spec.x", rule.id, f"found. Rule: {rule.quoted()}")
    assert rule.says in found.message and rule.source in found.message


def test_a_finding_says_what_it_found_with_the_numbers() -> None:
    (finding,) = lint(
        obj("TaskDefinition", "charge", retryCount=5, retryDelaySeconds=100, jitter=0, **WATCHED),
        obj("Workflow", "pay", timeoutSeconds=600, tasks=[SIMPLE]),
    )
    # Exponential from 100 s: 100 + 200 + 400 = 700 s >= 600 s before retry 3, so retries 3 to 5 never run.
    assert "waits at least 700 s in backoff before retry 3 of 5" in finding.message
    assert "its last 3 retries can never run" in finding.message
    assert "Workflow timeout" in finding.message


def test_the_retry_rule_reads_the_bottom_of_the_jitter_band_and_the_task_override() -> None:
    definition = obj("TaskDefinition", "charge", retryCount=1, retryLogic="FIXED", retryDelaySeconds=100, **WATCHED)
    # One retry after 100 s ± 20 %: at least 80 s, so a 90 s run may still see it.
    assert lint(definition, obj("Workflow", "pay", timeoutSeconds=90, tasks=[SIMPLE])) == []
    assert rules(lint(definition, obj("Workflow", "pay", timeoutSeconds=80, tasks=[SIMPLE]))) == [
        ("pay", "spec.timeoutSeconds", "retries-outlive-workflow-timeout")
    ]
    no_retry = {**SIMPLE, "retryCount": 0}
    assert lint(definition, obj("Workflow", "pay", timeoutSeconds=80, tasks=[no_retry])) == []


def test_rules_that_need_another_object_say_nothing_without_it() -> None:
    # The retries' TaskDefinition is elsewhere: the built-in defaults are not assumed.
    assert lint(obj("Workflow", "pay", timeoutSeconds=1, tasks=[SIMPLE])) == []
    # The Workflow a Schedule starts is elsewhere: its tasks' rate limits are unknown.
    rate_limited = obj("TaskDefinition", "charge", rateLimitPerFrequency=1, rateLimitFrequencySeconds=60, **WATCHED)
    assert lint(rate_limited, obj("Schedule", "often", workflow="pay", every="1s")) == []
    # A live object alone: its namespace's Semaphores are not in the set.
    lonely = obj("TaskDefinition", "export", semaphores=["legacy_erp"], **WATCHED)
    assert lint(lonely, semaphores_known=False) == []


def test_objects_relate_only_within_one_namespace() -> None:
    definition = obj("TaskDefinition", "export", "shop", semaphores=["legacy_erp"], **WATCHED)
    elsewhere = obj("Semaphore", "legacy-erp", "billing", name="legacy_erp", permits=4)
    unset = obj("Semaphore", "legacy-erp", name="legacy_erp", permits=4)
    assert rules(lint(definition, elsewhere)) == [("export", "spec.semaphores[0]", "undeclared-semaphore")]
    assert lint(definition, unset) == []  # a manifest without a namespace goes where it is applied


def test_a_task_type_used_only_by_system_tasks_needs_no_schedule_to_start() -> None:
    http = {
        "name": "charge",
        "taskReferenceName": "call",
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": "https://example.com", "method": "GET"}},
    }
    definition = obj("TaskDefinition", "charge", retryCount=1)
    assert lint(definition, obj("Workflow", "pay", tasks=[http])) == []
    assert rules(lint(definition, obj("Workflow", "pay", tasks=[http, SIMPLE]))) == [
        ("charge", "spec.scheduleToStartTimeout", "worker-schedule-to-start")
    ]


def test_a_semaphore_of_zero_names_the_task_types_it_stops() -> None:
    findings = lint(
        obj("Semaphore", "erp", permits=0),
        obj("TaskDefinition", "export", semaphores=["erp"], **WATCHED),
    )
    assert rules(findings) == [("erp", "spec.permits", "gate-never-admits")]
    assert "export will never be leased" in findings[0].message


def test_the_fire_rate_counts_only_the_tasks_every_run_has() -> None:
    limited = obj("TaskDefinition", "charge", rateLimitPerFrequency=6, rateLimitFrequencySeconds=60, **WATCHED)
    switch = {
        "name": "route",
        "taskReferenceName": "route",
        "type": "SWITCH",
        "expression": "true",
        "evaluatorType": "cel",
        "decisionCases": {"true": [SIMPLE]},
    }
    fork = {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [[SIMPLE]]}
    every_10s = obj("Schedule", "often", workflow="pay", every="10s")  # 6 runs a minute
    assert lint(limited, obj("Workflow", "pay", tasks=[switch]), every_10s) == []
    assert lint(limited, obj("Workflow", "pay", tasks=[fork]), every_10s) == []
    faster = obj("Schedule", "often", workflow="pay", every="5s")
    assert rules(lint(limited, obj("Workflow", "pay", tasks=[fork]), faster)) == [
        ("often", "spec.every", "rate-below-fire-rate")
    ]
    suspended = obj("Schedule", "often", workflow="pay", every="5s", suspend=True)
    assert lint(limited, obj("Workflow", "pay", tasks=[fork]), suspended) == []


def test_an_object_that_does_not_parse_is_an_error_naming_its_field() -> None:
    bad = obj("TaskDefinition", "charge", retryCount=-1)
    (finding,) = declared(bad, "defs.yaml")  # type: ignore[misc]
    assert (finding.kind, finding.name, finding.field, finding.severity) == (
        "TaskDefinition",
        "charge",
        "spec.retryCount",
        Severity.ERROR,
    )
    assert finding.source == "defs.yaml" and "greater than or equal to 0" in finding.message
    nested = declared(obj("Workflow", "pay", tasks=[{"name": "x", "taskReferenceName": "x", "retryCount": "many"}]))
    assert isinstance(nested, list) and [f.field for f in nested] == ["spec.tasks[0].retryCount"]
    nameless = declared({"apiVersion": "sluiceway.dev/v1beta1", "kind": "Quota", "spec": {}})
    assert isinstance(nameless, list) and nameless[0].field == "metadata.name"


def test_a_calendar_that_does_not_parse_is_an_error_naming_its_field() -> None:
    findings = lint(obj("Schedule", "bad", workflow="pay", cron=["61 * * * *"]))
    assert [(f.field, f.severity) for f in findings] == [("spec.cron[0]", Severity.ERROR)]


def test_only_sluiceway_kinds_are_read() -> None:
    assert advice.is_ours(obj("Workflow", "pay"))
    assert not advice.is_ours({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}})
    assert not advice.is_ours(obj("WorkflowRun", "run"))  # a run, not a definition
    assert not advice.is_ours({**obj("Workflow", "pay"), "apiVersion": "example.com/v1"})


def test_every_shipped_example_lints_clean_but_the_findings_it_keeps_on_purpose() -> None:
    objects = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and advice.is_ours(document):
                result = declared(document, path.name)
                assert isinstance(result, Declared), result
                objects.append(result)
    assert len(objects) > 20
    assert {(f.source, f.name, f.rule) for f in advise(objects)} == EXPECTED_IN_EXAMPLES
