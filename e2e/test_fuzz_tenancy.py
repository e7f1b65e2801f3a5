"""The API fuzz pass in `kubernetes` auth mode, with two tenants: identity A
(every Sluiceway right in namespace a, none in b) runs a seeded schemathesis
pass whose requests are steered at namespace b and at the ids and names of
b's runs, tasks, schedule and semaphore, which identity B made beforehand.
Nothing A sends may reach b: no answer naming b is a 2xx, no answer carries
b's data, b's rows and objects are unchanged, and the audit trail holds no
operation of A in b. Without a token, or with a garbage one, every `/v1`
call is 401. None of it is ever a 5xx.

The operator's API rate limits stay on, raised so the pass is never starved;
a 429 would count as a refusal like any other non-2xx (none is expected)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fuzzing
from tests.support.api import call
from tests.support.database import Databases, fetch
from tests.support.kube import Cluster
from tests.support.secured import (
    API,
    TASK_TYPE,
    TENANT_RULES,
    WORKFLOW,
    Secured,
    lease,
    secured_operator,
    start_run,
)
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

# A tenant's administrator in each namespace: A is `tenant` of a, B is `tenant` of b.
TENANT = "tenant"
# In every input of b, so any answer that carries b's data is found by it.
MARKER = f"b-only-{uuid.uuid4().hex}"
HUMAN_WORKFLOW = "b_approval"
SCHEDULE = "b-yearly"
SEMAPHORE = "b-erp"
# Generous enough that the passes are never refused for their pace (the defaults
# are 100/s, burst 200 per identity, and 20 failed authentications per address).
RATE_LIMITS = {
    "identity": {"perSecond": 5000, "burst": 10000},
    "namespace": {"perSecond": 5000, "burst": 10000},
    "failedAuthentication": {"perSecond": 5000, "burst": 10000},
}
# The webhook intake asks no token (it verifies each call's signature): refused otherwise.
WEBHOOK = "POST /v1/ns/{namespace}/webhooks/{name}"
# The worker protocol's batches answer item by item: a batch in b that names
# none of b's tasks (items invalid, or ids b does not hold) asks no right and
# is answered 200/207 with every item refused, changing nothing (see
# refused_item_by_item and docs/security.md).
BATCHES = ("POST /v1/ns/{namespace}/tasks/heartbeats", "POST /v1/ns/{namespace}/tasks/results")
# Cases per operation (the fuzzing phase only: the coverage phase would add some
# 3,000 boundary cases, mostly invalid input refused before anything is read).
AS_A, ANONYMOUS = "10", "3"


@pytest.fixture(scope="module")
def secured(cluster: Cluster, databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_operator(
        cluster.kube,
        databases,
        tmp_path_factory.mktemp("operator-tenancy"),
        {TENANT: TENANT_RULES},
        settings={"SLUICEWAY_API_RATE_LIMITS": json.dumps(RATE_LIMITS)},
    ) as secured:
        yield secured


def user(s: Secured, namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:{TENANT}"


def seed_b(s: Secured) -> dict[str, list[str]]:
    """B's objects in b: runs (one done, one leased, the rest queued), a HUMAN
    task waiting for a decision, a yearly schedule and a semaphore. Their ids
    and names, for the steering."""
    b, as_b = s.b, s.token(s.b, TENANT)
    runs = [start_run(s, b, f"{MARKER} run {i}", TENANT) for i in range(4)]
    done = lease(s, b, as_b)
    result = {"taskId": done["taskId"], "epoch": done["epoch"], "status": "COMPLETED", "output": {"echoed": MARKER}}
    status, body = call("POST", f"{s.url}/v1/ns/{b}/tasks/{done['taskId']}/result", result, as_b)
    assert status == 200, body
    lease(s, b, as_b)  # held by B for the whole test (its lease lasts ten minutes)
    s.kube.apply(
        {
            "apiVersion": API,
            "kind": "Workflow",
            "metadata": {"name": HUMAN_WORKFLOW.replace("_", "-")},
            "spec": {
                "name": HUMAN_WORKFLOW,
                "tasks": [
                    {
                        "name": "approve",
                        "taskReferenceName": "approve",
                        "type": "HUMAN",
                        "inputParameters": {"why": MARKER},
                    }
                ],
            },
        },
        b,
    )
    eventually(
        lambda: (
            (o := s.kube.get("workflow", HUMAN_WORKFLOW.replace("_", "-"), b)) and o.get("status", {}).get("version")
        ),
        what="the HUMAN Workflow in b",
    )
    status, body = call(
        "POST", f"{s.url}/v1/ns/{b}/executions", {"name": HUMAN_WORKFLOW, "input": {"why": MARKER}}, as_b
    )
    assert status == 201, body
    runs.append(body["id"])
    s.kube.apply(
        {
            "apiVersion": API,
            "kind": "Schedule",
            "metadata": {"name": SCHEDULE},
            "spec": {"workflow": WORKFLOW, "cron": ["0 0 1 1 *"], "input": {"text": MARKER}},
        },
        b,
    )
    status, body = call("PUT", f"{s.url}/v1/ns/{b}/semaphores/{SEMAPHORE}", {"permits": 2}, as_b)
    assert status in (200, 201, 202), body

    def every_task() -> list[str] | None:
        status, body = call("GET", f"{s.url}/v1/ns/{b}/tasks?limit=100", None, as_b)
        assert status == 200, body
        ids = [t["taskId"] for t in body["items"]]
        return ids if len(ids) >= 5 else None  # four echoes and the HUMAN task

    tasks = eventually(every_task, what="b's tasks")
    names = [WORKFLOW, HUMAN_WORKFLOW, TASK_TYPE, SCHEDULE, SEMAPHORE, "auth-flow", "auth-echo"]
    return {"runs": runs, "tasks": tasks, "names": names}


def snapshot(s: Secured, runs: list[str]) -> dict[str, Any]:
    """Everything of b's: its rows in every table that has a namespace (or
    names one of its runs), and its Sluiceway objects' specs."""
    tables = fetch(
        s.database,
        "SELECT table_name, bool_or(column_name = 'namespace') AS by_namespace FROM information_schema.columns "
        "WHERE table_schema = 'public' AND column_name IN ('namespace', 'execution_id') GROUP BY table_name",
    )
    rows = {}
    for table in tables:
        key: object = s.b if table["by_namespace"] else runs
        where = "namespace = $1" if table["by_namespace"] else "execution_id::text = ANY($1::text[])"
        # A poller's last_poll is written whenever the process next flushes the polls it saw
        # (every few seconds, on anyone's poll), so B's own earlier poll may land during the
        # pass: compare who polled, which A could only change by polling b itself.
        unstable = " - 'last_poll'" if table["table_name"] == "pollers" else ""
        query = f"SELECT (to_jsonb(t){unstable})::text AS row FROM {table['table_name']} t WHERE {where}"
        found = fetch(s.database, query, key)
        rows[str(table["table_name"])] = sorted(str(r["row"]) for r in found)
    listed = json.loads(s.kube.run("get", "sluiceway", "-n", s.b, "-o", "json").stdout)["items"]
    objects = sorted(
        json.dumps([o["kind"], o["metadata"]["name"], o["metadata"].get("generation"), o.get("spec")]) for o in listed
    )
    return {"rows": rows, "objects": objects}


