-- Operating runs: finding them, idempotent starts, search attributes, pause
-- and resume, retry and rerun, the SLA, task logs and retention.

ALTER TABLE executions
    ADD COLUMN request_id            text,
    ADD COLUMN restarted_from        uuid,
    ADD COLUMN paused_at             timestamptz,
    ADD COLUMN pause_reason          text,
    ADD COLUMN paused_seconds        double precision NOT NULL DEFAULT 0,
    -- The hook for continue-as-new chains (issue 12): an absolute bound on a
    -- whole chain. A pause never moves it; the decider times the run out past it.
    ADD COLUMN chain_deadline_at     timestamptz,
    ADD COLUMN sla_seconds           integer     NOT NULL DEFAULT 0,
    ADD COLUMN sla_reported          boolean     NOT NULL DEFAULT false,
    -- Retry and rerun: ref -> the last attempt they made history, and a
    -- rerun's new input by ref.
    ADD COLUMN superseded            jsonb       NOT NULL DEFAULT '{}',
    ADD COLUMN input_overrides       jsonb       NOT NULL DEFAULT '{}',
    ADD COLUMN retries               integer     NOT NULL DEFAULT 0,
    -- Retention, resolved when the run ends (NULL: the operator's default).
    ADD COLUMN retain_seconds        integer,
    ADD COLUMN retain_failed_seconds integer,
    ADD COLUMN expires_at            timestamptz;

-- Pages of runs, newest first, by keyset (created_at, id): one index per
-- filter that narrows a namespace a lot, each ending in the page order, so a
-- page is an index range scan that stops after `limit` rows whatever the size
-- of the table. Partial indexes for rare states cost nothing for other rows.
CREATE INDEX executions_page ON executions (namespace, created_at, id);
DROP INDEX executions_created;
CREATE INDEX executions_page_workflow ON executions (namespace, workflow_name, created_at, id);
CREATE INDEX executions_page_status ON executions (namespace, status, created_at, id);
CREATE INDEX executions_page_correlation ON executions (namespace, correlation_id, created_at, id)
    WHERE correlation_id IS NOT NULL;
CREATE INDEX executions_page_ended ON executions (namespace, ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX executions_page_sla ON executions (namespace, created_at, id) WHERE sla_breached_at IS NOT NULL;
CREATE INDEX executions_page_awaiting ON executions (namespace, created_at, id) WHERE awaiting_admission;
CREATE INDEX executions_page_paused ON executions (namespace, created_at, id) WHERE paused_at IS NOT NULL;
CREATE INDEX executions_restarted ON executions (restarted_from) WHERE restarted_from IS NOT NULL;
CREATE INDEX executions_chain_deadline ON executions (chain_deadline_at)
    WHERE status = 'RUNNING' AND chain_deadline_at IS NOT NULL;
CREATE INDEX executions_expiry ON executions (expires_at) WHERE expires_at IS NOT NULL;

-- Pages of tasks: by namespace, task type, worker, and the failures people
-- look for; the active ones are served by the dispatch indexes.
CREATE INDEX tasks_page ON tasks (namespace, created_at, id);
CREATE INDEX tasks_page_type ON tasks (namespace, name, created_at, id);
CREATE INDEX tasks_page_worker ON tasks (namespace, worker_id, created_at, id) WHERE worker_id IS NOT NULL;
CREATE INDEX tasks_page_failed ON tasks (namespace, created_at, id)
    WHERE status IN ('FAILED', 'FAILED_WITH_TERMINAL_ERROR', 'TIMED_OUT');

-- Search attributes: one row per run and attribute, the value in the column
-- of its type, so `=`, ranges and `in` compare as the type does and each is a
-- btree range. The run's created_at is copied in (it never changes), so an
-- equality filter pages in run order from its own index. A side table rather
-- than a jsonb column: jsonb's GIN index answers containment but not ranges,
-- and an expression index per attribute would be DDL driven by user
-- definitions; upserts from task results also touch these small rows, never
-- the run's row the decider locks.
CREATE TABLE run_attributes (
    run_id        uuid             NOT NULL,
    name          text             NOT NULL,
    namespace     text             NOT NULL,
    created_at    timestamptz      NOT NULL,
    type          text             NOT NULL,
    keyword       text,
    int_value     bigint,
    double_value  double precision,
    bool_value    boolean,
    time_value    timestamptz,
    PRIMARY KEY (run_id, name),
    CHECK (num_nonnulls(keyword, int_value, double_value, bool_value, time_value) = 1)
);
CREATE INDEX run_attributes_keyword ON run_attributes (namespace, name, keyword, created_at, run_id)
    WHERE keyword IS NOT NULL;
CREATE INDEX run_attributes_int ON run_attributes (namespace, name, int_value, created_at, run_id)
    WHERE int_value IS NOT NULL;
CREATE INDEX run_attributes_double ON run_attributes (namespace, name, double_value, created_at, run_id)
    WHERE double_value IS NOT NULL;
CREATE INDEX run_attributes_bool ON run_attributes (namespace, name, bool_value, created_at, run_id)
    WHERE bool_value IS NOT NULL;
CREATE INDEX run_attributes_time ON run_attributes (namespace, name, time_value, created_at, run_id)
    WHERE time_value IS NOT NULL;

-- Idempotent starts: a key names the run its first start created, for a
-- window; a retried start finds it here. `fingerprint` tells a retry from a
-- different start that reuses the key.
CREATE TABLE start_requests (
    namespace     text        NOT NULL,
    request_id    text        NOT NULL,
    execution_id  uuid        NOT NULL,
    fingerprint   text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, request_id)
);
CREATE INDEX start_requests_age ON start_requests (created_at);

-- A paused run's queued and waiting tasks, set aside with their timers: the
-- task rows hold a far-future availability and no timers meanwhile, so
-- nothing leases or expires them; resume puts them back, moved by the pause.
CREATE TABLE parked_tasks (
    task_id               uuid        PRIMARY KEY,
    execution_id          uuid        NOT NULL,
    status                text        NOT NULL,
    available_at          timestamptz NOT NULL,
    schedule_to_start_at  timestamptz,
    total_at              timestamptz,
    schedule_to_close_at  timestamptz,
    wait_until            timestamptz,
    close_deadline        timestamptz
);
CREATE INDEX parked_tasks_run ON parked_tasks (execution_id);

-- What handlers logged, shipped by workers with heartbeats and results, kept
-- bounded per task: `task_log_sizes` counts what each task offered, and lines
-- past the cap are dropped with one line saying so.
CREATE TABLE task_logs (
    id            bigserial   PRIMARY KEY,
    execution_id  uuid        NOT NULL,
    task_id       uuid        NOT NULL,
    logged_at     timestamptz,
    at            timestamptz NOT NULL DEFAULT now(),
    level         text        NOT NULL,
    message       text        NOT NULL
);
CREATE INDEX task_logs_run ON task_logs (execution_id, id);
CREATE INDEX task_logs_task ON task_logs (task_id, id);
CREATE TABLE task_log_sizes (
    task_id       uuid        PRIMARY KEY,
    execution_id  uuid        NOT NULL,
    bytes         bigint      NOT NULL DEFAULT 0,
    lines         integer     NOT NULL DEFAULT 0
);
CREATE INDEX task_log_sizes_run ON task_log_sizes (execution_id);
