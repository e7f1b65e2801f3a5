"""What a namespace's Quotas say about it as a tenant: the payload limits
they set and the destinations its system tasks may reach despite the egress
policy. Read once per namespace and kept, without a query per request, until
a Quota of the namespace changes: storing a Quota drops the namespace's rules
in this process before the store returns (`rules_changed`), and in every
other replica when the notification its transaction sends arrives
(`store.notifications`, milliseconds). `ttl` only bounds what a replica whose
notification connection is down keeps (it drops everything on reconnecting)."""

from __future__ import annotations

import time
import weakref
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


# Every rules cache of this process, so a Quota stored here is applied here
# before its reconciler reports it stored (a notification comes back later).
_CACHES: weakref.WeakSet[Tenants] = weakref.WeakSet()


def rules_changed(namespace: str) -> None:
    """A Quota of `namespace` was stored or deleted by this process: every
    cache of this process reads the namespace's rules again."""
    for cache in list(_CACHES):
        cache.invalidate(namespace)


class Tenants:
    """The rules of each namespace, cached until they change (see the module)."""

    def __init__(self, ttl: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._entries: dict[str, tuple[float, TenantRules]] = {}
        # Counts invalidations: rules read while one happened may predate the
        # change, so they are returned but not kept.
        self._invalidations = 0
        _CACHES.add(self)

    def invalidate(self, namespace: str | None = None) -> None:
        self._invalidations += 1
        if namespace is None:
            self._entries.clear()
        else:
            self._entries.pop(namespace, None)

    async def of(self, pool: Pool, namespace: str) -> TenantRules:
        entry = self._entries.get(namespace)
        now = self.clock()
        if entry is not None and now - entry[0] <= self.ttl:
            return entry[1]
        before = self._invalidations
        async with pool.acquire() as conn:
            rules = await tenant_rules(conn, namespace)
        if self._invalidations != before:
            return rules
        if len(self._entries) > 10_000:  # forget namespaces long gone
            self._entries.clear()
        self._entries[namespace] = (now, rules)
        return rules
