"""The egress policy's decisions on resolved addresses: what is always
denied, what configuration denies, and how allow entries override both."""

from __future__ import annotations

import ipaddress

import pytest

from sluiceway.controls.egress import EgressPolicy, denied_ranges

CLUSTER = EgressPolicy(
    denied_ranges(
        service_cidrs=["10.96.0.0/12"],
        pod_cidrs=["10.244.0.0/16"],
        own_addresses=["10.244.1.5"],
        api_server_addresses=["172.18.0.2"],
    )
)


@pytest.mark.parametrize(
    ("host", "address", "what"),
    [
        ("127.0.0.1", "127.0.0.1", "loopback"),
        ("localhost", "::1", "loopback"),
        ("metadata", "169.254.169.254", "link-local"),
        ("x", "fe80::1", "link-local"),
        ("x", "0.0.0.0", "unspecified"),
        ("x", "0.1.2.3", "unspecified"),
        ("x", "::", "unspecified"),
        ("x", "224.0.0.1", "multicast"),
        ("x", "::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("kubernetes.default", "10.96.0.1", "service range"),
        ("x", "10.244.7.7", "pod range"),
        ("api", "172.18.0.2", "Kubernetes API server"),
    ],
)
def test_denied_addresses_are_named(host: str, address: str, what: str) -> None:
    refusal = CLUSTER.refusal(host, ipaddress.ip_address(address))
    assert refusal is not None and refusal.startswith("egress policy: ") and what in refusal
    assert "allowedEgress" in refusal


def test_the_operators_own_address_is_named_before_its_pod_range() -> None:
    policy = EgressPolicy(denied_ranges(own_addresses=["10.244.1.5"], pod_cidrs=["10.244.0.0/16"]))
    refusal = policy.refusal("me", ipaddress.ip_address("10.244.1.5"))
    assert refusal is not None and "operator's own address" in refusal and "pod range" not in refusal


@pytest.mark.parametrize("address", ["93.184.216.34", "10.0.0.5", "2606:2800:220:1::1"])
def test_other_addresses_are_allowed(address: str) -> None:
    assert CLUSTER.refusal("example.com", ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("entry", "host", "address", "allowed"),
    [
        ("127.0.0.1", "127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1/32", "127.0.0.2", "127.0.0.2", False),
        ("10.96.0.0/24", "billing", "10.96.0.10", True),
        ("billing.team-a.svc.cluster.local", "billing.team-a.svc.cluster.local", "10.96.3.3", True),
        ("billing.team-a.svc.cluster.local", "other.team-b.svc.cluster.local", "10.96.3.3", False),
        ("*.team-a.svc.cluster.local", "billing.team-a.svc.cluster.local.", "10.96.3.3", True),
        ("*.team-a.svc.cluster.local", "team-a.svc.cluster.local.evil", "10.96.3.3", False),
    ],
)
def test_allow_entries_override_denials(entry: str, host: str, address: str, allowed: bool) -> None:
    policy = CLUSTER.with_allowed([entry])
    assert (policy.refusal(host, ipaddress.ip_address(address)) is None) is allowed


def test_policies_with_the_same_entries_are_one_key() -> None:
    assert CLUSTER.with_allowed(["a", "b"]) == CLUSTER.with_allowed(["b", "a", "a"])
    assert CLUSTER.with_allowed([]) is CLUSTER
