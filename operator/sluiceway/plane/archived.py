"""Runs read back from the archive once retention has deleted them
(store.archives), for the API and the UI alike: by id, within the namespace
the caller may read, as the run was when it was purged."""

from __future__ import annotations

from sluiceway.plane.core import Plane
from sluiceway.store import archives
from sluiceway.store.archives import ArchivedRun


async def archived_run(plane: Plane, namespace: str, run_id: str) -> ArchivedRun | None:
    """The run `run_id` of `namespace` as archived, or None when it was not
    (or archiving is off in this process). Raises store.archives.ArchiveError
    when its file cannot be read here."""
    if plane.archive is None:
        return None
    async with plane.pool.acquire() as conn:
        return await archives.find(conn, plane.archive, namespace, run_id)
