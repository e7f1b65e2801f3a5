"""The long soak behind `make chaos`: about 100 faults over a run of some
10,000 worker tasks, with the same invariants as the suite in `make test`.
Too long for every commit, so it runs only when asked for."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import pytest

from e2e.faults.drivers import KINDS
from e2e.faults.scenario import Report, Scenario, seed_from_environment

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(not os.environ.get("SLUICEWAY_CHAOS"), reason="the soak runs with `make chaos`"),
]


async def test_a_long_soak_loses_nothing_and_does_nothing_twice(
    fault_run: Callable[[Scenario], Awaitable[Report]],
) -> None:
    scenario = Scenario(
        seed=seed_from_environment(),
        runs=int(os.environ.get("SLUICEWAY_CHAOS_RUNS", "1650")),
        workflow_runs=30,
        load_seconds=float(os.environ.get("SLUICEWAY_CHAOS_SECONDS", "480")),
        faults=int(os.environ.get("SLUICEWAY_CHAOS_FAULTS", "100")),
        fault_gap=(0.5, 2.0),
        workers=6,
        events=int(os.environ.get("SLUICEWAY_CHAOS_EVENTS", "300")),
        settle_seconds=900,
    )
    report = await fault_run(scenario)
    assert set(report.faults) | set(report.not_injected) == set(KINDS), "every kind of fault was injected"
    assert not report.failures(), f"seed {scenario.seed}:\n" + "\n".join(report.failures())
