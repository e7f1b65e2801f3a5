"""The payload limit of a namespace: the operator's, lowered (never raised)
by its Quotas, naming what set it; and the refusal's wording."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sluiceway.controls.payloads import OPERATOR_SETTING, PayloadLimit, oversized, payload_limit
from sluiceway.model.quota import QuotaSpec


@pytest.mark.parametrize(
    ("quotas", "expected"),
    [
        ([], PayloadLimit(2048, OPERATOR_SETTING)),
        ([("a", None)], PayloadLimit(2048, OPERATOR_SETTING)),
        ([("a", 4096)], PayloadLimit(2048, OPERATOR_SETTING)),  # a Quota never raises it
        ([("b", 1024), ("a", 1500)], PayloadLimit(1024, "Quota b maxPayloadBytes")),
        ([("b", 1024), ("a", 1024)], PayloadLimit(1024, "Quota a maxPayloadBytes")),  # a tie names the first
    ],
)
def test_the_lowest_limit_applies_and_is_named(quotas: list[tuple[str, int | None]], expected: PayloadLimit) -> None:
    assert payload_limit(2048, quotas) == expected


def test_a_value_at_the_limit_fits_and_one_byte_more_is_named() -> None:
    limit = PayloadLimit(100, OPERATOR_SETTING)
    assert oversized("input", 100, limit) is None
    found = oversized("input", 101, limit)
    assert found is not None
    assert found.message.startswith("input: 101 bytes of JSON, over the limit of 100 bytes (SLUICEWAY_MAX_PAYLOAD")
    assert found.details() == {
        "control": "maxPayloadBytes",
        "field": "input",
        "size": 101,
        "limit": 100,
        "limitSource": OPERATOR_SETTING,
    }


@pytest.mark.parametrize("entry", ["api.example.com", "*.example.com", "10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8"])
def test_egress_entries_that_name_a_destination_are_accepted(entry: str) -> None:
    assert QuotaSpec.model_validate({"allowedEgress": [entry]}).allowed_egress == [entry]


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "300.1.1.1", "a.*.example.com", "http://x", ""])
def test_egress_entries_that_name_nothing_are_refused(entry: str) -> None:
    with pytest.raises(ValidationError, match="allowedEgress"):
        QuotaSpec.model_validate({"allowedEgress": [entry]})
