-- Tasks are only ever inserted by the decider while it holds their run's row
-- lock, so the foreign key to executions guarded nothing the code does not;
-- it cost a FOR KEY SHARE lock on the run for every inserted task.
ALTER TABLE tasks DROP CONSTRAINT tasks_execution_id_fkey;
