"""Every PromQL expression the chart ships (the alert rules and each panel of
the Grafana dashboard) passes promtool, built from the Prometheus Go module
(hack/build-prometheus.sh, cached like the control plane). Panel queries are
checked as recording rules in a temporary rule file, with Grafana's variables
replaced by what Grafana would send."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sluiceway.devenv.controlplane import REPO_ROOT

CHART = REPO_ROOT / "charts" / "sluiceway"
RULES = CHART / "files" / "prometheus-rules.yaml"
DASHBOARD = CHART / "dashboards" / "sluiceway.json"
DOCS = REPO_ROOT / "docs" / "observability.md"

# What Grafana substitutes before a query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$namespace": ".*"}


@pytest.fixture(scope="session")
def promtool() -> Path:
    built = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "build-prometheus.sh")], capture_output=True, text=True, check=False
    )
    assert built.returncode == 0, f"cannot build promtool:\n{built.stderr[-4000:]}"
    return Path(built.stdout.strip()) / "promtool"


def check_rules(promtool: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True, text=True, check=False)


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row keeps its panels inside


def panel_queries() -> list[tuple[str, str]]:
    """(a name for the query, its PromQL as Prometheus receives it)."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            queries.append((f"sluiceway:panel_{panel['id']}_{target['refId']}", expr))
    return queries


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_every_alert_rule_passes_promtool(promtool: Path) -> None:
    result = check_rules(promtool, RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout, result.stdout


def test_every_panel_query_passes_promtool(promtool: Path, tmp_path: Path) -> None:
    queries = panel_queries()
    assert len(queries) >= 20, "the dashboard's rows are all there"
    leftover = [(name, expr) for name, expr in queries if "$" in expr]
    assert leftover == [], f"a Grafana variable this test does not substitute: {leftover}"
    rules = tmp_path / "panels.yaml"
    recording = [{"record": name, "expr": expr} for name, expr in queries]
    rules.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recording}]}))
    result = check_rules(promtool, rules)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout, result.stdout


def test_promtool_refuses_a_broken_expression(promtool: Path, tmp_path: Path) -> None:
    """The check can fail: an unclosed parenthesis is named, not passed."""
    rules = tmp_path / "broken.yaml"
    broken = {"record": "sluiceway:broken", "expr": "sum(rate(sluiceway_decisions_total[5m])"}
    rules.write_text(yaml.safe_dump({"groups": [{"name": "broken", "rules": [broken]}]}))
    result = check_rules(promtool, rules)
    assert result.returncode != 0 and "SUCCESS" not in result.stdout, result.stdout
    assert "parse error" in result.stdout + result.stderr, result.stdout + result.stderr


def test_each_panel_asks_a_question_and_each_alert_has_a_runbook() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in panels(dashboard):
        if panel["type"] != "row":
            assert panel.get("description", "").endswith("?"), f"panel {panel['title']!r} states no question"
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in DOCS.read_text().splitlines()
        if line.startswith("#")
    }
    for rule in alert_rules():
        runbook = rule["annotations"]["runbook_url"]
        assert runbook == f"docs/observability.md#{rule['alert'].lower()}", runbook
        assert rule["alert"].lower() in anchors, f"docs/observability.md has no section {rule['alert']}"
