-- Quarantine: a run the decider cannot evaluate for a reason nothing foresaw
-- (a stored spec or row it cannot read) is set aside, alone. Its decide
-- events are consumed without deciding it, so it is never retried in a loop;
-- terminating it still works, and forcing an evaluation releases it.
ALTER TABLE executions
    ADD COLUMN quarantined_at    timestamptz,
    ADD COLUMN quarantine_reason text;

-- "Which runs are quarantined?" is asked of a handful of rows among millions.
CREATE INDEX executions_quarantined ON executions (namespace, quarantined_at)
    WHERE quarantined_at IS NOT NULL AND status = 'RUNNING';
