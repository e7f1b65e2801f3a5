-- Schedules and continue-as-new chains.
--
-- A Schedule object is reconciled into `schedules`; every replica's scheduler
-- takes due rows with FOR UPDATE SKIP LOCKED. Each fire is a row of
-- `schedule_fires`, keyed by (schedule, fire time) and inserted in the same
-- transaction as the run it starts, whose id is derived from the schedule and
-- the fire time: a fire is never started twice, nor lost by a crash.

CREATE TABLE schedules (
    namespace      text        NOT NULL,
    name           text        NOT NULL,   -- metadata.name of the Schedule
    uid            text        NOT NULL,   -- names its runs: a re-created Schedule never reuses a run id
    generation     bigint      NOT NULL,
    spec           jsonb       NOT NULL,
    next_fire_at   timestamptz,            -- the first fire not handled yet; NULL: suspended, or no fire left
    due_at         timestamptz,            -- next_fire_at plus its jitter: when a scheduler acts on it
    buffered       integer     NOT NULL DEFAULT 0,  -- fires waiting for the running runs to end
    runs_started   integer     NOT NULL DEFAULT 0,  -- scheduled runs started, against maxRuns
    missed         bigint      NOT NULL DEFAULT 0,  -- fires older than the catch-up window
    skipped        bigint      NOT NULL DEFAULT 0,  -- fires the overlap policy skipped
    last_fire_at   timestamptz,
    last_run_id    uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);
CREATE INDEX schedules_due ON schedules (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX schedules_buffered ON schedules (namespace, name) WHERE buffered > 0;

CREATE TABLE schedule_fires (
    namespace   text        NOT NULL,
    schedule    text        NOT NULL,
    fire_at     timestamptz NOT NULL,   -- the nominal fire time, before jitter
    kind        text        NOT NULL,   -- scheduled, catchup, trigger, backfill
    outcome     text        NOT NULL,   -- started, buffered, skipped, refused
    run_id      uuid,
    reason      text,
    handled_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, schedule, fire_at)
);
CREATE INDEX schedule_fires_buffered ON schedule_fires (namespace, schedule, fire_at) WHERE outcome = 'buffered';

-- Runs a schedule started (its overlap policy counts them), and chains of
-- continue-as-new: the chain's first run id, the run this one continues, and
-- the chain's absolute deadline, copied verbatim from link to link and never
-- moved by a pause. (IF NOT EXISTS: run operations may add the deadline column first.)
ALTER TABLE executions
    ADD COLUMN IF NOT EXISTS schedule_name     text,
    ADD COLUMN IF NOT EXISTS chain_id          uuid,
    ADD COLUMN IF NOT EXISTS previous_run_id   uuid,
    ADD COLUMN IF NOT EXISTS chain_deadline_at timestamptz;
CREATE INDEX executions_schedule_running ON executions (namespace, schedule_name)
    WHERE status = 'RUNNING' AND schedule_name IS NOT NULL;
CREATE INDEX executions_previous ON executions (previous_run_id) WHERE previous_run_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS executions_chain_deadline ON executions (chain_deadline_at)
    WHERE status = 'RUNNING' AND chain_deadline_at IS NOT NULL;
