-- The gated lease in one call. Counting in flight, reading the rate window and
-- the semaphores, and leasing must happen under the queue's advisory lock;
-- done statement by statement from the operator, the lock was held across
-- several round trips to a busy process, and every other dispatcher of the
-- queue waited on it. Here the locks are held for the few microseconds the
-- database needs. The arithmetic is controls.gates.allowance's: the most
-- restrictive gate wins.
CREATE FUNCTION sluiceway_gated_lease(
    p_namespace text, p_name text, p_worker text, p_count integer, p_system boolean,
    p_cap integer, p_rate_limit integer, p_window_seconds integer, p_semaphores text[]
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_allowed   integer := p_count;
    v_in_flight integer := 0;
    v_used      integer := 0;
    v_window    numeric;
    v_at        timestamptz;
    v_semaphore record;
    v_held      integer;
    v_holds     text[] := '{}';
    v_states    jsonb := '[]';
    v_leased    jsonb := '[]';
    v_granted   integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('queue:' || p_namespace || '/' || p_name, 0));
    IF p_cap > 0 THEN
        IF p_system THEN
            SELECT count(*) INTO v_in_flight FROM tasks
             WHERE namespace = p_namespace AND name = p_name AND status = 'IN_PROGRESS' AND type IN ('HTTP', 'HTTP_POLL');
        ELSE
            SELECT count(*) INTO v_in_flight FROM tasks
             WHERE namespace = p_namespace AND name = p_name AND status = 'IN_PROGRESS' AND type = 'SIMPLE';
        END IF;
        v_allowed := least(v_allowed, greatest(p_cap - v_in_flight, 0));
    END IF;
    -- Semaphores in name order, so two queues sharing them can never deadlock;
    -- one nobody configured gates nothing.
    FOR v_semaphore IN
        SELECT name, permits FROM semaphores WHERE namespace = p_namespace AND name = ANY(p_semaphores) ORDER BY name
    LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('semaphore:' || p_namespace || '/' || v_semaphore.name, 0));
        SELECT count(*) INTO v_held FROM tasks
         WHERE namespace = p_namespace AND status = 'IN_PROGRESS' AND holds @> ARRAY[v_semaphore.name];
        v_holds := v_holds || v_semaphore.name;
        v_states := v_states || jsonb_build_object('name', v_semaphore.name, 'permits', v_semaphore.permits,
                                                   'held', v_held);
        v_allowed := least(v_allowed, greatest(v_semaphore.permits - v_held, 0));
    END LOOP;
    -- The instant of this grant, taken under the locks: leased_at, and the fixed window it falls in.
    v_at := clock_timestamp();
    v_window := floor(extract(epoch FROM v_at) / greatest(p_window_seconds, 1)) * greatest(p_window_seconds, 1);
    IF p_rate_limit > 0 THEN
        SELECT coalesce(max(used), 0) INTO v_used FROM rate_windows
         WHERE namespace = p_namespace AND name = p_name AND window_start = to_timestamp(v_window);
        v_allowed := least(v_allowed, greatest(p_rate_limit - v_used, 0));
    END IF;
    IF v_allowed > 0 THEN
        IF p_system THEN
            WITH picked AS (
                SELECT id FROM tasks
                 WHERE namespace = p_namespace AND name = p_name AND type IN ('HTTP', 'HTTP_POLL')
                   AND status = 'SCHEDULED' AND available_at <= v_at
                 ORDER BY available_at LIMIT v_allowed FOR UPDATE SKIP LOCKED
            ), leased AS (
                UPDATE tasks t
                   SET status = 'IN_PROGRESS', epoch = t.epoch + 1, worker_id = p_worker, leased_at = v_at,
                       last_heartbeat_at = v_at, holds = v_holds, schedule_to_start_at = NULL,
                       schedule_to_close_at = NULL,
                       start_to_close_at = CASE WHEN t.start_to_close_timeout > 0
                                                THEN v_at + make_interval(secs => t.start_to_close_timeout) END,
                       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0
                                           THEN v_at + make_interval(secs => t.heartbeat_timeout) END,
                       lease_expires_at = v_at + make_interval(secs => t.response_timeout)
                  FROM picked WHERE t.id = picked.id
                RETURNING t.*
            )
            SELECT coalesce(jsonb_agg(to_jsonb(leased)), '[]') INTO v_leased FROM leased;
        ELSE
            WITH picked AS (
                SELECT id FROM tasks
                 WHERE namespace = p_namespace AND name = p_name AND type = 'SIMPLE'
                   AND status = 'SCHEDULED' AND available_at <= v_at
                 ORDER BY available_at LIMIT v_allowed FOR UPDATE SKIP LOCKED
            ), leased AS (
                UPDATE tasks t
                   SET status = 'IN_PROGRESS', epoch = t.epoch + 1, worker_id = p_worker, leased_at = v_at,
                       last_heartbeat_at = v_at, holds = v_holds, schedule_to_start_at = NULL,
                       schedule_to_close_at = NULL,
                       start_to_close_at = CASE WHEN t.start_to_close_timeout > 0
                                                THEN v_at + make_interval(secs => t.start_to_close_timeout) END,
                       heartbeat_at = CASE WHEN t.heartbeat_timeout > 0
                                           THEN v_at + make_interval(secs => t.heartbeat_timeout) END,
                       lease_expires_at = v_at + make_interval(secs => t.response_timeout)
                  FROM picked WHERE t.id = picked.id
                RETURNING t.*
            )
            SELECT coalesce(jsonb_agg(to_jsonb(leased)), '[]') INTO v_leased FROM leased;
        END IF;
        v_granted := jsonb_array_length(v_leased);
        IF p_rate_limit > 0 AND v_granted > 0 THEN
            INSERT INTO rate_windows AS w (namespace, name, window_start, used)
            VALUES (p_namespace, p_name, to_timestamp(v_window), v_granted)
            ON CONFLICT (namespace, name, window_start) DO UPDATE SET used = w.used + EXCLUDED.used;
        END IF;
    END IF;
    RETURN jsonb_build_object('leased', v_leased, 'inFlight', v_in_flight, 'windowUsed', v_used,
                              'windowStart', v_window, 'now', extract(epoch FROM v_at), 'semaphores', v_states);
END
$$;
