"""Profiles for the benchmarks' `--profile`: py-spy on a process, pg_stat_statements on the database.

    with sampled(pid, seconds) as spy: ...          # py-spy record, raw (collapsed) stacks
    print_spy(spy.path)                             # the top functions, own and inclusive
    await print_statements(dsn)                     # the top statements by total time

PostgreSQL must load the extension: start it with `settings=STATEMENT_SETTINGS`."""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg

PACKAGES = {"api", "store", "engine", "controls", "model", "runtime", "worker", "observability", "systemtasks"}
STATEMENT_SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


@contextmanager
def sampled(pid: int, seconds: float) -> Iterator[Path]:
    """Sample `pid` for `seconds` (py-spy at 100 Hz, idle frames left out); yields the raw file."""
    out = Path(tempfile.mkstemp(prefix="spy-", suffix=".txt")[1])
    spy = py_spy()
    process = None
    if spy is not None:
        argv = [
            spy,
            "record",
            "-p",
            str(pid),
            "-d",
            str(int(seconds)),
            "-r",
            "100",
            "--gil",
            "-f",
            "raw",
            "-o",
            str(out),
        ]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield out
    finally:
        if process is not None:
            process.wait(seconds + 30)


def print_spy(path: Path, top: int = 15, title: str = "py-spy") -> None:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        print(f"  {title}: no samples (py-spy missing or not permitted)")
        return
    print(f"  {title}: {total} samples; top by own time, then by inclusive time")
    for frame, n in own.most_common(top):
        print(f"    own {n / total:6.1%}  {frame}")
    ours = [(f, n) for f, n in inclusive.most_common() if f.split("(")[-1].split("/")[0] in PACKAGES]
    for frame, n in ours[:top]:
        print(f"    incl {n / total:5.1%}  {frame}")


def _short(frame: str) -> str:
    """`function (path/to/module.py:line)` as `function (module.py)`."""
    name, _, where = frame.partition(" (")
    module = where.rsplit("/", 1)[-1].split(":")[0]
    parent = where.rsplit("/", 2)[-2] if where.count("/") >= 2 else ""
    return f"{name} ({parent}/{module})" if parent else f"{name} ({module})"


async def reset_statements(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.execute("SELECT pg_stat_statements_reset()")
    finally:
        await conn.close()


async def print_statements(dsn: str, top: int = 12) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            """
            SELECT calls, total_exec_time, mean_exec_time, rows, regexp_replace(query, '\\s+', ' ', 'g') AS query
              FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
             ORDER BY total_exec_time DESC LIMIT $1
            """,
            top,
        )
    finally:
        await conn.close()
    print("  pg_stat_statements, top by total time (ms total, calls, ms mean, rows):")
    for r in rows:
        print(
            f"    {r['total_exec_time']:9.0f} {r['calls']:8d} {r['mean_exec_time']:7.2f} {r['rows']:8d}  "
            f"{r['query'][:110]}"
        )
