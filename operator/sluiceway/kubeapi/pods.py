"""Pods through the `v1` API, for CONTAINER tasks: created, read, listed and
watched by label, their logs read, deleted. Plain dicts in the wire shape, in
threads so the event loop never blocks (as kubeapi.apps does for Deployments).

Only these verbs are used, and the chart grants only these: pods create, get,
list, watch, delete; pods/log get."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from sluiceway.kubeapi.client import KubeClient, KubeError, _error

# A pod log longer than this is read from its end: the task's log store keeps
# a bounded amount per task anyway (docs/logs.md).
LOG_LIMIT_BYTES = 1024 * 1024

# Pods in the wire shape (named here: inside Pods, `list` is the method).
PodList = list[dict[str, Any]]


class Pods:
    def __init__(self, kube: KubeClient) -> None:
        self.api = kubernetes.client.CoreV1Api(kube.api)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        def call() -> Any:
            response = fn(*args, _preload_content=False, **kwargs)
            return getattr(response, "data", b"")

        try:
            return await asyncio.to_thread(call)
        except ApiException as exc:
            raise _error(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(0, "Unreachable", f"the Kubernetes API did not answer: {type(exc).__name__}") from exc

    async def _json(self, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raw = await self._call(fn, *args, **kwargs)
        decoded: dict[str, Any] = json.loads(raw) if raw else {}
        return decoded

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        namespace = manifest["metadata"]["namespace"]
        return await self._json(self.api.create_namespaced_pod, namespace, manifest)

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._json(self.api.read_namespaced_pod, name, namespace)
        except KubeError as error:
            if error.status == 404:
                return None
            raise

    async def list(self, selector: str, namespace: str | None = None) -> list[dict[str, Any]]:
        items, _ = await self.list_at(selector, namespace)
        return items

    async def list_at(self, selector: str, namespace: str | None = None) -> tuple[PodList, str]:
        """The pods, and the resourceVersion to watch their changes from."""
        fn, args = self._lister(namespace)
        found = await self._json(fn, *args, label_selector=selector)
        return list(found.get("items") or []), str((found.get("metadata") or {}).get("resourceVersion") or "")

    def _lister(self, namespace: str | None) -> tuple[Any, tuple[str, ...]]:
        if namespace is None:
            return self.api.list_pod_for_all_namespaces, ()
        return self.api.list_namespaced_pod, (namespace,)

    async def watch(
        self,
        selector: str,
        resource_version: str,
        deliver: Callable[[dict[str, Any]], object],
        namespace: str | None = None,
        timeout_seconds: int = 60,
        opened: Callable[[], object] = lambda: None,
    ) -> None:
        """Hand each change after `resource_version` (an event in the wire shape:
        type, object) to `deliver`, on the event loop, until the API server ends
        the stream after `timeout_seconds`; `opened` once the API server has
        accepted it, before any change. KubeError 410 when that version is
        too old to resume from (list again); other KubeErrors when the stream
        broke. The stream runs in a thread of its own: it lives for minutes,
        and would otherwise hold one of the loop's few executor threads."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        # "object": events come as plain dicts, their objects in the wire shape, undecoded.
        watch = kubernetes.watch.Watch(return_type="object")
        cancelled = threading.Event()
        lister, args = self._lister(namespace)

        def accepted(*args: Any, **kwargs: Any) -> Any:
            response = lister(*args, **kwargs)
            if 200 <= int(getattr(response, "status", 200)) <= 299 and not cancelled.is_set():
                loop.call_soon_threadsafe(opened)
            return response

        def settle(error: KubeError | None) -> None:
            if ended.done():
                return
            if error is None:
                ended.set_result(None)
            else:
                ended.set_exception(error)

        def stream() -> None:
            error: KubeError | None = None
            try:
                for event in watch.stream(
                    accepted,
                    *args,
                    label_selector=selector,
                    resource_version=resource_version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=timeout_seconds,
                    # A connection that went silent (no bookmark, no close) is given up on.
                    _request_timeout=(10, timeout_seconds + 30),
                ):
                    if cancelled.is_set():
                        return
                    loop.call_soon_threadsafe(deliver, event)
            except ApiException as exc:
                error = _error(exc)
            except Exception as exc:  # noqa: BLE001 - whatever broke it, the stream must end for its caller
                error = KubeError(0, "Unreachable", f"the pod watch broke: {type(exc).__name__}: {exc}")
            # After every event it delivered (callbacks run in the order they were scheduled);
            # a loop already closed has no one left to tell.
            if not cancelled.is_set():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(settle, error)

        threading.Thread(target=stream, name=f"pod watch {namespace or '(all)'}", daemon=True).start()
        try:
            await ended
        finally:
            cancelled.set()
            watch.stop()  # unblocks the thread's read when cancelled mid-stream

    async def log(self, namespace: str, name: str, container: str) -> str:
        """The container's log (stdout and stderr, interleaved as written),
        each line prefixed with its timestamp; '' when there is none."""
        try:
            raw = await self._call(
                self.api.read_namespaced_pod_log,
                name,
                namespace,
                container=container,
                timestamps=True,
                limit_bytes=LOG_LIMIT_BYTES,
            )
        except KubeError as error:
            if error.status in (400, 404):  # never started, or already gone
                return ""
            raise
        return bytes(raw).decode(errors="replace")

    async def delete(self, namespace: str, name: str, grace_seconds: int | None = None) -> bool:
        """False when it was not there."""
        try:
            await self._call(self.api.delete_namespaced_pod, name, namespace, grace_period_seconds=grace_seconds)
        except KubeError as error:
            if error.status == 404:
                return False
            raise
        return True
