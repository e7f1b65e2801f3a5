"""The fault suite's reports are printed at the end of the session, pass or
fail, so the seed and the figures of every run are in the `make test` log."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.faults.scenario import Report, Scenario, run_scenario
from tests.support.kube import Cluster

REPORTS: list[Report] = []


@pytest.fixture
def fault_run(cluster: Cluster, tmp_path: Path):  # type: ignore[no-untyped-def]
    async def run(scenario: Scenario) -> Report:
        report = await run_scenario(scenario, cluster.kube, cluster.control_plane, tmp_path)
        REPORTS.append(report)
        print(report.render())
        return report

    return run


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for report in REPORTS:
        terminalreporter.write_sep("-", "fault suite")
        terminalreporter.write_line(report.render())
