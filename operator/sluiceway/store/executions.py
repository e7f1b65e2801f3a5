"""Runs: starting them, reading them, asking for termination, waking the
decider."""

from __future__ import annotations

import datetime
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg

from sluiceway.controls import attributes as attribute_rules
from sluiceway.controls import priority as run_priority
from sluiceway.controls.pausing import effective_sla_seconds
from sluiceway.model.execution import RunStatus, TaskOverride
from sluiceway.model.workflow import WorkflowSpec, iter_tasks
from sluiceway.store import admission, attributes, sql, workflows
from sluiceway.store.runs import shown_status
from sluiceway.store.wakeups import NOTIFY_DECIDER_SQL

# How long a requestId names the run it started, unless the caller says otherwise.
IDEMPOTENCY_WINDOW_SECONDS = 86_400


@dataclass(frozen=True)
class Started:
    id: str
    status: RunStatus
    awaiting_admission: bool = False
    created: bool = True  # False when the id or request id already named a run (an idempotent retry)


@dataclass(frozen=True)
class InvalidStart:
    """Search attributes that do not fit their declarations; nothing was started."""

    problems: list[attribute_rules.Problem]

    @property
    def message(self) -> str:
        return "; ".join(str(p) for p in self.problems)


@dataclass(frozen=True)
class RequestReused:
    """A requestId that already started a different run (other workflow or input)."""

    request_id: str
    execution_id: str

    @property
    def message(self) -> str:
        return (
            f"requestId {self.request_id!r} already started run {self.execution_id} with a different request: "
            "use a new key for a new start"
        )


# A start a gate refused, saying which and with what numbers.
Refused = admission.Refusal


@dataclass(frozen=True)
class WorkflowNotFound:
    name: str
    version: int | None

    @property
    def message(self) -> str:
        pinned = f" version {self.version}" if self.version is not None else ""
        return f"workflow {self.name}{pinned} not found"


@dataclass(frozen=True)
class InvalidOverrides:
    """A start's taskOverrides name a reference its workflow version does not have."""

    field: str
    message: str


StartOutcome = Started | Refused | WorkflowNotFound | InvalidStart | RequestReused | InvalidOverrides


@dataclass(frozen=True)
class ChainLink:
    """Where a continued run sits in its chain: the chain (its first run's id),
    the run it continues, and the chain's deadline, carried verbatim."""

    chain_id: uuid.UUID
    previous_run_id: uuid.UUID
    deadline_at: datetime.datetime | None


# A run that continues none starts a chain of its own: chain_id is its id.
# A scheduled run is stamped with the statement's clock, not its transaction's
# start: an overlap policy starts it once it has seen the previous run end,
# and that end may carry a later transaction time than this one began with.
_INSERT_RUN = """
INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, input, correlation_id,
                        resource_name, parent_execution_id, parent_task_id, sla_at, admission_key,
                        awaiting_admission, sla_seconds, request_id, restarted_from, retain_seconds,
                        retain_failed_seconds, schedule_name, chain_id, previous_run_id, chain_deadline_at,
                        task_overrides, priority, created_at)
VALUES ($1, $2, $3, $4, 'RUNNING', $5, $6, $7, $8, $9,
        CASE WHEN $10::int > 0 THEN now() + make_interval(secs => $10::int) END, $11, $12, $10, $13, $14, $15, $16,
        $17, coalesce($18::uuid, $1::uuid), $19, $20, $21, $22,
        CASE WHEN $17::text IS NULL THEN now() ELSE clock_timestamp() END)
ON CONFLICT (id) DO NOTHING
RETURNING created_at
"""
_EXISTING = "SELECT status, awaiting_admission, paused_at FROM executions WHERE id = $1"
# A key names its run for the window; past it a start takes it over. (A run
# deleted by retention takes its keys with it.) The condition reads only the
# key's row, which a concurrent start holds locked until it commits: a
# subquery here would read the snapshot from before that wait.
_CLAIM_REQUEST = """
INSERT INTO start_requests AS r (namespace, request_id, execution_id, fingerprint) VALUES ($1, $2, $3, $4)
ON CONFLICT (namespace, request_id) DO UPDATE
   SET execution_id = EXCLUDED.execution_id, fingerprint = EXCLUDED.fingerprint, created_at = now()
 WHERE r.created_at < now() - make_interval(secs => $5::float8)
RETURNING execution_id
"""
_PRIOR_REQUEST = """
SELECT r.execution_id, r.fingerprint, e.status, e.awaiting_admission, e.paused_at
  FROM start_requests r JOIN executions e ON e.id = r.execution_id
 WHERE r.namespace = $1 AND r.request_id = $2 AND r.created_at >= now() - make_interval(secs => $3::float8)
"""
_ENQUEUE_MANY = "INSERT INTO decide_queue (execution_id, event) SELECT unnest($1::uuid[]), $2"
_NOTIFY_DECIDER = f"SELECT {NOTIFY_DECIDER_SQL}"
# Queued and the deciders told in one round trip: a data-modifying WITH runs
# once whether or not the query reads it.
_ENQUEUE_MANY_AND_NOTIFY = f"WITH queued AS ({_ENQUEUE_MANY}) {_NOTIFY_DECIDER}"


