"""The invariants, checked after the faults stop and the runs settle: in SQL
over the tables and the transition history, against the workers' journals,
and through the API. Each check returns the violations it found, described
well enough to start debugging from; an empty list is a pass.

Unlike the other e2e tests, these read the database directly: what they check
(each attempt ends once, every completion came from the lease holder, no
permit leaks) is internal, shown by no API, and the one API-visible claim is
itself a check that the API agrees with the tables."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import aiohttp

from e2e.faults.drivers import HTTP_TIMEOUT, FaultLog, LoadLog
from e2e.faults.rig import Db, Rig
from e2e.faults.workload import FLAKY_REASON, Gates
from sluiceway.controls.triggers import dedup_key

TERMINAL_TASK = ("COMPLETED", "COMPLETED_WITH_ERRORS", "FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT", "CANCELED")
# An optional task's failure is absorbed after the fact: the one terminal-to-terminal move by design.
ABSORBED = ("FAILED", "FAILED_WITH_TERMINAL_ERROR", "TIMED_OUT")
PHASES = {"COMPLETED": "Completed", "FAILED": "Failed", "TIMED_OUT": "TimedOut", "TERMINATED": "Terminated"}


Violations = dict[str, list[str]]


async def check_all(
    rig: Rig,
    db: Db,
    gates: Gates,
    load: LoadLog,
    faults: FaultLog,
    journal: list[dict[str, Any]],
    trigger_uid: str,
) -> tuple[Violations, dict[str, Any]]:
    """Every invariant; also the figures the report prints."""
    violations: Violations = {}
    figures: dict[str, Any] = {}
    violations["every run reaches a terminal state"] = await runs_terminal(db)
    violations["no lost start"], figures["starts"] = await no_lost_start(db, load)
    violations["one run per request id, whatever fails"], figures["request ids"] = await one_run_per_request(db, load)
    violations["one run per event id"], figures["events"] = await one_run_per_event(db, load, trigger_uid)
    violations["one run per schedule fire"], figures["schedule fires"] = await one_run_per_fire(db)
    violations["no task completed twice"] = await one_success_per_task(db)
    violations["each attempt ends once, and nothing moves after it ends"] = await attempts_end_once(db)
    violations["every completion was performed by the lease holder"] = await completions_are_real(db, journal)
    violations["every lease a worker ran was granted"] = await leases_are_real(db, journal)
    violations["late results are refused by the epoch"], figures["late"] = await late_results_refused(
        db, faults, journal
    )
    violations["no terminated task ran again"] = await terminated_never_ran_again(db)
    violations["the SDK never gave up a result or a lease"], figures["sdk"] = sdk_never_gave_up(journal)
    violations["semaphore holders never above permits"], figures["semaphore peak"] = await peak_within(
        db, gates.semaphore, gates.permits, semaphore=True
    )
    violations["capped type never above its cap"], figures["cap peak"] = await peak_within(
        db, gates.capped, gates.cap, semaphore=False
    )
    violations["rate windows never above their limit"], figures["busiest window"] = await rate_within(db, gates)
    violations["no leaked permit"] = await no_leaked_permit(db)
    violations["the API agrees with the database"] = await api_agrees(rig, db, load)
    return violations, figures


async def runs_terminal(db: Db) -> list[str]:
    rows = await db.fetch("SELECT id::text AS id FROM executions WHERE status = 'RUNNING' ORDER BY id")
    if not rows:
        return []
    stuck = await db.fetch(
        "SELECT execution_id::text AS run, ref, attempt, status, epoch, worker_id FROM tasks"
        " WHERE execution_id = ANY($1::uuid[]) ORDER BY execution_id, created_at, attempt",
        [r["id"] for r in rows],
    )
    detail = "; ".join(f"{r['run'][:8]} {r['ref']}#{r['attempt']} {r['status']}@{r['epoch']}" for r in stuck[:20])
    return [f"{len(rows)} runs still RUNNING, e.g. {[r['id'] for r in rows[:5]]}; their tasks: {detail}"]


async def no_lost_start(db: Db, load: LoadLog) -> tuple[list[str], dict[str, int]]:
    """Every start the API acknowledged exists; every WorkflowRun the API server
    accepted has exactly one run; no run exists that nobody asked for."""
    rows = await db.fetch(
        "SELECT id::text AS id, correlation_id, resource_name FROM executions"
        " WHERE schedule_name IS NULL AND (request_id IS NULL OR request_id NOT LIKE 'trigger:%')"
    )
    ids = {r["id"] for r in rows}
    keys = Counter(r["correlation_id"] for r in rows if r["resource_name"] is None)
    by_resource = Counter(r["resource_name"] for r in rows if r["resource_name"] is not None)
    asked = {s.key for s in load.starts}
    violations = [
        f"start {s.key} was acknowledged as run {s.acked}, which does not exist"
        for s in load.starts
        if s.acked and s.acked not in ids
    ]
    violations += [f"WorkflowRun {n} has {by_resource[n]} runs" for n in load.workflow_runs if by_resource[n] != 1]
    violations += [
        f"{n} runs with correlationId {k!r}, which the load driver never sent"
        for k, n in keys.items()
        if k not in asked
    ]
    violations += [
        f"a run for WorkflowRun {n}, which was never created" for n in by_resource if n not in load.workflow_runs
    ]
    figures = {
        "acknowledged": sum(1 for s in load.starts if s.acked),
        "refused (4xx)": sum(1 for s in load.starts if s.refused),
        "retried after an unanswered request": sum(1 for s in load.starts if s.errors),
        "in batches": sum(1 for s in load.starts if s.batch is not None),
        "batch requests": load.batches,
        "runs sharing a correlationId": sum(n - 1 for k, n in keys.items() if n > 1),
        "unacknowledged and absent": sum(1 for s in load.starts if not s.acked and keys[s.key] == 0),
        "WorkflowRuns": len(load.workflow_runs),
    }
    return violations, figures


async def one_run_per_request(db: Db, load: LoadLog) -> tuple[list[str], dict[str, int]]:
    """Every start, single or in a batch, retried with its requestId however
    its answers were lost: exactly one run for each acknowledged one (the run
    it was told), at most one for the others, and no requestId on two runs."""
    rows = await db.fetch(
        "SELECT request_id, array_agg(id::text ORDER BY created_at) AS ids FROM executions"
        " WHERE request_id IS NOT NULL GROUP BY request_id"
    )
    runs = {r["request_id"]: list(r["ids"]) for r in rows}
    violations = [f"requestId {k!r} has {len(ids)} runs: {ids}" for k, ids in runs.items() if len(ids) > 1]
    for start in load.starts:
        found = runs.get(start.key, [])
        if start.acked and found[:1] != [start.acked]:
            violations.append(f"start {start.key} was acknowledged as run {start.acked}; its requestId has {found}")
        if start.refused and found:
            violations.append(f"start {start.key} was refused ({start.refused}) yet has runs {found}")
    figures = {
        "sent": len(load.starts),
        "sent more than once": sum(1 for s in load.starts if s.attempts > 1),
        "duplicate runs": sum(len(ids) - 1 for ids in runs.values()),
    }
    return violations, figures


async def one_run_per_event(db: Db, load: LoadLog, trigger_uid: str) -> tuple[list[str], dict[str, int]]:
    """Every event published (retried with its event id) started exactly one
    run of the Trigger, the one its answer named, started or duplicate."""
    rows = await db.fetch(
        "SELECT request_id, array_agg(id::text) AS ids FROM executions WHERE request_id LIKE 'trigger:%'"
        " GROUP BY request_id"
    )
    runs = {r["request_id"]: list(r["ids"]) for r in rows}
    keys = {dedup_key(trigger_uid, p.event_id): p for p in load.events}
    violations = [f"{len(ids)} runs for one (Trigger, event id): {ids}" for ids in runs.values() if len(ids) > 1]
    violations += [f"a run of the Trigger for an event never sent: {ids}" for k, ids in runs.items() if k not in keys]
    for key, publish in keys.items():
        found = runs.get(key, [])
        if publish.outcome is not None and found != [publish.outcome.get("runId")]:
            violations.append(f"event {publish.event_id} answered {publish.outcome}; its runs are {found}")
        if publish.outcome is None and len(found) > 1:
            violations.append(f"event {publish.event_id}, never answered, has runs {found}")
    figures = {
        "published": len(load.events),
        "answered": sum(1 for p in load.events if p.outcome is not None),
        "sent more than once": sum(1 for p in load.events if p.attempts > 1),
        "answered duplicate": sum(1 for p in load.events if (p.outcome or {}).get("outcome") == "duplicate"),
    }
    return violations, figures


# One statement, so the fires and the runs are read in one snapshot.
_FIRES_AND_RUNS = """
SELECT 'run without a started fire' AS problem, e.schedule_name AS schedule, e.id::text AS run, NULL::text AS fire
  FROM executions e
 WHERE e.schedule_name IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM schedule_fires f WHERE f.namespace = e.namespace AND f.schedule = e.schedule_name
                      AND f.run_id = e.id AND f.outcome = 'started')
