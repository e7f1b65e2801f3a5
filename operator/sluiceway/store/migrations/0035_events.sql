-- Event-triggered starts (docs/triggers.md): the Triggers, reconciled from
-- their custom resources, and every event published, with what each Trigger
-- did with it, kept for the operator's event retention.

CREATE TABLE triggers (
    namespace      text        NOT NULL,
    name           text        NOT NULL,   -- the Trigger's metadata.name
    uid            text        NOT NULL,   -- its metadata.uid: part of every dedup key it claims
    generation     bigint      NOT NULL,
    event          text        NOT NULL,
    spec           jsonb       NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);
-- A publish reads the Triggers of one event.
CREATE INDEX triggers_event ON triggers (namespace, event, name);

CREATE TABLE events (
    id           uuid        PRIMARY KEY,
    namespace    text        NOT NULL,
    name         text        NOT NULL,   -- the event's name
    event_id     text        NOT NULL,   -- the delivery's id (a header, or a hash of the body)
    source       text        NOT NULL,   -- api, or webhook <name>
    payload      jsonb       NOT NULL,
    outcomes     jsonb       NOT NULL,   -- one object per Trigger of the event: what it did
    kinds        text[]      NOT NULL,   -- the distinct outcomes, `unmatched` when no Trigger listens
    received_at  timestamptz NOT NULL DEFAULT now()
);
-- Keyset pages, newest first, of a namespace and of one event name; and the purge by age.
CREATE INDEX events_page ON events (namespace, received_at DESC, id DESC);
CREATE INDEX events_by_name ON events (namespace, name, received_at DESC, id DESC);
CREATE INDEX events_received ON events (received_at);
