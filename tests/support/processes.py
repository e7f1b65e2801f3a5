"""Stopping several processes at once: each gets SIGTERM and its grace period
in parallel, so a teardown waits for the slowest, not for the sum."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from sluiceway.devenv.processes import Child


def stop_all(children: Sequence[Child]) -> None:
    with ThreadPoolExecutor(max_workers=max(1, len(children))) as pool:
        list(pool.map(lambda child: child.stop(), children))