UNION ALL
SELECT 'started fire without its run', f.schedule, f.run_id::text, f.fire_at::text
  FROM schedule_fires f
 WHERE f.outcome = 'started' AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.id = f.run_id)
UNION ALL
SELECT 'one run for two fires', f.schedule, f.run_id::text, string_agg(f.fire_at::text, ', ')
  FROM schedule_fires f WHERE f.run_id IS NOT NULL AND f.outcome = 'started'
 GROUP BY f.schedule, f.run_id HAVING count(*) > 1
UNION ALL
SELECT 'figure', f.outcome, count(*)::text, NULL FROM schedule_fires f GROUP BY f.outcome
"""


async def one_run_per_fire(db: Db) -> tuple[list[str], dict[str, int]]:
    """One run per (schedule, fire time): schedule_fires holds one row per fire
    (its key), so a second run of a fire would be a run no started fire names."""
    rows = await db.fetch(_FIRES_AND_RUNS)
    figures = {r["schedule"]: int(r["run"]) for r in rows if r["problem"] == "figure"}
    violations = [
        f"{r['problem']}: schedule {r['schedule']} run {r['run']}" + (f" fire {r['fire']}" if r["fire"] else "")
        for r in rows
        if r["problem"] != "figure"
    ]
    if not figures.get("started"):
        violations.append(f"the schedule started no run under faults: {figures}")
    return violations, figures


async def one_success_per_task(db: Db) -> list[str]:
    rows = await db.fetch(
        "SELECT execution_id::text AS run, ref, count(*) AS n FROM tasks WHERE status = 'COMPLETED'"
        " GROUP BY execution_id, ref HAVING count(*) > 1"
    )
    return [f"run {r['run']} task {r['ref']} completed {r['n']} times" for r in rows]


async def attempts_end_once(db: Db) -> list[str]:
    moved = await db.fetch(
        "SELECT task_id::text AS task, ref, old_status, new_status, old_epoch, new_epoch, at FROM fault_task_history"
        " WHERE old_status = ANY($1) AND NOT (new_status = 'COMPLETED_WITH_ERRORS' AND old_status = ANY($2))"
        " ORDER BY seq",
        list(TERMINAL_TASK),
        list(ABSORBED),
    )
    violations = [
        f"task {r['task']} ({r['ref']}) moved {r['old_status']}@{r['old_epoch']} -> {r['new_status']}@{r['new_epoch']}"
        f" at {r['at']}"
        for r in moved
    ]
    open_ = await db.fetch(
        "SELECT id::text AS task, ref, status FROM tasks WHERE status IN ('SCHEDULED', 'IN_PROGRESS') ORDER BY id"
    )
    violations += [f"task {r['task']} ({r['ref']}) is still {r['status']}" for r in open_]
    # The history must agree with the table, or the checks above looked at a partial record.
    drift = await db.fetch(
        "SELECT t.id::text AS task, t.status, h.new_status FROM tasks t"
        " LEFT JOIN LATERAL (SELECT new_status FROM fault_task_history WHERE task_id = t.id ORDER BY seq DESC LIMIT 1)"
        " h ON true WHERE h.new_status IS DISTINCT FROM t.status"
    )
    violations += [f"history of task {r['task']} ends {r['new_status']}, the table says {r['status']}" for r in drift]
    # A lease bumps the epoch; nothing else may change it.
    rebumped = await db.fetch(
        "SELECT task_id::text AS task, old_status, new_status, old_epoch, new_epoch FROM fault_task_history"
        " WHERE old_epoch IS NOT NULL AND new_epoch <> old_epoch"
        "   AND NOT (old_status = 'SCHEDULED' AND new_status = 'IN_PROGRESS' AND new_epoch = old_epoch + 1)"
    )
    violations += [
        f"task {r['task']} epoch {r['old_epoch']} -> {r['new_epoch']} on {r['old_status']} -> {r['new_status']}"
        for r in rebumped
    ]
    return violations


async def completions_are_real(db: Db, journal: list[dict[str, Any]]) -> list[str]:
    """Each COMPLETED transition of a worker task is one a worker journaled
    finishing, under that very epoch and lease."""
    done = {(j["task"], j["epoch"]): j["worker"] for j in journal if j["ev"] == "done" and j["outcome"] == "completed"}
    rows = await db.fetch(
        "SELECT h.task_id::text AS task, h.new_epoch AS epoch, h.worker_id AS worker FROM fault_task_history h"
        " WHERE h.type = 'SIMPLE' AND h.new_status = 'COMPLETED'"
    )
    violations = []
    for row in rows:
        performer = done.get((row["task"], row["epoch"]))
        if performer is None:
            violations.append(f"task {row['task']} completed at epoch {row['epoch']}, which no worker finished")
        elif performer != row["worker"]:
            violations.append(
                f"task {row['task']} epoch {row['epoch']}: leased to {row['worker']}, done by {performer}"
            )
    return violations


async def leases_are_real(db: Db, journal: list[dict[str, Any]]) -> list[str]:
    rows = await db.fetch(
        "SELECT task_id::text AS task, new_epoch AS epoch, worker_id AS worker FROM fault_task_history"
        " WHERE new_status = 'IN_PROGRESS' AND old_status IS DISTINCT FROM 'IN_PROGRESS'"
    )
    granted = {(r["task"], r["epoch"]): r["worker"] for r in rows}
    violations = []
    for entry in journal:
        if entry["ev"] != "start":
            continue
        holder = granted.get((entry["task"], entry["epoch"]))
        if holder != entry["worker"]:
            violations.append(
                f"{entry['worker']} ran task {entry['task']} epoch {entry['epoch']}, granted to {holder or 'nobody'}"
            )
    return violations


async def late_results_refused(
    db: Db, faults: FaultLog, journal: list[dict[str, Any]]
) -> tuple[list[str], dict[str, int]]:
    """A worker frozen past its lease finishes its work after the thaw: those
    results must change nothing (the attempt ended when the lease was taken
    back), and a stale result replayed through the API must get 409."""
    violations = [
        f"a replayed COMPLETED for task {task} at stale epoch {epoch} got {code}, not 409"
        for task, epoch, code in faults.stale_replays
        if code != 409
    ]
    paused = {(task, epoch) for task, epoch, _ in faults.paused_leases}
    late = [
        j
        for j in journal
        if j["ev"] == "done" and (j["task"], j["epoch"]) in paused and j["at"] >= faults.thawed_at.get(j["worker"], 0)
    ]
    applied = await worker_results_applied(db)
    violations += [
        f"late result of task {j['task']} epoch {j['epoch']} was applied" for j in late if _key(j) in applied
    ]
    unapplied = [j for j in journal if j["ev"] == "done" and _key(j) not in applied]
    figures = {
        "leases held by frozen workers": len(paused),
        "finished after the thaw and refused": len(late),
        "stale results replayed (409)": sum(1 for *_, code in faults.stale_replays if code == 409),
        "results a worker produced that were not applied": len(unapplied),
    }
    return violations, figures


def _key(done: dict[str, Any]) -> tuple[str, int, str]:
    return done["task"], done["epoch"], "COMPLETED" if done["outcome"] == "completed" else "FAILED"


async def worker_results_applied(db: Db) -> set[tuple[str, int, str]]:
    """(task, epoch, status) of every attempt a worker's own result ended; a
    FAILED by lease expiry is the operator's, told apart by its reason."""
    rows = await db.fetch(
        "SELECT task_id::text AS task, new_epoch AS epoch, new_status AS status FROM fault_task_history"
        " WHERE old_status = 'IN_PROGRESS' AND (new_status = 'COMPLETED'"
        "  OR (new_status = 'FAILED' AND reason LIKE '%' || $1 || '%'))",
        FLAKY_REASON,
    )
    return {(r["task"], r["epoch"], r["status"]) for r in rows}