def settled(s: Secured, runs: list[str]) -> dict[str, Any]:
    """A snapshot that two reads a second apart agree on: b has stopped moving."""
    last: list[dict[str, Any]] = []

    def same_twice() -> dict[str, Any] | None:
        now = snapshot(s, runs)
        previous, last[:] = (last[0] if last else None), [now]
        if now != previous:
            time.sleep(1)
            return None
        return now

    return eventually(same_twice, timeout=60, what="b's state to settle")


def namespace_of(url: str) -> str | None:
    parts = url.split("?", 1)[0].split("/")
    return parts[parts.index("ns") + 1] if "ns" in parts[:-1] and "v1" in parts else None


def refused_item_by_item(call: fuzzing.Call) -> bool:
    """A batch answer in which no item was applied: no lease renewed, no result taken."""
    if call.operation not in BATCHES:
        return False
    answer = json.loads(call.answer)
    if "alive" in answer:
        return not answer["alive"]
    return all(item["code"] != 200 for item in answer["results"])


def figures(calls: list[fuzzing.Call], elapsed: float) -> str:
    statuses = Counter(c.status for c in calls)
    return f"{len(calls)} calls in {elapsed:.0f} s, statuses {dict(sorted(statuses.items()))}"


def fuzz(
    s: Secured, record: Path, header: str | None, steer: dict[str, str], examples: str
) -> tuple[list[fuzzing.Call], str]:
    start = time.monotonic()
    outcome = asyncio.run(
        fuzzing.run(
            s.url,
            "--phases",
            "fuzzing",
            "--max-examples",
            examples,
            *(["--header", header] if header else []),
            steer=steer,
            record=record,
            checks="not_a_server_error",  # 401, 403 and 429 are not documented per operation
        )
    )
    calls = fuzzing.recorded(record)
    summary = figures(calls, time.monotonic() - start)
    print(f"schemathesis seed {fuzzing.seed()} (replay or explore with SLUICEWAY_FUZZ_SEED): {summary}")
    assert outcome.code == 0, outcome.output[-20_000:]
    assert not [c for c in calls if c.status >= 500], "a 5xx"
    return calls, summary


