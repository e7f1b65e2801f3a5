"""Conditions on a resource's status: the Ready condition's transition time
moves only when its status does, and other conditions are kept."""

from __future__ import annotations

from sluiceway.k8s.conditions import not_ready, ready, with_condition


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = with_condition(None, ready("Stored", "ok", 1), "2026-01-01T00:00:00Z")
    same = with_condition(first, ready("Stored", "still ok", 2), "2026-01-01T00:05:00Z")
    flipped = with_condition(same, not_ready("InvalidSpec", "bad", 3), "2026-01-01T00:09:00Z")
    assert same[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert same[0]["message"] == "still ok" and same[0]["observedGeneration"] == 2
    assert flipped[0]["lastTransitionTime"] == "2026-01-01T00:09:00Z"
    assert flipped[0]["status"] == "False"


def test_other_conditions_are_kept() -> None:
    existing = [{"type": "Progressing", "status": "True", "reason": "x"}]
    result = with_condition(existing, ready("Stored", "", 1), "t")
    assert [c["type"] for c in result] == ["Progressing", "Ready"]
