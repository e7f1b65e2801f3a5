"""The egress policy, enforced where system tasks connect
(`sluiceway.controls.egress` decides).

A name is resolved once, every address it resolves to is checked, and the
connection is made to a checked address: HTTP through a resolver plugged into
aiohttp's connector (so redirects, which resolve again, are checked too),
gRPC by dialling the checked address itself. DNS rebinding cannot swap the
address between the check and the connect. Connections are pooled per policy,
never shared between namespaces whose policies differ."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from sluiceway.controls.egress import EgressPolicy
from sluiceway.store.database import Pool
from sluiceway.store.tenancy import Tenants


class EgressRefused(Exception):
    """The policy denies this destination; the message names the policy."""


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_addresses(policy: EgressPolicy, host: str, addresses: list[str]) -> None:
    for address in addresses:
        refusal = policy.refusal(host, ipaddress.ip_address(address.partition("%")[0]))
        if refusal:
            raise EgressRefused(refusal)


def check_literal(policy: EgressPolicy, host: str) -> None:
    """A URL naming an address is never resolved (aiohttp connects to it as
    is): check it here."""
    address = _literal(host)
    if address is not None:
        check_addresses(policy, host.strip("[]"), [str(address)])


async def resolve_checked(policy: EgressPolicy, host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, every one allowed (EgressRefused
    otherwise); connect to these, not to the name."""
    if _literal(host) is not None:
        check_literal(policy, host)
        return [host.strip("[]")]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    check_addresses(policy, host, addresses)
    return addresses


class _CheckedResolver(AbstractResolver):
    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy
        self._inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        check_addresses(self.policy, host, [entry["host"] for entry in found])
        return found

    async def close(self) -> None:
        await self._inner.close()


class Egress:
    """The policy of each namespace (the operator's, plus its Quotas'
    `allowedEgress`), and an HTTP session per distinct policy."""

    def __init__(
        self, base: EgressPolicy | None = None, pool: Pool | None = None, tenants: Tenants | None = None
    ) -> None:
        self.base = base or EgressPolicy()
        self.pool = pool
        self.tenants = tenants or Tenants()
        self._sessions: dict[EgressPolicy, aiohttp.ClientSession] = {}

    async def policy(self, namespace: str) -> EgressPolicy:
        if self.pool is None:
            return self.base
        rules = await self.tenants.of(self.pool, namespace)
        return self.base.with_allowed(rules.allowed_egress)

    def session(self, policy: EgressPolicy) -> aiohttp.ClientSession:
        session = self._sessions.get(policy)
        if session is None or session.closed:
            # No DNS cache: every new connection is resolved, and checked, afresh.
            connector = aiohttp.TCPConnector(resolver=_CheckedResolver(policy), use_dns_cache=False)
            session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
            self._sessions[policy] = session
        return session

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


def refused_cause(error: BaseException) -> EgressRefused | None:
    """The EgressRefused behind an error aiohttp raised, if any."""
    seen: Any = error
    while seen is not None:
        if isinstance(seen, EgressRefused):
            return seen
        seen = seen.__cause__
    return None
