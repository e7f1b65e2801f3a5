"""The store's errors: one root, so that the edges (the API, the reconcilers,
the loops) never name the database driver.

`StoreUnavailable` is an outage: the database is unreachable, restarting, cut
this session or has no room, and the same request a moment later may well
succeed (the API answers 503 with Retry-After; a reconciler retries; a loop
pauses). `StoreError` is anything else the database refused."""

from __future__ import annotations

import asyncpg


class StoreError(Exception):
    """Something the database refused or could not do."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or is going away: retry later."""


# SQLSTATE classes of an outage: connection exceptions, insufficient resources
# (too many connections), operator intervention (shutdown, cannot connect now);
# and a write on a server that is now a standby (25006: a failover demoted the
# primary under an open session; the session must go, see `on_standby`).
_UNAVAILABLE_STATES = ("08", "53", "57", "25006")


def _unavailable(error: BaseException) -> bool:
    if isinstance(error, asyncpg.PostgresError):
        return str(getattr(error, "sqlstate", "") or "").startswith(_UNAVAILABLE_STATES)
    # The client's own: a closed connection, a closing pool, or a protocol left
    # mid-operation by a session the server ended under it (InternalClientError
    # "cannot switch to state ..."). Not a value that does not fit its parameter
    # (asyncpg's DataError is a ValueError too).
    if isinstance(error, asyncpg.InternalClientError):
        return True
    return isinstance(error, asyncpg.InterfaceError) and not isinstance(error, ValueError)


def on_standby(error: BaseException | None) -> bool:
    """A write refused because the server is read-only: the session reached a
    primary that has since been demoted (a switchover), so only a new session,
    which `target_session_attrs=read-write` sends to the new primary, helps."""
    return isinstance(error, asyncpg.ReadOnlySQLTransactionError)


def translated(error: BaseException, connection_lost: bool = False) -> StoreError | None:
    """The store's error for one the driver raised (an OSError counts when the
    connection is gone with it); None for any other error, which is left as it is."""
    if isinstance(error, StoreError):
        return None
    if isinstance(error, OSError):
        return StoreUnavailable(f"the database is unavailable: {error}") if connection_lost else None
    if _unavailable(error):
        return StoreUnavailable(f"the database is unavailable: {type(error).__name__}: {error}")
    if isinstance(error, (asyncpg.PostgresError, asyncpg.InterfaceError)):
        return StoreError(f"{type(error).__name__}: {error}")
    return None
