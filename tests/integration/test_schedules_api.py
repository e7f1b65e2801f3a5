"""The schedules REST surface on a real PostgreSQL, without Kubernetes:
reads, trigger now and backfill act on the store; a bad write is refused
naming the field before anything is sent to Kubernetes."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import aiohttp
from typer.testing import CliRunner

from sluiceway.cli.client import ExitCode
from sluiceway.controls.schedules import run_id
from sluiceway.runtime.main import app
from tests.integration.test_schedules import NAMESPACE, add_schedule, define_workflow
from tests.support.plane import Plane

BASE = f"/v1/ns/{NAMESPACE}/schedules"


async def call(plane: Plane, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        async with session.request(method, plane.url + path, json=body) as response:
            return response.status, await response.json()


async def test_a_schedule_is_read_with_its_next_fires_and_triggered_now(plane: Plane) -> None:
    await define_workflow(plane.pool)
    await add_schedule(plane.pool, "nightly", cron=["0 2 * * *"], timezone="Europe/Paris")
    status, found = await call(plane, "GET", f"{BASE}/nightly?upcoming=3")
    assert status == 200 and found["name"] == "nightly" and found["spec"]["timezone"] == "Europe/Paris"
    assert len(found["nextFireTimes"]) == 3 and all(
        t.endswith(("T01:00:00Z", "T00:00:00Z")) for t in found["nextFireTimes"]
    )
    status, fire = await call(plane, "POST", f"{BASE}/nightly/trigger", {})
    assert status == 201 and fire["outcome"] == "started" and fire["kind"] == "trigger"
    status, again = await call(plane, "POST", f"{BASE}/nightly/trigger", {"overlapPolicy": "Skip"})
    assert status == 201 and again["outcome"] == "skipped", "the first trigger's run still runs"
    status, listed = await call(plane, "GET", BASE)
    assert status == 200 and [(s["name"], s["activeRuns"], s["skipped"]) for s in listed] == [("nightly", 1, 1)]
    status, run = await call(plane, "GET", f"/v1/ns/{NAMESPACE}/executions/{fire['runId']}?include_tasks=false")
    assert status == 200 and run["schedule"] == "nightly" and run["chainId"] == fire["runId"]


async def test_a_backfill_starts_one_run_per_fire_and_says_what_was_fired_before(plane: Plane) -> None:
    await define_workflow(plane.pool)
    uid = await add_schedule(plane.pool, "hourly", cron=["0 * * * *"], overlapPolicy="AllowAll")
    body = {"startTime": "2026-05-01T00:00:00Z", "endTime": "2026-05-01T02:30:00Z"}
    status, filled = await call(plane, "POST", f"{BASE}/hourly/backfill", body)
    assert status == 201 and (filled["started"], filled["alreadyFired"]) == (3, 0)
    assert [f["runId"] for f in filled["fires"]] == [
        run_id(uid, datetime.datetime(2026, 5, 1, h, tzinfo=datetime.UTC)) for h in range(3)
    ]
    status, again = await call(plane, "POST", f"{BASE}/hourly/backfill", body)
    assert status == 201 and (again["started"], again["alreadyFired"]) == (0, 3)


async def test_refusals_name_the_field_and_unknown_schedules_are_404(plane: Plane) -> None:
    await define_workflow(plane.pool)
    await add_schedule(plane.pool, "hourly", cron=["0 * * * *"])
    status, refused = await call(plane, "PUT", f"{BASE}/broken", {"workflow": "report", "cron": ["* * *"]})
    assert status == 422 and refused["fields"][0]["field"] == "cron[0]"
    status, refused = await call(plane, "PUT", f"{BASE}/broken", {"workflow": "report", "cron": ["@daily"]})
    assert status == 503 and refused["error"] == "NO_KUBERNETES", "a valid write needs the Kubernetes API"
    future = {"startTime": "2026-05-01T00:00:00Z", "endTime": "2999-01-01T00:00:00Z"}
    status, refused = await call(plane, "POST", f"{BASE}/hourly/backfill", future)
    assert status == 422 and refused["fields"][0]["field"] == "endTime"
    naive = {"startTime": "2026-05-01T00:00:00", "endTime": "2026-05-01T02:00:00Z"}
    status, refused = await call(plane, "POST", f"{BASE}/hourly/backfill", naive)
    assert status == 422 and refused["fields"][0]["field"] == "startTime"
    for method, path in (("GET", "/missing"), ("POST", "/missing/trigger")):
        status, refused = await call(plane, method, BASE + path, {} if method == "POST" else None)
        assert status == 404 and refused["error"] == "NOT_FOUND"


async def cli(plane: Plane, *argv: str) -> tuple[int, list[str], str]:
    """`sluiceway schedules ...` against the plane, as a person runs it: the
    exit code, the lines it printed and what it said on stderr. (In a thread:
    the command runs its own event loop.)"""
    args = ["schedules", *argv, "-n", NAMESPACE, "--server", plane.url]
    result = await asyncio.to_thread(CliRunner().invoke, app(), args)
    return result.exit_code, result.stdout.splitlines(), result.stderr


async def test_the_schedules_command_lists_shows_next_fires_triggers_and_backfills(plane: Plane) -> None:
    await define_workflow(plane.pool)
    await add_schedule(
        plane.pool, "nightly", cron=["30 2 * * *"], timezone="America/New_York", overlapPolicy="AllowAll"
    )
    code, lines, _ = await cli(plane, "list")
    assert code == 0 and lines[0].split() == [
        "NAME",
        "WORKFLOW",
        "NEXT",
        "LAST",
        "ACTIVE",
        "SUSPENDED",
        "STARTED",
        "MISSED",
        "SKIPPED",
    ]
    assert lines[1].split()[:2] == ["nightly", "report"]
    _, lines, _ = await cli(plane, "next", "nightly", "--count", "3")
    assert len(lines) == 3 and all("02:30:00 E" in line and "(America/New_York)" in line for line in lines)
    _, lines, _ = await cli(plane, "trigger", "nightly")
    assert " trigger: started run " in lines[0]
    _, lines, _ = await cli(
        plane, "backfill", "nightly", "--from", "2026-03-07T00:00:00Z", "--to", "2026-03-10T00:00:00Z"
    )
    assert lines[0] == "2 runs started, 0 fire times already fired", "no 02:30 on 8 March in New York"
    _, lines, _ = await cli(plane, "get", "nightly")
    assert lines[0] == "schedule nightly: cron 30 2 * * * (America/New_York), workflow report"
    code, _, said = await cli(plane, "pause", "nightly")  # pause writes spec.suspend through Kubernetes
    assert code == ExitCode.UNAVAILABLE and "(HTTP 503" in said, said
    code, _, said = await cli(plane, "get", "missing")
    assert code == ExitCode.NOT_FOUND and "(HTTP 404" in said, said
    code, lines, _ = await cli(plane, "list", "-o", "json")
    assert code == 0 and json.loads("\n".join(lines))[0]["name"] == "nightly"
