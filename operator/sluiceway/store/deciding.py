"""The decider's transaction: take runs from the decide queue, load their
snapshots, call the pure decider, apply its commands, consume the events;
and the report of a pass once it has committed.

Several replicas run this at once: a run is decided by whoever locks its
`executions` row (`FOR UPDATE SKIP LOCKED`); results and timers only ever
insert into the decide queue, so they never wait on the decider's locks.
Starts and results may also decide the runs they queued in their own
transaction (`decide_inline`): only runs whose decision touches no other run
or gate, never waiting for a lock; whatever they leave stays queued here.
Commands of a whole batch are applied with a few bulk statements; if the bulk
apply fails, each run is retried alone so one bad run cannot wedge the queue.

No run can stop the loop or the other runs of its batch. A run whose spec or
rows cannot be read, whose decision is a Quarantine, or whose decision cannot
be applied even alone, is quarantined: marked on its row, its decide events
consumed, and passed over from then on (terminating it still works; forcing an
evaluation releases it). Only a lost database connection leaves this module,
for the loop to wait out.

The parts, each in a module of its own: store.snapshots loads what a run is
decided from, store.applying writes what the decisions say, store.endings
ends runs and starts the runs that follow, store.quarantining sets runs
aside, store.wakeups says who is woken and how.
"""

from __future__ import annotations

import datetime
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import asyncpg
from pydantic import ValidationError

from sluiceway.engine.commands import (
    AdmitNext,
    ContinueAsNew,
    DecideAgain,
    Decision,
    FinishRun,
    NotifyParent,
    Quarantine,
    ScheduleTask,
    StartChild,
    StartFailureWorkflow,
)
from sluiceway.engine.decider import Event, decide
from sluiceway.engine.snapshot import RunSnapshot
from sluiceway.model.execution import RunStatus
from sluiceway.model.workflow import TaskType
from sluiceway.observability import tracing
from sluiceway.observability.logs import about
from sluiceway.store import diagnostics, executions, matching, snapshots
from sluiceway.store.applying import Applier
from sluiceway.store.database import Pool
from sluiceway.store.endings import DEFAULT_RETENTION_SECONDS
from sluiceway.store.executions import FirstWrite, FreshStart
from sluiceway.store.policies import Policies
from sluiceway.store.quarantining import Quarantined, SetAside, describe, quarantine_runs

__all__ = [
    "DEFAULT_RETENTION_SECONDS",
    "Decided",
    "DeciderConfig",
    "FirstDecisions",
    "Pass",
    "Quarantined",
    "decide_batch",
    "decide_inline",
    "decide_pass",
    "report",
    "trace_pass",
]

log = logging.getLogger(__name__)

_ERROR_BACKOFF = datetime.timedelta(seconds=30)


@dataclass
class DeciderConfig:
    batch_size: int = 128
    retention_seconds: int = DEFAULT_RETENTION_SECONDS
    rng: random.Random = field(default_factory=random.Random)
    policies: Policies = field(default_factory=Policies)  # the process's one, with the operator defaults
    on_decision: Callable[[RunSnapshot, Decision], None] | None = None  # metrics and tracing hooks
    on_quarantine: Callable[[Quarantined], None] | None = None
    # Told, once the batch committed, which queues (namespace, task type) got
    # work: this process's long polls wake at once, without waiting for the
    # NOTIFY (which still goes out, for the other replicas) to come back.
    on_ready: Callable[[set[tuple[str, str]]], None] | None = None
    # This process's waiting polls: a pass leases the tasks it schedules to
    # them in its own transaction (store.matching). None: they wake and lease.
    offers: matching.Offers | None = None


# Whether due events wait for a run that exists: asked when a pass took no run,
# it says another transaction holds a run that is due (SKIP LOCKED passed it
# over). Whoever holds it (an operation, a result, a mirror write, another
# decider) may let go without queueing anything: nothing would wake the loop.
_HELD = """
SELECT EXISTS (SELECT 1 FROM decide_queue q JOIN executions e ON e.id = q.execution_id WHERE q.due_at <= now())
"""
_HEAD_EVENTS = "SELECT execution_id FROM decide_queue WHERE due_at <= now() ORDER BY due_at, id LIMIT $1"
_DEFER = """
WITH consumed AS (DELETE FROM decide_queue WHERE execution_id = $1 AND due_at <= now())
INSERT INTO decide_queue (execution_id, event, due_at) VALUES ($1, 'retry_after_error', now() + $2)
"""


