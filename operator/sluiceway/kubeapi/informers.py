"""An informer over labelled pods: one LIST, then one WATCH stream resumed from
the last resourceVersion, per scope (the whole cluster, or each namespace the
operator names where it may not list pods cluster-wide), feeding one cache
keyed "namespace/name". Whoever waits on a pod waits on its key and is woken by
its changes, instead of asking the API server again and again.

`PodCache` is the pure half (no IO, no clock): what each event does to the cache,
the resourceVersion to resume from, which waiter to wake, and whether a scope's
stream is live. `PodInformer` runs the streams: relists on 410 Gone, reconnects
with backoff on any other error, and marks the scope down meanwhile so that its
waiters fall back to reading the pod themselves.

Why not kubernetes.informer.SharedInformer (in the client since 37): it hands
out models rather than the wire-shaped dicts the rest of kubeapi returns, calls
its handlers on its own thread, reconnects a refused watch at once with no
backoff, and says nothing of whether its cache is live."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

from sluiceway.kubeapi.client import KubeError
from sluiceway.kubeapi.pods import Pods

log = logging.getLogger(__name__)

# The scope of a cluster-wide stream; any other scope is a namespace.
CLUSTER = ""


def key_of(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class PodCache:
    """The pods of every scope's stream, the resourceVersion each resumes from,
    and the events of those waiting on a pod."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, str] = {}  # scope -> resourceVersion; absent: list again
        self.live: set[str] = set()  # scopes whose stream is connected, so whose pods are current
        self._waiters: dict[str, set[asyncio.Event]] = {}

    # -- what the streams do to it -----------------------------------------------

    def replace(self, scope: str, items: list[dict[str, Any]], resource_version: str) -> None:
        """A LIST: the scope's pods are these now, as of `resource_version`.
        Waiters on a pod that appeared, changed or vanished are woken."""
        fresh = {key_of(pod): pod for pod in items}
        before = {key: pod for key, pod in self.pods.items() if _in_scope(key, scope)}
        for key in before.keys() - fresh.keys():
            del self.pods[key]
        self.pods.update(fresh)
        self.versions[scope] = resource_version
        changed = before.keys() ^ fresh.keys()
        changed |= {key for key in before.keys() & fresh.keys() if _version(before[key]) != _version(fresh[key])}
        self._wake(changed)

    def apply(self, scope: str, event: dict[str, Any]) -> str | None:
        """One WATCH event; the key of the pod it changed (None: no pod changed).
        Every event carries the version to resume from, a BOOKMARK only that."""
        kind, obj = str(event.get("type") or ""), event.get("object")
        if not isinstance(obj, dict):
            return None
        if version := _version(obj):
            self.versions[scope] = version
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return None  # BOOKMARK; an ERROR ends the stream before it gets here
        key = key_of(obj)
        if kind == "DELETED":
            self.pods.pop(key, None)
        else:
            self.pods[key] = obj
        self._wake({key})
        return key

    def up(self, scope: str) -> None:
        """The API server accepted its stream from the scope's version: whatever
        changed since is replayed to it, so its pods are as current as a read."""
        self.live.add(scope)

    def down(self, scope: str, *, expired: bool = False) -> None:
        """Its stream broke (expired: too long ago to resume, list again). Its
        waiters are woken: they read their pods themselves until it is back."""
        self.live.discard(scope)
        if expired:
            self.versions.pop(scope, None)
        self._wake({key for key in self._waiters if _in_scope(key, scope)})

    # -- what readers ask of it --------------------------------------------------

    def lookup(self, key: str) -> tuple[bool, dict[str, Any] | None]:
        """(live, pod): live when a connected stream covers the key's namespace,
        so that an absent pod is one that is not there (or not yet seen)."""
        namespace = key.partition("/")[0]
        return (CLUSTER in self.live or namespace in self.live), self.pods.get(key)

    def snapshot(self, scopes: tuple[str, ...]) -> list[dict[str, Any]] | None:
        """Every pod, when each of `scopes` is live; else None (read them from the API)."""
        if not scopes or not all(scope in self.live for scope in scopes):
            return None
        return [pod for key, pod in self.pods.items() if any(_in_scope(key, s) for s in scopes)]

    @contextlib.contextmanager
    def waiting(self, key: str) -> Iterator[asyncio.Event]:
        """An event set whenever the pod of `key` changes (or its stream goes
        down); the waiter clears it before each look at the pod."""
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(key, set())
            waiters.discard(event)
            if not waiters:
                self._waiters.pop(key, None)

    def _wake(self, keys: set[str]) -> None:
        for key in keys:
            for event in self._waiters.get(key, ()):
                event.set()


