"""Who a caller is: principals, the identity a request carries, API keys and
how long a token may be trusted.

Pure: no Kubernetes call, and the clock is a parameter. Tokens and keys are
never logged and never kept: keys are held as their SHA-256."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from sluiceway.kubeapi.auth import SERVICE_ACCOUNT_ANNOTATION, KeySecret
from sluiceway.model.common import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN

log = logging.getLogger(__name__)

TOKEN_TTL = 60.0
MIN_KEY_LENGTH = 16
# Without a successful re-list for this long, keys are not trusted: a Secret
# deleted while the API server was unreachable must not keep working.
KEYS_STALE_AFTER = 60.0
SA_PREFIX = "system:serviceaccount:"
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)


@dataclass(frozen=True)
class Principal:
    user: str
    groups: tuple[str, ...]


def service_account_principal(namespace: str, name: str) -> Principal:
    return Principal(
        f"{SA_PREFIX}{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@dataclass(frozen=True)
class Identity:
    """`request.state.identity`. `token`: the caller's bearer token, for writes
    made with the caller's authority; `impersonate`: (user, groups) to act as
    for writes, set only for API keys when keys may write."""

    user: str
    groups: tuple[str, ...]
    via: Literal["token", "api-key"]
    token: str | None = field(default=None, repr=False)
    impersonate: tuple[str, list[str]] | None = None
    key: str | None = None  # the API key's Secret

    @property
    def principal(self) -> Principal:
        return Principal(self.user, self.groups)


# -- tokens --------------------------------------------------------------------


def digest(secret: str | bytes) -> bytes:
    return hashlib.sha256(secret.encode() if isinstance(secret, str) else secret).digest()


def token_expiry(token: str) -> float | None:
    """The `exp` claim (Unix seconds) of a JWT, read without verifying it: it
    only ever shortens how long a TokenReview's answer is trusted."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def token_ttl(token: str, now: float, ceiling: float = TOKEN_TTL) -> float:
    """How long to trust a TokenReview's yes: at most `ceiling`, never past
    the token's expiry (`now` is Unix seconds)."""
    expires = token_expiry(token)
    return ceiling if expires is None else max(0.0, min(ceiling, expires - now))


# -- API keys ------------------------------------------------------------------


@dataclass(frozen=True)
class ApiKey:
    secret: str  # the Secret's name
    digest: bytes  # SHA-256 of the key; the key itself is not kept
    namespace: str  # of the ServiceAccount it acts as
    service_account: str

    @property
    def principal(self) -> Principal:
        return service_account_principal(self.namespace, self.service_account)


def parse_key_secret(secret: KeySecret) -> ApiKey | str:
    """The key a Secret holds, or why it holds none (a message naming no key)."""
    if secret.key is None:
        return f"Secret {secret.name} has no data key `key`"
    key = secret.key.strip()
    if len(key) < MIN_KEY_LENGTH:
        return f"Secret {secret.name}: the key is shorter than {MIN_KEY_LENGTH} bytes"
    sa_namespace, _, sa_name = (secret.service_account or "").strip().partition("/")
    if not _DNS_LABEL.match(sa_namespace) or not _DNS_SUBDOMAIN.match(sa_name):
        return f"Secret {secret.name}: annotation {SERVICE_ACCOUNT_ANNOTATION} must be <namespace>/<serviceaccount>"
    return ApiKey(secret.name, digest(key), sa_namespace, sa_name)


class ApiKeys:
    """The keys in memory, replaced wholesale by each re-list."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, stale_after: float = KEYS_STALE_AFTER) -> None:
        self.clock = clock
        self.stale_after = stale_after
        self._keys: tuple[ApiKey, ...] = ()
        self._refreshed: float | None = None
        self._problems: frozenset[str] = frozenset()

    @property
    def loaded(self) -> bool:
        return self._refreshed is not None

    @property
    def fresh(self) -> bool:
        return self._refreshed is not None and self.clock() - self._refreshed < self.stale_after

    def __len__(self) -> int:
        return len(self._keys)

    def replace(self, secrets: Iterable[KeySecret]) -> None:
        keys, problems = [], set()
        for secret in secrets:
            parsed = parse_key_secret(secret)
            if isinstance(parsed, str):
                problems.add(parsed)
            else:
                keys.append(parsed)
        for problem in sorted(problems - self._problems):
            log.warning("API key ignored: %s", problem)
        self._problems = frozenset(problems)
        self._keys = tuple(keys)
        self._refreshed = self.clock()

    def lookup(self, presented: str) -> ApiKey | None:
        """The key matching `presented`. Every key is compared, in constant
        time, on digests: neither timing nor length tells a near miss."""
        wanted = digest(presented.strip())
        found = None
        for key in self._keys:
            if hmac.compare_digest(key.digest, wanted):
                found = key
        return found
