"""Search attributes: typed values, what a run starts with, what a task may
upsert, and the filters runs are listed by. Every problem names the field."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sluiceway.controls.attributes import (
    BadValue,
    FilterError,
    Op,
    at_start,
    declared_types,
    filter_type,
    parse_filter,
    typed,
    typed_filter,
    upserted,
)
from sluiceway.engine.graph import problems
from sluiceway.model.attributes import AttributeType
from sluiceway.model.workflow import WorkflowSpec

K, INT, D, B, T = (
    AttributeType.KEYWORD,
    AttributeType.INT,
    AttributeType.DOUBLE,
    AttributeType.BOOL,
    AttributeType.DATETIME,
)


def spec(*attributes: dict[str, Any]) -> WorkflowSpec:
    return WorkflowSpec.model_validate(
        {"tasks": [{"name": "a", "taskReferenceName": "a"}], "searchAttributes": list(attributes)}
    )


ORDERS = spec(
    {"name": "tenant", "type": "keyword", "source": "${workflow.input.tenantId}"},
    {"name": "amount", "type": "double", "source": "${workflow.input.amount}"},
    {"name": "priority", "type": "int"},
    {"name": "vip", "type": "bool"},
    {"name": "due", "type": "datetime"},
)


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        (K, "acme", "acme"),
        (K, "", ""),
        (INT, 3, 3),
        (INT, 3.0, 3),
        (D, 2, 2.0),
        (D, 2.5, 2.5),
        (B, True, True),
        (T, "2026-01-02T03:04:05Z", datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)),
    ],
)
def test_values_of_each_type(kind: AttributeType, raw: Any, expected: Any) -> None:
    assert typed(kind, raw) == expected


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        (K, 3, "a keyword is a string, not the number 3"),
        (K, "x" * 257, "at most 256"),
        (INT, True, "an int is a whole number, not the bool true"),
        (INT, 2.5, "whole number"),
        (INT, 2**63, "64 bits"),
        (D, "1.5", "a double is a number, not the string '1.5'"),
        (D, float("inf"), "finite"),
        (B, "true", "true or false"),
        (T, "2026-01-02T03:04:05", "no time zone"),
        (T, "yesterday", "ISO 8601"),
        (T, 5, "ISO 8601 string"),
    ],
)
def test_values_that_do_not_fit_say_why(kind: AttributeType, raw: Any, message: str) -> None:
    with pytest.raises(BadValue, match=message):
        typed(kind, raw)


def test_text_is_read_by_the_type_as_labels_and_filters_write_it() -> None:
    assert typed(INT, "42", text=True) == 42
    assert typed(D, " 1.5 ", text=True) == 1.5
    assert typed(B, "TRUE", text=True) is True
    assert typed(K, "42", text=True) == "42"
    with pytest.raises(BadValue, match="whole number"):
        typed(INT, "4.2", text=True)


def test_a_run_starts_with_given_values_then_labels_then_sources() -> None:
    checked = at_start(
        ORDERS.search_attributes,
        {"priority": 2},
        run_input={"tenantId": "acme", "amount": 12},
        labels={"team": "payments", "tenant": "from-label", "vip": "true"},
    )
    assert checked.problems == []
    values = {name: (a.type, a.value) for name, a in checked.attributes.items()}
    assert values == {
        "priority": (INT, 2),
        "team": (K, "payments"),
        "tenant": (K, "from-label"),
        "vip": (B, True),
        "amount": (D, 12.0),
    }


def test_a_source_that_resolves_to_nothing_leaves_the_attribute_unset() -> None:
    assert at_start(ORDERS.search_attributes, {}, run_input={}).attributes == {}


def test_bad_starts_name_every_attribute() -> None:
    checked = at_start(
        ORDERS.search_attributes,
        {"priority": "high", "colour": "red"},
        run_input={"tenantId": 7, "amount": "lots"},
        labels={"vip": "maybe"},
    )
    assert [str(p) for p in checked.problems] == [
        "searchAttributes.priority: int: an int is a whole number, not the string 'high'",
        "searchAttributes.colour: not declared by the workflow (it declares tenant, amount, priority, vip, due)",
        "metadata.labels.vip: bool: a bool is true or false, not 'maybe'",
        "searchAttributes.tenant: keyword from ${workflow.input.tenantId}: a keyword is a string, not the number 7",
        "searchAttributes.amount: double from ${workflow.input.amount}: a double is a number, not the string 'lots'",
    ]


def test_a_task_may_upsert_declared_attributes_only() -> None:
    assert upserted(ORDERS.search_attributes, {"priority": 5}).attributes["priority"].value == 5
    assert [str(p) for p in upserted(ORDERS.search_attributes, {"stage": "x", "vip": 1}).problems] == [
        "searchAttributes.stage: not declared by the workflow (it declares tenant, amount, priority, vip, due)",
        "searchAttributes.vip: bool: a bool is true or false, not the number 1",
    ]


def test_a_workflow_declares_each_attribute_once_and_sources_read_the_workflow_only() -> None:
    with pytest.raises(ValueError, match="tenant declared more than once"):
        spec({"name": "tenant", "type": "keyword"}, {"name": "tenant", "type": "int"})
    found = problems(spec({"name": "x", "type": "keyword", "source": "${a.output.x}"}))
    assert found == [
        "searchAttributes[x].source: a run's attributes are set at start and can only refer to workflow, not 'a'"
    ]


@pytest.mark.parametrize(
    ("text", "name", "op", "values"),
    [
        ("tenant=acme", "tenant", Op.EQ, ("acme",)),
        ("tenant==acme", "tenant", Op.EQ, ("acme",)),
        ("amount>=100", "amount", Op.GE, ("100",)),
        ("amount > 1.5", "amount", Op.GT, ("1.5",)),
        ("due<2026-01-01T00:00:00Z", "due", Op.LT, ("2026-01-01T00:00:00Z",)),
        ("tenant in (acme, globex)", "tenant", Op.IN, ("acme", "globex")),
        ('tenant in ("a b",c)', "tenant", Op.IN, ("a b", "c")),
        ("app.kubernetes.io/name=shop", "app.kubernetes.io/name", Op.EQ, ("shop",)),
        ("note=a=b", "note", Op.EQ, ("a=b",)),
    ],
)
def test_filters_as_written(text: str, name: str, op: Op, values: tuple[str, ...]) -> None:
    parsed = parse_filter(text)
    assert (parsed.name, parsed.op, parsed.values) == (name, op, values)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tenant", "cannot read"),
        ("tenant!=acme", "cannot read"),
        ("tenant in ()", "at least one value"),
        ("bad name=x", "cannot read"),
        ("-x=1", "not an attribute name"),
    ],
)
def test_filters_that_cannot_be_read(text: str, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        parse_filter(text)


def test_filter_values_take_the_declared_type() -> None:
    types = declared_types([ORDERS.search_attributes])
    assert typed_filter(parse_filter("amount>=100"), filter_type("amount", types)).values == (100.0,)
    assert filter_type("app.kubernetes.io/name", types) is K, "undeclared: a label, so a keyword"
    with pytest.raises(FilterError, match="priority \\(int\\)"):
        typed_filter(parse_filter("priority=high"), filter_type("priority", types))
    with pytest.raises(FilterError, match="= and in only"):
        typed_filter(parse_filter("vip>true"), B)
    other = spec({"name": "priority", "type": "keyword"})
    with pytest.raises(FilterError, match="declare it as int, keyword"):
        filter_type("priority", declared_types([ORDERS.search_attributes, other.search_attributes]))
