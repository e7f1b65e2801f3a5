"""What a namespace's Quotas say about it as a tenant: the payload limits
they set and the destinations its system tasks may reach despite the egress
policy. Read once per namespace and kept `ttl` seconds: a Quota edited takes
effect within seconds on every replica, without a query per request."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from sluiceway.store.database import Pool

_RULES = "SELECT resource_name, max_payload_bytes, allowed_egress, dispatch_weight FROM quotas WHERE namespace = $1"


@dataclass(frozen=True)
class TenantRules:
    payload_limits: tuple[tuple[str, int | None], ...] = ()  # (Quota name, maxPayloadBytes)
    allowed_egress: tuple[str, ...] = ()  # every Quota's entries: each one allows
    dispatch_weight: int = 1  # the largest a Quota sets: its share of the operator's system-task slots


async def tenant_rules(conn: asyncpg.Connection, namespace: str) -> TenantRules:
    rows = await conn.fetch(_RULES, namespace)
    return TenantRules(
        payload_limits=tuple((r["resource_name"], r["max_payload_bytes"]) for r in rows),
        allowed_egress=tuple(sorted({entry for r in rows for entry in r["allowed_egress"]})),
        dispatch_weight=max((r["dispatch_weight"] for r in rows if r["dispatch_weight"] is not None), default=1),
    )


class Tenants:
    """The rules of each namespace, cached for `ttl` seconds."""

    def __init__(self, ttl: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._entries: dict[str, tuple[float, TenantRules]] = {}

    def invalidate(self, namespace: str | None = None) -> None:
        if namespace is None:
            self._entries.clear()
        else:
            self._entries.pop(namespace, None)

    async def of(self, pool: Pool, namespace: str) -> TenantRules:
        entry = self._entries.get(namespace)
        now = self.clock()
        if entry is not None and now - entry[0] <= self.ttl:
            return entry[1]
        async with pool.acquire() as conn:
            rules = await tenant_rules(conn, namespace)
        if len(self._entries) > 10_000:  # forget namespaces long gone
            self._entries.clear()
        self._entries[namespace] = (now, rules)
        return rules
