"""The egress policy of system tasks: which addresses an HTTP, HTTP_POLL,
WEBHOOK or GRPC task may make the operator connect to.

System tasks run inside the operator's network identity, so without a policy
a tenant's workflow could reach whatever the operator reaches: its own
endpoints on loopback, cloud metadata on link-local addresses, the
Kubernetes API, and every other tenant's services. Denied by default:

- loopback, link-local, unspecified and multicast addresses (always);
- the operator's own addresses, the Kubernetes API server's addresses, and
  the cluster's service and pod ranges (as configured: SLUICEWAY_SERVICE_CIDRS,
  SLUICEWAY_POD_CIDRS).

An entry of the operator's SLUICEWAY_EGRESS_ALLOWED, or of a Quota's
`allowedEgress` in the task's namespace, allows a destination despite them:
a host name (`billing.team-a.svc.cluster.local`), a suffix (`*.team-a.svc`),
an address or a CIDR. Decisions are on resolved addresses, so the caller
must connect to the address it checked (no second lookup an attacker's DNS
could answer differently). Pure: no lookup here."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

POLICY = "egress policy"
HOW_TO_ALLOW = "a Quota's allowedEgress in the task's namespace allows it (see docs/security.md)"


def _normalized(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is the IPv4 address it maps."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _always_denied(address: IPAddress) -> str | None:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local (cloud metadata)"
    if address.is_unspecified or address in ipaddress.ip_network("0.0.0.0/8"):
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    return None


def _host_matches(host: str, entry: str) -> bool:
    host, entry = host.lower().rstrip("."), entry.lower().rstrip(".")
    if entry.startswith("*."):
        return host.endswith(entry[1:])
    return host == entry


def _address_matches(address: IPAddress, entry: str) -> bool:
    try:
        network = ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False  # a host name
    return _in(address, network)


@dataclass(frozen=True)
class EgressPolicy:
    """`denied`: (range, what it is) beyond the ranges always denied;
    `allowed`: entries that allow despite both. Hashable: connections are
    pooled per policy, so one made under a laxer policy is never reused."""

    denied: tuple[tuple[IPNetwork, str], ...] = ()
    allowed: tuple[str, ...] = ()

    def with_allowed(self, entries: Iterable[str]) -> EgressPolicy:
        more = tuple(sorted(set(entries) - set(self.allowed)))
        return self if not more else EgressPolicy(self.denied, self.allowed + more)

    def allows_host(self, host: str) -> bool:
        """An entry names this host: whatever it resolves to is allowed."""
        return any(_host_matches(host, entry) for entry in self.allowed if not _is_address_entry(entry))

    def refusal(self, host: str, raw: IPAddress) -> str | None:
        """Why a task may not connect to `raw` (which `host` resolved to), or None."""
        address = _normalized(raw)
        if self.allows_host(host) or any(_address_matches(address, e) for e in self.allowed):
            return None
        what = _always_denied(address) or next((why for net, why in self.denied if _in(address, net)), None)
        if what is None:
            return None
        subject = f"{host} is" if host == str(raw) else f"{host} resolves to {raw}, which is"
        return f"{POLICY}: {subject} {what}, denied to system tasks unless {HOW_TO_ALLOW}"


def _in(address: IPAddress, network: IPNetwork) -> bool:
    return address.version == network.version and address in network


def _is_address_entry(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


def denied_ranges(
    service_cidrs: Iterable[str] = (),
    pod_cidrs: Iterable[str] = (),
    own_addresses: Iterable[str] = (),
    api_server_addresses: Iterable[str] = (),
) -> tuple[tuple[IPNetwork, str], ...]:
    """The configured denials, each named for the refusal. Raises ValueError
    naming an entry that is not a CIDR or an address."""
    found: list[tuple[IPNetwork, str]] = []
    for entries, what in (
        # The most specific first: a refusal names the operator, not its pod range.
        (own_addresses, "the operator's own address"),
        (api_server_addresses, "the Kubernetes API server"),
        (service_cidrs, "in the cluster's service range"),
        (pod_cidrs, "in the cluster's pod range"),
    ):
        for entry in entries:
            found.append((ipaddress.ip_network(entry.strip(), strict=False), what))
    return tuple(found)
