"""Every metric, declared once. Names carry the `sluiceway_` prefix.

Labels are bounded: namespaces, definition names (workflows, task types),
controls, outcomes and breaker targets; never a run or task id. Counters
below are counted by the replica where the event happened (sum them across
replicas); what is read from the database is exported by the leader alone
(`DatabaseMetrics`). docs/observability.md lists them all."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class DatabaseMetrics(Collector):
    """The metrics read from PostgreSQL rather than counted in this process:
    queue depths, decider lag, overdue timers, runs in quarantine, dead letters.

    They describe the whole installation, so one replica exports them: the
    leader publishes a fresh set every few seconds and withdraws it when it
    steps down (`sluiceway_database_metrics_exporter` says which replica it
    is). Summing them across replicas never double-counts."""

    def __init__(self) -> None:
        self._families: list[Metric] = []

    def publish(self, families: list[Metric]) -> None:
        self._families = families
        DATABASE_METRICS_EXPORTER.set(1)

    def withdraw(self) -> None:
        self._families = []
        DATABASE_METRICS_EXPORTER.set(0)

    def describe(self) -> Iterable[Metric]:
        return []  # names vary with what the database holds; nothing to reserve

    def collect(self) -> Iterable[Metric]:
        return list(self._families)


class PoolMetrics(Collector):
    """This replica's connections to PostgreSQL: in use and idle, against its maximum."""

    def __init__(self) -> None:
        self.usage: Callable[[], tuple[int, int, int]] | None = None

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        if self.usage is None:
            return []
        in_use, idle, most = self.usage()
        connections = GaugeMetricFamily(
            "sluiceway_db_pool_connections", "This replica's connections to PostgreSQL, by state.", labels=["state"]
        )
        connections.add_metric(["in_use"], in_use)
        connections.add_metric(["idle"], idle)
        ceiling = GaugeMetricFamily("sluiceway_db_pool_max_connections", "The most connections this replica opens.")
        ceiling.add_metric([], most)
        return [connections, ceiling]


POOL = PoolMetrics()
REGISTRY.register(POOL)

DATABASE_METRICS_EXPORTER = Gauge(
    "sluiceway_database_metrics_exporter",
    "1 on the replica exporting the metrics read from the database (the leader), 0 elsewhere.",
)
FROM_THE_DATABASE = DatabaseMetrics()
REGISTRY.register(FROM_THE_DATABASE)

