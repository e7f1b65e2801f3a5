"""The worker-side retry classifiers of the TaskQ reference."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sluiceway.worker.classifiers import (
    RetryOverride,
    compose_retry_classifiers,
    failure_taxonomy_classifier,
    make_rate_limit_aware_classifier,
    parse_retry_after,
    rate_limit_aware_classifier,
    retry_after_hint,
    status_of,
)

NOW = datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("0.5", 0.5),
        (" 30 ", 30.0),  # surrounding whitespace is the header's, not the value's
        ("100000", 100000.0),  # a finite hint is never garbage: the server's ceiling clamps it
        ("1" + "0" * 30, 1e15),  # saturates instead of crashing
        ("Sun, 29 Nov 2026 12:01:00 GMT", 60.0),  # RFC 9110 IMF-fixdate
        ("0", None),  # Retry-After: 0 falls back to the policy's curve
        ("1,5", None),
        ("1e3", None),
        ("+30", None),
        ("-5", None),
        ("1_000", None),
        ("١٢٣", None),  # non-ASCII digits
        ("1 000", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Sun, 29 Nov 2026 11:59:00 GMT", None),  # a date in the past is no delay
    ],
)
def test_retry_after_grammar(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


class _Response:
    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


class HTTPStatusError(Exception):  # the httpx / requests shape
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = _Response(status, headers)


class ClientResponseError(Exception):  # the aiohttp shape
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers or {}


class RateLimitError(Exception):  # the openai / anthropic SDK shape
    pass


def test_status_is_read_from_every_common_shape() -> None:
    assert status_of(HTTPStatusError(503)) == 503
    assert status_of(ClientResponseError(429)) == 429
    assert status_of(ValueError()) is None


def test_the_standard_header_wins_over_x_retry_after() -> None:
    exc = ClientResponseError(429, {"X-Retry-After": "9", "retry-after": "3"})
    assert retry_after_hint(exc) == 3.0
    assert retry_after_hint(ClientResponseError(429, {"x-retry-after": "9"})) == 9.0


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (HTTPStatusError(429, {"Retry-After": "7"}), RetryOverride("indefinite", 7.0)),
        (ClientResponseError(429), RetryOverride("indefinite", None)),
        (ClientResponseError(429, {"Retry-After": "0"}), RetryOverride("indefinite", None)),
        (ClientResponseError(429, {"Retry-After": "1e3"}), RetryOverride("indefinite", None)),
        (RateLimitError("slow down"), RetryOverride("indefinite", None)),
        (HTTPStatusError(500), None),
        (HTTPStatusError(404), None),
        (ValueError("x"), None),
    ],
)
def test_rate_limit_aware_classifier(exc: BaseException, expected: RetryOverride | None) -> None:
    assert rate_limit_aware_classifier(exc, 1) == expected


def test_the_bounded_mode_claims_transient_and_the_none_mode_never_claims() -> None:
    exc = ClientResponseError(429, {"Retry-After": "2"})
    assert make_rate_limit_aware_classifier("transient")(exc, 1) == RetryOverride("transient", 2.0)
    assert make_rate_limit_aware_classifier(None)(exc, 1) is None
    with pytest.raises(ValueError):
        make_rate_limit_aware_classifier("forever")  # type: ignore[arg-type]


class ReadTimeout(Exception):  # httpx's name, claimed without importing httpx
    pass


class ExecutionTimeout(Exception):  # pymongo's: a deadline that means failure
    pass


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ConnectionResetError(), "transient"),
        (TimeoutError(), "transient"),
        (ReadTimeout(), "transient"),
        (HTTPStatusError(503), "transient"),
        (HTTPStatusError(408), "transient"),
        (HTTPStatusError(425), "transient"),
        (HTTPStatusError(404), "non_retryable"),
        (HTTPStatusError(422), "non_retryable"),
        (HTTPStatusError(429), None),  # carved out: the rate-limit classifier owns it
        (ExecutionTimeout(), None),  # exact names by default: no suffix guessing
        (KeyError("x"), None),
    ],
)
def test_failure_taxonomy(exc: BaseException, kind: str | None) -> None:
    verdict = failure_taxonomy_classifier()(exc, 1)
    assert (verdict.kind if verdict else None) == kind
    assert verdict is None or verdict.kind != "indefinite"


def test_taxonomy_options_replace_and_exclude() -> None:
    assert failure_taxonomy_classifier(infer_timeout_by_suffix=True)(ExecutionTimeout(), 1) == RetryOverride(
        "transient"
    )
    assert failure_taxonomy_classifier(exclude_names={"ReadTimeout"})(ReadTimeout(), 1) is None
    custom = failure_taxonomy_classifier(transient_status={429})
    assert custom(HTTPStatusError(429), 1) == RetryOverride("transient")
    assert custom(HTTPStatusError(503), 1) is None, "passing a set replaces the default entirely"


def test_composition_first_override_wins_and_broken_ones_are_skipped() -> None:
    calls: list[str] = []

    def broken(exc: BaseException, attempt: int) -> RetryOverride | None:
        calls.append("broken")
        raise RuntimeError("bug in a classifier")

    def wrong_type(exc: BaseException, attempt: int) -> Any:
        calls.append("wrong_type")
        return "retry please"

    def mine(exc: BaseException, attempt: int) -> RetryOverride | None:
        calls.append("mine")
        return RetryOverride("non_retryable") if status_of(exc) == 429 else None

    composed = compose_retry_classifiers(broken, wrong_type, mine, rate_limit_aware_classifier)
    assert composed(ClientResponseError(429, {"Retry-After": "5"}), 1) == RetryOverride("non_retryable")
    assert calls == ["broken", "wrong_type", "mine"], "the rate-limit classifier is never consulted"
    assert composed(ClientResponseError(429, {"Retry-After": "5"}), 1) is not None
    assert compose_retry_classifiers()(ValueError(), 1) is None


def test_cancellation_is_never_an_outcome() -> None:
    import asyncio

    def cancelled(exc: BaseException, attempt: int) -> RetryOverride | None:
        raise asyncio.CancelledError()

    with pytest.raises(asyncio.CancelledError):
        compose_retry_classifiers(cancelled)(ValueError(), 1)
