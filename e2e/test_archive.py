"""Archive before purge in the operator process, against the real API server
with SLUICEWAY_AUTH=kubernetes: its purger archives finished runs to
SLUICEWAY_ARCHIVE_DIR and deletes them, and an archived run is read back by
id only within its namespace, by whoever RBAC lets read runs there (a
namespace is a tenant boundary, for archived runs as for live ones)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import call
from tests.support.database import Databases
from tests.support.kube import Cluster
from tests.support.secured import STARTER_RULES, WORKER_RULES, Secured, lease, secured_operator, start_run
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def archive_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("archive")


@pytest.fixture(scope="module")
def secured(
    cluster: Cluster, databases: Databases, tmp_path_factory: pytest.TempPathFactory, archive_dir: Path
) -> Iterator[Secured]:
    accounts = {"worker": WORKER_RULES, "starter": STARTER_RULES}
    settings = {
        "SLUICEWAY_ARCHIVE_DIR": str(archive_dir),
        "SLUICEWAY_RETENTION": "1",  # every run expires a second after it ends
        "SLUICEWAY_PURGE_INTERVAL": "0.5",
    }
    logs = tmp_path_factory.mktemp("operator-archive")
    with secured_operator(cluster.kube, databases, logs, accounts, settings) as secured:
        yield secured


def finish(s: Secured, namespace: str, text: str) -> str:
    run_id = start_run(s, namespace, text)
    task = lease(s, namespace, s.token(namespace, "worker"))
    done = {"taskId": task["taskId"], "epoch": task["epoch"], "status": "COMPLETED", "output": {"echoed": text}}
    status, body = call(
        "POST", f"{s.url}/v1/ns/{namespace}/tasks/{task['taskId']}/result", done, s.token(namespace, "worker")
    )
    assert status == 200, body
    return run_id


def test_the_operator_archives_purged_runs_and_serves_them_within_their_namespace_only(
    secured: Secured, archive_dir: Path
) -> None:
    s, a, b = secured, secured.a, secured.b
    run_a = finish(s, a, "from a")

    def archived() -> dict[str, Any] | None:
        status, body = call("GET", f"{s.url}/v1/ns/{a}/executions/{run_a}", None, s.token(a, "starter"))
        assert status == 200, body
        return body if body["archived"] else None

    run = eventually(archived, timeout=60, what="the purger to archive and delete the run")
    assert run["status"] == "COMPLETED" and run["output"] == {"echoed": "from a"}
    assert [t["status"] for t in run["tasks"]] == ["COMPLETED"]
    [path] = list((archive_dir / a).glob("*.jsonl.gz"))
    with gzip.open(path, "rt") as lines:
        assert [json.loads(line)["id"] for line in lines] == [run_a]

    # Another tenant's caller: refused by RBAC in a, and not found in its own namespace.
    status, body = call("GET", f"{s.url}/v1/ns/{a}/executions/{run_a}", None, s.token(b, "starter"))
    assert status == 403, body
    status, body = call("GET", f"{s.url}/v1/ns/{b}/executions/{run_a}", None, s.token(b, "starter"))
    assert status == 404, body
    status, body = call("GET", f"{s.url}/v1/ns/{a}/executions/{run_a}", None, s.token(a, "worker"))
    assert status == 403, "a worker may not read runs, archived or not"
