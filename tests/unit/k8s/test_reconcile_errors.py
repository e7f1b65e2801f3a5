"""Reconciler failures are counted by kind, re-raised for kopf to retry, and
the handler keeps the name kopf identifies it by."""

from __future__ import annotations

import asyncio

import kopf
import pytest
from prometheus_client import REGISTRY

from sluiceway.k8s.reconciling import counted
from sluiceway.model.resources import WORKFLOW_RUN


def errors(kind: str) -> float:
    return REGISTRY.get_sample_value("sluiceway_reconcile_errors_total", {"kind": kind}) or 0.0


def test_a_failing_reconciler_is_counted_by_kind_and_still_raises() -> None:
    async def reconcile_run(**_: object) -> None:
        raise kopf.TemporaryError("workflow orders is not defined yet", delay=5)

    handler = counted(WORKFLOW_RUN, reconcile_run)
    assert handler.__qualname__ == reconcile_run.__qualname__, "kopf's handler id is unchanged"
    before = errors(WORKFLOW_RUN.kind)
    with pytest.raises(kopf.TemporaryError):
        asyncio.run(handler(body={}, name="orders-1"))
    assert errors(WORKFLOW_RUN.kind) == before + 1


def test_a_passing_reconciler_counts_nothing_and_returns_its_value() -> None:
    async def report(**_: object) -> dict[str, int]:
        return {"seen": 1}

    before = errors(WORKFLOW_RUN.kind)
    assert asyncio.run(counted(WORKFLOW_RUN, report)(body={})) == {"seen": 1}
    assert errors(WORKFLOW_RUN.kind) == before
