"""Deployments through the `apps/v1` API, as plain dicts, in threads so the
event loop never blocks.

Responses are read raw (`_preload_content=False`) and decoded as JSON: the
operator works with the wire shape (camelCase, the same keys a manifest has),
never with the client's generated models.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from sluiceway.kubeapi.client import KubeError, _error, load_client_configuration

FIELD_MANAGER = "sluiceway-operator"


@dataclass
class AppsClient:
    api: kubernetes.client.ApiClient

    @classmethod
    def from_environment(cls) -> AppsClient:
        return cls(kubernetes.client.ApiClient(load_client_configuration()))

    def _apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.api)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        def call() -> dict[str, Any] | None:
            response = fn(*args, _preload_content=False, **kwargs)
            raw = getattr(response, "data", b"")
            if not raw:
                return None
            decoded: dict[str, Any] = json.loads(raw)
            return decoded

        try:
            return await asyncio.to_thread(call)
        except ApiException as exc:
            raise _error(exc) from exc

    async def get_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self._call(self._apps().read_namespaced_deployment, name, namespace)
        except KubeError as error:
            if error.status == 404:
                return None
            raise

    async def apply_deployment(
        self, namespace: str, name: str, manifest: dict[str, Any], field_manager: str = FIELD_MANAGER
    ) -> dict[str, Any]:
        """Server-side apply: exactly these fields, owned by `field_manager`."""
        applied = await self._call(
            self._apps().patch_namespaced_deployment,
            name,
            namespace,
            manifest,
            field_manager=field_manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        if applied is None:  # no body decoded: read the object back
            applied = await self.get_deployment(namespace, name)
        if applied is None:
            raise KubeError(404, "NotFound", f"deployments/{name} vanished right after it was applied")
        return applied

    async def delete_deployment(self, namespace: str, name: str) -> bool:
        """Delete it and (in the background) its ReplicaSets and pods; False when it was not there."""
        try:
            await self._call(
                self._apps().delete_namespaced_deployment, name, namespace, propagation_policy="Background"
            )
        except KubeError as error:
            if error.status == 404:
                return False
            raise
        return True

    def close(self) -> None:
        self.api.close()
