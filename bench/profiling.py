"""Profiles for the benchmarks: where the operator's time goes (py-spy) and
where the database's goes (pg_stat_statements), printed as top entries.

`--profile` on a benchmark turns both on: PostgreSQL is started with
pg_stat_statements preloaded (the embedded build ships it), and py-spy samples
the operator process for as long as the measured phase runs."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg

SETTINGS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}


def pg_settings(profile: bool) -> dict[str, str]:
    return dict(SETTINGS) if profile else {}


async def reset_statements(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.execute("SELECT pg_stat_statements_reset()")
    finally:
        await conn.close()


async def top_statements(dsn: str, limit: int = 10) -> list[str]:
    """The statements that took the most database time since the reset."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT calls, total_exec_time, rows, query FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " ORDER BY total_exec_time DESC LIMIT $1",
            limit,
        )
    finally:
        await conn.close()
    total = sum(r["total_exec_time"] for r in rows) or 1.0
    return [
        f"{r['total_exec_time']:9.0f} ms {r['total_exec_time'] / total:4.0%} {r['calls']:7d} calls "
        f"{r['total_exec_time'] / max(r['calls'], 1):7.3f} ms/call {r['rows']:8d} rows  "
        + " ".join(r["query"].split())[:150]
        for r in rows
    ]


@contextlib.contextmanager
def py_spy(pid: int, out: Path, rate: int = 200) -> Iterator[None]:
    """Sample `pid` with py-spy while the block runs, raw (collapsed stacks) into `out`."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    process = subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate), "--output", str(out)]
        + ["--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield
    finally:
        process.send_signal(2)  # SIGINT: py-spy writes what it sampled
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _frame(raw: str) -> str:
    """`function (path/file.py:line)` as `function (file.py)`."""
    function, _, where = raw.partition(" (")
    return f"{function} ({where.split(':')[0].rsplit('/', 1)[-1]})"


def top_frames(collapsed: Path, limit: int = 15) -> list[str]:
    """Own time (the innermost frame) and inclusive time of the busiest functions."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    try:
        lines = collapsed.read_text().splitlines()
    except OSError:
        return ["(no py-spy profile: is ptrace allowed?)"]
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [_frame(f) for f in stack.split(";") if " (" in f]
        if frames:
            own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    if not total:
        return ["(py-spy sampled nothing)"]
    lines_out = [f"{total} samples; own time:"]
    lines_out += [f"  {n / total:5.1%}  {frame}" for frame, n in own.most_common(limit)]
    lines_out.append("inclusive:")
    lines_out += [f"  {n / total:5.1%}  {frame}" for frame, n in inclusive.most_common(limit)]
    return lines_out


async def sample_waits(dsn: str, stop: asyncio.Event, every: float = 0.005) -> collections.Counter[str]:
    """What the other backends are doing, sampled from pg_stat_activity until `stop`:
    CPU (active, no wait event), or the wait event and the statement's first words."""
    conn = await asyncpg.connect(dsn)
    seen: collections.Counter[str] = collections.Counter()
    try:
        while not stop.is_set():
            for row in await conn.fetch(
                "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS what, left(query, 60) AS query"
                " FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend'"
            ):
                seen[f"{row['what']:28} {' '.join(row['query'].split())}"] += 1
            await asyncio.sleep(every)
    finally:
        await conn.close()
    return seen


def top_waits(seen: collections.Counter[str], limit: int = 12) -> list[str]:
    total = sum(seen.values()) or 1
    return [f"{n / total:5.1%}  {what}" for what, n in seen.most_common(limit)]


def show(title: str, lines: list[str]) -> None:
    print(f"    {title}:")
    for line in lines:
        print(f"      {line}")
