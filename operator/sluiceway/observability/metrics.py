"""Every metric, declared once. Names carry the `sluiceway_` prefix; the first
five are the reference's "metrics that move first"."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

DECIDE_QUEUE_OLDEST = Gauge("sluiceway_decide_queue_oldest_seconds", "Age of the oldest due decide event: decider lag.")
TASKS_READY = Gauge("sluiceway_tasks_ready", "Tasks queued and leasable now, by task type.", ["namespace", "task_type"])
TASKS_DELAYED = Gauge(
    "sluiceway_tasks_delayed", "Tasks waiting out a retry backoff or a snooze.", ["namespace", "task_type"]
)
TIMERS_OVERDUE = Gauge("sluiceway_timers_overdue", "Armed timers past due: the sweeper is behind.")
OUTBOX_DEAD_LETTERED = Gauge(
    "sluiceway_outbox_dead_lettered",
    "Status writes to custom resources the API server refused for good, since start; never expected to be non-zero.",
)

TASKS_LEASED = Counter("sluiceway_tasks_leased_total", "Tasks leased to workers.", ["namespace", "task_type"])
RESULTS = Counter("sluiceway_task_results_total", "Worker results by outcome.", ["outcome"])
LEASE_LATENCY = Histogram(
    "sluiceway_lease_seconds", "Time to lease a batch (the database part of a poll).", buckets=_LATENCY
)
COMPLETE_LATENCY = Histogram("sluiceway_complete_seconds", "Time to apply a batch of results.", buckets=_LATENCY)
DECISIONS = Counter("sluiceway_decisions_total", "Runs decided.")
DECIDE_BATCH_LATENCY = Histogram(
    "sluiceway_decide_batch_seconds", "Time to decide one batch of runs.", buckets=_LATENCY
)
RUNS_FINISHED = Counter("sluiceway_runs_finished_total", "Runs that ended, by status.", ["status"])
RUNS_QUARANTINED = Counter(
    "sluiceway_runs_quarantined_total",
    "Runs the decider set aside because it could not evaluate them; each needs a person.",
    ["namespace"],
)
RUNS_IN_QUARANTINE = Gauge("sluiceway_runs_in_quarantine", "Running runs in quarantine now: alert when above zero.")
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
GATE_HOLDS = Counter("sluiceway_gate_holds_total", "Work a gate held back, by control.", ["control"])
BREAKER_STATE = Gauge(
    "sluiceway_circuit_breaker_state", "Circuit breaker of a target host: 0 closed, 1 half-open, 2 open.", ["target"]
)
BREAKER_REJECTIONS = Counter(
    "sluiceway_circuit_breaker_rejections_total", "System-task calls failed fast by an open breaker.", ["target"]
)
HTTP_TASK_CALLS = Counter("sluiceway_http_task_calls_total", "HTTP system-task calls, by outcome class.", ["outcome"])
RUNS_PURGED = Counter("sluiceway_runs_purged_total", "Finished runs deleted by retention, with their tasks and logs.")
TASKS_PURGED = Counter("sluiceway_tasks_purged_total", "Task attempts deleted with their runs by retention.")
GRPC_TASK_CALLS = Counter(
    "sluiceway_grpc_task_calls_total", "GRPC system-task calls, by service and status code.", ["service", "code"]
)
WEBHOOK_CALLS = Counter(
    "sluiceway_webhook_calls_total",
    "Webhook intake calls: refused, matched (completed tasks) or unmatched.",
    ["outcome"],
)
HUMAN_DECISIONS = Counter("sluiceway_human_decisions_total", "HUMAN tasks completed or rejected.", ["decision"])
RUN_MESSAGES = Counter("sluiceway_run_messages_total", "Messages sent to runs, by outcome.", ["outcome"])

SCHEDULE_FIRES = Counter(
    "sluiceway_schedule_fires_total",
    "Schedule fires handled, by result: started, buffered (waits for a running run), skipped (by the overlap "
    "policy) or refused (a quota, a limit or a missing workflow refused the run).",
    ["result"],
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