@dataclass(frozen=True)
class Pass:
    """What one pass of the decider loop did."""

    decided: int
    # It took no run, yet due runs wait that another transaction holds: look
    # again soon, as no notification comes when that transaction lets go.
    held: bool = False


async def decide_batch(pool: Pool, config: DeciderConfig) -> int:
    """Decide one batch of due runs; return how many runs were decided."""
    return (await decide_pass(pool, config)).decided


async def decide_pass(pool: Pool, config: DeciderConfig) -> Pass:
    """Decide one batch of due runs; when it took none, say whether due runs
    were passed over because another transaction holds them (one more round
    trip, only on a pass that found nothing it could take)."""
    async with pool.acquire() as conn:
        matcher = _Matcher(config.offers, config.policies) if config.offers is not None else None
        try:
            async with conn.transaction():
                runs = await conn.fetch(snapshots.LOCK_DUE, config.batch_size)
                # A full pass means more runs wait to be decided: leasing to the
                # polls would lengthen every pass, and the polls lease as cheaply.
                outcome = await _decide(conn, runs, config, matcher=matcher if len(runs) < config.batch_size else None)
        except BaseException as error:  # noqa: BLE001 - a claimed poll is answered whatever happens; see below
            if matcher is not None:
                matching.settle(matcher.claimed, committed=False)
            if not isinstance(error, Exception) or _connection_lost(error, conn):
                raise
            log.warning("bulk decision failed (%s); deciding runs one by one", describe(error))
            return Pass(await _decide_one_by_one(conn, config))
        if matcher is not None:
            matching.settle(matcher.claimed, committed=True)
        report(outcome, config)
        held = not runs and bool(await conn.fetchval(_HELD))
        return Pass(outcome.decided, held)


@dataclass
class _Matcher:
    """A decider pass's leases to this process's waiting polls (store.matching):
    the offers it claimed, which decide_batch settles however the pass ends."""

    offers: matching.Offers
    policies: Policies
    unmatched: set[matching.Queue] = field(default_factory=set)  # queues the caller leases from itself
    claimed: list[matching.Offer] = field(default_factory=list)

    async def lease(self, conn: asyncpg.Connection, tasks: dict[matching.Queue, int]) -> set[str]:
        """Lease waiting polls the new `tasks` (per queue) of ungated types; the ids of every task leased."""
        tasks = {queue: count for queue, count in tasks.items() if queue not in self.unmatched}
        ungated = await self._ungated(conn, tasks)
        claimed = self.offers.claim(ungated)
        self.claimed.extend(claimed)
        await matching.lease_to(conn, claimed, ungated)
        return {lease.task_id for offer in claimed for lease in offer.leases}

    async def _ungated(self, conn: asyncpg.Connection, tasks: dict[matching.Queue, int]) -> dict[matching.Queue, int]:
        """The queues of `tasks` whose type has no gate now: only those are leased
        to a waiting poll outside the gates' locks. A namespace whose definitions
        cannot be read is left to the polls, which report it."""
        ungated: dict[matching.Queue, int] = {}
        for namespace in {queue[0] for queue in tasks}:
            try:
                found = await self.policies.of(conn, namespace, [name for ns, name in tasks if ns == namespace])
            except ValidationError:
                continue
            ungated.update({(namespace, n): tasks[(namespace, n)] for n, p in found.items() if not p.gates.any()})
        return ungated


