"""A Jepsen-style fault suite in `make test`: two operator replicas, SDK
workers, a load driver and a seeded fault driver on loopback, then the
invariants. Set SLUICEWAY_FAULT_SEED to replay a seed's plan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from e2e.faults.drivers import KINDS
from e2e.faults.scenario import Report, Scenario, seed_from_environment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


async def test_nothing_is_lost_or_done_twice_under_faults(fault_run: Callable[[Scenario], Awaitable[Report]]) -> None:
    scenario = Scenario(
        seed=seed_from_environment(),
        runs=160,
        workflow_runs=8,
        load_seconds=80,
        faults=2 * len(KINDS),
        fault_gap=(0.5, 2.0),
        events=30,
    )
    report = await fault_run(scenario)
    assert set(report.faults) | set(report.not_injected) == set(KINDS), "every kind of fault was injected"
    assert not report.failures(), f"seed {scenario.seed}:\n" + "\n".join(report.failures())
