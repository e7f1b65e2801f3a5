"""Secrets the operator reads for tasks and webhooks: one key of a Secret in
the task's namespace, only when the Secret is labelled
`sluiceway.dev/secret: "true"` (a Workflow author who may not read Secrets
cannot have the operator read one for them), cached for a few seconds so a
burst of calls makes one request. Values are never logged."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from typing import Protocol

import kubernetes

from sluiceway.kubeapi.client import KubeClient, KubeError
from sluiceway.model.common import SECRET_LABEL, SecretKeyRef

CACHE_SECONDS = 10.0
MISSING_CACHE_SECONDS = 2.0


class SecretUnavailable(Exception):
    """The value cannot be had; the message says why, naming the Secret, never its content."""


class SecretSource(Protocol):
    async def value(self, namespace: str, ref: SecretKeyRef) -> bytes:
        """The key's bytes; SecretUnavailable otherwise."""
        ...


class KubeSecrets:
    """Reads Secrets through the Kubernetes API, by name, with the operator's credentials."""

    def __init__(self, kube: KubeClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.clock = clock
        self._cache: dict[tuple[str, str], tuple[float, Mapping[str, bytes] | str]] = {}

    async def value(self, namespace: str, ref: SecretKeyRef) -> bytes:
        found = await self._data(namespace, ref.name)
        if isinstance(found, str):
            raise SecretUnavailable(found)
        if ref.key not in found:
            raise SecretUnavailable(f"Secret {namespace}/{ref.name} has no key {ref.key!r}")
        return found[ref.key]

    async def _data(self, namespace: str, name: str) -> Mapping[str, bytes] | str:
        now = self.clock()
        cached = self._cache.get((namespace, name))
        if cached is not None and now < cached[0]:
            return cached[1]
        api = kubernetes.client.CoreV1Api(self.kube.api)
        try:
            secret = await self.kube._call(api.read_namespaced_secret, name, namespace)
        except KubeError as error:
            if error.status == 404:
                return self._keep(namespace, name, f"Secret {namespace}/{name} does not exist", now)
            raise SecretUnavailable(f"Secret {namespace}/{name} cannot be read: {error.message}") from error
        labels = secret.metadata.labels or {}
        if labels.get(SECRET_LABEL) != "true":
            return self._keep(namespace, name, f"Secret {namespace}/{name} is not labelled {SECRET_LABEL}=true", now)
        data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
        self._cache[(namespace, name)] = (now + CACHE_SECONDS, data)
        return data

    def _keep(self, namespace: str, name: str, problem: str, now: float) -> str:
        self._cache[(namespace, name)] = (now + MISSING_CACHE_SECONDS, problem)
        return problem


class StaticSecrets:
    """Secrets held in memory, for a process without Kubernetes (tests, local runs)."""

    def __init__(self, secrets: Mapping[tuple[str, str], Mapping[str, bytes]] | None = None) -> None:
        self.secrets = dict(secrets or {})

    async def value(self, namespace: str, ref: SecretKeyRef) -> bytes:
        data = self.secrets.get((namespace, ref.name))
        if data is None:
            raise SecretUnavailable(f"Secret {namespace}/{ref.name} does not exist")
        if ref.key not in data:
            raise SecretUnavailable(f"Secret {namespace}/{ref.name} has no key {ref.key!r}")
        return data[ref.key]
