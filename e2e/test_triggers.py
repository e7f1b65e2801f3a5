"""Triggers end to end (docs/triggers.md): a real API server, the operator as
a process. Events sent over the API start runs, one is a redelivery and one
fails the condition; the Trigger's status then says what it did with its
recent events (the runs it started, the newest of them, the duplicate, the
filtered event) as `kubectl get` shows it, and stops being written once
nothing changes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.support.api import call
from tests.support.kube import Kube, condition
from tests.support.operators import STATUS_INTERVAL, OperatorProcess
from tests.support.waiting import eventually

API = "sluiceway.dev/v1beta1"
INSTANT = {"tasks": [{"name": "note", "taskReferenceName": "note", "type": "INLINE",
                      "inputParameters": {"expression": "1 + 1"}}]}  # fmt: skip


def apply(kube: Kube, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)
    eventually(
        lambda: (c := condition(kube.get(kind.lower(), name, namespace))) and c["status"] == "True",
        timeout=60,
        what=f"{kind} {name} to be Ready",
    )


def send(operator: OperatorProcess, namespace: str, payload: dict[str, Any], event_id: str) -> dict[str, Any]:
    status, body = call(
        "POST",
        f"{operator.api_url}/v1/ns/{namespace}/events/order-paid",
        payload,
        headers={"X-Sluiceway-Event-Id": event_id},
    )
    assert status == 202, body
    [outcome] = body["outcomes"]
    found: dict[str, Any] = outcome
    return found


def test_a_triggers_status_says_what_it_did_with_its_events(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    apply(kube, namespace, "Workflow", "ship", INSTANT)
    apply(kube, namespace, "Trigger", "ship-paid", {"event": "order-paid", "workflow": "ship",
                                                    "condition": "event.payload.status == 'paid'"})  # fmt: skip

    def status_when(done: Callable[[dict[str, Any]], bool]) -> Callable[[], dict[str, Any] | None]:
        def probe() -> dict[str, Any] | None:
            status: dict[str, Any] = (kube.get("trigger", "ship-paid", namespace) or {}).get("status", {})
            return status if done(status) else None

        return probe

    def recent(status: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = status.get("recent", {})
        return found

    never = eventually(status_when(lambda s: recent(s).get("started") == 0), timeout=60, what="0 started")
    assert recent(never)["events"] == 0 and "lastEventTime" not in never and "lastRunId" not in never

    first = send(operator, namespace, {"status": "paid", "order": 1}, "evt-1")
    newest = send(operator, namespace, {"status": "paid", "order": 2}, "evt-2")
    again = send(operator, namespace, {"status": "paid", "order": 2}, "evt-2")
    open_order = send(operator, namespace, {"status": "open", "order": 3}, "evt-3")
    assert [o["outcome"] for o in (first, newest, again, open_order)] == ["started", "started", "duplicate", "filtered"]

    counted = status_when(lambda s: recent(s).get("started") == 2 and recent(s).get("filtered") == 1)
    status = eventually(counted, timeout=60, what="the Trigger's status to count its events")
    assert recent(status)["events"] == 4  # of its newest 1000 events, all 4 read
    assert (recent(status)["duplicate"], recent(status)["refused"], recent(status)["invalid"]) == (1, 0, 0)
    assert status["lastRunId"] == newest["runId"]
    assert status["lastEventTime"].endswith("Z")

    shown = kube.run("get", "triggers", "-n", namespace).stdout.splitlines()
    assert shown[0].split() == ["NAME", "EVENT", "WORKFLOW", "READY", "LAST-EVENT", "RECENT", "STARTED", "AGE"]
    assert shown[1].split()[:4] == ["ship-paid", "order-paid", "ship", "True"] and shown[1].split()[5:7] == ["4", "2"]
    wide = kube.run("get", "triggers", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[7:11] == ["DUPLICATE", "FILTERED", "REFUSED", "INVALID"]
    assert wide[1].split()[7:11] == ["1", "1", "0", "0"]

    # Nothing new: two status intervals and more pass without a write.
    before = kube.get("trigger", "ship-paid", namespace)
    assert before is not None
    time.sleep(3 * STATUS_INTERVAL)
    after = kube.get("trigger", "ship-paid", namespace)
    assert after is not None and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
