-- Who changed a run through the API: one row per operation (start,
-- terminate, pause, resume, retry, rerun, restart, decide, a message, a
-- HUMAN task's decision, a webhook's acceptance), written in the same
-- transaction as the operation, so a row exists exactly when it happened.
-- Purged with its run.

CREATE TABLE run_audit (
    id            bigserial   PRIMARY KEY,
    namespace     text        NOT NULL,
    execution_id  uuid        NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    actor         text        NOT NULL,   -- the authenticated identity (a user name, never a credential)
    via           text        NOT NULL,   -- token, api-key, signature, anonymous
    operation     text        NOT NULL,
    detail        jsonb       NOT NULL DEFAULT '{}'
);

CREATE INDEX run_audit_run ON run_audit (execution_id, id);
