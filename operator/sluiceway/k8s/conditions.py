"""Standard `Ready` conditions, written the way `kubectl wait`, Argo CD and Flux
read them: the transition time only moves when the status does.

Flux, cli-utils and `kubectl`-style waiters compute health with kstatus, which
reads `Ready` only as "Current or still InProgress": a refusal that waits for
the user (an invalid spec, a name conflict) is Failed only with `Stalled`
True, and a run still going is InProgress with `Reconciling` True
(docs/gitops.md)."""

from __future__ import annotations

from typing import Any

from sluiceway.model.common import Condition, ConditionStatus


def with_condition(previous: list[dict[str, Any]] | None, condition: Condition, now: str) -> list[dict[str, Any]]:
    """The condition list with `condition` set, keeping the others."""
    kept = [c for c in previous or [] if c.get("type") != condition.type]
    old = next((c for c in previous or [] if c.get("type") == condition.type), None)
    moved = old is None or old.get("status") != condition.status.value
    since = now if moved else old.get("lastTransitionTime", now) if old else now
    updated = condition.model_copy(update={"last_transition_time": since}).to_wire()
    return sorted(kept + [updated], key=lambda c: str(c.get("type")))


def ready(reason: str, message: str, generation: int | None) -> Condition:
    return Condition(
        type="Ready", status=ConditionStatus.TRUE, reason=reason, message=message, observed_generation=generation
    )


def not_ready(reason: str, message: str, generation: int | None) -> Condition:
    return Condition(
        type="Ready", status=ConditionStatus.FALSE, reason=reason, message=message, observed_generation=generation
    )


def stalled(reason: str, message: str, generation: int | None) -> Condition:
    """kstatus's Failed: nothing will change until the user (or another object) does."""
    return Condition(
        type="Stalled", status=ConditionStatus.TRUE, reason=reason, message=message, observed_generation=generation
    )


def not_stalled(reason: str, message: str, generation: int | None) -> Condition:
    return Condition(
        type="Stalled", status=ConditionStatus.FALSE, reason=reason, message=message, observed_generation=generation
    )