async def terminated_never_ran_again(db: Db) -> list[str]:
    """Once a run is TERMINATED no attempt of it is created, and none is leased
    unless the terminating transaction itself cancelled that lease (a lease
    can land between the run's end and the cancel of its attempts, both in
    one transaction; the attempt history shows it cancelled right after)."""
    rows = await db.fetch(
        """
        SELECT r.execution_id::text AS run, h.task_id::text AS task, h.ref, h.new_status, h.new_epoch
          FROM fault_run_history r
          JOIN fault_task_history h ON h.execution_id = r.execution_id AND h.seq > r.seq
         WHERE r.new_status = 'TERMINATED'
           AND (h.old_status IS NULL
                OR (h.new_status = 'IN_PROGRESS' AND NOT EXISTS (
                        SELECT 1 FROM fault_task_history c
                         WHERE c.task_id = h.task_id AND c.seq > h.seq
                           AND c.old_status = 'IN_PROGRESS' AND c.new_status = 'CANCELED')))
        """
    )
    return [
        f"run {r['run']} was terminated, then task {r['task']} ({r['ref']}) became {r['new_status']}@{r['new_epoch']}"
        for r in rows
    ]


# The one result the SDK gives up by design: its lease ran out first (the worker, or the one replica
# it talks to, was frozen or down for longer than heartbeatTimeout), so the server hands the task out again.
LEASE_RAN_OUT = "lease ran out"


