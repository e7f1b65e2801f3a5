"""What the decider decides from: the runs a pass takes (locked, with their
due events, in one round trip), and each run's snapshot: its workflow spec,
the latest row of each of its tasks, the policies of its task types and the
retry budgets of those failing.

Loading never raises for one run's sake: a run whose spec, rows or policies
cannot be read is returned with the reason, for the decider to quarantine
alone."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from pydantic import ValidationError

from sluiceway.controls.budget import WINDOW_SECONDS, BudgetWindow
from sluiceway.controls.policy import TaskPolicy
from sluiceway.engine.decider import Event
from sluiceway.engine.snapshot import RunSnapshot, TaskRow
from sluiceway.model.execution import DelaySource, RunStatus, TaskOverride, TaskStatus
from sluiceway.model.taskdefinition import RetryKind
from sluiceway.model.workflow import TaskType, WorkflowSpec
from sluiceway.store import sql, workflows
from sluiceway.store.policies import Policies
from sluiceway.store.quarantining import describe

# A run and its due events, as every way of taking runs reads them. LEFT JOIN:
# a run whose version row is missing is quarantined, not left to block the
# queue's head.
_RUN_COLUMNS = """now() AS now, e.id, e.namespace, e.workflow_name, e.workflow_version, e.status, e.input,
       e.correlation_id, e.evaluated, e.timeout_at, e.terminate_requested, e.awaiting_admission,
       e.admission_key, e.parent_execution_id, e.parent_task_id, e.task_overrides,
       e.resource_name IS NOT NULL AS mirrored, e.quarantined_at IS NOT NULL AS quarantined,
       v.created_at AS version_created_at,
       e.paused_at IS NOT NULL AS paused, e.superseded, e.input_overrides,
       e.chain_id, e.previous_run_id, e.chain_deadline_at, e.priority,
       ARRAY(SELECT q.id FROM decide_queue q WHERE q.execution_id = e.id AND q.due_at <= now()) AS event_ids,
       ARRAY(SELECT DISTINCT q.event FROM decide_queue q WHERE q.execution_id = e.id AND q.due_at <= now())
           AS events"""
_RUNS = """executions e
  LEFT JOIN workflow_versions v ON v.namespace = e.namespace AND v.name = e.workflow_name
                               AND v.version = e.workflow_version"""


def _take(where: str, limit: str = "") -> str:
    return sql.claim(_RUN_COLUMNS, _RUNS, where, order_by="e.id", limit=limit, of="e")


# The runs of the queue's head: lock due runs and read their events in one round trip.
LOCK_DUE = _take(
    """e.id = ANY(ARRAY(SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id
                        LIMIT $1 * 4))""",
    limit="$1",
)
# One run, taken alone (the decider isolating a run whose batch failed).
LOCK_ONE = _take("e.id = $1")
# The runs a start or a result just queued, those of them an inline decision
# may take: no parent, child or admission to tell (their rows are shared with
# other runs), nothing set aside, and never one another transaction holds.
# Nor a run with tasks still in flight (a fork's other branches): each of their
# results would decide it again, where the loop decides it once for many.
_INLINE = """e.id = ANY($1::uuid[]) AND e.parent_execution_id IS NULL AND e.admission_key IS NULL
   AND NOT e.awaiting_admission AND e.quarantined_at IS NULL AND e.terminate_requested IS NULL
   AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.execution_id = e.id AND t.status IN ('SCHEDULED', 'IN_PROGRESS'))"""
LOCK_GIVEN = _take(
    _INLINE + "\n   AND EXISTS (SELECT 1 FROM decide_queue q WHERE q.execution_id = e.id AND q.due_at <= now())"
)
# The same, for runs a result batch did not queue because it decides them
# itself (store.results, `Queued.quiet`): they have no event to find.
LOCK_UNQUEUED = _take(_INLINE)
_LATEST_TASKS = """
SELECT DISTINCT ON (execution_id, ref)
       id, execution_id, ref, type, name, status, attempt, input, output, reason, retry_after_seconds,
       close_deadline, first_scheduled_at, retry_kind, retry_after_source, loop_ref, iteration
  FROM tasks WHERE execution_id = ANY($1)
 ORDER BY execution_id, ref, attempt DESC
"""
_BUDGETS = """
SELECT name, sum(executions)::int AS executions, sum(retries)::int AS retries FROM execution_counts
 WHERE namespace = $1 AND name = ANY($2) AND bucket > now() - make_interval(secs => $3)
 GROUP BY name
