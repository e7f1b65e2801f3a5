"""The background loops of an operator process: decider, sweeper, scheduler, gauges.

Each survives a database outage: it logs, waits and tries again, so a
PostgreSQL restart costs latency, never a crashed replica."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from sluiceway.engine.commands import Decision
from sluiceway.engine.snapshot import RunSnapshot
from sluiceway.observability import metrics
from sluiceway.observability.logs import about
from sluiceway.plane import Plane
from sluiceway.plane import schedules as firing
from sluiceway.store import diagnostics, retention, schedules
from sluiceway.store.archives import Archive
from sluiceway.store.database import Pool
from sluiceway.store.deciding import DeciderConfig, Quarantined, decide_pass, trace_pass
from sluiceway.store.errors import StoreError
from sluiceway.store.notifications import Notifications
from sluiceway.store.sweeping import (
    SweepReport,
    admit_waiting_runs,
    housekeeping,
    refresh_statistics,
    seconds_until_due,
    sweep,
)

log = logging.getLogger(__name__)

_OUTAGE_PAUSE = 1.0
_FAILED_PASS_PAUSE = 5.0
# Even with nothing armed, the sweeper looks again this often: a timer armed
# by another replica a moment ago may be due sooner than anything it knew of.
_SWEEP_RECHECK = 0.5
# Every decide event is notified, except the one a failed decision defers by
# 30 s: an idle decider looks again this often for that one (and for a
# notification lost by the listener's reconnect), not every second.
_DECIDER_RECHECK = 5.0
# A due run another transaction holds is looked at again after this long,
# twice as long each time it is still held, up to the last: its holder lets
# go without a notification (an operation refused, a result), most often
# within milliseconds; another decider's pass may take a second.
_HELD_BACKOFF = (0.01, 1.0)


async def _pause(stop: asyncio.Event, seconds: float, wake: asyncio.Event | None = None) -> None:
    """Sleep `seconds`, or less when `stop` (or `wake`) is set. asyncio.wait rather
    than wait_for: Python 3.11's wait_for can raise CancelledError when its timeout
    and its cancellation of the inner wait cross, and that would end the loop."""
    waiters = {asyncio.ensure_future(event.wait()) for event in (stop, wake) if event is not None}
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def _cancel_requested() -> bool:
    """Whether someone called cancel() on the running task (and has not taken it back)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


async def _guarded(name: str, stop: asyncio.Event, step: Callable[[], Awaitable[bool]]) -> None:
    """Run `step` until stopped; it returns True when it wants to run again at once.

    A failed step never ends the loop: the runs and tasks it serves belong to
    every tenant, so one bad pass is logged and the loop goes on after a pause.
    Nothing a user sends should get here (the decider quarantines what it
    cannot evaluate); what does is a bug, logged with its traceback."""
    while not stop.is_set():
        try:
            busy = await step()
        except (OSError, StoreError) as error:
            log.warning("%s: database unavailable (%s); retrying", name, error)
            await _pause(stop, _OUTAGE_PAUSE)
            continue
        except asyncio.CancelledError:
            if _cancel_requested():
                raise
            # Nobody cancelled this loop: a library raised CancelledError out of
            # one of its own tasks (a driver cleaning up a connection the server
            # ended). That is one failed pass, not the end of the loop.
            log.exception("%s: a pass was cancelled from below; the loop goes on in %.0f s", name, _OUTAGE_PAUSE)
            metrics.LOOP_FAILURES.labels(name).inc()
            await _pause(stop, _OUTAGE_PAUSE)
            continue
        except Exception:
            log.exception("%s: a pass failed; the loop goes on in %.0f s", name, _FAILED_PASS_PAUSE)
            metrics.LOOP_FAILURES.labels(name).inc()
            await _pause(stop, _FAILED_PASS_PAUSE)
            continue
        if not busy:
            await asyncio.sleep(0)


def count_quarantined(run: Quarantined) -> None:
    metrics.RUNS_QUARANTINED.labels(run.namespace).inc()


# The runs one decider pass decided, for its span (each decider task has its own list).
_decided: ContextVar[list[tuple[RunSnapshot, str | None]] | None] = ContextVar("sluiceway_decided", default=None)


def observe_decision(run: RunSnapshot, decision: Decision) -> None:
    metrics.DECISIONS.inc()
    finish = decision.finish()
    decided = _decided.get()
    if decided is not None:
        decided.append((run, None if finish is None else finish.status.value))
    if finish is not None:
        metrics.RUNS_FINISHED.labels(run.namespace, run.workflow_name, finish.status.value).inc()
        if finish.by_chain_deadline:
            metrics.CHAIN_TIMEOUTS.inc()
    for hold in decision.holds:
        metrics.GATE_HOLDS.labels(hold.control).inc()


