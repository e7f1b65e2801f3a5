"""Schedules end to end: a real API server, the operator as processes.

- Two replicas fire a 2-second schedule on time; SIGKILL of the leader just
  after a fire loses no fire and doubles none; after both are stopped, the
  restarted operator catches up exactly the fires inside the catch-up window
  and counts the older ones as missed.
- Each overlap policy against a run slower than the interval.
- A backfill starts one run per fire; maxSchedules refuses the schedule over
  quota (Ready=False, and 429 over REST); the printer columns.
- A continue-as-new chain keeps one deadline and ends TIMED_OUT."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluiceway.controls.schedules import run_id
from sluiceway.devenv.processes import Child
from sluiceway.store.schedules import WAITED
from tests.support.api import call
from tests.support.database import Databases, fetch
from tests.support.kube import Cluster, Kube, condition
from tests.support.operators import OperatorProcess, start_operator
from tests.support.processes import stop_all
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
INSTANT = {"tasks": [{"name": "note", "taskReferenceName": "note", "type": "INLINE",
                      "inputParameters": {"expression": "1 + 1"}}]}  # fmt: skip
SLOW = {
    "tasks": [{"name": "pause", "taskReferenceName": "pause", "type": "WAIT", "inputParameters": {"duration": "5s"}}]
}


def apply(kube: Kube, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)


def ready(kube: Kube, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return eventually(
        lambda: condition(kube.get(kind, name, namespace)), what=f"{kind} {name} to report Ready", timeout=60
    )


# The fires' ledger is internal: that each fire happens exactly once, across replicas, a
# killed leader and an outage, shows only in it. And no API lists a schedule's runs with
# their start and end instants yet, which the overlap policies are judged by.
def fires(dsn: str, namespace: str, schedule: str) -> list[dict[str, Any]]:
    return fetch(
        dsn,
        "SELECT fire_at, kind, outcome, run_id, handled_at, reason FROM schedule_fires"
        " WHERE namespace = $1 AND schedule = $2 ORDER BY fire_at",
        namespace,
        schedule,
    )


def runs(dsn: str, namespace: str, schedule: str) -> list[dict[str, Any]]:
    return fetch(
        dsn,
        "SELECT id, status, reason, created_at, ended_at FROM executions"
        " WHERE namespace = $1 AND schedule_name = $2 ORDER BY created_at",
        namespace,
        schedule,
    )


# -- two replicas, a killed leader, an outage -----------------------------------------------


class Replicas:
    def __init__(self, kube: Kube, namespace: str, dsn: str, logs: Path) -> None:
        self.kube, self.namespace, self.dsn, self.logs = kube, namespace, dsn, logs
        self.children: dict[str, Child] = {}

    def start(self, name: str) -> Child:
        replica = start_operator(
            name,
            self.dsn,
            self.logs,
            kubeconfig=self.kube.kubeconfig,
            log_level="INFO",
            settings={
                "SLUICEWAY_NAMESPACES": self.namespace,
                "SLUICEWAY_LEADER_ELECTION_NAMESPACE": self.namespace,
                "SLUICEWAY_POD_NAME": name,
                "SLUICEWAY_STATUS_INTERVAL": "1",
            },
        )
        self.children[name] = replica.child
        return replica.child

    def leader(self) -> str | None:
        lease = self.kube.run("get", "lease", "sluiceway-operator", "-n", self.namespace, "-o", "json", check=False)
        if lease.returncode != 0:
            return None
        holder: str | None = json.loads(lease.stdout)["spec"].get("holderIdentity")
        return holder


@pytest.fixture
def replicas(cluster: Cluster, databases: Databases, tmp_path: Path) -> Iterator[Replicas]:
    namespace = f"sched-{uuid.uuid4().hex[:8]}"
    cluster.kube.run("create", "namespace", namespace)
    group = Replicas(cluster.kube, namespace, asyncio.run(databases.create("sched")), tmp_path)
    yield group
    stop_all(list(group.children.values()))
    cluster.kube.run("delete", "namespace", namespace, "--wait=false", check=False)


def grid(start: datetime.datetime, end: datetime.datetime, step: int) -> list[datetime.datetime]:
    """Every fire of an every-`step`-seconds schedule in [start, end]."""
    first = -(-int(start.timestamp()) // step) * step
    return [datetime.datetime.fromtimestamp(t, tz=datetime.UTC) for t in range(first, int(end.timestamp()) + 1, step)]


def test_two_replicas_fire_on_time_a_killed_leader_loses_nothing_and_a_restart_catches_up(
    replicas: Replicas,
) -> None:
    kube, namespace, dsn = replicas.kube, replicas.namespace, replicas.dsn
    replicas.start("op-1")
    eventually(lambda: replicas.leader() == "op-1", what="op-1 to lead")
    replicas.start("op-2")
    apply(kube, namespace, "Workflow", "tick", INSTANT)
    ready(kube, namespace, "Workflow", "tick")
    apply(
        kube,
        namespace,
        "Schedule",
        "every-2s",
        {"workflow": "tick", "every": "2s", "overlapPolicy": "AllowAll", "catchupWindowSeconds": 3},
    )
    ready(kube, namespace, "Schedule", "every-2s")
    eventually(lambda: len(fires(dsn, namespace, "every-2s")) >= 3, timeout=30, what="three fires")

    # SIGKILL the leader 30 ms after a fire is due: it may be inside that fire's transaction.
    time.sleep(2 - (time.time() % 2) + 0.03)
    leader = replicas.leader()
    assert leader is not None
    os.killpg(replicas.children[leader].process.pid, signal.SIGKILL)
    replicas.children[leader].process.wait(10)
    survivor = next(name for name in replicas.children if name != leader)
    killed_at = datetime.datetime.now(datetime.UTC)
    eventually(
        lambda: any(
            f["fire_at"] > killed_at + datetime.timedelta(seconds=4) for f in fires(dsn, namespace, "every-2s")
        ),
        timeout=30,
        what="fires after the kill",
    )

    # An outage: the survivor stops too; a new replica starts some seconds later.
    replicas.children[survivor].stop()
    before = fires(dsn, namespace, "every-2s")
    time.sleep(7)
    replicas.start("op-3")
    eventually(
        lambda: any(f["kind"] == "catchup" for f in fires(dsn, namespace, "every-2s")), timeout=30, what="a catch-up"
    )
    caught_up_at = next(f["handled_at"] for f in fires(dsn, namespace, "every-2s") if f["kind"] == "catchup")
    eventually(
        lambda: fires(dsn, namespace, "every-2s")[-1]["fire_at"] > caught_up_at + datetime.timedelta(seconds=2),
        timeout=30,
        what="a fire after the catch-up",
    )

    fired = fires(dsn, namespace, "every-2s")
    last_before = before[-1]["fire_at"]
    window_start = caught_up_at - datetime.timedelta(seconds=3)
    expected = [t for t in grid(fired[0]["fire_at"], fired[-1]["fire_at"], 2) if t <= last_before or t >= window_start]
    assert [f["fire_at"] for f in fired] == expected, "a fire lost, doubled, or started outside the window"
    assert {f["outcome"] for f in fired} == {"started"}
    missed = [t for t in grid(last_before, caught_up_at, 2) if last_before < t < window_start]
    [counters] = fetch(dsn, "SELECT uid, missed FROM schedules WHERE namespace = $1", namespace)
    assert counters["missed"] == len(missed) > 0
    started = runs(dsn, namespace, "every-2s")
    assert sorted(str(r["id"]) for r in started) == sorted(str(f["run_id"]) for f in fired), "one run per fire"
    assert all(str(f["run_id"]) == run_id(counters["uid"], f["fire_at"]) for f in fired)
    on_time = [(f["handled_at"] - f["fire_at"]).total_seconds() for f in fired if f["kind"] == "scheduled"]
    print(
        f"{len(fired)} fires, {len(missed)} missed in the outage, killed {leader} at {killed_at:%H:%M:%S.%f}; "
        f"lag of scheduled fires: median {sorted(on_time)[len(on_time) // 2]:.3f} s, worst {max(on_time):.3f} s"
    )
    assert max(on_time) < 2.0, "a fire started after the next one was due"


# -- the overlap policies, on the shared operator --------------------------------------------

POLICIES = ("Skip", "BufferOne", "BufferAll", "CancelOther", "TerminateOther", "AllowAll")


def outcomes(dsn: str, namespace: str, schedule: str) -> list[str]:
    """Each fire's outcome; a fire that waited and then started reads `buffered`."""
    return ["buffered" if f["reason"] == WAITED else f["outcome"] for f in fires(dsn, namespace, schedule)]


