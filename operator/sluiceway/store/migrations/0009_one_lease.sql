-- One home per gate in SQL. The fixed-window formula and the gate arithmetic
-- are functions, used by the lease and by diagnostics, and saying exactly what
-- controls.gates says in Python (a property test runs both on random states);
-- the lease itself is one statement, run alone for an ungated queue and under
-- the queue's locks for a gated one.

-- The start of the fixed rate-limit window `p_at` falls in: floor(epoch / size) * size.
CREATE FUNCTION sluiceway_window_start(p_at timestamptz, p_seconds integer) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_timestamp(floor(extract(epoch FROM p_at) / greatest(p_seconds, 1)) * greatest(p_seconds, 1))
$$;

-- How many of `p_requested` tasks the gates let one lease take: the most
-- restrictive wins. A cap or a rate of 0 is no limit; each semaphore allows
-- its free permits (permits less those held, never below 0).
CREATE FUNCTION sluiceway_gate_allowance(
    p_requested integer, p_cap integer, p_in_flight integer, p_rate_limit integer, p_window_used integer,
    p_permits integer[], p_held integer[]
) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(least(
        p_requested,
        CASE WHEN p_cap > 0 THEN greatest(p_cap - p_in_flight, 0) END,
        CASE WHEN p_rate_limit > 0 THEN greatest(p_rate_limit - p_window_used, 0) END,
        (SELECT min(greatest(s.permits - s.held, 0)) FROM unnest(p_permits, p_held) AS s(permits, held))
    ), 0)
$$;

-- The lease: up to `p_count` of the queue's ready tasks, oldest first, each
-- leased to `p_worker` at `p_at` (the instant of the grant) holding the
-- semaphores `p_holds`, its timers armed from then. Rows another lease has
-- locked are skipped, never waited for.
CREATE FUNCTION sluiceway_lease(
    p_namespace text, p_name text, p_executor text, p_worker text, p_count integer, p_holds text[],
    p_at timestamptz
) RETURNS SETOF tasks LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT id FROM tasks
         WHERE executor = p_executor AND namespace = p_namespace AND name = p_name AND status = 'SCHEDULED'
           AND available_at <= p_at
         ORDER BY available_at LIMIT p_count FOR UPDATE SKIP LOCKED
    ), leased AS (
        UPDATE tasks t
           SET status = 'IN_PROGRESS', epoch = t.epoch + 1, worker_id = p_worker, leased_at = p_at,
               last_heartbeat_at = p_at, holds = p_holds, schedule_to_start_at = NULL, schedule_to_close_at = NULL,
               start_to_close_at = CASE WHEN t.start_to_close_timeout > 0
                                        THEN p_at + make_interval(secs => t.start_to_close_timeout) END,
               heartbeat_at = CASE WHEN t.heartbeat_timeout > 0
                                   THEN p_at + make_interval(secs => t.heartbeat_timeout) END,
               lease_expires_at = p_at + make_interval(secs => t.response_timeout)
          FROM picked WHERE t.id = picked.id
        RETURNING t.*
    )
    SELECT * FROM leased;
END
$$;

-- The gated lease in one call, under an advisory lock on the queue and one on
-- each semaphore, taken in name order so that two queues sharing semaphores
-- never deadlock: counting in flight, reading the window and the semaphores,
-- and leasing all happen under them, for the few microseconds the database
-- needs. Returns what it leased and the numbers it decided by, from which
-- controls.gates explains any gate that held.
CREATE FUNCTION sluiceway_lease_within_gates(
    p_namespace text, p_name text, p_executor text, p_worker text, p_count integer,
    p_cap integer, p_rate_limit integer, p_window_seconds integer, p_semaphores text[]
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_in_flight integer := 0;
    v_used      integer := 0;
    v_window    timestamptz;
    v_at        timestamptz;
    v_semaphore record;
    v_taken     integer;
    v_holds     text[] := '{}';
    v_permits   integer[] := '{}';
    v_held      integer[] := '{}';
    v_states    jsonb := '[]';
    v_allowed   integer;
    v_leased    jsonb := '[]';
    v_granted   integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('queue:' || p_namespace || '/' || p_name, 0));
    IF p_cap > 0 THEN
        SELECT count(*) INTO v_in_flight FROM tasks
         WHERE executor = p_executor AND namespace = p_namespace AND name = p_name AND status = 'IN_PROGRESS';
    END IF;
    -- A semaphore nobody configured gates nothing.
    FOR v_semaphore IN
        SELECT name, permits FROM semaphores WHERE namespace = p_namespace AND name = ANY(p_semaphores) ORDER BY name
    LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('semaphore:' || p_namespace || '/' || v_semaphore.name, 0));
        SELECT count(*) INTO v_taken FROM tasks
         WHERE namespace = p_namespace AND status = 'IN_PROGRESS' AND holds @> ARRAY[v_semaphore.name];
        v_holds := v_holds || v_semaphore.name;
        v_permits := v_permits || v_semaphore.permits;
        v_held := v_held || v_taken;
        v_states := v_states || jsonb_build_object('name', v_semaphore.name, 'permits', v_semaphore.permits,
                                                   'held', v_taken);
    END LOOP;
    -- The instant of this grant, taken under the locks: leased_at, and the window it falls in.
    v_at := clock_timestamp();
    v_window := sluiceway_window_start(v_at, p_window_seconds);
    IF p_rate_limit > 0 THEN
        SELECT coalesce(max(used), 0) INTO v_used FROM rate_windows
         WHERE namespace = p_namespace AND name = p_name AND window_start = v_window;
    END IF;
    v_allowed := sluiceway_gate_allowance(p_count, p_cap, v_in_flight, p_rate_limit, v_used, v_permits, v_held);
    IF v_allowed > 0 THEN
        SELECT coalesce(jsonb_agg(to_jsonb(l)), '[]') INTO v_leased
          FROM sluiceway_lease(p_namespace, p_name, p_executor, p_worker, v_allowed, v_holds, v_at) AS l;
        v_granted := jsonb_array_length(v_leased);
        IF p_rate_limit > 0 AND v_granted > 0 THEN
            INSERT INTO rate_windows AS w (namespace, name, window_start, used)
            VALUES (p_namespace, p_name, v_window, v_granted)
            ON CONFLICT (namespace, name, window_start) DO UPDATE SET used = w.used + EXCLUDED.used;
        END IF;
    END IF;
    RETURN jsonb_build_object('leased', v_leased, 'inFlight', v_in_flight, 'windowUsed', v_used,
                              'windowStart', extract(epoch FROM v_window), 'now', extract(epoch FROM v_at),
                              'semaphores', v_states);
END
$$;

-- The previous release's entry point, for its replicas during a rolling
-- upgrade: the same lease, by the executor its boolean meant. A later
-- migration may drop it once no such replica can be left.
CREATE OR REPLACE FUNCTION sluiceway_gated_lease(
    p_namespace text, p_name text, p_worker text, p_count integer, p_system boolean,
    p_cap integer, p_rate_limit integer, p_window_seconds integer, p_semaphores text[]
) RETURNS jsonb LANGUAGE sql AS $$
    SELECT sluiceway_lease_within_gates(p_namespace, p_name, CASE WHEN p_system THEN 'system' ELSE 'worker' END,
                                        p_worker, p_count, p_cap, p_rate_limit, p_window_seconds, p_semaphores)
$$;