def test_identity_a_reaches_nothing_of_namespace_b(secured: Secured, tmp_path: Path) -> None:
    s, a, b = secured, secured.a, secured.b
    seeded = seed_b(s)
    start_run(s, a, "a's own run", TENANT)  # something of a's for A's authorized calls to find
    before = settled(s, seeded["runs"])

    calls, summary = fuzz(
        s,
        tmp_path / "a.jsonl",
        f"Authorization: Bearer {s.tokens[(a, TENANT)]}",
        {
            "namespaces": f"{b},{b},{a}",
            "run_ids": ",".join(seeded["runs"]),
            "task_ids": ",".join(seeded["tasks"]),
            "names": ",".join(seeded["names"]),
        },
        AS_A,
    )
    in_b = [c for c in calls if namespace_of(c.url) == b]
    in_a = [c for c in calls if namespace_of(c.url) == a]
    print(
        f"as A: {summary}; naming b: {len(in_b)} {dict(Counter(c.status for c in in_b))}; "
        f"in a: {len(in_a)} {dict(Counter(c.status for c in in_a))}"
    )
    assert len(in_b) >= 100, "the steering did not reach b"
    assert any(200 <= c.status < 300 for c in in_a), "A was never served in its own namespace: the pass proves nothing"

    # (2) Nothing that names b succeeds, and no answer carries what only b has.
    reached = [c for c in in_b if 200 <= c.status < 300 and not refused_item_by_item(c)]
    assert not reached, [(c.operation, c.url, c.status, c.answer[:300]) for c in reached[:10]]
    secrets_of_b = [MARKER, *seeded["runs"], *seeded["tasks"]]
    leaked = [
        (c.operation, c.url, c.status, c.answer[:300])
        for c in calls
        if any(secret in c.answer and secret not in c.url + c.request for secret in secrets_of_b)
    ]
    assert not leaked, leaked[:10]

    # (3) b is as B left it, and nothing records an operation of A there.
    after = settled(s, seeded["runs"])
    changed = {
        t: (before["rows"][t], after["rows"].get(t))
        for t in before["rows"]
        if before["rows"][t] != after["rows"].get(t)
    }
    assert not changed, changed
    assert before["objects"] == after["objects"]
    audit = fetch(s.database, "SELECT namespace, operation, actor FROM run_audit WHERE actor = $1", user(s, a))
    assert all(row["namespace"] == a for row in audit), audit
    events = json.loads(s.kube.run("get", "events", "-n", b, "-o", "json").stdout)["items"]
    assert not [e for e in events if user(s, a) in json.dumps(e)], "an Event in b names A"
    print(f"b unchanged: {sum(len(r) for r in after['rows'].values())} rows, {len(after['objects'])} objects")


@pytest.mark.parametrize("header", [None, "Authorization: Bearer not-a-token-of-anyone"], ids=["no-token", "garbage"])
def test_without_a_valid_token_every_call_is_401(secured: Secured, tmp_path: Path, header: str | None) -> None:
    s = secured
    calls, summary = fuzz(s, tmp_path / "anonymous.jsonl", header, {"namespaces": f"{s.a},{s.b}"}, ANONYMOUS)
    print(f"{'no token' if header is None else 'a garbage token'}: {summary}")
    api = [c for c in calls if namespace_of(c.url) is not None]
    assert api, "the pass made no /v1 call"
    served = [(c.operation, c.url, c.status) for c in api if c.status != 401 and c.operation != WEBHOOK]
    assert not served, served[:10]
    assert all(not 200 <= c.status < 300 for c in api), "a webhook call without its signature was accepted"