"""


@dataclass
class Loaded:
    """The runs a pass took: those to decide, with their snapshots; those set
    aside before (with their raw spec, None if missing: a terminate still ends
    them); and those that cannot be read, with why."""

    snapshots: list[tuple[Run, RunSnapshot]] = field(default_factory=list)
    set_aside: list[tuple[asyncpg.Record, str | None]] = field(default_factory=list)
    unreadable: dict[uuid.UUID, str] = field(default_factory=dict)


async def load(conn: asyncpg.Connection, runs: list[asyncpg.Record], policies: Policies) -> Loaded:
    """The snapshots of `runs` (rows of LOCK_DUE, LOCK_ONE or LOCK_GIVEN)."""
    loaded = Loaded()
    rows_by_run, loaded.unreadable = await _task_rows(conn, [r["id"] for r in runs if not r["quarantined"]])
    keys = [_spec_key(run) for run in runs]
    specs = await workflows.stored_specs(conn, set(keys))
    live: list[tuple[Run, WorkflowSpec]] = []
    for run, key in zip(runs, keys, strict=True):
        raw_spec = specs.get(key)  # None: the version row is missing
        if run["quarantined"]:
            loaded.set_aside.append((run, raw_spec))
        elif run["id"] not in loaded.unreadable:
            try:
                name, version = run["workflow_name"], run["workflow_version"]
                live.append((run, workflows.parsed_spec(run["namespace"], name, version, raw_spec)))
            except Exception as error:  # noqa: BLE001 - a version row missing or nothing can parse: that run alone
                loaded.unreadable[run["id"]] = (
                    f"workflow {run['workflow_name']} version {run['workflow_version']} cannot be read: "
                    f"{describe(error)}"
                )
    loaded.snapshots = await build(conn, live, rows_by_run, policies, loaded.unreadable)
    return loaded


def _spec_key(run: asyncpg.Record) -> workflows.SpecKey:
    return (run["namespace"], run["workflow_name"], run["workflow_version"], run["version_created_at"])


def event_of(names: set[str]) -> Event:
    """The event a run is decided for, from the names of its due events."""
    for candidate in (Event.TERMINATE, Event.STARTED, Event.TIMER, Event.CHILD_FINISHED, Event.ADMITTED):
        if candidate.value in names:
            return candidate
    return Event.FORCED if "forced" in names else Event.TASK_UPDATED


def str_or_none(value: object) -> str | None:
    return None if value is None else str(value)


_TYPES = {t.value: t for t in TaskType}
_STATUSES = {s.value: s for s in TaskStatus}


def _task_row(row: asyncpg.Record) -> TaskRow:
    return TaskRow(
        id=str(row["id"]),
        ref=row["ref"],
        type=_TYPES[row["type"]],
        name=row["name"],
        status=_STATUSES[row["status"]],
        attempt=row["attempt"],
        input=row["input"],
        output=row["output"],
        reason=row["reason"],
        retry_after_seconds=row["retry_after_seconds"],
        schedule_to_close_at=row["close_deadline"],
        first_scheduled_at=row["first_scheduled_at"],
        retry_kind=RetryKind(row["retry_kind"]) if row["retry_kind"] else None,
        delay_source=DelaySource(row["retry_after_source"] or DelaySource.HINT.value),
        loop=row["loop_ref"],
        iteration=row["iteration"],
    )


async def _task_rows(
    conn: asyncpg.Connection, ids: list[uuid.UUID]
) -> tuple[dict[uuid.UUID, dict[str, TaskRow]], dict[uuid.UUID, str]]:
    """The latest rows of each run, and the runs with a row that cannot be read."""
    rows_by_run: dict[uuid.UUID, dict[str, TaskRow]] = defaultdict(dict)
    unreadable: dict[uuid.UUID, str] = {}
    if not ids:
        return rows_by_run, unreadable
    for row in await conn.fetch(_LATEST_TASKS, ids):
        try:
            rows_by_run[row["execution_id"]][row["ref"]] = _task_row(row)
        except Exception as error:  # noqa: BLE001 - a row nothing wrote this way: its run alone
            unreadable[row["execution_id"]] = (
                f"task {row['ref']} attempt {row['attempt']} ({row['id']}) cannot be read: {describe(error)}"
            )
    return rows_by_run, unreadable


async def policies_of(
    conn: asyncpg.Connection, policies: Policies, namespace: str, names: set[str]
) -> dict[str, TaskPolicy] | str:
    """The namespace's policies by task type, or why a definition cannot be read."""
    try:
        return await policies.of(conn, namespace, names)
    except ValidationError as error:
        return f"a task definition of namespace {namespace} cannot be read: {describe(error)}"