def _in_scope(key: str, scope: str) -> bool:
    return scope == CLUSTER or key.partition("/")[0] == scope


class PodInformer:
    """Keeps a PodCache of the pods matching `selector`: cluster-wide, or, where
    the operator may not list pods cluster-wide (the chart's per-namespace
    Roles), in each namespace of `namespaces` (the names it watches outright)."""

    def __init__(
        self,
        pods: Pods,
        selector: str,
        namespaces: tuple[str, ...] = (),
        *,
        watch_seconds: int = 60,
        max_backoff: float = 30.0,
    ) -> None:
        self.pods = pods
        self.selector = selector
        self.namespaces = namespaces
        self.watch_seconds = watch_seconds  # each stream is renewed this often, from its version
        self.max_backoff = max_backoff
        self.cache = PodCache()
        self.scopes: tuple[str, ...] = (CLUSTER,)

    async def run(self) -> None:
        """Forever (until cancelled)."""
        try:
            await self._follow(CLUSTER)
        except _ListForbidden:
            self.scopes = self.namespaces
            log.info("pods: not allowed to list them cluster-wide; watching %s", ", ".join(self.namespaces))
        await asyncio.gather(*(self._follow(scope) for scope in self.scopes))

    def snapshot(self) -> list[dict[str, Any]] | None:
        return self.cache.snapshot(self.scopes)

    async def _follow(self, scope: str) -> None:
        failures = 0
        while True:
            try:
                await self._list_and_watch(scope)
                failures = 0  # the server ended the stream after watch_seconds: resume
            except KubeError as error:
                failures += 1
                if error.status == 410:
                    self.cache.down(scope, expired=True)
                    log.info("pods%s: the watch expired (410 Gone); listing again", _where(scope))
                    if failures == 1:
                        continue  # the usual case, at once; one that repeats backs off as any error
                delay = backoff(failures, self.max_backoff)
                log.warning("pods%s: the watch broke (%s); again in %.1f s", _where(scope), error.message, delay)
                await asyncio.sleep(delay)

    async def _list_and_watch(self, scope: str) -> None:
        namespace = scope or None
        if scope not in self.cache.versions:
            try:
                items, version = await self.pods.list_at(self.selector, namespace)
            except KubeError as error:
                if error.status == 403 and scope == CLUSTER and self.namespaces:
                    raise _ListForbidden from error
                raise
            self.cache.replace(scope, items, version)
        try:
            await self.pods.watch(
                self.selector,
                self.cache.versions[scope],
                functools.partial(self.cache.apply, scope),
                namespace,
                self.watch_seconds,
                opened=functools.partial(self.cache.up, scope),
            )
        except BaseException:
            self.cache.down(scope)  # broken or stopped: its pods are no longer kept current
            raise


class _ListForbidden(Exception):
    """Listing cluster-wide is forbidden: watch each named namespace instead."""


def backoff(failures: int, cap: float) -> float:
    """Seconds before reconnecting after `failures` failures in a row: 0.5, 1, 2, ... up to `cap`."""
    return float(min(cap, 0.5 * 2 ** min(failures - 1, 16)))


def _where(scope: str) -> str:
    return f" in {scope}" if scope else ""
