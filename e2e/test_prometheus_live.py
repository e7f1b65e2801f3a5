"""The dashboard and the alert rules against live data: a real Prometheus
(built by hack/build-prometheus.sh) scrapes the operator every second while
this test drives a namespace into known states, then every panel query and
every alert expression is evaluated. A query whose state was driven must
return series; the few whose state this test does not create are named in
`NOT_DRIVEN` with the reason, so a query can neither silently return nothing
nor silently be skipped. Every rule must also evaluate without error."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.test_gates import manifest
from e2e.test_promql import RULES, alert_rules, panel_queries
from sluiceway.devenv.controlplane import REPO_ROOT
from sluiceway.devenv.processes import Child, free_port, wait_until
from tests.support.api import call
from tests.support.database import fetch
from tests.support.kube import Kube, condition
from tests.support.operators import OperatorProcess
from tests.support.waiting import eventually

# Queries of states this test does not drive, and why: each is still checked
# to evaluate without error.
NOT_DRIVEN = {
    "Gate holds by control": "needs a gated queue polled while full (tests/integration/test_metrics.py asserts it)",
    "Circuit breakers": "needs a failing system-task target (e2e/test_gates.py opens one)",
    "Schedule fires by result": "needs a Schedule firing (tests/integration/test_metrics.py asserts it)",
    "Dead-lettered statuses": "the API server refusing a status for good cannot be provoked by a valid CRD",
    "Loop failures": "a failing background loop is a bug; none is expected",
    "Reconcile errors by kind": "tests/unit/test_reconcile_errors.py asserts it; a valid namespace has none",
    "SluicewayDeciderLag": "a decider 30 s behind",
    "SluicewayTimersOverdue": "a sweeper behind",
    "SluicewayDeadLetters": "as for the dead-letter panel",
    "SluicewayCircuitBreakerOpen": "as for the breaker panel",
    "SluicewayNoMetricsExporter": "no leader: this operator leads",
}


@pytest.fixture(scope="module")
def prometheus_bin() -> Path:
    built = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "build-prometheus.sh")], capture_output=True, text=True, check=False
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return Path(built.stdout.strip())


@pytest.fixture
def prometheus(prometheus_bin: Path, operator: OperatorProcess, tmp_path: Path) -> Iterator[str]:
    target = urllib.parse.urlparse(operator.api_url).netloc
    panels = tmp_path / "panels.yaml"
    recording = [{"record": name, "expr": expr} for name, expr in panel_queries()]
    panels.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recording}]}))
    config = tmp_path / "prometheus.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES), str(panels)],
                "scrape_configs": [{"job_name": "sluiceway", "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    port = free_port()
    child = Child(
        "prometheus",
        [
            str(prometheus_bin / "prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _get(f"{url}/-/ready") is not None, timeout=60, what="Prometheus to be ready", child=child)
    yield url
    child.stop()


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
    except OSError:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    answer = _get(f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert answer is not None and answer["status"] == "success", (expr, answer)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def panel_titles() -> dict[str, str]:
    dashboard = json.loads((REPO_ROOT / "charts/sluiceway/dashboards/sluiceway.json").read_text())
    return {f"sluiceway:panel_{p['id']}_": p["title"] for p in dashboard["panels"]}


def drive(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    """Runs completed by a worker (leases, results, decisions), a queue with
    work, no pollers and runs past their SLA, and a quarantined run."""
    api = f"{operator.api_url}/v1/ns/{namespace}"
    specs = {
        "served": {"tasks": [{"name": "served_job", "taskReferenceName": "job"}]},
        "forgotten": {"tasks": [{"name": "forgotten_job", "taskReferenceName": "job"}], "slaSeconds": 1},
        "fragile": {"tasks": [{"name": "calc", "taskReferenceName": "calc", "type": "INLINE",
                               "inputParameters": {"expression": "1 + 1"}}]},
    }  # fmt: skip
    for name, spec in specs.items():
        kube.apply(manifest("Workflow", name, {"name": name, **spec}), namespace)
    for name in specs:
        eventually(
            lambda name=name: (c := condition(kube.get("workflow", name, namespace))) and c["status"] == "True",
            what=f"Workflow {name} to be Ready",
        )
    # Garbage no API could write: runs of `fragile` are quarantined (as in e2e/test_poison.py).
    poison = "UPDATE workflow_versions SET spec = '{\"tasks\": 42}' WHERE namespace = $1 AND name = 'fragile'"
    fetch(operator.database_url, poison, namespace)
    for name in ("served", "forgotten", "forgotten", "fragile"):
        status, body = call("POST", f"{api}/executions", {"name": name})
        assert status == 201, body
    poll = {"taskTypes": ["served_job"], "workerId": "e2e-worker", "count": 1, "pollTimeoutSeconds": 10}
    status, body = call("POST", f"{api}/tasks/poll", poll)
    assert status == 200 and len(body["tasks"]) == 1, body
    [task] = body["tasks"]
    result = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED"}
    status, body = call("POST", f"{api}/tasks/{task['taskId']}/result", result)
    assert status == 200, body


def test_every_panel_and_alert_returns_data_when_its_state_exists(
    kube: Kube, operator: OperatorProcess, namespace: str, prometheus: str
) -> None:
    drive(kube, operator, namespace)
    titles = panel_titles()
    expressions = [(next(t for p, t in titles.items() if name.startswith(p)), expr) for name, expr in panel_queries()]
    expressions += [(rule["alert"], rule["expr"]) for rule in alert_rules()]
    driven = [(title, expr) for title, expr in expressions if title not in NOT_DRIVEN]
    assert len(driven) >= 25, "most queries watch a state this test creates"

    still_empty: list[str] = []

    def all_answer() -> bool:
        nonlocal still_empty
        still_empty = [f"{title}: {expr}" for title, expr in driven if not query(prometheus, expr)]
        return not still_empty

    try:
        eventually(all_answer, timeout=90, interval=2, what="every driven query to return series")
    except AssertionError as error:
        raise AssertionError(f"queries returning nothing although their state exists: {still_empty}") from error

    # The e2e operator is shared: earlier tests may have left queues of their own without pollers.
    unpolled = query(prometheus, next(r["expr"] for r in alert_rules() if r["alert"] == "SluicewayQueueWithoutPollers"))
    ours = [s["metric"] for s in unpolled if s["metric"].get("namespace") == namespace]
    assert ours == [{"namespace": namespace, "task_type": "forgotten_job"}], unpolled
    sla = query(prometheus, next(r["expr"] for r in alert_rules() if r["alert"] == "SluicewaySlaBreached"))
    assert {"namespace": namespace, "workflow": "forgotten"} in [s["metric"] for s in sla]

    groups = _get(f"{prometheus}/api/v1/rules")["data"]["groups"]
    unhealthy = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] != "ok"]
    assert unhealthy == [], "every rule evaluates against live data"
    assert sum(len(g["rules"]) for g in groups) == len(expressions)
