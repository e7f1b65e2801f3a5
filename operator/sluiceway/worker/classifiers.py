"""Retry classifiers: per-instance verdicts on an exception, as in the TaskQ
reference. A classifier returns a RetryOverride or None ("no opinion: the
policy decides").

- `non_retryable`: reported FAILED_WITH_TERMINAL_ERROR, never retried.
- `transient`: reported FAILED (an attempt is spent), with `delay` as an exact
  Retry-After when given.
- `indefinite`: wait it out without spending attempts (a snooze); only
  scheduleToCloseTimeout ends it, so give such tasks one.

Classify by status, not by class: 429 and 408 are 4xx and are the statuses
most worth retrying.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger(__name__)

Kind = Literal["transient", "indefinite", "non_retryable"]


@dataclass(frozen=True)
class RetryOverride:
    kind: Kind | None = None
    delay: float | None = None  # seconds, honored exactly (never jittered)


Classifier = Callable[[BaseException, int], "RetryOverride | None"]

# Decimal-fraction seconds, ASCII digits only. A comma decimal, scientific
# notation, a sign, underscores, non-ASCII digits and embedded whitespace are
# all garbage: a rate-limit hint is a human-scale count of seconds.
_SECONDS = re.compile(r"[0-9]+(\.[0-9]+)?", re.ASCII)
_MAX_SECONDS = 1e15  # representability saturation, not a policy: the server's ceiling clamps


def parse_retry_after(value: str | None, now: datetime.datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After value, or None for anything that is
    not a positive delay (the declared policy's curve then decides)."""
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        seconds = min(float(text), _MAX_SECONDS)
        return seconds if seconds > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    now = now or datetime.datetime.now(datetime.UTC)
    seconds = (when - now).total_seconds()
    return seconds if seconds > 0 else None


def _headers(exc: BaseException) -> Mapping[str, Any] | None:
    response = getattr(exc, "response", None)
    for candidate in (getattr(response, "headers", None), getattr(exc, "headers", None)):
        if candidate is not None and hasattr(candidate, "items"):
            found: Mapping[str, Any] = candidate
            return found
    return None


def retry_after_hint(exc: BaseException, now: datetime.datetime | None = None) -> float | None:
    """The server's delay hint on an exception: Retry-After wins over X-Retry-After."""
    headers = _headers(exc)
    if headers is None:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    for name in ("retry-after", "x-retry-after"):
        if name in lowered:
            return parse_retry_after(lowered[name], now)
    return None


def status_of(exc: BaseException) -> int | None:
    """An HTTP status from the common client exception shapes, duck-typed."""
    response = getattr(exc, "response", None)
    for candidate in (
        getattr(response, "status_code", None),
        getattr(response, "status", None),
        getattr(exc, "status", None),
        getattr(exc, "status_code", None),
    ):
        if isinstance(candidate, int) and not isinstance(candidate, bool):
            return candidate
    return None


def make_rate_limit_aware_classifier(claim_kind: Kind | None = "indefinite") -> Classifier:
    """Claims HTTP 429 (and exceptions named RateLimitError) with the server's hint as the delay."""
    if claim_kind not in ("indefinite", "transient", None):
        raise ValueError(f"claim_kind must be 'indefinite', 'transient' or None, not {claim_kind!r}")

    def classify(exc: BaseException, attempt: int) -> RetryOverride | None:
        if claim_kind is None:
            return None
        if status_of(exc) != 429 and type(exc).__name__ != "RateLimitError":
            return None
        return RetryOverride(kind=claim_kind, delay=retry_after_hint(exc))

    return classify


rate_limit_aware_classifier = make_rate_limit_aware_classifier("indefinite")

DEFAULT_TRANSIENT_STATUSES = frozenset({408, 425, *range(500, 600)})
DEFAULT_NON_RETRYABLE_STATUSES = frozenset(set(range(400, 500)) - {408, 425, 429})
DEFAULT_TRANSIENT_EXCEPTION_NAMES = frozenset(
    {
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ConnectError",
        "RemoteProtocolError",
        "ServerTimeoutError",
        "ServerDisconnectedError",
        "ClientConnectorError",
        "ClientOSError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
    }
)


def failure_taxonomy_classifier(
    *,
    transient_status: Iterable[int] = DEFAULT_TRANSIENT_STATUSES,
    non_retryable_status: Iterable[int] = DEFAULT_NON_RETRYABLE_STATUSES,
    include_names: Iterable[str] = DEFAULT_TRANSIENT_EXCEPTION_NAMES,
    exclude_names: Iterable[str] = (),
    infer_timeout_by_suffix: bool = False,
) -> Classifier:
    """Connection and timeout shapes and 5xx/408/425 are transient; other 4xx
    are non-retryable; anything else: no opinion. Never `indefinite`. Passing
    a set replaces the default entirely."""
    transient, terminal = frozenset(transient_status), frozenset(non_retryable_status)
    include, exclude = frozenset(include_names), frozenset(exclude_names)

    def classify(exc: BaseException, attempt: int) -> RetryOverride | None:
        name = type(exc).__name__
        if name in exclude:
            return None
        status = status_of(exc)
        if (
            isinstance(exc, (ConnectionError, TimeoutError))
            or name in include
            or (infer_timeout_by_suffix and (name.endswith("Timeout") or name.endswith("TimeoutError")))
            or (status is not None and status in transient)
        ):
            return RetryOverride(kind="transient")
        if status is not None and status in terminal:
            return RetryOverride(kind="non_retryable")
        return None

    return classify


def compose_retry_classifiers(*classifiers: Classifier) -> Classifier:
    """The first override wins; a classifier that raises or returns something
    else is logged and skipped, never fatal."""

    def classify(exc: BaseException, attempt: int) -> RetryOverride | None:
        for classifier in classifiers:
            try:
                verdict = classifier(exc, attempt)
            except (KeyboardInterrupt, asyncio.CancelledError):
                raise
            except Exception as error:  # noqa: BLE001 - a broken classifier degrades to the policy
                log.warning("retry classifier %r raised %r; skipping it", classifier, error)
                continue
            if verdict is None:
                continue
            if not isinstance(verdict, RetryOverride):
                log.warning("retry classifier %r returned %r, not a RetryOverride; skipping it", classifier, verdict)
                continue
            return verdict
        return None

    return classify
