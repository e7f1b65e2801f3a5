-- The execution plane: workflow versions, runs, task attempts, the decide
-- queue and the retry-budget counters. Every state transition is one
-- transaction over these tables.

-- Every version of every workflow, kept while runs may pin it. A version is
-- added when the spec changes, so recreating a Workflow never reuses one.
CREATE TABLE workflow_versions (
    namespace      text        NOT NULL,
    name           text        NOT NULL,
    version        integer     NOT NULL,
    spec           jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name, version)
);

-- The live Workflow objects: one per engine name.
CREATE TABLE workflows (
    namespace       text        NOT NULL,
    name            text        NOT NULL,
    resource_name   text        NOT NULL,
    generation      bigint      NOT NULL,
    latest_version  integer     NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);
CREATE UNIQUE INDEX workflows_resource ON workflows (namespace, resource_name);

CREATE TABLE executions (
    id                   uuid        PRIMARY KEY,
    namespace            text        NOT NULL,
    workflow_name        text        NOT NULL,
    workflow_version     integer     NOT NULL,
    status               text        NOT NULL,
    input                jsonb       NOT NULL DEFAULT '{}',
    output               jsonb       NOT NULL DEFAULT '{}',
    reason               text        NOT NULL DEFAULT '',
    correlation_id       text,
    resource_name        text,        -- the WorkflowRun that started it, if any
    parent_execution_id  uuid,
    parent_task_id       uuid,
    awaiting_admission   boolean     NOT NULL DEFAULT false,
    admission_key        text,
    evaluated            boolean     NOT NULL DEFAULT false,
    timeout_at           timestamptz,
    sla_at               timestamptz,
    sla_breached_at      timestamptz,
    terminate_requested  text,
    failed_task_id       uuid,
    created_at           timestamptz NOT NULL DEFAULT now(),
    ended_at             timestamptz,
    -- Coalesced mirroring into the WorkflowRun status: changes bump mirror_seq;
    -- the mirror writes and records what it wrote.
    mirror_seq           bigint      NOT NULL DEFAULT 1,
    mirrored_seq         bigint      NOT NULL DEFAULT 0
);
CREATE INDEX executions_running ON executions (namespace, workflow_name) WHERE status = 'RUNNING';
CREATE INDEX executions_timeout ON executions (timeout_at) WHERE status = 'RUNNING' AND timeout_at IS NOT NULL;
CREATE INDEX executions_sla ON executions (sla_at)
    WHERE status = 'RUNNING' AND sla_at IS NOT NULL AND sla_breached_at IS NULL;
CREATE INDEX executions_mirror ON executions (id) WHERE resource_name IS NOT NULL AND mirror_seq > mirrored_seq;
CREATE INDEX executions_parent ON executions (parent_execution_id) WHERE parent_execution_id IS NOT NULL;
CREATE INDEX executions_resource ON executions (namespace, resource_name) WHERE resource_name IS NOT NULL;

-- One row per attempt of a task. The deadline columns are the timers: set
-- while they apply, NULL otherwise; next_deadline is their minimum, indexed
-- for the sweeper, so a timer fires when due rather than at the next scan.
CREATE TABLE tasks (
    id                        uuid        PRIMARY KEY,
    execution_id              uuid        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    namespace                 text        NOT NULL,
    ref                       text        NOT NULL,
    type                      text        NOT NULL,   -- SIMPLE, WAIT, FORK_JOIN, ...
    name                      text        NOT NULL,   -- the task type: the queue
    attempt                   integer     NOT NULL,
    status                    text        NOT NULL,
    input                     jsonb       NOT NULL DEFAULT '{}',
    output                    jsonb       NOT NULL DEFAULT '{}',
    reason                    text        NOT NULL DEFAULT '',
    retry_after_seconds       double precision,
    epoch                     integer     NOT NULL DEFAULT 0,
    worker_id                 text,
    created_at                timestamptz NOT NULL DEFAULT now(),
    first_scheduled_at        timestamptz NOT NULL,
    available_at              timestamptz NOT NULL,
    leased_at                 timestamptz,
    last_heartbeat_at         timestamptz,
    ended_at                  timestamptz,
    close_deadline            timestamptz,            -- scheduleToClose across attempts, never cleared
    child_execution_id        uuid,
    -- the policy this attempt runs under, fixed when it was scheduled
    schedule_to_start_timeout integer     NOT NULL DEFAULT 0,
    start_to_close_timeout    integer     NOT NULL DEFAULT 0,
    timeout_seconds           integer     NOT NULL DEFAULT 0,
    heartbeat_timeout         integer     NOT NULL DEFAULT 0,
    response_timeout          integer     NOT NULL DEFAULT 3600,
    timeout_policy            text        NOT NULL DEFAULT 'TIME_OUT_WF',
    -- timers
    schedule_to_start_at      timestamptz,
    start_to_close_at         timestamptz,
    total_at                  timestamptz,
    heartbeat_at              timestamptz,
    lease_expires_at          timestamptz,
    schedule_to_close_at      timestamptz,
    wait_until                timestamptz,
    next_deadline             timestamptz GENERATED ALWAYS AS (
        LEAST(schedule_to_start_at, start_to_close_at, total_at, heartbeat_at, lease_expires_at,
              schedule_to_close_at, wait_until)) STORED,
    UNIQUE (execution_id, ref, attempt)
);
CREATE INDEX tasks_ready ON tasks (namespace, name, available_at) WHERE status = 'SCHEDULED' AND type = 'SIMPLE';
CREATE INDEX tasks_leased ON tasks (namespace, name) WHERE status = 'IN_PROGRESS' AND type = 'SIMPLE';
CREATE INDEX tasks_deadlines ON tasks (next_deadline)
    WHERE status IN ('SCHEDULED', 'IN_PROGRESS') AND next_deadline IS NOT NULL;
CREATE INDEX tasks_child ON tasks (child_execution_id) WHERE child_execution_id IS NOT NULL;

-- Runs waiting for the decider. Insert-only on the hot path: a result adds a
-- row, the decider deletes the rows it consumed, so the two never wait on
-- each other's locks.
CREATE TABLE decide_queue (
    id            bigserial   PRIMARY KEY,
    execution_id  uuid        NOT NULL,
    event         text        NOT NULL,
    due_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX decide_queue_due ON decide_queue (due_at, id);
CREATE INDEX decide_queue_execution ON decide_queue (execution_id);

-- The retry budget's window, in 10-second buckets, sharded so concurrent
-- deciders scheduling the same task type do not queue on one counter row.
CREATE TABLE execution_counts (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    bucket      timestamptz NOT NULL,
    shard       smallint    NOT NULL,
    executions  integer     NOT NULL DEFAULT 0,
    retries     integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, name, bucket, shard)
);

-- Who polled which queue, and when ("is anyone polling?").
CREATE TABLE pollers (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    worker_id   text        NOT NULL,
    last_poll   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name, worker_id)
);
