-- Archive before purge (docs/retention.md, "Archiving"): where each purged
-- run's history was written, so that a run is read back by id from one gzip
-- member of one file, never by reading the archive. Written in the purge's
-- own transaction, so a row exists exactly when its run was deleted; kept
-- after the purge (a row is about 150 bytes).

CREATE TABLE archived_runs (
    namespace    text        NOT NULL,
    id           uuid        NOT NULL,
    file         text        NOT NULL,   -- relative to the archive's root: <namespace>/<day>.<writer>.<seq>.jsonl.gz
    offset_bytes bigint      NOT NULL,   -- where the gzip member that holds the run starts
    length_bytes bigint      NOT NULL,   -- and its length
    ended_at     timestamptz,
    archived_at  timestamptz NOT NULL DEFAULT now(),
    -- By namespace first: a run is only ever looked up within its namespace.
    PRIMARY KEY (namespace, id)
);
