"""`sluiceway worker` processes, started as a user starts them. Stop them
with `stop_all` (tests/support/processes.py): each drains its long poll
before it exits, so stopping them one after another waits out one poll each."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from sluiceway.devenv.processes import Child


def start_worker(
    name: str, target: str, url: str, namespace: str, logs: Path, *, env: Mapping[str, str] | None = None
) -> Child:
    """Run the handlers in `target` (a file or module, as `sluiceway worker` takes it) against the API at `url`."""
    argv = [sys.executable, "-m", "sluiceway", "worker", target, "--url", url, "--namespace", namespace]
    return Child(name, argv, logs, env={**os.environ, **(env or {})})
