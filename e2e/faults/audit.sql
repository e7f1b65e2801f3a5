-- Test-only instrumentation the fault suite installs into its own database
-- (never a product migration): every transition of a task attempt and of a
-- run, stamped with clock_timestamp() inside the transaction that made it. A
-- transaction that rolls back takes its history rows with it, so the history
-- holds exactly the transitions that happened.

-- One sequence for both histories: nextval runs in statement order, so seq
-- orders a run's transitions against its attempts' (the decider changes both
-- while it holds the run's row lock).
CREATE SEQUENCE fault_seq;

CREATE TABLE fault_task_history (
    seq           bigint      PRIMARY KEY DEFAULT nextval('fault_seq'),
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    task_id       uuid        NOT NULL,
    execution_id  uuid        NOT NULL,
    name          text        NOT NULL,
    type          text        NOT NULL,
    ref           text        NOT NULL,
    attempt       integer     NOT NULL,
    old_status    text,                  -- NULL: the attempt was created
    new_status    text        NOT NULL,
    old_epoch     integer,
    new_epoch     integer     NOT NULL,
    old_holds     text[],
    new_holds     text[],
    leased_at     timestamptz,
    worker_id     text,
    reason        text
);
CREATE INDEX fault_task_history_task ON fault_task_history (task_id, seq);

CREATE FUNCTION fault_log_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO fault_task_history (task_id, execution_id, name, type, ref, attempt, new_status, new_epoch,
                                        new_holds, leased_at, worker_id, reason)
        VALUES (NEW.id, NEW.execution_id, NEW.name, NEW.type, NEW.ref, NEW.attempt, NEW.status, NEW.epoch,
                NEW.holds, NEW.leased_at, NEW.worker_id, NEW.reason);
    ELSIF NEW.status IS DISTINCT FROM OLD.status OR NEW.epoch IS DISTINCT FROM OLD.epoch THEN
        INSERT INTO fault_task_history (task_id, execution_id, name, type, ref, attempt, old_status, new_status,
                                        old_epoch, new_epoch, old_holds, new_holds, leased_at, worker_id, reason)
        VALUES (NEW.id, NEW.execution_id, NEW.name, NEW.type, NEW.ref, NEW.attempt, OLD.status, NEW.status,
                OLD.epoch, NEW.epoch, OLD.holds, NEW.holds, NEW.leased_at, NEW.worker_id, NEW.reason);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER fault_task_history AFTER INSERT OR UPDATE OF status, epoch ON tasks
    FOR EACH ROW EXECUTE FUNCTION fault_log_task();

CREATE TABLE fault_run_history (
    seq           bigint      PRIMARY KEY DEFAULT nextval('fault_seq'),
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    execution_id  uuid        NOT NULL,
    old_status    text,
    new_status    text        NOT NULL
);

CREATE FUNCTION fault_log_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO fault_run_history (execution_id, new_status) VALUES (NEW.id, NEW.status);
    ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
        INSERT INTO fault_run_history (execution_id, old_status, new_status) VALUES (NEW.id, OLD.status, NEW.status);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER fault_run_history AFTER INSERT OR UPDATE OF status ON executions
    FOR EACH ROW EXECUTE FUNCTION fault_log_run();