async def decide_inline(
    conn: asyncpg.Connection,
    run_ids: Collection[uuid.UUID],
    config: DeciderConfig,
    unmatched: Collection[matching.Queue] = (),
    unqueued: Collection[uuid.UUID] = (),
) -> Decided:
    """Decide the runs a start or a result just queued (`run_ids`), or did not
    queue because it decides them here (`unqueued`: each is queued now if it is
    left), in the caller's transaction, so that they move on at its commit:
    the caller reports the outcome (`report`) once that commit is done, makes
    sure the decider loop is told of the runs it `left`, and settles the polls
    it `claimed` (leased the tasks it scheduled, as the loop's passes do; not
    those of the `unmatched` queues, which the caller leases itself) once its
    transaction has ended, committed or not.

    Only runs whose decision is their own affair are taken (see
    snapshots.LOCK_GIVEN and _local); a run another transaction holds is
    skipped, never waited for. Everything happens under a savepoint: if it
    fails (a deadlock, a bad spec, anything but a lost connection), it is
    undone and logged, and every run is left queued for the decider loop,
    which isolates and quarantines. Never raises but for a lost connection: a
    start or a result does not fail for it."""
    quiet = sorted(set(unqueued))
    wanted = sorted(set(run_ids) - set(quiet))
    if not wanted and not quiet:
        return Decided()
    started_ns = time.time_ns()
    matcher = _Matcher(config.offers, config.policies, set(unmatched)) if config.offers is not None else None
    runs: list[asyncpg.Record] = []
    try:
        async with conn.transaction():
            if wanted:
                runs += await conn.fetch(snapshots.LOCK_GIVEN, wanted)
            if quiet:
                runs += await conn.fetch(snapshots.LOCK_UNQUEUED, quiet)
            outcome = await _decide(conn, runs, config, inline=True, matcher=matcher)
    except BaseException as error:  # noqa: BLE001 - whatever it was, the decider loop takes these runs
        if matcher is not None:  # undone with the savepoint: those polls lease for themselves
            matching.settle(matcher.claimed, committed=False)
        if not isinstance(error, Exception) or _connection_lost(error, conn):
            raise
        _inline_failures.note(error, len(wanted) + len(quiet))
        await executions.enqueue_decides(conn, quiet, "task_updated", notify=False)
        return Decided(left=set(wanted) | set(quiet))
    outcome.left |= (set(wanted) | set(quiet)) - {run["id"] for run in runs}
    await executions.enqueue_decides(conn, sorted(outcome.left & set(quiet)), "task_updated", notify=False)
    outcome.started_ns = started_ns
    outcome.claimed = matcher.claimed if matcher is not None else []
    return outcome


def _fresh_row(run: FreshStart, now: datetime.datetime) -> snapshots.Run:
    """A start about to be written, as the lock statements would read its row once written undecided."""
    return {
        "now": now,
        "id": run.id,
        "namespace": run.namespace,
        "workflow_name": run.workflow_name,
        "workflow_version": run.version,
        "status": RunStatus.RUNNING.value,
        "input": run.input,
        "correlation_id": run.correlation_id,
        "evaluated": False,
        "timeout_at": None,
        "terminate_requested": None,
        "awaiting_admission": False,
        "admission_key": None,
        "parent_execution_id": None,
        "parent_task_id": None,
        "task_overrides": run.task_overrides,
        "mirrored": False,
        "quarantined": False,
        "paused": False,
        "superseded": {},
        "input_overrides": {},
        "chain_id": run.id,
        "previous_run_id": None,
        "chain_deadline_at": None,
        "priority": run.priority,
    }