def sdk_never_gave_up(journal: list[dict[str, Any]]) -> tuple[list[str], dict[str, int]]:
    """Faults cost the SDK retries (warnings), never work: an error is a result
    or a lease it dropped while the server would still have taken it."""
    errors = [j for j in journal if j["ev"] == "log" and j["level"] in ("ERROR", "CRITICAL")]
    expired = [j for j in errors if LEASE_RAN_OUT in j["message"]]
    violations = [f"{j['worker']}: {j['message']}" for j in errors if LEASE_RAN_OUT not in j["message"]]
    figures = {
        "warnings (retries)": sum(1 for j in journal if j["ev"] == "log" and j["level"] == "WARNING"),
        "results given up after their lease ran out": len(expired),
    }
    return violations, figures


async def peak_within(db: Db, name: str, limit: int, *, semaphore: bool) -> tuple[list[str], int]:
    """The most holders at any instant, from the history ordered by the time
    each transition happened inside its transaction."""
    if semaphore:
        enter = "SELECT seq, at, 1 AS delta FROM fault_task_history, unnest(new_holds) s WHERE s = $1"
        leave = "SELECT seq, at, -1 FROM fault_task_history, unnest(old_holds) s WHERE s = $1"
    else:
        enter = "SELECT seq, at, 1 AS delta FROM fault_task_history WHERE name = $1 AND type = 'SIMPLE'"
        leave = "SELECT seq, at, -1 FROM fault_task_history WHERE name = $1 AND type = 'SIMPLE'"
    rows = await db.fetch(
        f"""
        WITH events AS (
            {enter} AND new_status = 'IN_PROGRESS' AND old_status IS DISTINCT FROM 'IN_PROGRESS'
            UNION ALL
            {leave} AND old_status = 'IN_PROGRESS' AND new_status <> 'IN_PROGRESS'
        ), running AS (
            SELECT at, sum(delta) OVER (ORDER BY at, seq) AS held FROM events
        )
        SELECT coalesce(max(held), 0) AS peak, (SELECT min(at) FROM running WHERE held > $2) AS first_over
          FROM running
        """,
        name,
        limit,
    )
    peak, first_over = int(rows[0]["peak"]), rows[0]["first_over"]
    violations = [f"{name}: {peak} holders at once (limit {limit}), first at {first_over}"] if peak > limit else []
    return violations, peak