TASKS_LEASED = Counter("sluiceway_tasks_leased_total", "Tasks leased to workers.", ["namespace", "task_type"])
TASKS_MATCHED = Counter(
    "sluiceway_tasks_matched_total",
    "Tasks the decider leased to a waiting poll in the transaction that scheduled them (also in tasks_leased).",
    ["namespace"],
)
RESULTS = Counter("sluiceway_task_results_total", "Worker results by outcome.", ["outcome"])
LEASE_LATENCY = Histogram(
    "sluiceway_lease_seconds", "Time to lease a batch (the database part of a poll).", buckets=_LATENCY
)
COMPLETE_LATENCY = Histogram("sluiceway_complete_seconds", "Time to apply a batch of results.", buckets=_LATENCY)
DECISIONS = Counter("sluiceway_decisions_total", "Runs decided.")
DECIDE_BATCH_LATENCY = Histogram(
    "sluiceway_decide_batch_seconds", "Time to decide one batch of runs.", buckets=_LATENCY
)
RUNS_FINISHED = Counter(
    "sluiceway_runs_finished_total", "Runs that ended, by workflow and status.", ["namespace", "workflow", "status"]
)
RUNS_QUARANTINED = Counter(
    "sluiceway_runs_quarantined_total",
    "Runs the decider set aside because it could not evaluate them; each needs a person.",
    ["namespace"],
)
TIMERS_FIRED = Counter("sluiceway_timers_fired_total", "Timers fired, by the deadline missed.", ["deadline"])
TIMEOUT_ALERTS = Counter(
    "sluiceway_timeout_alerts_total", "Deadlines missed under timeoutPolicy ALERT_ONLY.", ["task_type", "deadline"]
)
SLA_BREACHES = Counter("sluiceway_workflow_sla_breached_total", "Runs past their soft SLA.", ["namespace", "workflow"])
LOOP_FAILURES = Counter(
    "sluiceway_loop_failures_total",
    "Passes of a background loop (decider, sweeper, ...) that failed for a reason other than the database.",
    ["loop"],
)
RECONCILE_ERRORS = Counter(
    "sluiceway_reconcile_errors_total",
    "Reconciler passes that raised (kopf retries them), by kind: an invalid spec is a condition, not an error; "
    "a WorkflowRun waiting for its Workflow counts here.",
    ["kind"],
)
GATE_HOLDS = Counter("sluiceway_gate_holds_total", "Work a gate held back, by control.", ["control"])
BREAKER_STATE = Gauge(
    "sluiceway_circuit_breaker_state", "Circuit breaker of a target host: 0 closed, 1 half-open, 2 open.", ["target"]
)
BREAKER_REJECTIONS = Counter(
    "sluiceway_circuit_breaker_rejections_total", "System-task calls failed fast by an open breaker.", ["target"]
)
HTTP_TASK_CALLS = Counter("sluiceway_http_task_calls_total", "HTTP system-task calls, by outcome class.", ["outcome"])
RUNS_PURGED = Counter("sluiceway_runs_purged_total", "Finished runs deleted by retention, with their tasks and logs.")
RUNS_ARCHIVED = Counter(
    "sluiceway_runs_archived_total", "Finished runs written to the archive (synced) before retention deleted them."
)
TASKS_PURGED = Counter("sluiceway_tasks_purged_total", "Task attempts deleted with their runs by retention.")
GRPC_TASK_CALLS = Counter(
    "sluiceway_grpc_task_calls_total", "GRPC system-task calls, by service and status code.", ["service", "code"]
)
WEBHOOK_CALLS = Counter(
    "sluiceway_webhook_calls_total",
    "Webhook intake calls: refused, matched (completed tasks) or unmatched.",
    ["outcome"],
)
TRIGGER_OUTCOMES = Counter(
    "sluiceway_trigger_outcomes_total",
    "What Triggers did with published events: started, duplicate, filtered, refused, invalid; "
    "unmatched for an event no Trigger listens to.",
    ["outcome"],
)
HUMAN_DECISIONS = Counter("sluiceway_human_decisions_total", "HUMAN tasks completed or rejected.", ["decision"])
RUN_MESSAGES = Counter("sluiceway_run_messages_total", "Messages sent to runs, by outcome.", ["outcome"])

SCHEDULE_FIRES = Counter(
    "sluiceway_schedule_fires_total",
    "Schedule fires handled, by result: started, buffered (waits for a running run), skipped (by the overlap "
    "policy) or refused (a quota, a limit or a missing workflow refused the run).",
    ["namespace", "result"],
)
SCHEDULE_MISSED = Counter(
    "sluiceway_schedule_missed_total",
    "Fires found older than their schedule's catch-up window (after an outage): skipped, never started.",
    ["namespace"],
)
SCHEDULE_SKIPPED = Counter(
    "sluiceway_schedule_skipped_total", "Fires an overlap policy skipped because a run still ran.", ["namespace"]
)
SCHEDULE_LAG = Histogram(
    "sluiceway_schedule_lag_seconds",
    "From a fire's due time (its time plus jitter) to the start of its run.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0),
)
CHAIN_TIMEOUTS = Counter(
    "sluiceway_chain_timeouts_total",
    "Runs ended TIMED_OUT because their continue-as-new chain passed its chainTimeoutSeconds "
    "(a run's own timeoutSeconds counts in sluiceway_runs_finished_total only).",
)
API_RATE_LIMITED = Counter(
    "sluiceway_api_rate_limited_total",
    "API requests refused with 429 by a per-identity or per-namespace rate limit, by traffic (api, worker) "
    "and the bucket that was empty.",
    ["traffic", "bucket"],
)