class FirstDecisions:
    """The first decisions of the runs a start writes, made before their rows
    are: each run is then written already decided, with its first tasks, and
    no decide event is queued for it, consumed, or followed by a second write
    of its row (what deciding it inline after the insert costs). A run whose
    first decision is not its own affair (`_local`), or cannot be made, is
    written undecided with its event, for the decider loop, as any start's.

    The runs and their tasks are written in one savepoint: if it fails, it is
    undone, logged, and the runs are written undecided instead. A start never
    fails for it (but for a lost connection)."""

    def __init__(self, config: DeciderConfig, unmatched: Collection[matching.Queue] = ()) -> None:
        self.config = config
        self.unmatched = set(unmatched)
        self.decided = Decided()
        self.handled: set[uuid.UUID] = set()  # the runs it wrote, decided or left to the loop

    async def write_decided(
        self,
        conn: asyncpg.Connection,
        fresh: Sequence[FreshStart],
        write: Callable[[Mapping[uuid.UUID, FirstWrite]], Awaitable[None]],
    ) -> None:
        """Decide `fresh` and `write` them, decided where they could be (store.executions.start_runs)."""
        self.handled |= {run.id for run in fresh}
        self.decided.started_ns = time.time_ns()
        matcher = _Matcher(self.config.offers, self.config.policies, self.unmatched) if self.config.offers else None
        try:
            async with conn.transaction():
                now: datetime.datetime = await conn.fetchval("SELECT now()")
                applier, decided = await self._decide(conn, fresh, now)
                await write(decided)
                if decided:
                    applied = await applier.apply(conn, [], matcher)
                    self.decided.ready, self.decided.ended = applied.ready, applied.ended
        except Exception as error:  # noqa: BLE001 - whatever it was, the decider loop takes these runs
            if matcher is not None:
                matching.settle(matcher.claimed, committed=False)
            if _connection_lost(error, conn):
                raise
            _inline_failures.note(error, len(fresh))
            self.decided = Decided(left={run.id for run in fresh})
            await write({})
            return
        self.decided.claimed = matcher.claimed if matcher is not None else []

    async def _decide(
        self, conn: asyncpg.Connection, fresh: Sequence[FreshStart], now: datetime.datetime
    ) -> tuple[Applier, dict[uuid.UUID, FirstWrite]]:
        applier = Applier(now, self.config.retention_seconds, inline=True)
        live = [(_fresh_row(run, now), run.spec) for run in fresh]
        for _, snapshot in await snapshots.build(conn, live, {}, self.config.policies, {}):
            decision = await _decision(conn, self.config, snapshot, Event.STARTED, now)
            if decision.quarantine() is not None or not _local(snapshot, decision):
                continue  # written undecided: the loop decides it, and quarantines it if it must
            applier.add(snapshot, decision)
            self.decided.decisions.append((snapshot, decision))
        armed = {mark.id: FirstWrite(mark.timeout_at, mark.chain_deadline_at) for mark in applier.take_marks()}
        # A run its first decision ends has no mark: it is written decided all the same, then ended.
        decided = {uuid.UUID(s.id): armed.get(uuid.UUID(s.id), FirstWrite()) for s, _ in self.decided.decisions}
        self.decided.decided = len(decided)
        self.decided.left = {run.id for run in fresh} - set(decided)
        return applier, decided


async def _decide_one_by_one(conn: asyncpg.Connection, config: DeciderConfig) -> int:
    """Isolate a run whose decision cannot be applied, so it cannot wedge the queue."""
    decided = 0
    candidates = list(dict.fromkeys(r["execution_id"] for r in await conn.fetch(_HEAD_EVENTS, config.batch_size)))
    for execution_id in candidates:
        try:
            async with conn.transaction():
                outcome = await _decide(conn, await conn.fetch(snapshots.LOCK_ONE, execution_id), config)
        except Exception as error:  # noqa: BLE001 - this run alone; see _connection_lost and _transient
            if _connection_lost(error, conn):
                raise
            if _transient(error):
                log.warning(
                    "run %s: deciding failed (%s); retrying it in %s",
                    execution_id,
                    error,
                    _ERROR_BACKOFF,
                    extra=about(run_id=execution_id),
                )
                await conn.execute(_DEFER, execution_id, _ERROR_BACKOFF)
                continue
            log.error(
                "run %s: deciding it failed, even alone", execution_id, exc_info=error, extra=about(run_id=execution_id)
            )
            try:
                outcome = await _quarantine_alone(
                    conn, execution_id, f"deciding it failed, even alone: {describe(error)}"
                )
            except Exception as failure:  # noqa: BLE001 - the others of the batch still go on
                if _connection_lost(failure, conn):
                    raise
                log.error(
                    "run %s: cannot be quarantined either (%s); retrying it in %s",
                    execution_id,
                    failure,
                    _ERROR_BACKOFF,
                )
                await conn.execute(_DEFER, execution_id, _ERROR_BACKOFF)
                continue
        report(outcome, config)
        decided += outcome.decided
    return decided


class _InlineFailures:
    """Logs inline decisions that failed: the first at once, then at most one
    line a minute with how many failed since, so that a cause every start or
    result meets (a deadlock storm, a bad trigger) does not flood the log."""

    INTERVAL = 60.0

    def __init__(self) -> None:
        self.logged_at: float | None = None
        self.since = 0

    def note(self, error: BaseException, runs: int) -> None:
        self.since += 1
        now = time.monotonic()
        if self.logged_at is not None and now - self.logged_at < self.INTERVAL:
            return
        log.warning(
            "deciding %d runs inline failed (%s); the decider loop takes them (%d inline decisions failed since "
            "the last such line)",
            runs,
            describe(error),
            self.since,
        )
        self.logged_at, self.since = now, 0


