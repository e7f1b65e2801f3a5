"""A list cursor is opaque to callers, so anything that is not one this API
wrote (any decoded shape, any text) is refused as Invalid naming `cursor` (a
422 at the API), never an error of the server; and a cursor it did write
names a position PostgreSQL can compare with."""

from __future__ import annotations

import base64
import datetime
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluiceway.plane.errors import Invalid
from sluiceway.plane.finding import Order, decode_cursor, encode_cursor
from sluiceway.store.listing import Position

FUZZ = settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)
INSTANT = "2026-11-02T08:00:00+00:00"
RUN = "0b7e3c1a-5d2f-4e8a-9c61-2f0d8a4b7e10"


def forged(raw: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")


def refused_naming_cursor(text: str) -> Invalid:
    with pytest.raises(Invalid) as refused:
        decode_cursor(text, Order.NEWEST)
    assert refused.value.field == "cursor", refused.value
    return refused.value


def test_a_cursor_it_wrote_reads_back() -> None:
    position = Position(datetime.datetime(2026, 11, 2, 8, tzinfo=datetime.UTC), uuid.UUID(RUN))
    assert decode_cursor(encode_cursor(position, Order.OLDEST), Order.OLDEST) == position


def test_a_cursor_of_the_other_order_says_which_order_it_is_for() -> None:
    position = Position(datetime.datetime(2026, 11, 2, 8, tzinfo=datetime.UTC), uuid.UUID(RUN))
    refused = refused_naming_cursor(encode_cursor(position, Order.OLDEST))
    assert "order=oldest" in refused.message


@pytest.mark.parametrize(
    "raw",
    [
        {"t": INSTANT, "i": 5, "o": "newest"},
        {"t": INSTANT, "i": {"a": 1}, "o": "newest"},
        {"t": INSTANT, "i": [RUN], "o": "newest"},
        {"t": INSTANT, "i": None, "o": "newest"},
        {"t": INSTANT, "i": True, "o": "newest"},
        {"t": 1762070400, "i": RUN, "o": "newest"},
        {"t": {"t": INSTANT}, "i": RUN, "o": "newest"},
        {"t": INSTANT, "i": RUN, "o": ["newest"]},
        {"t": INSTANT, "i": RUN, "o": {"newest": 1}},
        {"t": INSTANT, "i": RUN},
        {"t": "2026-11-02T08:00:00", "i": RUN, "o": "newest"},
        # Aware, but outside what an instant in UTC can be: PostgreSQL is sent UTC.
        {"t": "0001-01-01T00:00:00+14:00", "i": RUN, "o": "newest"},
        {"t": "9999-12-31T23:59:59-14:00", "i": RUN, "o": "newest"},
        [INSTANT, RUN, "newest"],
        "a string",
        42,
        None,
    ],
    ids=repr,
)
def test_a_forged_cursor_of_any_shape_is_a_422_naming_the_cursor(raw: Any) -> None:
    refused_naming_cursor(forged(raw))


@pytest.mark.parametrize("text", ["", "not-a-cursor", "!!!!", "é", "[" * 300, base64.b64encode(b"\xff\xfe").decode()])
def test_text_that_is_no_cursor_is_a_422_naming_the_cursor(text: str) -> None:
    refused_naming_cursor(text)


def test_a_deeply_nested_forgery_is_a_422_too() -> None:
    nested = base64.urlsafe_b64encode(b"[" * 100_000).decode()
    refused_naming_cursor(nested)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12,
)
INSTANTS = st.datetimes(
    timezones=st.one_of(
        st.none(),
        st.timedeltas(datetime.timedelta(hours=-23, minutes=-59), datetime.timedelta(hours=23, minutes=59)).map(
            datetime.timezone
        ),
    )
).map(lambda d: d.isoformat())
# Each field: a value of the right kind (often), a near miss, or any JSON.
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "t": INSTANTS | JSON,
        "i": st.uuids().map(str) | st.text(max_size=40) | JSON,
        "o": st.sampled_from(["newest", "oldest", "NEWEST", ""]) | JSON,
    },
)


@FUZZ
@given(raw=FIELDS | JSON)
def test_no_decoded_shape_is_anything_but_a_position_or_a_422(raw: Any) -> None:
    text = forged(raw)
    try:
        position = decode_cursor(text, Order.NEWEST)
    except Invalid as refused:
        assert refused.field == "cursor", refused
        return
    assert position.created_at.utcoffset() == datetime.timedelta(0), "PostgreSQL is sent an instant in UTC"
    assert decode_cursor(encode_cursor(position, Order.NEWEST), Order.NEWEST) == position


@FUZZ
@given(text=st.text(max_size=512))
def test_no_text_is_anything_but_a_position_or_a_422(text: str) -> None:
    try:
        decode_cursor(text, Order.OLDEST)
    except Invalid as refused:
        assert refused.field == "cursor", refused
