"""Archive before purge: the purger writes each expired run's whole history
(the run, every attempt of every task, their logs, its search attributes,
its audit trail, its untaken messages, its idempotency keys) to a directory
before it deletes it, and the edges read an archived run back by id.

The files. One gzip-compressed JSON-lines file per namespace, day (the day
the run ended, UTC) and writer process:
`<root>/<namespace>/<YYYY-MM-DD>.<writer>.<seq>.jsonl.gz`, one line per run.
A purge batch appends one gzip member per file it touches (a gzip file may
hold several members; `zcat` and every gzip reader read them as one
stream). Only the process that created a file ever appends to it (its name
carries the process's identity and a random token), so replicas sharing a
volume never interleave writes, and no lock is needed on a file system that
may not honour one (NFS, many ReadWriteMany volumes). A write that fails
part way is cut back to where it began; if even that fails, the writer moves
on to the next `<seq>`, so a torn member is only ever at the end of a file
no one appends to any more.

Durability. The member is fsynced (and the directory, when the file is new)
before the purge's transaction deletes the run, and the index row that
points at it commits with the delete: the database forgets a run only once
its archive is on disk. A crash (or a failed delete) after the write leaves
the run in the database and an unindexed copy in the archive; the next
purge writes it again. Readers by id follow the index, which names the copy
written with the committed delete; a reader of the files themselves takes,
for a run id, the line with the latest `archivedAt`.

The index (`archived_runs`, migration 0036): run id -> file, member offset
and length, so a read by id decompresses one member of one file. A table
rather than an index file beside the archive, since it must commit
atomically with the delete, and a file cannot join that transaction."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import gzip
import os
import re
import secrets
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import orjson

from sluiceway.controls.attributes import Attribute
from sluiceway.model.attributes import AttributeType
from sluiceway.store import audit, logs
from sluiceway.store.attributes import COLUMNS
from sluiceway.store.runs import RunView, TaskView, shown_status

SUFFIX = ".jsonl.gz"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")

# A run's history as one JSON object, rendered by the database (its own JSON
# forms of times and jsonb, so nothing is lost): each table's rows whole, of
# every table the purge deletes from but decide_queue, whose rows are
# wake-ups still owed to the run, not its history.
_HISTORY = """
SELECT e.id, e.namespace, (coalesce(e.ended_at, now()) AT TIME ZONE 'UTC')::date AS day,
       jsonb_build_object(
         'id', e.id, 'namespace', e.namespace, 'archivedAt', now(),
         'run', to_jsonb(e) || jsonb_build_object(
             'next_run_id', (SELECT n.id FROM executions n WHERE n.previous_run_id = e.id LIMIT 1)),
         'tasks', (SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.created_at, t.ref, t.attempt), '[]')
                     FROM tasks t WHERE t.execution_id = e.id),
         'taskLogs', (SELECT coalesce(jsonb_agg(to_jsonb(l) ORDER BY l.id), '[]')
                        FROM task_logs l WHERE l.execution_id = e.id),
         'taskLogSizes', (SELECT coalesce(jsonb_agg(to_jsonb(z)), '[]')
                            FROM task_log_sizes z WHERE z.execution_id = e.id),
         'runAttributes', (SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.name), '[]')
                             FROM run_attributes a WHERE a.run_id = e.id),
         'audit', (SELECT coalesce(jsonb_agg(to_jsonb(u) ORDER BY u.id), '[]')
                     FROM run_audit u WHERE u.execution_id = e.id),
         'messages', (SELECT coalesce(jsonb_agg(to_jsonb(m) ORDER BY m.id), '[]')
                        FROM run_messages m WHERE m.execution_id = e.id),
         'startRequests', (SELECT coalesce(jsonb_agg(to_jsonb(s)), '[]')
                             FROM start_requests s WHERE s.execution_id = e.id),
         'parkedTasks', (SELECT coalesce(jsonb_agg(to_jsonb(p)), '[]')
                           FROM parked_tasks p WHERE p.execution_id = e.id)
       )::text AS record
  FROM executions e WHERE e.id = ANY($1::uuid[])
 ORDER BY e.namespace, e.id
