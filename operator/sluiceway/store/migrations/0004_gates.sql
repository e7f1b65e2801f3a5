-- The gates: semaphore holds, fixed rate-limit windows, per-key admission.

-- The semaphores a leased attempt holds. A permit is held exactly while its
-- task is IN_PROGRESS: every way out of that status (result, timeout, lease
-- expiry, cancel, snooze) releases it, with no separate bookkeeping to leak.
ALTER TABLE tasks ADD COLUMN holds text[];
CREATE INDEX tasks_holds ON tasks USING gin (holds) WHERE status = 'IN_PROGRESS' AND holds IS NOT NULL;

-- System tasks (HTTP, HTTP_POLL) are run by the operator itself.
CREATE INDEX tasks_system_ready ON tasks (namespace, name, available_at)
    WHERE status = 'SCHEDULED' AND type IN ('HTTP', 'HTTP_POLL');
CREATE INDEX tasks_system_leased ON tasks (namespace, name)
    WHERE status = 'IN_PROGRESS' AND type IN ('HTTP', 'HTTP_POLL');

-- Fixed rate-limit windows: floor(now / size), tokens spent when granted.
CREATE TABLE rate_windows (
    namespace     text        NOT NULL,
    name          text        NOT NULL,
    window_start  timestamptz NOT NULL,
    used          integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, name, window_start)
);

CREATE INDEX executions_admission ON executions (namespace, workflow_name, admission_key, created_at)
    WHERE status = 'RUNNING' AND admission_key IS NOT NULL;
CREATE INDEX executions_created ON executions (namespace, created_at);
