-- Status writes the API server refused for good (a 400 or 422 on a WorkflowRun
-- status patch): one row per run and mirror_seq, inserted in the transaction
-- that marks that status written. The metric sluiceway_outbox_dead_lettered_total
-- is counted from here, so it is the same whichever replica leads, survives
-- restarts and never counts a refusal twice. No foreign key: retention purges
-- runs, and a dead letter stays counted.

CREATE TABLE dead_letters (
    execution_id   uuid        NOT NULL,
    mirror_seq     bigint      NOT NULL,
    namespace      text        NOT NULL,
    resource_name  text        NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, mirror_seq)
);
