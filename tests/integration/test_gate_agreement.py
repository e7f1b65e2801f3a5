"""The gates say the same thing in SQL and in Python, against a real
PostgreSQL, on random states: the fixed-window formula, the allowance
arithmetic (cap, rate and semaphores together: the most restrictive wins),
and the locked lease itself, which takes exactly what controls.gates allows
and reports the numbers it decided by."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluiceway.controls.gates import GateState, SemaphoreState, allowance, window_start
from sluiceway.controls.policy import Gates
from sluiceway.store.database import Connection, Pool

# A fixture shared by the examples is the point: one database, reset where needed.
_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@_SETTINGS
@given(
    micros=st.integers(
        min_value=int(datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC).timestamp() * 1e6),
        max_value=int(datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC).timestamp() * 1e6),
    ),
    size=st.integers(min_value=1, max_value=86_400),
)
async def test_the_fixed_window_formula_is_the_same_in_sql_and_python(pool: Pool, micros: int, size: int) -> None:
    at = EPOCH + datetime.timedelta(microseconds=micros)
    async with pool.acquire() as conn:
        start: datetime.datetime = await conn.fetchval("SELECT sluiceway_window_start($1, $2)", at, size)
    assert start.timestamp() == window_start(at.timestamp(), size)


@dataclass(frozen=True)
class Case:
    requested: int
    gates: Gates
    state: GateState


@st.composite
def cases(draw: st.DrawFn) -> Case:
    semaphores = draw(
        st.lists(
            st.tuples(st.integers(0, 6), st.integers(0, 8)),
            max_size=3,  # (permits, held): held may exceed permits
        )
    )
    states = [SemaphoreState(f"s{i}", permits, held) for i, (permits, held) in enumerate(semaphores)]
    gates = Gates(
        concurrent_exec_limit=draw(st.integers(0, 8)),
        rate_limit_per_frequency=draw(st.integers(0, 8)),
        rate_limit_frequency_seconds=3600,
        semaphores=tuple(s.name for s in states),
    )
    state = GateState(in_flight=draw(st.integers(0, 10)), window_used=draw(st.integers(0, 10)), semaphores=states)
    return Case(draw(st.integers(0, 12)), gates, state)


_ALLOWANCE = "SELECT sluiceway_gate_allowance($1, $2, $3, $4, $5, $6, $7)"


@settings(_SETTINGS, max_examples=300)
@given(case=cases())
async def test_the_allowance_is_the_same_in_sql_and_python(pool: Pool, case: Case) -> None:
    g, s = case.gates, case.state
    async with pool.acquire() as conn:
        allowed = await conn.fetchval(
            _ALLOWANCE,
            case.requested,
            g.concurrent_exec_limit,
            s.in_flight,
            g.rate_limit_per_frequency,
            s.window_used,
            [x.permits for x in s.semaphores],
            [x.held for x in s.semaphores],
        )
    assert allowed == allowance(case.requested, g, s)[0]


NS, QUEUE = "gates", "gated"


async def _set_up(conn: Connection, case: Case, ready: int) -> None:
    """The state of `case` as rows: tasks in flight in the queue, permits held
    by tasks of another queue, tokens spent in this window and the next (so a
    lease that crosses the boundary counts the same), and `ready` tasks."""
    await conn.execute("TRUNCATE tasks, rate_windows, semaphores")
    add = """
    INSERT INTO tasks (id, execution_id, namespace, ref, type, executor, name, attempt, status, holds,
                       first_scheduled_at, available_at)
    SELECT gen_random_uuid(), gen_random_uuid(), $1, 'r', 'SIMPLE', 'worker', $2, 1, $3, $4,
           now() - interval '1 minute', now() - interval '1 minute'
      FROM generate_series(1, $5)
    """
    await conn.execute(add, NS, QUEUE, "IN_PROGRESS", None, case.state.in_flight)
    await conn.execute(add, NS, QUEUE, "SCHEDULED", None, ready)
    for semaphore in case.state.semaphores:
        await conn.execute(
            "INSERT INTO semaphores (namespace, name, resource_name, generation, permits) VALUES ($1, $2, $2, 1, $3)",
            NS,
            semaphore.name,
            semaphore.permits,
        )
        await conn.execute(add, NS, "other", "IN_PROGRESS", [semaphore.name], semaphore.held)
    size = case.gates.rate_limit_frequency_seconds
    await conn.execute(
        """INSERT INTO rate_windows (namespace, name, window_start, used)
           SELECT $1, $2, sluiceway_window_start(now(), $3) + make_interval(secs => $3 * n), $4
             FROM generate_series(0, 1) AS n""",
        NS,
        QUEUE,
        size,
        case.state.window_used,
    )


@settings(_SETTINGS, max_examples=60)
@given(case=cases(), ready=st.integers(0, 12))
async def test_the_locked_lease_takes_what_the_python_allowance_allows(pool: Pool, case: Case, ready: int) -> None:
    g = case.gates
    async with pool.acquire() as conn:
        await _set_up(conn, case, ready)
        result = await conn.fetchval(
            "SELECT sluiceway_lease_within_gates($1, $2, 'worker', 'w', $3, $4, $5, $6, $7)",
            NS,
            QUEUE,
            case.requested,
            g.concurrent_exec_limit,
            g.rate_limit_per_frequency,
            g.rate_limit_frequency_seconds,
            list(g.semaphores),
        )
        spent = await conn.fetchval("SELECT max(used) FROM rate_windows WHERE namespace = $1 AND name = $2", NS, QUEUE)
    allowed, _ = allowance(case.requested, g, case.state)
    leased = result["leased"]
    assert len(leased) == min(allowed, ready), result
    # The numbers it decided by are the state's, so the holds explained from them are the state's too.
    assert result["inFlight"] == (case.state.in_flight if g.concurrent_exec_limit else 0)
    assert result["windowUsed"] == (case.state.window_used if g.rate_limit_per_frequency else 0)
    assert [(s["name"], s["permits"], s["held"]) for s in result["semaphores"]] == [
        (s.name, s.permits, s.held) for s in case.state.semaphores
    ]
    # Every lease holds every semaphore its type lists, and spends one token.
    assert all(sorted(row["holds"]) == sorted(g.semaphores) for row in leased)
    assert all(uuid.UUID(row["id"]) and row["status"] == "IN_PROGRESS" for row in leased)
    if g.rate_limit_per_frequency and leased:
        assert spent == case.state.window_used + len(leased)
