"""CONTAINER tasks: the operator leases the task like any executor, under every
gate (caps, semaphores, rate limits, quotas), and only then creates its pod:
one pod per attempt, watched until it ends, its log read and stored as the
task's log, then deleted (docs/tasks/container.md).

Pods are watched, not polled: one informer (kubeapi.informers) keeps every
CONTAINER pod in a cache, and each attempt waits on its pod's key, woken by
the pod's changes or by its next deadline (a renewal, startToClose, a bound
of `classify`), whichever comes first. While the informer's stream is down an
attempt reads its pod itself, at most every `fallback_interval`.

While a pod runs, the operator renews the attempt's lease (a heartbeat) on
its behalf; a renewal refused means the attempt is no longer current (it
timed out, the run was terminated, another attempt was leased), and the pod is
deleted without a result: the epoch fences it. startToClose deletes the pod
when it passes, and the sweeper's timer ends the attempt as for any task.

A sweep (at start and every `sweep_interval`) looks at every CONTAINER pod
this process does not watch: a pod whose attempt is no longer the task's
lease is deleted; one whose lease nobody has renewed for two heartbeat
intervals (its operator died) is adopted, claimed in the database so that
one replica only watches it, and its result applied as if it had never been
left."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import fnmatch
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sluiceway.kubeapi.client import KubeError
from sluiceway.kubeapi.informers import PodInformer
from sluiceway.kubeapi.pods import Pods
from sluiceway.model.container import ContainerSpec
from sluiceway.model.execution import Heartbeat, LogLine, ResultStatus, TaskResult
from sluiceway.model.workflow import TaskType
from sluiceway.observability.logs import about
from sluiceway.plane import Plane, containers, dispatch
from sluiceway.plane.dispatch import Lease
from sluiceway.store.errors import StoreError
from sluiceway.systemtasks.container_pods import (
    CONTAINER,
    EPOCH,
    SELECTOR,
    Attempt,
    Verdict,
    classify,
    log_lines,
    next_check,
    render_pod,
)

log = logging.getLogger(__name__)

# A heartbeat at least this often (and at a third of responseTimeoutSeconds);
# two missed ones make a pod an orphan, well before its lease would expire.
_MAX_HEARTBEAT_EVERY = 10.0
_ORPHANED_AFTER = 2


class ContainerTasks:
    """The CONTAINER system task: one pod per leased attempt."""

    types = frozenset({TaskType.CONTAINER})
    holds_slot = False

    def __init__(
        self,
        plane: Plane,
        pods: Pods,
        *,
        fallback_interval: float = 5.0,
        sweep_interval: float = 15.0,
        keep_pods: int = 0,
        namespaces: tuple[str, ...] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.plane = plane
        self.pods = pods
        self.fallback_interval = fallback_interval  # between two reads of a pod while the watch is down
        self.sweep_interval = sweep_interval
        self.keep_pods = keep_pods
        self.clock = clock
        # The namespaces this operator watches (patterns; none: all): pods elsewhere
        # are another installation's. Those named outright are where to look for
        # pods when the operator may not list them cluster-wide.
        self.patterns = namespaces
        self.namespaces = tuple(n for n in namespaces if not any(c in n for c in "*?["))
        self.watched: set[str] = set()  # "namespace/name" of the pods this process watches
        self.adopted: set[asyncio.Task[None]] = set()
        self.informer = PodInformer(pods, SELECTOR, self.namespaces)
        self.background: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self.background = [asyncio.create_task(self.informer.run()), asyncio.create_task(self._sweep_forever())]

    async def stop(self) -> None:
        """Stop watching; the pods go on, for the next operator to adopt."""
        for task in [*self.adopted, *self.background]:
            task.cancel()

    # -- one leased attempt ------------------------------------------------------

    async def call(self, lease: Lease) -> TaskResult | None:
        try:
            spec = ContainerSpec.model_validate(lease.input.get("container"))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return _result(
                lease.task_id,
                lease.epoch,
                ResultStatus.FAILED_WITH_TERMINAL_ERROR,
                f"container.{where}: {first['msg']}" if where else f"container: {first['msg']}",
            )
        try:
            attempt = await self._attempt(lease, spec)
            owner = await containers.run_resource(self.plane, lease.namespace, lease.execution_id)
        except (OSError, StoreError) as error:
            return _result(lease.task_id, lease.epoch, ResultStatus.FAILED, f"database unavailable: {error}")
        manifest = render_pod(spec, attempt, lease.input, owner)
        name = manifest["metadata"]["name"]
        try:
            pod = await self._create(manifest)
        except KubeError as error:
            # Refused (invalid, forbidden by the namespace's Pod Security admission, a
            # missing ServiceAccount): running it again is refused again.
            status = (
                ResultStatus.FAILED
                if error.status in (0, 429) or error.status >= 500
                else (ResultStatus.FAILED_WITH_TERMINAL_ERROR)
            )
            return _result(lease.task_id, lease.epoch, status, f"pod {name} could not be created: {error.message}")
        return await self.watch(attempt, pod)

    async def _attempt(self, lease: Lease, spec: ContainerSpec) -> Attempt:
        policy = (await dispatch.policies_of(self.plane, lease.namespace, [lease.task_type]))[lease.task_type]
        beat = min(_MAX_HEARTBEAT_EVERY, max(lease.response_timeout / 3, 1.0)) if lease.response_timeout else 10.0
        return Attempt(
            namespace=lease.namespace,
            run_id=lease.execution_id,
            task_id=lease.task_id,
            ref=lease.ref,
            attempt=lease.attempt,
            epoch=lease.epoch,
            schedule_to_start=policy.timeouts.schedule_to_start,
            start_to_close=lease.start_to_close_timeout,
            heartbeat_every=beat,
            non_retryable_exit_codes=frozenset(spec.non_retryable_exit_codes or ()),
            image_pull_timeout=spec.image_pull_timeout_seconds,
        )

    async def _create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Create the pod; a pod of that name already there is this attempt's
        when its epoch is ours (a retried create), else a stale one, replaced."""
        meta = manifest["metadata"]
        try:
            return await self.pods.create(manifest)
        except KubeError as error:
            if error.status != 409:
                raise
        existing = await self.pods.get(meta["namespace"], meta["name"])
        if existing is not None and (existing["metadata"].get("labels") or {}).get(EPOCH) == meta["labels"][EPOCH]:
            return existing
        await self.pods.delete(meta["namespace"], meta["name"], grace_seconds=0)
        for _ in range(30):  # a deleted pod lingers until its kubelet confirms
            if await self.pods.get(meta["namespace"], meta["name"]) is None:
                break
            await asyncio.sleep(1.0)
        return await self.pods.create(manifest)

    async def watch(self, attempt: Attempt, pod: dict[str, Any]) -> TaskResult | None:
        """Watch an attempt's pod until it ends; its result (None when the
        attempt was fenced or its startToClose passed). The pod is gone (or
        kept, see keep_pods) when this returns, unless it was cancelled."""
        name = pod["metadata"]["name"]
        key = f"{attempt.namespace}/{name}"
        self.watched.add(key)
        try:
            with self.informer.cache.waiting(key) as changed:
                sight = _Sight(name, pod, next_read=self.clock() + self.fallback_interval)
                return await self._watch(attempt, sight, _created(pod, self.clock()), changed)
        finally:
            self.watched.discard(key)

    async def _watch(
        self, attempt: Attempt, sight: _Sight, created: float, changed: asyncio.Event
    ) -> TaskResult | None:
        name = sight.name
        pull_since: float | None = None
        next_beat = 0.0
        while True:
            now = self.clock()
            if attempt.start_to_close and now - created >= attempt.start_to_close:
                log.info("CONTAINER pod %s: startToClose passed, deleting it", name, extra=_about(attempt))
                await self._fence(attempt, name)
                return None
            if now >= next_beat:
                if not await self._renew(attempt):
                    log.info(
                        "CONTAINER pod %s: its attempt is no longer current, deleting it", name, extra=_about(attempt)
                    )
                    await self._fence(attempt, name)
                    return None
                next_beat = now + attempt.heartbeat_every
            changed.clear()  # before the look: a change from here on ends the wait below at once
            pod = await self._look(attempt, sight, now)
            if pod is None:
                return _result(
                    attempt.task_id, attempt.epoch, ResultStatus.FAILED, f"pod {name} was deleted before it ended"
                )
            verdict = classify(pod, attempt, now, created, pull_since)
            if verdict.status is not None:
                return await self._end(attempt, name, verdict)
            pull_since = (pull_since or now) if verdict.waiting else None
            # No event may come for a while: wake by the next deadline whatever happens.
            bounds = [next_beat, next_check(pod, attempt, created, pull_since)]
            bounds.append(sight.next_read if sight.reads else None)
            await _until(changed, min(b for b in bounds if b is not None) - self.clock())

    async def _look(self, attempt: Attempt, sight: _Sight, now: float) -> dict[str, Any] | None:
        """The pod as last known: the informer's, while its stream is live and has
        seen the pod (an absent pod it had seen was deleted); else read from the
        API, at most every fallback_interval (the stream is down, or has not yet
        brought the pod just created)."""
        live, cached = self.informer.cache.lookup(f"{attempt.namespace}/{sight.name}")
        sight.reads = not (live and (cached is not None or sight.seen))
        if not sight.reads:
            sight.pod, sight.seen = cached, True
        elif now >= sight.next_read:
            sight.next_read = now + self.fallback_interval
            try:
                sight.pod = await self.pods.get(attempt.namespace, sight.name)
            except KubeError as error:
                log.warning("CONTAINER pod %s: %s", sight.name, error.message, extra=_about(attempt))
        return sight.pod

    async def _end(self, attempt: Attempt, name: str, verdict: Verdict) -> TaskResult:
        """The attempt's result, its log read before the pod goes."""
        assert verdict.status is not None
        lines = await self._log(attempt, name)
        await self._finish(attempt, name)
        result = _result(attempt.task_id, attempt.epoch, verdict.status, verdict.reason, verdict.output)
        return result.model_copy(update={"logs": lines})

    async def _renew(self, attempt: Attempt) -> bool:
        try:
            alive = await dispatch.heartbeat(
                self.plane, attempt.namespace, [Heartbeat(task_id=attempt.task_id, epoch=attempt.epoch)]
            )
        except (OSError, StoreError) as error:
            log.warning("CONTAINER task: cannot renew its lease (%s)", error, extra=_about(attempt))
            return True  # not known to be stale: the next renewal decides
        return attempt.task_id in alive

    async def _fence(self, attempt: Attempt, name: str) -> None:
        """The attempt is over without a result from its pod: keep what it
        logged (a heartbeat's logs are stored even when its lease is gone),
        then delete it."""
        lines = await self._log(attempt, name)
        if lines:
            with contextlib.suppress(OSError, StoreError):
                await dispatch.heartbeat(
                    self.plane,
                    attempt.namespace,
                    [Heartbeat(task_id=attempt.task_id, epoch=attempt.epoch, logs=lines)],
                )
        await self._finish(attempt, name, grace_seconds=0)

    async def _log(self, attempt: Attempt, name: str) -> list[LogLine]:
        try:
            text = await self.pods.log(attempt.namespace, name, CONTAINER)
        except KubeError as error:
            log.warning("CONTAINER pod %s: its log cannot be read: %s", name, error.message, extra=_about(attempt))
            return []
        return [LogLine(at=at, message=message) for at, message in log_lines(text)]

    async def _finish(self, attempt: Attempt, name: str, grace_seconds: int | None = None) -> None:
        """Delete the pod. With keep_pods, a pod that ended by itself stays, and
        the ended pods of its namespace beyond the newest keep_pods are deleted."""
        try:
            pod = await self.pods.get(attempt.namespace, name) if self.keep_pods else None
            if pod is None or not _ended(pod):
                await self.pods.delete(attempt.namespace, name, grace_seconds=grace_seconds)
                return
            ended = [
                p
                for p in await self.pods.list(SELECTOR, attempt.namespace)
                if _ended(p)
                and (
                    p["metadata"]["name"] == name or f"{attempt.namespace}/{p['metadata']['name']}" not in self.watched
                )
            ]
            ended.sort(key=lambda p: str(p["metadata"].get("creationTimestamp", "")), reverse=True)
            for old in ended[self.keep_pods :]:
                await self.pods.delete(attempt.namespace, old["metadata"]["name"])
        except KubeError as error:
            # Left behind for now: the next sweep deletes a pod whose attempt has ended.
            log.warning("CONTAINER pod %s: cannot delete it: %s", name, error.message, extra=_about(attempt))

    # -- the sweep: fence and adopt ------------------------------------------------

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except (OSError, StoreError, KubeError) as error:
                log.warning("CONTAINER pods: the sweep failed (%s); again in %.0f s", error, self.sweep_interval)
            await asyncio.sleep(self.sweep_interval)

    async def sweep(self) -> tuple[int, int]:
        """One pass over the CONTAINER pods nobody here watches: (deleted, adopted)."""
        deleted = adopted = 0
        for pod in await self._all_pods():
            meta = pod["metadata"]
            if f"{meta['namespace']}/{meta['name']}" in self.watched or not self._ours(meta["namespace"]):
                continue
            attempt = Attempt.of_pod(pod)
            if attempt is None:
                continue  # labels altered by hand: not ours to judge
            stale = attempt.heartbeat_every * _ORPHANED_AFTER
            state = await containers.lease_state(self.plane, attempt.namespace, attempt.task_id, attempt.epoch, stale)
            if state == "gone" and self.keep_pods and _ended(pod):
                continue  # kept for debugging: _finish prunes the oldest
            if state == "gone":
                log.info("CONTAINER pod %s: its attempt has ended, deleting it", meta["name"], extra=_about(attempt))
                await self._fence(attempt, meta["name"])
                deleted += 1
            elif state == "orphaned" and await containers.claim(
                self.plane, attempt.namespace, attempt.task_id, attempt.epoch, stale
            ):
                log.info("CONTAINER pod %s: adopted", meta["name"], extra=_about(attempt))
                task = asyncio.create_task(self._adopt(attempt, pod))
                self.adopted.add(task)
                task.add_done_callback(self.adopted.discard)
                adopted += 1
        return deleted, adopted

    def _ours(self, namespace: str) -> bool:
        return not self.patterns or any(fnmatch.fnmatchcase(namespace, p) for p in self.patterns)

    async def _all_pods(self) -> list[dict[str, Any]]:
        """Every CONTAINER pod: the informer's while its streams are live; else
        listed across the cluster, or, where the operator may list pods only in
        the namespaces it watches (the chart's per-namespace Roles), in each of
        those it names."""
        if (cached := self.informer.snapshot()) is not None:
            return cached
        try:
            return await self.pods.list(SELECTOR)
        except KubeError as error:
            if error.status != 403 or not self.namespaces:
                raise
        found: list[dict[str, Any]] = []
        for namespace in self.namespaces:
            found.extend(await self.pods.list(SELECTOR, namespace))
        return found

    async def _adopt(self, attempt: Attempt, pod: dict[str, Any]) -> None:
        result = await self.watch(attempt, pod)
        if result is not None:
            await dispatch.report(self.plane, attempt.namespace, [result])


@dataclass
class _Sight:
    """What an attempt's watcher knows of its pod."""

    name: str
    pod: dict[str, Any] | None  # as last seen; None: it is gone
    next_read: float  # the earliest time to read it from the API again
    seen: bool = False  # the informer has had it: its absence there now means it was deleted
    reads: bool = True  # read from the API (the informer cannot tell), not from the informer


async def _until(changed: asyncio.Event, seconds: float) -> None:
    """Until the pod changes, or for `seconds` (at least a moment: a bound
    just past is not worth a busy loop)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(changed.wait(), timeout=max(seconds, 0.05))


def _result(
    task_id: str, epoch: int, status: ResultStatus, reason: str = "", output: dict[str, Any] | None = None
) -> TaskResult:
    return TaskResult(task_id=task_id, epoch=epoch, status=status, reason=reason, output=output or {})


def _about(attempt: Attempt) -> dict[str, Any]:
    return about(namespace=attempt.namespace, run_id=attempt.run_id, task_id=attempt.task_id, epoch=attempt.epoch)


def _created(pod: dict[str, Any], default: float) -> float:
    stamp = str(pod.get("metadata", {}).get("creationTimestamp") or "")
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def _ended(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
