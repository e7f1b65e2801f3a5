-- Who runs a task (model.workflow.Executor): 'worker' (leased by worker pods),
-- 'system' (leased by the operator's system-task runner) or 'engine' (decided
-- by the engine, never leased). Written when the row is inserted, from
-- TaskType.executor(), so that queries select by it and no list of task types
-- is written in SQL: a new task type is described once, in the model.
ALTER TABLE tasks ADD COLUMN executor text;

-- The executors of the task types that existed when this migration was
-- written. It backfills the rows already there, and fills rows that replicas
-- of the previous release insert without the column during a rolling upgrade;
-- a later migration may drop the trigger once no such replica can be left.
CREATE FUNCTION sluiceway_executor_0008(p_type text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_type = 'SIMPLE' THEN 'worker'
                WHEN p_type IN ('HTTP', 'HTTP_POLL') THEN 'system'
                ELSE 'engine' END
$$;
UPDATE tasks SET executor = sluiceway_executor_0008(type);
ALTER TABLE tasks ALTER COLUMN executor SET NOT NULL;

CREATE FUNCTION sluiceway_fill_executor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.executor := sluiceway_executor_0008(NEW.type);
    RETURN NEW;
END
$$;
CREATE TRIGGER tasks_fill_executor BEFORE INSERT ON tasks
    FOR EACH ROW WHEN (NEW.executor IS NULL) EXECUTE FUNCTION sluiceway_fill_executor();

-- The queues, keyed on the executor. Partial on status only (a literal in
-- every query), with the executor a key column: a prepared or plpgsql
-- statement that passes the executor as a parameter still uses them, which a
-- predicate on the executor would not allow once the plan is generic. Only
-- leased tasks are ever SCHEDULED; IN_PROGRESS also holds waits and child
-- runs, a small share of the rows.
DROP INDEX tasks_ready;
DROP INDEX tasks_leased;
DROP INDEX tasks_system_ready;
DROP INDEX tasks_system_leased;
CREATE INDEX tasks_ready ON tasks (executor, namespace, name, available_at) WHERE status = 'SCHEDULED';
CREATE INDEX tasks_leased ON tasks (executor, namespace, name) WHERE status = 'IN_PROGRESS';
