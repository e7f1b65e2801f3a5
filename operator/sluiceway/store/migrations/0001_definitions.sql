-- Definitions reconciled from the custom resources. The cluster is their source
-- of truth; these rows are what the engine reads on the hot path.
-- Append-only: once a migration has landed, change the schema in a new file.

CREATE TABLE task_definitions (
    namespace      text        NOT NULL,
    name           text        NOT NULL,   -- the task type (spec.name or metadata.name)
    resource_name  text        NOT NULL,   -- metadata.name of the TaskDefinition
    generation     bigint      NOT NULL,
    spec           jsonb       NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);
CREATE UNIQUE INDEX task_definitions_resource ON task_definitions (namespace, resource_name);

CREATE TABLE semaphores (
    namespace      text        NOT NULL,
    name           text        NOT NULL,
    resource_name  text        NOT NULL,
    generation     bigint      NOT NULL,
    permits        integer     NOT NULL CHECK (permits >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);
CREATE UNIQUE INDEX semaphores_resource ON semaphores (namespace, resource_name);

CREATE TABLE quotas (
    namespace                  text        NOT NULL,
    resource_name              text        NOT NULL,
    generation                 bigint      NOT NULL,
    max_concurrent_executions  integer,
    max_executions_per_minute  integer,
    max_workflow_definitions   integer,
    max_schedules              integer,
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, resource_name)
);