_inline_failures = _InlineFailures()


@dataclass
class Decided:
    """What a decision pass did, to report once its transaction committed."""

    decided: int = 0
    quarantined: list[Quarantined] = field(default_factory=list)
    ended: list[tuple[str, FinishRun]] = field(default_factory=list)
    ready: set[tuple[str, str]] = field(default_factory=set)
    decisions: list[tuple[RunSnapshot, Decision]] = field(default_factory=list)
    left: set[uuid.UUID] = field(default_factory=set)  # inline: runs left queued for the decider loop
    started_ns: int = 0  # inline: when it began, for its trace
    # inline: the waiting polls leased tasks in the caller's transaction, to settle once it ended
    claimed: list[matching.Offer] = field(default_factory=list)

    def merged(self, other: Decided) -> Decided:
        """What this pass and `other` did together (one transaction's inline decisions)."""
        started = [ns for ns in (self.started_ns, other.started_ns) if ns]
        return Decided(
            decided=self.decided + other.decided,
            quarantined=self.quarantined + other.quarantined,
            ended=self.ended + other.ended,
            ready=self.ready | other.ready,
            decisions=self.decisions + other.decisions,
            left=self.left | other.left,
            started_ns=min(started, default=0),
            claimed=self.claimed + other.claimed,
        )

    def traced(self) -> list[tuple[RunSnapshot, str | None]]:
        """The runs decided, with the status each ended in (None: still running), for trace_pass."""
        return [(run, None if (end := d.finish()) is None else end.status.value) for run, d in self.decisions]


async def trace_pass(pool: Pool, started_ns: int, runs: list[tuple[RunSnapshot, str | None]]) -> None:
    """A decision pass's span, and the span of each run it ended (written now,
    from the run's start): `runs` are those it decided, with the status each
    ended in (None: still running)."""
    if not tracing.enabled():
        return
    tracing.record_decider_pass(started_ns, [run.id for run, _ in runs])
    ended = {run.id: (run, status) for run, status in runs if status is not None}
    if not ended:
        return
    async with pool.acquire() as conn:
        times = await diagnostics.run_times(conn, list(ended))
    for run_id, (created_at, ended_at) in times.items():
        run, status = ended[run_id]
        tracing.record_run(run_id, run.namespace, run.workflow_name, status or "", created_at, ended_at)


def report(outcome: Decided, config: DeciderConfig) -> None:
    """Logs and hooks, once the transaction that did it has committed (a
    decision rolled back is neither counted nor told)."""
    if config.on_decision is not None:
        for snapshot, decision in outcome.decisions:
            config.on_decision(snapshot, decision)
    if outcome.ready and config.on_ready is not None:
        config.on_ready(outcome.ready)
    for run_id, finish in outcome.ended:
        if finish.status is not RunStatus.COMPLETED:
            failed = f" (task {finish.failed_task_id})" if finish.failed_task_id else ""
            log.info(
                "run %s %s%s: %s",
                run_id,
                finish.status.value,
                failed,
                finish.reason[:300],
                extra=about(run_id=run_id, task_id=finish.failed_task_id or None),
            )
    for quarantined in outcome.quarantined:
        log.error(
            "run %s (%s/%s) is quarantined: %s",
            quarantined.run_id,
            quarantined.namespace,
            quarantined.workflow,
            quarantined.reason,
            extra=about(namespace=quarantined.namespace, run_id=quarantined.run_id, workflow=quarantined.workflow),
        )
        if config.on_quarantine is not None:
            config.on_quarantine(quarantined)


# Connection trouble is the loop's to wait out; these classes of SQLSTATE pass
# by themselves (serialization failures and deadlocks, resources, locks,
# cancelled statements, system errors): the run is tried again later. Anything
# else a run's decision meets would meet it again: the run is quarantined.
_CONNECTION_STATES = ("08", "57P")
_TRANSIENT_STATES = ("40", "53", "55", "57", "58")


def _sqlstate(error: BaseException) -> str:
    return str(getattr(error, "sqlstate", "") or "") if isinstance(error, asyncpg.PostgresError) else ""


