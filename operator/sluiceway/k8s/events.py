"""Kubernetes Events for notable transitions (Ready changes, refused and
failed runs), rate-limited so a flapping object cannot flood the API server:
at most one Event per object and reason per minute, and a few per second
overall."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sluiceway.kubeapi.client import Events, KubeError
from sluiceway.model import API_VERSION

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, events: Events | None, per_object_seconds: float = 60.0, per_second: float = 5.0) -> None:
        self.events = events
        self.per_object_seconds = per_object_seconds
        self.per_second = per_second
        self._last: dict[tuple[str, str], float] = {}
        self._tokens = per_second
        self._refilled = time.monotonic()
        self._pending: set[asyncio.Task[None]] = set()

    def _allowed(self, key: tuple[str, str]) -> bool:
        now = time.monotonic()
        self._tokens = min(self.per_second, self._tokens + (now - self._refilled) * self.per_second)
        self._refilled = now
        if now - self._last.get(key, -1e9) < self.per_object_seconds or self._tokens < 1:
            return False
        self._tokens -= 1
        self._last[key] = now
        if len(self._last) > 50_000:
            self._last.clear()
        return True

    def record(self, kind: str, namespace: str, name: str, uid: str, warning: bool, reason: str, message: str) -> None:
        """Post in the background; never blocks or fails the caller."""
        if self.events is None or not self._allowed((uid or f"{kind}/{namespace}/{name}", reason)):
            return
        involved: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "uid": uid,
        }
        task = asyncio.create_task(self._post(involved, "Warning" if warning else "Normal", reason, message))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _post(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        assert self.events is not None
        try:
            await self.events.post(involved, event_type, reason, message)
        except (KubeError, OSError) as error:
            log.info("event %s on %s/%s not posted: %s", reason, involved["kind"], involved["name"], error)