async def enqueue_decide(
    conn: asyncpg.Connection, execution_id: str | uuid.UUID, event: str, *, notify: bool = True
) -> None:
    """Queue a run for the decider; `notify=False` when the caller decides it
    inline and tells the decider itself of what it leaves (notify_decider)."""
    await enqueue_decides(conn, [_uuid(execution_id)], event, notify=notify)


async def enqueue_decides(
    conn: asyncpg.Connection, execution_ids: list[uuid.UUID], event: str, *, notify: bool = True
) -> None:
    if execution_ids:
        await conn.execute(_ENQUEUE_MANY_AND_NOTIFY if notify else _ENQUEUE_MANY, execution_ids, event)


async def notify_decider(conn: asyncpg.Connection) -> None:
    """Wake every replica's decider at this transaction's commit."""
    await conn.execute(_NOTIFY_DECIDER)


def _uuid(value: str | uuid.UUID) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def fingerprint(name: str, version: int | None, input: Mapping[str, Any], **rest: Any) -> str:
    """What a start asked for, so a retry with the same key can be told from
    a different start that reuses it."""
    canonical = json.dumps({"name": name, "version": version, "input": input, **rest}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def _prior_start(
    conn: asyncpg.Connection, namespace: str, request_id: str, wanted: str, window: float
) -> Started | RequestReused | None:
    row = await conn.fetchrow(_PRIOR_REQUEST, namespace, request_id, window)
    if row is None:
        return None
    if row["fingerprint"] != wanted:
        return RequestReused(request_id, str(row["execution_id"]))
    status = shown_status(row["status"], row["paused_at"])
    return Started(str(row["execution_id"]), status, row["awaiting_admission"], created=False)


async def start_run(
    conn: asyncpg.Connection,
    namespace: str,
    name: str,
    version: int | None,
    input: dict[str, Any],
    *,
    correlation_id: str | None = None,
    run_id: str | None = None,
    resource_name: str | None = None,
    parent: tuple[uuid.UUID, uuid.UUID] | None = None,
    request_id: str | None = None,
    search_attributes: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    sla_seconds: int | None = None,
    retention_seconds: int | None = None,
    restarted_from: uuid.UUID | None = None,
    idempotency_window: float = IDEMPOTENCY_WINDOW_SECONDS,
    schedule: str | None = None,
    chain: ChainLink | None = None,
    task_overrides: Mapping[str, TaskOverride] | None = None,
    priority: int | None = None,
    notify: bool = True,
) -> StartOutcome:
    """Create a run and wake the decider, in the caller's transaction.

    Idempotent two ways: `run_id` (a WorkflowRun passes its uid, a schedule
    one derived from the fire), and `request_id`, which names the run it
    started for `idempotency_window` seconds; concurrent starts with one key
    wait on its row, so they create one run. `retention_seconds` overrides the
    workflow's retention (a WorkflowRun's ttlSecondsAfterFinished). `schedule`
    names the Schedule that started it; `chain` links a continue-as-new run to
    the run it continues. `task_overrides` must name references of the version
    the run starts on. `priority` over the workflow's (controls.priority).
    `notify=False`: the caller decides the run inline and wakes the decider
    itself if it leaves it queued."""
    execution_id = _uuid(run_id) if run_id else uuid.uuid4()
    # A run id the caller chose may be taken; a fresh one is not (the insert still refuses a clash).
    existing = await _existing_run(conn, execution_id) if run_id else None
    if existing is not None:
        return existing
    found = await workflows.find_version(conn, namespace, name, version)
    if found is None:
        return WorkflowNotFound(name, version)
    overrides = dict(task_overrides or {})
    wrong = _unknown_override(found, overrides)
    if wrong is not None:
        return wrong
    asked = fingerprint(
        name,
        version,
        input,
        correlation=correlation_id,
        attributes=dict(search_attributes or {}),
        sla=sla_seconds,
        restarted_from=restarted_from,
        overrides={ref: o.model_dump(mode="json", by_alias=True, exclude_none=True) for ref, o in overrides.items()},
        # Only when asked: a key claimed by a release without priorities still names the same start.
        **({"priority": priority} if priority is not None else {}),
    )
    if request_id is not None:
        prior = await _prior_start(conn, namespace, request_id, asked, idempotency_window)
        if prior is not None:
            return prior
    spec = found.spec  # None when it no longer parses: the run starts, and the decider quarantines it
    checked = attribute_rules.at_start(
        spec.search_attributes if spec is not None else [],
        search_attributes or {},
        run_input=input,
        correlation_id=correlation_id,
        labels=labels,
    )
    if checked.problems:
        return InvalidStart(checked.problems)
    refusal: Refused | None = await admission.check_quotas(conn, namespace)
    if refusal is None and spec is not None:
        refusal = await admission.check_max_concurrent(conn, namespace, name, spec)
    if refusal is not None:
        return refusal
    if request_id is not None:
        claimed = await conn.fetchval(_CLAIM_REQUEST, namespace, request_id, execution_id, asked, idempotency_window)
        if claimed is None:  # a concurrent start with this key committed first
            prior = await _prior_start(conn, namespace, request_id, asked, idempotency_window)
            if prior is not None:
                return prior
    admitted = await admission.admit(conn, namespace, name, spec, input) if spec else admission.Admission(None, False)
    sla = _sla_seconds(spec, sla_seconds)
    keep, keep_failed = _kept_seconds(spec, retention_seconds)
    parent_run, parent_task = parent if parent else (None, None)
    created_at = await conn.fetchval(
        _INSERT_RUN,
        execution_id,
        namespace,
        name,
        found.version,
        input,
        correlation_id,
        resource_name,
        parent_run,
        parent_task,
        sla,
        admitted.key,
        admitted.awaiting,
        request_id,
        restarted_from,
        keep,
        keep_failed,
        schedule,
        chain.chain_id if chain else None,
        chain.previous_run_id if chain else None,
        chain.deadline_at if chain else None,
        _stored_overrides(overrides),
        _priority(spec, priority),
    )
    if created_at is None:  # raced with an identical start
        row = await conn.fetchrow(_EXISTING, execution_id)
        return Started(
            str(execution_id), shown_status(row["status"], row["paused_at"]), row["awaiting_admission"], False
        )
    await attributes.write(conn, execution_id, namespace, created_at, checked.attributes.values())
    await enqueue_decide(conn, execution_id, "started", notify=notify)
    return Started(str(execution_id), RunStatus.RUNNING, admitted.awaiting)


async def _existing_run(conn: asyncpg.Connection, run_id: uuid.UUID) -> Started | None:
    """The run a chosen id names, if it exists. Looked up before the workflow:
    a restored WorkflowRun adopts its run even when the run's Workflow has
    been deleted since (docs/backup.md)."""
    row = await conn.fetchrow(_EXISTING, run_id)
    if row is None:
        return None
    return Started(str(run_id), shown_status(row["status"], row["paused_at"]), row["awaiting_admission"], False)


def _unknown_override(
    found: workflows.WorkflowVersion, overrides: Mapping[str, TaskOverride]
) -> InvalidOverrides | None:
    if not overrides or found.spec is None:
        return None
    known = {t.task_reference_name for t in iter_tasks(found.spec.tasks)}
    unknown = sorted(set(overrides) - known)
    if not unknown:
        return None
    return InvalidOverrides(
        f"taskOverrides.{unknown[0]}", f"workflow {found.name} version {found.version} has no task {unknown[0]!r}"
    )


def _sla_seconds(spec: WorkflowSpec | None, asked: int | None) -> int:
    timeout = spec.timeout_seconds if spec is not None else 0
    return effective_sla_seconds(spec.sla_seconds if spec is not None else 0, asked, timeout)


def _kept_seconds(spec: WorkflowSpec | None, asked: int | None) -> tuple[int | None, int | None]:
    """How long the run is kept once it ends, and once it fails: a WorkflowRun's
    ttlSecondsAfterFinished over the workflow's retention."""
    if asked is not None:
        return asked, asked
    retention = spec.retention if spec is not None else None
    return (retention.seconds, retention.failed_seconds) if retention else (None, None)


def _priority(spec: WorkflowSpec | None, asked: int | None) -> int:
    return run_priority.effective(asked, spec.priority if spec is not None else None)


def _stored_overrides(overrides: Mapping[str, TaskOverride]) -> dict[str, Any]:
    return {ref: o.model_dump(mode="json", by_alias=True, exclude_none=True) for ref, o in overrides.items()}


@dataclass(frozen=True)
class StartItem:
    """One start: what `POST .../executions` takes, and what a WorkflowRun
    adds (its uid as the run's id, its name, labels and ttl)."""

    name: str
    version: int | None = None
    input: dict[str, Any] = field(default_factory=dict)
    correlation_id: str | None = None
    request_id: str | None = None
    search_attributes: Mapping[str, Any] = field(default_factory=dict)
    sla_seconds: int | None = None
    task_overrides: Mapping[str, TaskOverride] = field(default_factory=dict)
    run_id: str | None = None
    resource_name: str | None = None  # the WorkflowRun that started it
    labels: Mapping[str, str] = field(default_factory=dict)
    retention_seconds: int | None = None
    priority: int | None = None  # over the workflow's


@dataclass(frozen=True)
class _Plain:
    """A start that passes no gate and claims no key: inserted with the others in one statement."""

    at: int
    id: uuid.UUID
    version: int
    spec: WorkflowSpec
    item: StartItem
    sla: int
    kept: tuple[int | None, int | None]
    attributes: list[attribute_rules.Attribute]


@dataclass(frozen=True)
class _RunRow:
    """A row of _INSERT_RUNS: a plain start, decided already when `evaluated`."""

    id: sql.Uuid
    name: sql.Text
    version: sql.Int
    input: sql.Json
    correlation_id: sql.Text | None
    sla: sql.Int
    keep: sql.Int | None
    keep_failed: sql.Int | None
    overrides: sql.Json
    evaluated: sql.Bool
    timeout_at: sql.Instant | None
    chain_deadline_at: sql.Instant | None
    priority: sql.Int


class FirstDecider(Protocol):
    """Decides the runs a start writes before they are written (store.deciding.FirstDecisions)."""

    async def write_decided(
        self,
        conn: asyncpg.Connection,
        fresh: Sequence[FreshStart],
        write: Callable[[Mapping[uuid.UUID, FirstWrite]], Awaitable[None]],
    ) -> None:
        """Decide `fresh` and call `write` with what to write on each run decided (in a savepoint, with its tasks),
        or with nothing when it could not (the runs are then written undecided, for the loop)."""
        ...


@dataclass(frozen=True)
class FreshStart:
    """A plain start about to be written, as its first decision reads it."""

    id: uuid.UUID
    namespace: str
    workflow_name: str
    version: int
    spec: WorkflowSpec
    input: Mapping[str, Any]
    correlation_id: str | None
    task_overrides: Mapping[str, Any]
    priority: int


@dataclass(frozen=True)
class FirstWrite:
    """What a run's first decision sets on its row: written with the row."""

    timeout_at: datetime.datetime | None = None
    chain_deadline_at: datetime.datetime | None = None


# One statement for every plain start of a batch. Its rows carry exactly what
# _INSERT_RUN would give a start without a key, a gate, a parent or a chain.
_INSERT_RUNS = f"""
INSERT INTO executions (id, namespace, workflow_name, workflow_version, status, input, correlation_id, sla_at,
                        sla_seconds, retain_seconds, retain_failed_seconds, chain_id, task_overrides, evaluated,
                        timeout_at, chain_deadline_at, priority)
SELECT r.id, $1, r.name, r.version, 'RUNNING', r.input, r.correlation_id,
       CASE WHEN r.sla > 0 THEN now() + make_interval(secs => r.sla) END, r.sla, r.keep, r.keep_failed, r.id,
       r.overrides, r.evaluated, r.timeout_at, r.chain_deadline_at, r.priority
  FROM {sql.unnest(_RunRow, "r", first=2)}
RETURNING id, created_at
"""
# Quotas on runs gate every start of the namespace: with one, each start counts under its lock.
_RUN_QUOTAS = """
SELECT EXISTS (SELECT 1 FROM quotas WHERE namespace = $1
                 AND (max_concurrent_executions IS NOT NULL OR max_executions_per_minute IS NOT NULL))
"""


def _plain(spec: WorkflowSpec | None, item: StartItem) -> bool:
    """A start that needs none of start_run's locks: no key to claim, no gate to count."""
    return (
        spec is not None
        and item.request_id is None
        and item.run_id is None
        and item.resource_name is None
        and not item.labels
        and item.retention_seconds is None
        and not spec.max_concurrent_executions
        and spec.rate_limit_config is None
    )


async def start_runs(
    conn: asyncpg.Connection,
    namespace: str,
    items: list[StartItem],
    *,
    idempotency_window: float = IDEMPOTENCY_WINDOW_SECONDS,
    notify: bool = True,
    first: FirstDecider | None = None,
) -> list[StartOutcome]:
    """Start many runs in the caller's transaction, each judged on its own: one
    outcome per item, in order, exactly what `start_run` would have answered.
    With `first`, the plain starts are decided before they are written (their
    first tasks are written with them), those it could not decide queued.

    Plain starts (no requestId, a workflow without maxConcurrentExecutions or
    rateLimitConfig, a namespace without a run quota) are inserted with one
    multi-row statement per table and wake the decider once; the others go
    through `start_run`, one by one, under its locks. `notify` as start_run's."""
    outcomes: list[StartOutcome | None] = [None] * len(items)
    gated_namespace = bool(await conn.fetchval(_RUN_QUOTAS, namespace))
    versions: dict[tuple[str, int | None], workflows.WorkflowVersion | None] = {}
    plain: list[_Plain] = []
    for at, item in enumerate(items):
        if item.run_id and (existing := await _existing_run(conn, _uuid(item.run_id))) is not None:
            outcomes[at] = existing
            continue
        key = (item.name, item.version)
        if key not in versions:
            versions[key] = await workflows.find_version(conn, namespace, item.name, item.version)
        found = versions[key]
        if found is None:
            outcomes[at] = WorkflowNotFound(item.name, item.version)
        elif gated_namespace or not _plain(found.spec, item):
            outcomes[at] = await start_run(
                conn,
                namespace,
                item.name,
                item.version,
                item.input,
                correlation_id=item.correlation_id,
                request_id=item.request_id,
                search_attributes=item.search_attributes,
                sla_seconds=item.sla_seconds,
                idempotency_window=idempotency_window,
                task_overrides=item.task_overrides,
                run_id=item.run_id,
                resource_name=item.resource_name,
                labels=item.labels,
                retention_seconds=item.retention_seconds,
                priority=item.priority,
                notify=notify,
            )
        else:
            outcomes[at] = _unknown_override(found, item.task_overrides) or _checked_plain(at, found, item, plain)
    await _write_plain(conn, namespace, plain, notify, first)
    for started in plain:
        outcomes[started.at] = Started(str(started.id), RunStatus.RUNNING)
    assert all(outcome is not None for outcome in outcomes)
    return [outcome for outcome in outcomes if outcome is not None]


def _checked_plain(
    at: int, found: workflows.WorkflowVersion, item: StartItem, plain: list[_Plain]
) -> InvalidStart | None:
    """Its search attributes checked; queued in `plain` when they fit (its outcome comes with the insert)."""
    spec = found.spec
    assert spec is not None
    checked = attribute_rules.at_start(
        spec.search_attributes, item.search_attributes, run_input=item.input, correlation_id=item.correlation_id
    )
    if checked.problems:
        return InvalidStart(checked.problems)
    kept = _kept_seconds(spec, None)
    sla = _sla_seconds(spec, item.sla_seconds)
    plain.append(_Plain(at, uuid.uuid4(), found.version, spec, item, sla, kept, list(checked.attributes.values())))
    return None


async def _insert_plain(
    conn: asyncpg.Connection,
    namespace: str,
    plain: list[_Plain],
    notify: bool,
    decided: Mapping[uuid.UUID, FirstWrite] | None = None,
) -> None:
    """Write the plain starts in one statement; those `decided` already are
    written so (with what their first decision set), the others queued for
    the decider."""
    if not plain:
        return
    decided = decided or {}
    rows = [_run_row(p, decided.get(p.id)) for p in plain]
    created = {
        row["id"]: row["created_at"] for row in await conn.fetch(_INSERT_RUNS, namespace, *sql.arrays(rows, _RunRow))
    }
    for p in plain:
        if p.attributes:
            await attributes.write(conn, p.id, namespace, created[p.id], p.attributes)
    await enqueue_decides(conn, [p.id for p in plain if p.id not in decided], "started", notify=notify)


def _run_row(start: _Plain, decided: FirstWrite | None) -> _RunRow:
    item = start.item
    return _RunRow(
        id=start.id,
        name=item.name,
        version=start.version,
        input=item.input,
        correlation_id=item.correlation_id,
        sla=start.sla,
        keep=start.kept[0],
        keep_failed=start.kept[1],
        overrides=_stored_overrides(item.task_overrides),
        evaluated=decided is not None,
        timeout_at=decided.timeout_at if decided else None,
        chain_deadline_at=decided.chain_deadline_at if decided else None,
        priority=_priority(start.spec, item.priority),
    )


async def _write_plain(
    conn: asyncpg.Connection, namespace: str, plain: list[_Plain], notify: bool, first: FirstDecider | None
) -> None:
    """The plain starts written: decided by `first` before they are, when given."""
    if first is None or not plain:
        await _insert_plain(conn, namespace, plain, notify)
        return
    fresh = [
        FreshStart(
            p.id,
            namespace,
            p.item.name,
            p.version,
            p.spec,
            p.item.input,
            p.item.correlation_id,
            _stored_overrides(p.item.task_overrides),
            _priority(p.spec, p.item.priority),
        )
        for p in plain
    ]

    async def write(decided: Mapping[uuid.UUID, FirstWrite]) -> None:
        await _insert_plain(conn, namespace, plain, notify, decided)

    await first.write_decided(conn, fresh, write)


_REQUEST_TERMINATION = """
UPDATE executions SET terminate_requested = $3
 WHERE id = $1 AND namespace = $2 AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""


async def request_termination(conn: asyncpg.Connection, namespace: str, execution_id: str, reason: str) -> bool:
    """Ask the decider to end a running run; False if it is not running."""
    key = _uuid(execution_id)
    found = await conn.fetchval(_REQUEST_TERMINATION, key, namespace, reason)
    if found is None:
        return False
    await enqueue_decide(conn, key, "terminate")
    return True


_RELEASE = """
UPDATE executions SET quarantined_at = NULL, quarantine_reason = NULL, mirror_seq = mirror_seq + 1
 WHERE id = $1 AND namespace = $2 AND quarantined_at IS NOT NULL
RETURNING id
"""


async def release_quarantine(conn: asyncpg.Connection, namespace: str, execution_id: str) -> bool:
    """Let the decider take a quarantined run again (once its cause is fixed);
    False if it was not quarantined. The caller wakes the decider."""
    return await conn.fetchval(_RELEASE, _uuid(execution_id), namespace) is not None


_TERMINATE_ALL = """
UPDATE executions SET terminate_requested = $3
 WHERE namespace = $1 AND workflow_name = $2 AND status = 'RUNNING' AND terminate_requested IS NULL
RETURNING id
"""


async def terminate_all(conn: asyncpg.Connection, namespace: str, workflow_name: str, reason: str) -> list[uuid.UUID]:
    """Ask the decider to end every running run of a workflow; the runs asked."""
    ids: list[uuid.UUID] = [r["id"] for r in await conn.fetch(_TERMINATE_ALL, namespace, workflow_name, reason)]
    await enqueue_decides(conn, ids, "terminate")
    return ids