async def rate_within(db: Db, gates: Gates) -> tuple[list[str], int]:
    rows = await db.fetch(
        "SELECT floor(extract(epoch FROM leased_at) / $2) AS window, count(*) AS n FROM fault_task_history"
        " WHERE name = $1 AND new_status = 'IN_PROGRESS' AND old_status IS DISTINCT FROM 'IN_PROGRESS'"
        " GROUP BY 1 ORDER BY 2 DESC",
        gates.rated,
        gates.window_seconds,
    )
    counted = await db.fetch(
        "SELECT window_start, used FROM rate_windows WHERE name = $1 AND used > $2", gates.rated, gates.rate
    )
    violations = [f"{gates.rated}: {r['n']} leases in window {r['window']}" for r in rows if r["n"] > gates.rate]
    violations += [f"rate_windows says {r['used']} used in the window at {r['window_start']}" for r in counted]
    return violations, int(rows[0]["n"]) if rows else 0


async def no_leaked_permit(db: Db) -> list[str]:
    rows = await db.fetch(
        "SELECT id::text AS task, holds FROM tasks WHERE status = 'IN_PROGRESS' AND holds IS NOT NULL"
    )
    return [f"task {r['task']} still holds {r['holds']}" for r in rows]


async def api_agrees(rig: Rig, db: Db, load: LoadLog) -> list[str]:
    """Read every run back through the API, the semaphores too, and every
    WorkflowRun's status through the API server: the same terminal states."""
    statuses = {r["id"]: r["status"] for r in await db.fetch("SELECT id::text AS id, status FROM executions")}
    violations: list[str] = []
    base = f"{rig.replicas[0].url}/v1/ns/{rig.namespace}"
    async with aiohttp.ClientSession() as session:
        semaphore = asyncio.Semaphore(8)

        async def read(run_id: str) -> None:
            async with (
                semaphore,
                session.get(f"{base}/executions/{run_id}?include_tasks=false", timeout=HTTP_TIMEOUT) as r,
            ):
                body = await r.json()
            if r.status != 200 or body.get("status") != statuses.get(run_id):
                violations.append(
                    f"GET run {run_id}: HTTP {r.status} {body.get('status')}, the database has {statuses.get(run_id)}"
                )

        await asyncio.gather(*(read(run_id) for run_id in load.acked()))
        async with session.get(f"{base}/semaphores", timeout=HTTP_TIMEOUT) as response:
            for semaphore_view in await response.json():
                if semaphore_view["held"] != 0:
                    violations.append(f"semaphore {semaphore_view['name']} shows {semaphore_view['held']} held at rest")
    by_resource = {
        r["resource_name"]: r["status"]
        for r in await db.fetch("SELECT resource_name, status FROM executions WHERE resource_name IS NOT NULL")
    }
    for name in load.workflow_runs:
        obj = await asyncio.to_thread(rig.kube.get, "workflowrun", name, rig.namespace)
        phase = (obj or {}).get("status", {}).get("phase")
        expected = PHASES.get(by_resource.get(name, ""), "?")
        if phase != expected:
            violations.append(f"WorkflowRun {name} shows phase {phase}, the database has {by_resource.get(name)}")
    return violations
