-- The handover (leasing.hand_over) as a function planned once per session.
-- Sent as a statement, PostgreSQL planned it again on every call: the plan
-- for the arrays it was given always looked cheaper than the generic one,
-- and that planning was most of its time: 2.1 ms a call, 0.85 with one plan
-- kept (two capped types, five tasks each, 64,000 queued). Its parameters are
-- a batch's task types and ids, looked up by key, so one plan fits them all. $9 and $10 are the
-- ready channel and the slot-freed suffix (store.executions), kept in Python.

CREATE FUNCTION sluiceway_hand_over(
    text, text, text[], uuid[], integer[], text[], text[], integer[], text, text
) RETURNS TABLE (
    id uuid, epoch integer, name text, type text, execution_id uuid, ref text, attempt integer, input jsonb,
    response_timeout integer, heartbeat_timeout integer, start_to_close_timeout integer, namespace text
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH wanted AS (
        SELECT q.name, q.n, q.cap,
               coalesce((SELECT array_agg(s.name ORDER BY s.name) FROM semaphores s
                          WHERE s.namespace = $1
                            AND s.name IN (SELECT g.sem FROM unnest($6::text[], $7::text[]) AS g(name, sem)
                                            WHERE g.name = q.name)), '{}') AS holds
          FROM unnest($3::text[], $5::int[], $8::int[]) AS q(name, n, cap)
    ), allowed AS (
        SELECT w.name, w.holds, greatest(least(
            w.n,
            (SELECT count(*) FROM tasks t
              WHERE t.id = ANY($4::uuid[]) AND t.namespace = $1 AND t.name = w.name AND t.executor = 'worker'
                AND t.status <> 'IN_PROGRESS' AND t.holds @> w.holds),
            CASE WHEN w.cap > 0 THEN w.cap - (SELECT count(*) FROM tasks
                                               WHERE executor = 'worker' AND namespace = $1 AND name = w.name
                                                 AND status = 'IN_PROGRESS') END,
            (SELECT min(s.permits - (SELECT count(*) FROM tasks t
                                      WHERE t.namespace = $1 AND t.status = 'IN_PROGRESS' AND t.holds @> ARRAY[s.name]))
               FROM semaphores s WHERE s.namespace = $1 AND s.name = ANY(w.holds))
        ), 0)::int AS n
          FROM wanted w
    ), leased AS (
        SELECT l.* FROM allowed a, LATERAL sluiceway_lease($1, a.name, 'worker', $2, a.n, a.holds, clock_timestamp()) AS l
         WHERE a.n > 0
    ), freed_permits AS (
        SELECT t.name, h.semaphore, count(*) AS n
          FROM tasks t, unnest(t.holds) AS h(semaphore)
         WHERE t.id = ANY($4::uuid[]) AND t.namespace = $1 AND t.name = ANY($3::text[]) AND t.executor = 'worker'
           AND t.status <> 'IN_PROGRESS'
         GROUP BY t.name, h.semaphore
    ), woken AS (
        -- The results statement left these types' semaphores unwoken (`handing`):
        -- one wake-up per permit freed and not taken again here.
        SELECT pg_notify($9, $1 || '/@sem:' || f.semaphore || $10 || 'h' || row_number() OVER ())
          FROM freed_permits f JOIN allowed a ON a.name = f.name,
               generate_series(1, f.n - CASE WHEN f.semaphore = ANY(a.holds)
                                             THEN (SELECT count(*) FROM leased l WHERE l.name = f.name) ELSE 0 END)
    )
    SELECT l.id, l.epoch, l.name, l.type, l.execution_id, l.ref, l.attempt, l.input, l.response_timeout,
           l.heartbeat_timeout, l.start_to_close_timeout, l.namespace
      FROM leased l
     UNION ALL  -- no row, but the wake-ups are sent whether anything was leased or not
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM (SELECT count(*) AS n FROM woken) w
     WHERE w.n < 0;
END
$$;