async def run_decider(
    pool: Pool,
    notifications: Notifications | None,
    config: DeciderConfig,
    stop: asyncio.Event,
    recheck: float | None = None,
) -> None:
    """Decide due runs until stopped. An idle decider waits for a notification,
    or `recheck` seconds (_DECIDER_RECHECK by default) at most."""
    config.on_decision = config.on_decision or observe_decision
    config.on_quarantine = config.on_quarantine or count_quarantined
    held_wait = _HELD_BACKOFF[0]

    async def step() -> bool:
        nonlocal held_wait
        if notifications is not None:
            notifications.decide.clear()
        started = time.perf_counter()
        started_ns = time.time_ns()
        runs: list[tuple[RunSnapshot, str | None]] = []
        token = _decided.set(runs)
        try:
            done = await decide_pass(pool, config)
        finally:
            _decided.reset(token)
        if done.decided:
            held_wait = _HELD_BACKOFF[0]
            metrics.DECIDE_BATCH_LATENCY.observe(time.perf_counter() - started)
            await trace_pass(pool, started_ns, runs)
            return True
        if done.held:
            await _pause(stop, held_wait, wake=notifications.decide if notifications is not None else None)
            held_wait = min(held_wait * 2, _HELD_BACKOFF[1])
            return False
        held_wait = _HELD_BACKOFF[0]
        if notifications is not None:
            await _pause(stop, _DECIDER_RECHECK if recheck is None else recheck, wake=notifications.decide)
        else:
            await _pause(stop, 0.05)
        return False

    await _guarded("decider", stop, step)


_FIRED_LOG_LINES = 20  # per pass: an expiry storm needs examples and a count, not a line per task


def report_sweep(report: SweepReport) -> None:
    for expired in report.expired:
        metrics.TIMERS_FIRED.labels(expired.missed.value).inc()
    for fired in report.fired_tasks[:_FIRED_LOG_LINES]:
        log.info(
            "run %s task %s (epoch %d): %s",
            fired.execution_id,
            fired.task_id,
            fired.epoch,
            fired.reason,
            extra=about(run_id=fired.execution_id, task_id=fired.task_id, epoch=fired.epoch),
        )
    if len(report.fired_tasks) > _FIRED_LOG_LINES:
        log.info("and %d more tasks ended by their timers in this pass", len(report.fired_tasks) - _FIRED_LOG_LINES)
    for task_type, expiry in report.alerts:
        metrics.TIMEOUT_ALERTS.labels(task_type, expiry.missed.value).inc()
        log.warning("ALERT_ONLY timeout of a %s task: %s", task_type, expiry.reason)
    for run_id, namespace, workflow in report.sla_breaches:
        metrics.SLA_BREACHES.labels(namespace, workflow).inc()
        log.warning(
            "run %s of workflow %s/%s passed its SLA",
            run_id,
            namespace,
            workflow,
            extra=about(namespace=namespace, run_id=run_id, workflow=workflow),
        )


async def run_sweeper(pool: Pool, stop: asyncio.Event, batch: int = 500) -> None:
    last_housekeeping = last_admission = 0.0

    async def step() -> bool:
        nonlocal last_housekeeping, last_admission
        # An idle pass costs one statement: the sweep's transaction only when a timer is due.
        due = await seconds_until_due(pool)
        if due is not None and due <= 0:
            report = await sweep(pool, batch, report_sweep)
            if report.fired() >= batch:
                return True
            due = await seconds_until_due(pool)
        if time.monotonic() - last_admission > 5:
            await admit_waiting_runs(pool)
            analyzed = await refresh_statistics(pool)
            if analyzed:
                log.info("statistics refreshed after a burst of changes: %s", ", ".join(analyzed))
            last_admission = time.monotonic()
        if time.monotonic() - last_housekeeping > 60:
            await housekeeping(pool)
            last_housekeeping = time.monotonic()
        wait = _SWEEP_RECHECK if due is None else min(max(due, 0.0), _SWEEP_RECHECK)
        await _pause(stop, wait)
        return False

    await _guarded("sweeper", stop, step)


_SCHEDULER_RECHECK = 0.5  # a Schedule stored by the leader a moment ago is seen within this


def count_fires(report: schedules.PassReport) -> None:
    for fire in report.fires:
        if fire.outcome == "duplicate":
            continue
        metrics.SCHEDULE_FIRES.labels(fire.namespace, fire.outcome).inc()
        if fire.outcome == "skipped":
            metrics.SCHEDULE_SKIPPED.labels(fire.namespace).inc()
        if fire.lag_seconds is not None:
            metrics.SCHEDULE_LAG.observe(max(fire.lag_seconds, 0.0))
    for missed in report.missed:
        metrics.SCHEDULE_MISSED.labels(missed.namespace).inc(missed.count)
        log.warning(
            "schedule %s/%s: %d fires from %s to %s were older than its catch-up window: skipped",
            missed.namespace,
            missed.schedule,
            missed.count,
            missed.since.isoformat(),
            missed.until.isoformat(),
        )


