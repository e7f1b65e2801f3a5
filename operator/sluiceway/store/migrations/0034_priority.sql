-- Priority (controls/priority.py): a run's, 1 (most urgent) to 5, and each
-- task's, which the lease honours within a queue by the task's ready order.
-- Both columns have the default, so rows written by a release without
-- priorities read as the default (expand: the previous release runs beside).

ALTER TABLE executions ADD COLUMN priority smallint NOT NULL DEFAULT 3
    CONSTRAINT executions_priority_range CHECK (priority BETWEEN 1 AND 5);
ALTER TABLE tasks ADD COLUMN priority smallint NOT NULL DEFAULT 3
    CONSTRAINT tasks_priority_range CHECK (priority BETWEEN 1 AND 5);

-- When a task became ready, moved 60 s earlier for each level above the
-- default and later for each below (controls/priority.py: AGING_SECONDS).
-- IMMUTABLE, though timestamptz + interval is only STABLE in general: an
-- interval of seconds alone does not depend on the time zone, so the index
-- below may keep it.
CREATE FUNCTION sluiceway_ready_order(p_ready_at timestamptz, p_priority smallint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT p_ready_at + make_interval(secs => (p_priority - 3) * 60) $$;

-- The ready tasks of a queue in lease order, ties (tasks a transaction made
-- together) broken by id so that `why` can count the tasks ahead of one;
-- available_at follows so that a task moved ahead but not yet available (a
-- retry's backoff) is skipped in the index without reading its row.
DROP INDEX tasks_ready;
CREATE INDEX tasks_ready
    ON tasks (executor, namespace, name, sluiceway_ready_order(available_at, priority), id, available_at)
    WHERE status = 'SCHEDULED';

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
         ORDER BY sluiceway_ready_order(available_at, priority), id LIMIT p_count FOR UPDATE SKIP LOCKED
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