def _literal(value: object) -> str:
    """A parameter that is a plain string, not an expression ("" otherwise)."""
    return value if isinstance(value, str) and "${" not in value else ""


Run = Mapping[str, Any]  # a run's row as the lock statements read it (or as a start is about to write it)


async def build(
    conn: asyncpg.Connection,
    live: Sequence[tuple[Run, WorkflowSpec]],
    rows_by_run: Mapping[uuid.UUID, dict[str, TaskRow]],
    policies: Policies,
    unreadable: dict[uuid.UUID, str],
) -> list[tuple[Run, RunSnapshot]]:
    """Each run with its snapshot; a run whose snapshot cannot be built is
    added to `unreadable` instead."""
    names_by_run: dict[uuid.UUID, set[str]] = defaultdict(set)
    rows_by_run = defaultdict(dict, rows_by_run)
    failing_by_ns: dict[str, set[str]] = defaultdict(set)
    for run, spec in live:
        names = names_by_run[run["id"]]
        for task in spec.all_tasks:
            names.add(task.name)
            if task.type is TaskType.FORK_JOIN_DYNAMIC:
                fork = rows_by_run[run["id"]].get(task.task_reference_name)
                if fork is not None:
                    names.add(str(fork.output.get("forkTaskName", "")))
                elif literal := _literal(task.input_parameters.get("forkTaskName")):
                    names.add(literal)  # forked in this very pass: knowing its type saves deciding the run twice
        for row in rows_by_run[run["id"]].values():
            if row.status.is_failure():
                failing_by_ns[run["namespace"]].add(row.name)
    by_run: dict[uuid.UUID, dict[str, TaskPolicy] | str] = {}
    for namespace in {run["namespace"] for run, _ in live}:
        of_namespace = [run for run, _ in live if run["namespace"] == namespace]
        found = await policies_of(
            conn, policies, namespace, set().union(*(names_by_run[r["id"]] for r in of_namespace))
        )
        for run in of_namespace:  # one unreadable definition costs only the runs that use it
            by_run[run["id"]] = (
                found
                if not isinstance(found, str)
                else await policies_of(conn, policies, namespace, names_by_run[run["id"]])
            )
    budgets: dict[str, dict[str, BudgetWindow]] = defaultdict(dict)
    for namespace, names in failing_by_ns.items():
        for row in await conn.fetch(_BUDGETS, namespace, list(names), WINDOW_SECONDS):
            budgets[namespace][row["name"]] = BudgetWindow(row["executions"], row["retries"])
    built: list[tuple[Run, RunSnapshot]] = []
    for run, spec in live:
        found = by_run[run["id"]]
        if isinstance(found, str):
            unreadable[run["id"]] = found
            continue
        try:
            snapshot = RunSnapshot(
                id=str(run["id"]),
                namespace=run["namespace"],
                workflow_name=run["workflow_name"],
                version=run["workflow_version"],
                workflow=spec,
                status=RunStatus(run["status"]),
                input=run["input"],
                tasks=rows_by_run[run["id"]],
                correlation_id=run["correlation_id"],
                evaluated=run["evaluated"],
                timeout_at=run["timeout_at"],
                terminate_requested=run["terminate_requested"],
                awaiting_admission=run["awaiting_admission"],
                admission_key=run["admission_key"],
                parent_run_id=str_or_none(run["parent_execution_id"]),
                parent_task_id=str_or_none(run["parent_task_id"]),
                chain_id=str_or_none(run["chain_id"]),
                previous_run_id=str_or_none(run["previous_run_id"]),
                chain_deadline_at=run["chain_deadline_at"],
                priority=run["priority"],
                policies=found,
                defaults=policies.defaults,
                budgets=budgets[run["namespace"]],
                paused=run["paused"],
                superseded=run["superseded"],
                input_overrides=run["input_overrides"],
                task_overrides={
                    ref: TaskOverride.model_validate(value) for ref, value in (run["task_overrides"] or {}).items()
                },
            )
        except Exception as error:  # noqa: BLE001 - a run row nothing wrote this way: that run alone
            unreadable[run["id"]] = f"the run cannot be read: {describe(error)}"
            continue
        built.append((run, snapshot))
    return built
