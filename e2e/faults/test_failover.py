"""The fault suite with PostgreSQL under Patroni: a primary and a synchronous
standby, the operators connected through a DSN naming both hosts with
`target_session_attrs=read-write` (docs/ha.md). The primary's host is killed
mid-drain (Patroni promotes the standby once the leader key expires) and the
cluster is switched over under load, besides worker, leader and session
faults; then the same invariants as test_faults.py: nothing lost, no
transition done twice, no cap, permit or rate violated. The time from each
fault to a probe run's first lease is printed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from e2e.faults.drivers import FAILOVER_KINDS, PRIMARY_KILL, SWITCHOVER
from e2e.faults.scenario import Report, Scenario, seed_from_environment
from tests.support.patroni import patroni_installed

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not patroni_installed(),
        reason="Patroni is not installed (`make test` installs it as root: hack/install-node-packages.sh)",
    ),
]


async def test_failover_and_switchover_lose_nothing(fault_run: Callable[[Scenario], Awaitable[Report]]) -> None:
    scenario = Scenario(
        seed=seed_from_environment(),
        runs=100,
        workflow_runs=4,
        load_seconds=60,
        faults=len(FAILOVER_KINDS),
        fault_gap=(1.0, 2.0),
        kinds=FAILOVER_KINDS,
        database="patroni",
    )
    report = await fault_run(scenario)
    assert report.faults.get(PRIMARY_KILL) and report.faults.get(SWITCHOVER), report.faults
    assert not report.failures(), f"seed {scenario.seed}:\n" + "\n".join(report.failures())
    # Each figure is how long a probe run started after the fault took to have its first task leased;
    # -1 would mean it never was within 3 minutes (printed, never a timing assertion).
    resumed = report.figures["dispatch resumed after (s)"]
    assert all(took >= 0 for took in resumed[PRIMARY_KILL] + resumed[SWITCHOVER]), resumed