def _connection_lost(error: BaseException, conn: asyncpg.Connection) -> bool:
    # Not every InterfaceError: asyncpg's client-side DataError (a value that
    # does not fit its column) is one, and would meet the run again.
    if isinstance(error, OSError) or conn.is_closed():
        return True
    return _sqlstate(error).startswith(_CONNECTION_STATES)


def _transient(error: BaseException) -> bool:
    return _sqlstate(error).startswith(_TRANSIENT_STATES)


async def _quarantine_alone(conn: asyncpg.Connection, execution_id: uuid.UUID, reason: str) -> Decided:
    async with conn.transaction():
        return Decided(quarantined=await quarantine_runs(conn, [SetAside(execution_id, reason)]))


async def _decide(
    conn: asyncpg.Connection,
    runs: list[asyncpg.Record],
    config: DeciderConfig,
    inline: bool = False,
    matcher: _Matcher | None = None,
) -> Decided:
    """Decide and apply; `inline` leaves (unapplied, events kept) every run the
    loop would quarantine and every run whose decision is not _local. With a
    `matcher`, the tasks scheduled are leased to waiting polls where it can."""
    if not runs:
        return Decided()
    now: datetime.datetime = runs[0]["now"]
    applier = Applier(now, config.retention_seconds, inline=inline)
    loaded = await snapshots.load(conn, runs, config.policies)
    for run, raw_spec in loaded.set_aside:
        applier.set_aside(run, raw_spec)
    for run_id, reason in loaded.unreadable.items():
        applier.quarantine(run_id, reason)
    decisions: list[tuple[RunSnapshot, Decision]] = []
    for run, snapshot in loaded.snapshots:
        decision = await _decision(conn, config, snapshot, snapshots.event_of(set(run["events"])), now)
        quarantine = decision.quarantine()
        if quarantine is not None:
            applier.quarantine(run["id"], quarantine.reason)
            continue
        if inline and not _local(snapshot, decision):
            applier.left.add(run["id"])
            continue
        applier.add(snapshot, decision, mirrored=run["mirrored"])
        decisions.append((snapshot, decision))
    consumed = [event for run in runs if run["id"] not in applier.left for event in run["event_ids"]]
    applied = await applier.apply(conn, consumed, matcher)
    return Decided(
        decided=len(runs) - len(applied.quarantined) - len(applier.left),
        quarantined=applied.quarantined,
        ended=applied.ended,
        ready=applied.ready,
        decisions=decisions,
        left=applier.left,
    )


# What a decision may do and still be decided inline: none of these touch
# another run's rows, an admission or a run's messages, nor ask for another pass.
_NOT_LOCAL = (StartChild, NotifyParent, AdmitNext, StartFailureWorkflow, ContinueAsNew, DecideAgain)


def _local(snapshot: RunSnapshot, decision: Decision) -> bool:
    """Whether applying this decision touches only its own run's rows (and the
    shared counters every decision writes): ending a run with a child cancels
    the child too, and scheduling PULL_WORKFLOW_MESSAGES locks the run's
    messages first, so those are left to the loop."""
    if any(isinstance(command, _NOT_LOCAL) for command in decision.commands):
        return False
    if any(row.type is TaskType.SUB_WORKFLOW for row in snapshot.tasks.values()):
        return False
    return not any(
        isinstance(command, ScheduleTask) and command.type is TaskType.PULL_WORKFLOW_MESSAGES
        for command in decision.commands
    )


async def _decision(
    conn: asyncpg.Connection, config: DeciderConfig, snapshot: RunSnapshot, event: Event, now: datetime.datetime
) -> Decision:
    """decide(), once more with the policies it found missing (the task types
    a dynamic fork named in this very pass): its tasks must start on their
    TaskDefinition's policy, never on the operator's defaults by mistake."""
    for _ in range(3):
        try:
            decision = decide(snapshot, event, now, config.rng)
        except Exception as error:  # noqa: BLE001 - decide() is total; this guards that promise
            return Decision([Quarantine(f"the decider failed: {describe(error)}")])
        missing = decision.needs - set(snapshot.policies)
        if not missing:
            return decision
        found = await snapshots.policies_of(conn, config.policies, snapshot.namespace, set(missing))
        if isinstance(found, str):
            return Decision([Quarantine(found)])
        snapshot = replace(snapshot, policies={**snapshot.policies, **found})
    return decision
