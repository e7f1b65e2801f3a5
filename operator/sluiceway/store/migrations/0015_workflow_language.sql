-- The rest of the workflow language (loops, webhooks, people, messages) and
-- the retry rules of seed 002 (retry kinds, deferrals, interrupts).

-- Per attempt: what a snooze and a graceful shutdown did to it, the verdict and
-- the source of an explicit delay a result carried, the DO_WHILE iteration it
-- belongs to, and who decided a HUMAN task.
ALTER TABLE tasks
    ADD COLUMN snooze_count       integer NOT NULL DEFAULT 0,
    ADD COLUMN interrupt_count    integer NOT NULL DEFAULT 0,
    ADD COLUMN retry_kind         text,
    ADD COLUMN retry_after_source text,
    ADD COLUMN loop_ref           text,
    ADD COLUMN iteration          integer,
    ADD COLUMN completed_by       text;

-- Old iterations of a DO_WHILE are deleted by (run, loop, iteration).
CREATE INDEX tasks_iterations ON tasks (execution_id, loop_ref, iteration) WHERE loop_ref IS NOT NULL;
-- Waiting tasks (HUMAN inboxes, webhook intake, messages): a small share of the rows.
CREATE INDEX tasks_waiting ON tasks (namespace, type, created_at) WHERE status = 'IN_PROGRESS' AND executor = 'engine';
CREATE INDEX tasks_webhook_waiting ON tasks (namespace, (input ->> 'webhook'))
    WHERE status = 'IN_PROGRESS' AND type = 'WAIT_FOR_WEBHOOK';

-- A start's per-task overrides (retryCount, startToCloseTimeout), by task reference.
ALTER TABLE executions ADD COLUMN task_overrides jsonb NOT NULL DEFAULT '{}';

-- Webhook endpoints, reconciled from the Webhook custom resources.
CREATE TABLE webhooks (
    namespace      text        NOT NULL,
    name           text        NOT NULL,   -- the endpoint: POST /v1/ns/{namespace}/webhooks/{name}
    resource_name  text        NOT NULL,
    generation     bigint      NOT NULL,
    spec           jsonb       NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);
CREATE UNIQUE INDEX webhooks_resource ON webhooks (namespace, resource_name);

-- Each run's message queue: appended by POST .../executions/{id}/messages,
-- taken in order, once, by PULL_WORKFLOW_MESSAGES tasks (a taken message is
-- deleted in the transaction that completes its task with it).
CREATE TABLE run_messages (
    id            bigserial   PRIMARY KEY,
    execution_id  uuid        NOT NULL,
    payload       jsonb       NOT NULL,
    bytes         integer     NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_messages_run ON run_messages (execution_id, id);

-- The lease, as in 0009, and never of a task past its deadline: the sweeper
-- fails such a task with DeadlineExceeded, and until it does no worker may
-- start it (seed 002: expired pending jobs are never dispatched).
CREATE OR REPLACE FUNCTION sluiceway_lease(
    p_namespace text, p_name text, p_executor text, p_worker text, p_count integer, p_holds text[],
    p_at timestamptz
) RETURNS SETOF tasks LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT id FROM tasks
         WHERE executor = p_executor AND namespace = p_namespace AND name = p_name AND status = 'SCHEDULED'
           AND available_at <= p_at AND (close_deadline IS NULL OR close_deadline > p_at)
         ORDER BY available_at LIMIT p_count FOR UPDATE SKIP LOCKED
    ), leased AS (
        UPDATE tasks t
           SET status = 'IN_PROGRESS', epoch = t.epoch + 1, worker_id = p_worker, leased_at = p_at,
               last_heartbeat_at = p_at, holds = p_holds, schedule_to_start_at = NULL, schedule_to_close_at = NULL,
               start_to_close_at = CASE WHEN t.start_to_close_timeout > 0
                                        THEN p_at + make_interval(secs => t.start_to_close_timeout) END,
               heartbeat_at = CASE WHEN t.heartbeat_timeout > 0
                                   THEN p_at + make_interval(secs => t.heartbeat_timeout) END,
               lease_expires_at = p_at + make_interval(secs => t.response_timeout)
          FROM picked WHERE t.id = picked.id
        RETURNING t.*
    )
    SELECT * FROM leased;
END
$$;