def overlapping(started: list[dict[str, Any]]) -> bool:
    """Did any run start before the previous one ended?"""
    return any(b["created_at"] < (a["ended_at"] or b["created_at"] + datetime.timedelta(1)) for a, b in
               zip(started, started[1:], strict=False))  # fmt: skip


def test_each_overlap_policy_against_a_run_slower_than_the_interval(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    dsn = operator.database_url
    apply(kube, namespace, "Workflow", "slow", SLOW)
    ready(kube, namespace, "Workflow", "slow")
    for policy in POLICIES:
        apply(kube, namespace, "Schedule", policy.lower(), {"workflow": "slow", "every": "2s", "overlapPolicy": policy})
    for policy in POLICIES:
        ready(kube, namespace, "Schedule", policy.lower())
    eventually(lambda: len(fires(dsn, namespace, "skip")) >= 6, timeout=40, what="six fires of each")
    for policy in POLICIES:  # pausing them is part of the test: nothing fires afterwards
        kube.run(
            "patch", "schedule", policy.lower(), "-n", namespace, "--type=merge", "-p", '{"spec":{"suspend":true}}'
        )
    eventually(
        lambda: all(
            (kube.get("schedule", p.lower(), namespace) or {}).get("status", {}).get("suspended") for p in POLICIES
        ),
        what="the schedules to be suspended",
    )
    time.sleep(2.5)
    seen = {p: outcomes(dsn, namespace, p.lower()) for p in POLICIES}
    started = {p: runs(dsn, namespace, p.lower()) for p in POLICIES}
    time.sleep(2.5)
    later = {p: outcomes(dsn, namespace, p.lower()) for p in POLICIES}
    assert later == seen, "suspended: nothing fires, and nothing that waited starts"
    assert {p: len(runs(dsn, namespace, p.lower())) for p in POLICIES} == {p: len(started[p]) for p in POLICIES}
    print(seen)

    assert "skipped" in seen["Skip"] and not overlapping(started["Skip"])
    assert {"buffered", "skipped"} <= set(seen["BufferOne"]) and not overlapping(started["BufferOne"])
    assert "buffered" in seen["BufferAll"] and "skipped" not in seen["BufferAll"]
    assert not overlapping(started["BufferAll"])
    assert "buffered" in seen["CancelOther"] and not overlapping(started["CancelOther"])
    assert any(r["status"] == "TERMINATED" for r in started["CancelOther"])
    assert set(seen["TerminateOther"]) == {"started"} and len(started["TerminateOther"]) >= 3
    for replaced in started["TerminateOther"][:-1]:
        assert (
            replaced["status"] in ("TERMINATED", "RUNNING")
            and "TerminateOther" in replaced["reason"]
            or (replaced["status"] == "RUNNING")
        )
    assert set(seen["AllowAll"]) == {"started"} and overlapping(started["AllowAll"])


# -- backfill, trigger, quota, columns -------------------------------------------------------


def test_a_backfill_starts_one_run_per_fire_and_max_schedules_refuses_the_next(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    base = f"{operator.api_url}/v1/ns/{namespace}/schedules"
    apply(kube, namespace, "Workflow", "report", INSTANT)
    ready(kube, namespace, "Workflow", "report")
    apply(kube, namespace, "Quota", "limits", {"maxSchedules": 1})
    ready(kube, namespace, "Quota", "limits")
    apply(
        kube,
        namespace,
        "Schedule",
        "hourly",
        {"workflow": "report", "cron": ["0 * * * *"], "overlapPolicy": "AllowAll"},
    )
    assert ready(kube, namespace, "Schedule", "hourly")["status"] == "True"

    status, filled = call(
        "POST", f"{base}/hourly/backfill", {"startTime": "2026-06-01T00:00:00Z", "endTime": "2026-06-01T03:00:00Z"}
    )
    assert status == 201 and filled["started"] == 4
    executions = f"{operator.api_url}/v1/ns/{namespace}/executions"
    backfilled = [fire["runId"] for fire in filled["fires"]]
    eventually(
        lambda: [call("GET", f"{executions}/{run}")[1]["status"] for run in backfilled] == ["COMPLETED"] * 4,
        what="four runs to complete",
    )
    status, fire = call("POST", f"{base}/hourly/trigger", {})
    assert status == 201 and fire["outcome"] == "started"

    apply(kube, namespace, "Schedule", "daily", {"workflow": "report", "cron": ["@daily"]})
    refused = eventually(
        lambda: (c := condition(kube.get("schedule", "daily", namespace))) and c["status"] == "False" and c,
        what="the second schedule refused",
    )
    assert refused["reason"] == "QuotaExceeded"
    assert refused["message"] == "quota limits: maxSchedules 1 reached (1 defined)"
    status, body = call("PUT", f"{base}/weekly", {"workflow": "report", "cron": ["@weekly"]})
    assert status == 429 and (body["quota"], body["limit"], body["current"]) == ("limits", 1, 1)
    eventually(
        lambda: (kube.get("quota", "limits", namespace) or {}).get("status", {}).get("used", {}).get("schedules") == 1,
        what="the quota to count one schedule",
    )
    columns = kube.run("get", "sched", "-n", namespace, "hourly").stdout.splitlines()[0].split()
    assert columns[:7] == ["NAME", "WORKFLOW", "NEXT", "LAST", "ACTIVE", "SUSPENDED", "READY"]
    in_category = kube.run("get", "sluiceway", "-n", namespace, "-o", "name").stdout
    assert "schedule.sluiceway.dev/hourly" in in_category


# -- a continue-as-new chain -----------------------------------------------------------------


def test_a_chain_of_continue_as_new_runs_keeps_one_deadline_and_ends_timed_out(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    apply(
        kube,
        namespace,
        "Workflow",
        "poller",
        {
            "timeoutSeconds": 60,
            "chainTimeoutSeconds": 4,
            "tasks": [
                {"name": "pause", "taskReferenceName": "pause", "type": "WAIT", "inputParameters": {"duration": "1s"}},
                {
                    "name": "again",
                    "taskReferenceName": "again",
                    "type": "CONTINUE_AS_NEW",
                    "inputParameters": {"input": {"round": "${workflow.input.round}"}},
                },
            ],
        },
    )
    ready(kube, namespace, "Workflow", "poller")
    kube.run(
        "create", "-n", namespace, "-f", "-",
        input=json.dumps({"apiVersion": API, "kind": "WorkflowRun", "metadata": {"name": "poll"},
                          "spec": {"workflow": "poller", "input": {"round": 1}}}),
    )  # fmt: skip
    first = eventually(
        lambda: (kube.get("workflowrun", "poll", namespace) or {}).get("status", {}).get("executionId"),
        what="the first run",
    )
    executions = f"{operator.api_url}/v1/ns/{namespace}/executions"

    def chain() -> list[dict[str, Any]]:
        """The chain's runs as the API shows them, following each one's nextRunId."""
        found: list[dict[str, Any]] = []
        run_id: str | None = first
        while run_id:
            status, run = call("GET", f"{executions}/{run_id}")
            assert status == 200, run
            found.append(run)
            run_id = run.get("nextRunId")
        return found

    eventually(lambda: chain()[-1]["status"] == "TIMED_OUT", timeout=30, what="the chain to end")
    runs_of_chain = chain()
    assert runs_of_chain[0]["id"] == first and len(runs_of_chain) >= 3
    assert [r["status"] for r in runs_of_chain] == ["COMPLETED"] * (len(runs_of_chain) - 1) + ["TIMED_OUT"]
    assert {r["chainId"] for r in runs_of_chain} == {first}
    assert len({r["chainDeadline"] for r in runs_of_chain}) == 1
    assert runs_of_chain[-1]["reasonForIncompletion"].startswith("the chain's deadline passed")
    eventually(
        lambda: (kube.get("workflowrun", "poll", namespace) or {}).get("status", {}).get("phase") == "Completed",
        what="the WorkflowRun to show its own run completed (continued as new)",
    )
