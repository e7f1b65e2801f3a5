"""The effective policy of every task type, resolved once and shared.

One object per process, built by the composition root with the operator
defaults and handed to every part that needs a task type's policy: the
decider, the task protocol (gates and poll timeouts), the HTTP task runner and
diagnostics. A TaskDefinition row is read and resolved once per namespace and
type; the entries of a namespace are dropped when its definitions change (a
NOTIFY every replica hears) and refreshed after `ttl` seconds in any case, so
a missed notification costs seconds of staleness, never forever."""

from __future__ import annotations

import time
from collections.abc import Iterable

import asyncpg

from sluiceway.controls.policy import OperatorDefaults, TaskPolicy, resolve
from sluiceway.model.taskdefinition import TaskDefinitionSpec

_SPECS = "SELECT name, spec FROM task_definitions WHERE namespace = $1 AND name = ANY($2)"


class Policies:
    def __init__(self, defaults: OperatorDefaults = OperatorDefaults(), ttl: float = 10.0) -> None:
        self.defaults = defaults
        self.ttl = ttl
        self.undefined = resolve(None, defaults)  # the policy of a type nobody defined
        self._entries: dict[tuple[str, str], tuple[float, TaskPolicy]] = {}

    def invalidate(self, namespace: str | None = None) -> None:
        if namespace is None:
            self._entries.clear()
        else:
            for key in [k for k in self._entries if k[0] == namespace]:
                del self._entries[key]

    async def of(self, conn: asyncpg.Connection, namespace: str, names: Iterable[str]) -> dict[str, TaskPolicy]:
        """The policy of each of these task types. Raises pydantic's
        ValidationError when a stored definition no longer parses."""
        now = time.monotonic()
        wanted = set(names)
        missing = [
            n for n in wanted if (entry := self._entries.get((namespace, n))) is None or now - entry[0] > self.ttl
        ]
        if missing:
            found = {
                r["name"]: resolve(TaskDefinitionSpec.model_validate(r["spec"]), self.defaults)
                for r in await conn.fetch(_SPECS, namespace, missing)
            }
            for name in missing:
                self._entries[(namespace, name)] = (now, found.get(name, self.undefined))
        return {name: self._entries[(namespace, name)][1] for name in wanted}