"""
_INDEX = """
INSERT INTO archived_runs (namespace, id, file, offset_bytes, length_bytes, ended_at)
SELECT e.namespace, e.id, $2, $3, $4, e.ended_at FROM executions e WHERE e.id = ANY($1::uuid[])
ON CONFLICT (namespace, id) DO UPDATE
   SET file = excluded.file, offset_bytes = excluded.offset_bytes, length_bytes = excluded.length_bytes,
       ended_at = excluded.ended_at, archived_at = now()
"""
_LOOKUP = "SELECT file, offset_bytes, length_bytes FROM archived_runs WHERE namespace = $1 AND id = $2"


class ArchiveError(Exception):
    """The archive cannot be used: a bad directory at startup, or a file a read cannot find or decode."""


@dataclass(frozen=True)
class Location:
    file: str  # relative to the root
    offset: int
    length: int


class Archive:
    """The archive directory, as this process writes and reads it."""

    def __init__(self, root: Path, writer: str) -> None:
        self.root = root
        self.writer = writer
        self.seq = 0

    @classmethod
    def open(cls, root: str, identity: str) -> Archive:
        """The archive at `root`, checked now so that a bad path stops the
        operator at startup, not its first purge: absolute, an existing
        directory, writable (a file is written, synced and removed)."""
        path = Path(root)
        if not path.is_absolute():
            raise ArchiveError(f"SLUICEWAY_ARCHIVE_DIR: {root!r} is not an absolute path")
        if not path.is_dir():
            raise ArchiveError(f"SLUICEWAY_ARCHIVE_DIR: {root!r} is not an existing directory")
        # Per process, never shared: the identity (the pod's name) says whose
        # files they are, the token keeps a restarted pod off its old files.
        writer = f"{_UNSAFE.sub('-', identity)[:60]}-{secrets.token_hex(3)}"
        probe = path / f".probe.{writer}"
        try:
            with probe.open("wb") as handle:
                handle.write(b"sluiceway")
                os.fsync(handle.fileno())
            probe.unlink()
        except OSError as error:
            raise ArchiveError(f"SLUICEWAY_ARCHIVE_DIR: {root!r} is not writable ({error.strerror})") from error
        return cls(path, writer)

    def write(self, namespace: str, day: datetime.date, lines: list[bytes]) -> Location:
        """Append `lines` as one gzip member to this writer's file of the
        namespace and day, and sync it to disk before returning."""
        folder = self.root / namespace  # a namespace is a DNS label: one safe path segment
        new_folder = not folder.exists()
        folder.mkdir(exist_ok=True)
        if new_folder:
            _sync_directory(self.root)
        name = f"{day.isoformat()}.{self.writer}.{self.seq}{SUFFIX}"
        path = folder / name
        new_file = not path.exists()
        member = gzip.compress(b"".join(lines), compresslevel=6, mtime=0)
        with path.open("ab") as handle:
            offset = handle.tell()
            try:
                handle.write(member)
                handle.flush()
                os.fsync(handle.fileno())
            except OSError:
                self._cut(handle, offset)
                raise
        if new_file:
            _sync_directory(folder)
        return Location(f"{namespace}/{name}", offset, len(member))

    def _cut(self, handle: Any, offset: int) -> None:
        """Take a torn member off the end of a file; failing that, leave the file."""
        try:
            handle.truncate(offset)
            os.fsync(handle.fileno())
        except OSError:
            self.seq += 1

    def read(self, location: Location) -> list[dict[str, Any]]:
        """The runs of one member, in the order written."""
        path = (self.root / location.file).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ArchiveError(f"{location.file}: outside the archive")
        try:
            with path.open("rb") as handle:
                handle.seek(location.offset)
                member = handle.read(location.length)
            text = gzip.decompress(member)
        except (OSError, EOFError, zlib.error) as error:
            raise ArchiveError(f"the archive file {location.file} cannot be read: {error}") from error
        return [orjson.loads(line) for line in text.splitlines() if line]


def _sync_directory(path: Path) -> None:
    """Make a new entry of the directory durable (the file's own fsync does not)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def archive(conn: asyncpg.Connection, store: Archive, run_ids: list[uuid.UUID]) -> int:
    """Write these runs' histories to the archive, synced, and index them, in
    the caller's transaction (the purge's, which deletes them next). Returns
    how many runs were written."""
    if not run_ids:
        return 0
    groups: dict[tuple[str, datetime.date], list[tuple[uuid.UUID, bytes]]] = {}
    for row in await conn.fetch(_HISTORY, run_ids):
        groups.setdefault((row["namespace"], row["day"]), []).append((row["id"], row["record"].encode() + b"\n"))
    for (namespace, day), runs in groups.items():
        try:
            where = await asyncio.to_thread(store.write, namespace, day, [line for _, line in runs])
        except OSError as error:  # the disk, not the database: said so, and the batch is kept
            raise ArchiveError(f"archiving {len(runs)} runs of {namespace} failed: {error}") from error
        await conn.execute(_INDEX, [run_id for run_id, _ in runs], where.file, where.offset, where.length)
    return sum(len(runs) for runs in groups.values())


# -- reading back -------------------------------------------------------------------


@dataclass(frozen=True)
class ArchivedRun:
    run: RunView
    tasks: list[TaskView]
    search_attributes: dict[str, Any]
    lines: list[logs.Entry]  # what its tasks logged
    audit: list[audit.Entry]
    archived_at: datetime.datetime
    file: str
    log_bytes: dict[str, int]  # by task id: what each attempt logged, kept or not

    def logs_of(self, *, after: int = 0, limit: int = 1000, ref: str | None = None, cap: int = 0) -> logs.Logs:
        """A page of its log lines, as store.logs.read pages a run's."""
        lines = [e for e in self.lines if e.id > after and (ref is None or e.ref == ref)][:limit]
        refs = {t.id: t.ref for t in self.tasks}
        truncated = any(size > cap and (ref is None or refs.get(task) == ref) for task, size in self.log_bytes.items())
        return logs.Logs(lines, truncated)


async def find(conn: asyncpg.Connection, store: Archive | None, namespace: str, run_id: str) -> ArchivedRun | None:
    """The archived run `run_id` of `namespace`, or None when it was never
    archived there (or archiving is off here). Raises ArchiveError when the
    index names a file this process cannot read."""
    try:
        key = uuid.UUID(str(run_id))
    except ValueError:
        return None
    if store is None:
        return None
    row = await conn.fetchrow(_LOOKUP, namespace, key)
    if row is None:
        return None
    where = Location(row["file"], row["offset_bytes"], row["length_bytes"])
    records = await asyncio.to_thread(store.read, where)
    copies = [r for r in records if r.get("id") == str(key) and r.get("namespace") == namespace]
    if not copies:
        raise ArchiveError(f"the archive file {where.file} does not hold run {key}")
    return _archived(copies[-1], where.file)


def _time(value: Any) -> datetime.datetime | None:
    return None if value is None else datetime.datetime.fromisoformat(value)


def _fields(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    """The dataclass's fields from a row's JSON form, times parsed back."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            value = raw[f.name]
            values[f.name] = _time(value) if "datetime" in str(f.type) else value
    return values


def _archived(record: dict[str, Any], file: str) -> ArchivedRun:
    run = _fields(RunView, record["run"])
    run["status"] = shown_status(run["status"], run.get("paused_at"))
    tasks = [TaskView(**_fields(TaskView, t)) for t in record["tasks"]]
    by_id = {t.id: t for t in tasks}
    lines = [
        logs.Entry(
            line["id"],
            line["task_id"],
            by_id[line["task_id"]].ref if line["task_id"] in by_id else "",
            by_id[line["task_id"]].attempt if line["task_id"] in by_id else 0,
            _time(line["at"]) or datetime.datetime.min,
            _time(line.get("logged_at")),
            line["level"],
            line["message"],
        )
        for line in record["taskLogs"]
    ]
    trail = [audit.Entry(**_fields(audit.Entry, entry)) for entry in record["audit"]]
    return ArchivedRun(
        RunView(**run),
        tasks,
        {a["name"]: _attribute(a) for a in record["runAttributes"]},
        lines,
        trail,
        _time(record["archivedAt"]) or datetime.datetime.min,
        file,
        {z["task_id"]: int(z["bytes"]) for z in record["taskLogSizes"]},
    )


def _attribute(row: dict[str, Any]) -> Any:
    kind = AttributeType(row["type"])
    value = row[COLUMNS[kind]]
    return Attribute(
        row["name"], kind, datetime.datetime.fromisoformat(value) if kind is AttributeType.DATETIME else value
    ).wire()
