"""Quota: platform limits for one namespace, set by an administrator. Every
Quota in a namespace applies; an absent field, or an absent Quota, is
unlimited."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator

from sluiceway.model.common import Spec, Status

# The most a Quota may set a payload limit to: the operator's own limit caps it anyway.
MAX_PAYLOAD_LIMIT = 64 * 1024 * 1024
# A destination system tasks of the namespace may reach despite the egress
# policy: a host name (`api.example.com`), a suffix (`*.example.com`), an IP
# address or a CIDR (`10.0.12.0/24`).
EgressEntry = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=r"^[-*A-Za-z0-9.:]+(/[0-9]{1,3})?$")
]


class QuotaSpec(Spec):
    """Namespace limits (absent: unlimited, or the operator's), and where its system tasks may reach."""

    max_concurrent_executions: int | None = Field(None, ge=0, le=100_000_000)
    max_executions_per_minute: int | None = Field(None, ge=0, le=100_000_000)
    max_workflow_definitions: int | None = Field(None, ge=0, le=1_000_000)
    max_schedules: int | None = Field(None, ge=0, le=1_000_000)
    max_payload_bytes: int | None = Field(
        None,
        ge=1024,
        le=MAX_PAYLOAD_LIMIT,
        description="The largest run input or output, task output, message or webhook body, in bytes of JSON; "
        "lowers the operator's limit (SLUICEWAY_MAX_PAYLOAD_BYTES) for this namespace, never raises it. "
        "Applies from the request after the Quota is stored (Ready): at once on the replica that stored it, "
        "within milliseconds on the others (at most 5 s while one's notification connection is down).",
    )
    dispatch_weight: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="This namespace's share of the operator's system-task slots (HTTP, WEBHOOK, GRPC) when "
        "several namespaces have calls waiting, against the others' weights (default 1).",
    )
    allowed_egress: list[EgressEntry] = Field(
        default_factory=list,
        max_length=100,
        description="Destinations this namespace's HTTP, HTTP_POLL, WEBHOOK and GRPC tasks may reach although "
        "the egress policy denies them by default: host names, `*.suffix`, IP addresses or CIDRs. An entry "
        "with `/` or `:`, or only digits and dots, must be an IPv4 or IPv6 address or network; `*` only as a "
        "leading `*.` (else 422 naming allowedEgress).",
    )

    @field_validator("allowed_egress")
    @classmethod
    def _destinations(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            problem = egress_problem(entry)
            if problem:
                raise ValueError(f"{entry!r}: {problem}")
        return entries


def egress_problem(entry: str) -> str | None:
    """Why `entry` names no destination, or None: a CIDR or address must parse,
    a wildcard is only a leading `*.`."""
    if "/" in entry or entry.replace(".", "").isdigit() or ":" in entry:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError as error:
            return str(error)
        return None
    if "*" in entry.removeprefix("*."):
        return "a wildcard is only a leading `*.`"
    return None


class QuotaUsage(Spec):
    concurrent_executions: int = 0
    executions_this_minute: int = 0
    workflow_definitions: int = 0
    schedules: int = 0


class QuotaStatus(Status):
    used: QuotaUsage | None = None
