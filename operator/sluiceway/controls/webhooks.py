"""Webhook calls: is this call from who the Webhook trusts, and which waiting
tasks does it complete? Pure: the headers, body, secret and `now` are given.

Verification follows the sender's own scheme: Sluiceway's (what its WEBHOOK
task sends: a timestamp header and an HMAC-SHA256 of `timestamp.body`),
GitHub's (`X-Hub-Signature-256: sha256=<hex>` of the body), Stripe's
(`Stripe-Signature: t=...,v1=...` of `t.body`), or a static token header.
Every comparison is constant-time; a timestamped signature older or newer
than the tolerance is refused, so a captured call cannot be replayed later.

Matching: a task's `matches` is either an object of payload paths to the
values they must equal (`{"orderId": 42, "data.status": "paid"}`), or a CEL
expression over `payload`, `headers` (lower-case names) and `input` (the
task's other inputs). A task with no `matches` takes the first call."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from sluiceway.controls.expressions import ExpressionError, evaluate_cel, lookup
from sluiceway.model.webhook import HmacScheme, HmacVerification, TokenVerification, WebhookSpec

SIGNATURE_HEADER = "x-sluiceway-signature"
TIMESTAMP_HEADER = "x-sluiceway-timestamp"
GITHUB_HEADER = "x-hub-signature-256"
STRIPE_HEADER = "stripe-signature"


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """Sluiceway's signature of a body sent at `timestamp` (Unix seconds)."""
    return "sha256=" + hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signed_headers(secret: bytes, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers a signed call carries (what the WEBHOOK task sends)."""
    return {"X-Sluiceway-Timestamp": str(timestamp), "X-Sluiceway-Signature": sign(secret, timestamp, body)}


def verify(spec: WebhookSpec, secret: bytes, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """Why this call is not verified (for the log), or None when it is.
    `headers` have lower-case names; `now` is Unix seconds."""
    if spec.token is not None:
        return _token(spec.token, secret, headers)
    assert spec.hmac is not None  # the model requires one of the two
    return _hmac(spec.hmac, secret, headers, body, now)


def _token(config: TokenVerification, secret: bytes, headers: Mapping[str, str]) -> str | None:
    sent = headers.get(config.header.lower())
    if sent is None:
        return f"no {config.header} header"
    if not hmac.compare_digest(sent.strip().encode(), secret.strip()):
        return f"{config.header} does not match"
    return None


def _hex(secret: bytes, content: bytes) -> str:
    return hmac.new(secret, content, hashlib.sha256).hexdigest()


def _hmac(config: HmacVerification, secret: bytes, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    if config.scheme is HmacScheme.GITHUB:
        sent = headers.get(GITHUB_HEADER, "")
        expected = "sha256=" + _hex(secret, body)
        return None if sent and hmac.compare_digest(sent.strip(), expected) else f"{GITHUB_HEADER} does not match"
    if config.scheme is HmacScheme.STRIPE:
        fields = [part.strip().partition("=") for part in headers.get(STRIPE_HEADER, "").split(",")]
        stamp = next((value for key, _, value in fields if key == "t"), None)
        candidates = [value for key, _, value in fields if key == "v1"]
    else:
        stamp = headers.get(TIMESTAMP_HEADER)
        candidates = [v.strip().removeprefix("sha256=") for v in headers.get(SIGNATURE_HEADER, "").split(",") if v]
    if stamp is None or not stamp.strip().isdigit():
        return "no signed timestamp"
    if abs(now - int(stamp)) > config.tolerance_seconds:
        return f"the signed timestamp is more than {config.tolerance_seconds} s from now"
    expected = _hex(secret, stamp.strip().encode() + b"." + body)
    # Every candidate is compared (Stripe sends one per active secret): no early exit to time.
    verified = [hmac.compare_digest(candidate.strip(), expected) for candidate in candidates]
    return None if any(verified) else "the signature does not match"


def matches(criteria: Any, payload: Any, headers: Mapping[str, str], inputs: Mapping[str, Any]) -> bool:
    """Does a call with this payload complete a task waiting with these `matches`?"""
    if criteria is None:
        return True
    if isinstance(criteria, Mapping):
        root = payload if isinstance(payload, Mapping) else {}
        try:
            return all(lookup(root, str(path)) == expected for path, expected in criteria.items())
        except ExpressionError:  # a path that does not parse matches nothing
            return False
    if isinstance(criteria, str):
        variables = {"payload": payload, "headers": dict(headers), "input": dict(inputs)}
        try:
            return evaluate_cel(criteria, variables) is True
        except ExpressionError:
            return False
    return False


def describe(criteria: Any) -> str:
    """`matches` for people: `orderId=42, data.status=paid` or the CEL itself."""
    if isinstance(criteria, Mapping):
        return ", ".join(f"{path}={value}" for path, value in criteria.items()) or "any call"
    if isinstance(criteria, str):
        return criteria
    return "any call"
