-- Fair dispatch of the operator's system-task slots across namespaces: a
-- Quota's weight in the deficit round robin (NULL: 1).

ALTER TABLE quotas ADD COLUMN dispatch_weight integer;
