"""Pods through the `v1` API, for CONTAINER tasks: created, read, listed by
label, patched, their logs read, deleted. Plain dicts in the wire shape, in
threads so the event loop never blocks (as kubeapi.apps does for Deployments).

Only these verbs are used, and the chart grants only these: pods create, get,
list, watch, delete; pods/log get."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from sluiceway.kubeapi.client import KubeClient, KubeError, _error

# A pod log longer than this is read from its end: the task's log store keeps
# a bounded amount per task anyway (docs/logs.md).
LOG_LIMIT_BYTES = 1024 * 1024


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
        if namespace is None:
            found = await self._json(self.api.list_pod_for_all_namespaces, label_selector=selector)
        else:
            found = await self._json(self.api.list_namespaced_pod, namespace, label_selector=selector)
        return list(found.get("items") or [])

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