async def run_scheduler(
    plane: Plane,
    stop: asyncio.Event,
    on_report: Callable[[schedules.PassReport], None] | None = None,
    batch: int = 50,
) -> None:
    """Fire due schedules, on every replica: each due schedule is locked by
    one of them (SKIP LOCKED), and its fire rows make every fire happen once."""

    async def step() -> bool:
        # An idle pass costs one statement: the firing transaction only when a schedule is due.
        async with plane.pool.acquire() as conn:
            due = await schedules.seconds_until_due(conn)
        if due is None or due > 0:
            await _pause(stop, _SCHEDULER_RECHECK if due is None else min(due, _SCHEDULER_RECHECK))
            return False
        report = await firing.fire_due(plane, batch)
        count_fires(report)
        for fire in report.fires:
            if fire.outcome == "started":
                log.info(
                    "schedule %s/%s fired %s: run %s",
                    fire.namespace,
                    fire.schedule,
                    fire.fire_at,
                    fire.run_id,
                    extra=about(namespace=fire.namespace, run_id=fire.run_id),
                )
        if on_report is not None:
            on_report(report)
        return len(report.fires) >= batch

    await _guarded("scheduler", stop, step)


def database_families(health: diagnostics.Health) -> list[Metric]:
    """The metrics read from the database, as the leader exports them."""
    lag = GaugeMetricFamily("sluiceway_decide_queue_oldest_seconds", "Age of the oldest due decide event: decider lag.")
    lag.add_metric([], health.decide_lag_seconds)
    overdue = GaugeMetricFamily("sluiceway_timers_overdue", "Timers more than 2 s past due: the sweeper is behind.")
    overdue.add_metric([], health.timers_overdue)
    by_queue = ["namespace", "task_type", "executor"]
    ready = GaugeMetricFamily("sluiceway_tasks_ready", "Tasks queued and leasable now, by queue.", labels=by_queue)
    delayed = GaugeMetricFamily(
        "sluiceway_tasks_delayed", "Tasks waiting out a retry backoff or a snooze, by queue.", labels=by_queue
    )
    in_flight = GaugeMetricFamily(
        "sluiceway_tasks_in_flight", "Tasks leased and not yet reported, by queue.", labels=by_queue
    )
    pollers = GaugeMetricFamily(
        "sluiceway_queue_pollers",
        "Workers that polled a worker queue in the last minute.",
        labels=["namespace", "task_type"],
    )
    for queue in health.queues:
        labels = [queue.namespace, queue.name, queue.executor]
        ready.add_metric(labels, queue.ready)
        delayed.add_metric(labels, queue.delayed)
        in_flight.add_metric(labels, queue.in_flight)
        if queue.pollers is not None:
            pollers.add_metric([queue.namespace, queue.name], queue.pollers)
    quarantine = GaugeMetricFamily(
        "sluiceway_runs_in_quarantine", "Running runs in quarantine now: each needs a person.", labels=["namespace"]
    )
    for namespace, count in sorted(health.in_quarantine.items()):
        quarantine.add_metric([namespace], count)
    dead = CounterMetricFamily(
        "sluiceway_outbox_dead_lettered",
        "Status writes to WorkflowRuns the API server refused for good, counted in the database; "
        "never expected above zero.",
        labels=["namespace"],
    )
    for namespace, count in sorted(health.dead_letters.items()):
        dead.add_metric([namespace], count)
    return [lag, overdue, ready, delayed, in_flight, pollers, quarantine, dead]


async def publish_database_metrics(pool: Pool) -> None:
    async with pool.acquire() as conn:
        health = await diagnostics.health(conn)
    metrics.FROM_THE_DATABASE.publish(database_families(health))


async def run_gauges(pool: Pool, stop: asyncio.Event, interval: float = 5.0) -> None:
    """Export the metrics read from the database until `stop`; run by the
    leader alone, so replicas never double-count them."""

    async def step() -> bool:
        await publish_database_metrics(pool)
        await _pause(stop, interval)
        return False

    try:
        await _guarded("gauges", stop, step)
    finally:
        metrics.FROM_THE_DATABASE.withdraw()


async def run_purger(
    pool: Pool,
    stop: asyncio.Event,
    *,
    batch: int,
    interval: float,
    idempotency_window: float,
    share: float = 0.25,
    retention_seconds: float = 0,
    event_retention_seconds: float = 0,
    archive: Archive | None = None,
) -> None:
    """Delete expired runs in small batches (archived first, with an `archive`). While a backlog drains, the
    purger takes at most `share` of the time: after a full batch it pauses
    long enough for that (retention is never urgent; dispatch, sharing the
    database with it, is). After a partial batch it waits `interval`.
    Schedule fires older than `retention_seconds`, and published events older
    than `event_retention_seconds`, go with the same batches."""

    async def step() -> bool:
        started = time.perf_counter()
        async with pool.acquire() as conn:
            purged = await retention.purge(
                conn, batch, idempotency_window, retention_seconds, event_retention_seconds, archive
            )
        spent = time.perf_counter() - started
        metrics.RUNS_PURGED.inc(purged.runs)
        metrics.TASKS_PURGED.inc(purged.tasks)
        metrics.RUNS_ARCHIVED.inc(purged.archived)
        if purged.runs:
            log.debug("purged %d runs, %d tasks, %d log lines in %.2f s", purged.runs, purged.tasks, purged.logs, spent)
        backlog = max(purged.runs, purged.fires, purged.events) >= batch
        await _pause(stop, max(0.05, spent * (1 - share) / share) if backlog else interval)
        return False

    await _guarded("purger", stop, step)
