"""What a Trigger does with one event: its condition, its input mapping, its
dedup id, and every way an expression can fail naming its field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.controls.triggers import (
    Filtered,
    Invalid,
    Mapped,
    dedup_key,
    delivery_id,
    event_variable,
    judge,
)
from sluiceway.model.trigger import MAX_DEDUP_WINDOW_SECONDS, TriggerSpec

ORDER = {"order": {"id": 42, "total": 120.5, "status": "paid"}, "customer": "ada"}


def spec(**fields: Any) -> TriggerSpec:
    return TriggerSpec.model_validate({"event": "order-paid", "workflow": "ship", **fields})


def event(payload: Any = ORDER, headers: dict[str, str] | None = None) -> dict[str, Any]:
    headers = headers or {}
    return event_variable("order-paid", delivery_id(headers, payload), "api", payload, headers)


def test_without_expressions_the_payload_is_the_input_and_the_delivery_id_dedups() -> None:
    found = judge(spec(), event(headers={"x-sluiceway-event-id": "evt-1"}))
    assert found == Mapped(ORDER, "evt-1")


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("event.payload.order.status == 'paid'", True),
        ("event.payload.order.total > 500.0", False),
        ("event.source == 'api' && event.name == 'order-paid'", True),
        ("'x-test' in event.headers", False),
    ],
)
def test_the_condition_decides_whether_a_run_starts(condition: str, expected: bool) -> None:
    found = judge(spec(condition=condition), event())
    assert isinstance(found, Mapped) is expected
    if not expected:
        assert found == Filtered()


def test_the_input_is_mapped_by_cel_and_the_dedup_id_by_its_own_expression() -> None:
    found = judge(
        spec(
            input="{'orderId': event.payload.order.id, 'who': event.payload.customer, 'via': event.id}",
            eventId="event.payload.order.id",
        ),
        event(headers={"idempotency-key": "k-9"}),
    )
    assert found == Mapped({"orderId": 42, "who": "ada", "via": "k-9"}, "42")


@pytest.mark.parametrize(
    ("fields", "payload", "field"),
    [
        ({"condition": "event.payload.missing.deep == 1"}, ORDER, "condition"),
        ({"condition": "event.payload.customer"}, ORDER, "condition"),  # a string, not a bool
        ({"input": "event.payload.customer"}, ORDER, "input"),  # a string, not an object
        ({"input": "event.payload.nothing"}, ORDER, "input"),
        ({}, [1, 2, 3], "payload"),  # the default input: a payload that is no object
        ({"eventId": "event.payload.nothing"}, ORDER, "eventId"),
        ({"eventId": "event.payload.order"}, ORDER, "eventId"),  # a map is no id
        ({"eventId": "''"}, ORDER, "eventId"),
        ({"eventId": "true"}, ORDER, "eventId"),
    ],
)
def test_an_expression_that_fails_on_an_event_is_invalid_naming_its_field(
    fields: dict[str, str], payload: Any, field: str
) -> None:
    found = judge(spec(**fields), event(payload))
    assert isinstance(found, Invalid), found
    assert found.field == field


def test_the_delivery_id_is_the_first_id_header_else_a_hash_of_the_canonical_body() -> None:
    assert delivery_id({"x-github-delivery": "gh", "idempotency-key": "ik"}, {}) == "ik"
    assert delivery_id({"x-sluiceway-event-id": " s ", "idempotency-key": "ik"}, {}) == "s"
    hashed = delivery_id({}, {"a": 1, "b": 2})
    assert hashed.startswith("sha256:")
    assert delivery_id({}, {"b": 2, "a": 1}) == hashed  # key order is no new event
    assert delivery_id({}, {"a": 1, "b": 3}) != hashed
    assert delivery_id({"idempotency-key": "  "}, {"a": 1, "b": 2}) == hashed  # a blank header is none


def test_the_dedup_key_is_per_trigger_uid_and_event_id_and_fits_a_request_id() -> None:
    key = dedup_key("uid-1", "evt")
    assert key == dedup_key("uid-1", "evt")
    assert key != dedup_key("uid-2", "evt")  # a Trigger created again starts afresh
    assert key != dedup_key("uid-1", "evt2")
    assert dedup_key("uid-1", "x" * 512).startswith("trigger:") and len(dedup_key("uid-1", "x" * 512)) < 64


@pytest.mark.parametrize("field", ["condition", "input", "eventId"])
def test_a_spec_whose_cel_does_not_compile_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        spec(**{field: "event.payload.("})
    assert refused.value.errors()[0]["loc"] == (field,)


def test_the_dedup_window_is_bounded() -> None:
    assert spec().dedup_window_seconds == 86_400
    with pytest.raises(ValidationError):
        spec(dedupWindowSeconds=MAX_DEDUP_WINDOW_SECONDS + 1)
    with pytest.raises(ValidationError):
        spec(dedupWindowSeconds=0)


def test_credentials_in_headers_are_never_shown_to_a_trigger() -> None:
    headers = {"authorization": "Bearer t", "x-api-key": "k", "cookie": "c", "x-token": "s3cret", "x-trace": "1"}
    shown = event_variable("e", "id", "webhook w", {}, headers, frozenset({"x-token"}))["headers"]
    assert shown == {"x-trace": "1"}
    seen = event_variable("order-paid", "evt", "api", ORDER, {"authorization": "Bearer t"})
    found = judge(spec(input="{'leak': event.headers.authorization}"), seen)
    assert isinstance(found, Invalid) and found.field == "input"
