"""Parameter references, CEL, durations and admission keys."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sluiceway.controls.durations import parse_duration, parse_instant
from sluiceway.controls.expressions import (
    ExpressionError,
    admission_key,
    check_cel,
    evaluate_cel,
    lookup,
    references,
    resolve,
)

CONTEXT = {
    "workflow": {"input": {"tenantId": "acme", "n": 3, "items": [{"id": "a"}, {"id": "b"}]}, "workflowId": "w1"},
    "fetch": {"output": {"total": 9.5, "tags": ["x", "y"], "nested": {"deep": True}}},
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${workflow.input.n}", 3),
        ("${workflow.input.items[1].id}", "b"),
        ("${fetch.output.nested}", {"deep": True}),
        ("${fetch.output.missing}", None),
        ("${nope.output.x}", None),
        ("total=${fetch.output.total} for ${workflow.input.tenantId}", "total=9.5 for acme"),
        ("tags: ${fetch.output.tags}", 'tags: ["x","y"]'),
        ("missing: [${fetch.output.none}]", "missing: []"),
        ({"a": ["${workflow.workflowId}", 1]}, {"a": ["w1", 1]}),
        ("plain", "plain"),
        (7, 7),
    ],
)
def test_resolve(template: Any, expected: Any) -> None:
    assert resolve(template, CONTEXT) == expected


def test_out_of_range_index_is_none() -> None:
    assert lookup(CONTEXT, "workflow.input.items[9].id") is None


def test_references_names_the_first_step() -> None:
    assert references({"a": "${fetch.output.x}", "b": ["${workflow.input.y} and ${other.output}"]}) == {
        "fetch",
        "workflow",
        "other",
    }


def test_cel_evaluates_and_reports_errors_naming_the_expression() -> None:
    assert evaluate_cel("input.n * 2", {"input": {"n": 4}}) == 8
    with pytest.raises(ExpressionError, match="input.missing"):
        evaluate_cel("input.missing", {"input": {}})
    with pytest.raises(ExpressionError, match="invalid CEL"):
        check_cel("1 +")


@pytest.mark.parametrize(
    ("expression", "workflow_input", "key"),
    [
        ("${workflow.input.tenantId}", {"tenantId": "acme"}, "acme"),
        ("${workflow.input.tenantId}", {}, "${workflow.input.tenantId}"),
        ("${workflow.input.tenantId}", {"tenantId": ""}, "${workflow.input.tenantId}"),
        ("tenant-${workflow.input.tenantId}", {"tenantId": 7}, "tenant-7"),
    ],
)
def test_an_unresolved_key_shares_a_bucket_named_by_the_expression(
    expression: str, workflow_input: dict[str, Any], key: str
) -> None:
    assert admission_key(expression, workflow_input) == key


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (90, 90.0),
        ("90", 90.0),
        ("30s", 30.0),
        ("5m", 300.0),
        ("1h 30m", 5400.0),
        ("2 days", 172800.0),
        ("1.5h", 5400.0),
        ("1 hours 30 minutes", 5400.0),
    ],
)
def test_durations(text: Any, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-5", -5, "5 fortnights", "", True, None])
def test_bad_durations_are_refused(text: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_instants_need_a_zone() -> None:
    assert parse_instant("2026-12-24T18:00:00Z") == datetime.datetime(2026, 12, 24, 18, tzinfo=datetime.UTC)
    with pytest.raises(ValueError, match="time zone"):
        parse_instant("2026-12-24T18:00:00")
