"""Calls to the Kubernetes API, run in threads so the event loop never blocks."""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from sluiceway.model import GROUP, VERSION
from sluiceway.model.common import kube_time

log = logging.getLogger(__name__)


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str, causes: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes  # (field, message) of each cause the API server named


def _error(exc: ApiException) -> KubeError:
    import json

    message = exc.reason or ""
    causes: tuple[tuple[str, str], ...] = ()
    try:
        body = json.loads(exc.body or "{}")
        message = body.get("message", message)
        found = (body.get("details") or {}).get("causes") or []
        causes = tuple((str(c.get("field", "")), str(c.get("message", ""))) for c in found if isinstance(c, dict))
    except (ValueError, TypeError, AttributeError):
        pass
    return KubeError(int(exc.status or 0), str(exc.reason or ""), message, causes)


def load_client_configuration() -> kubernetes.client.Configuration:
    """In a pod: the ServiceAccount. Elsewhere: $KUBECONFIG or ~/.kube/config."""
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(client_configuration=configuration)
    return configuration


class KubeConfigError(Exception):
    """No usable credentials: the kubeconfig is missing or unreadable."""


def kubeconfig_namespace(kubeconfig: str | None) -> str | None:
    """The namespace of the kubeconfig's current context, if any: best effort
    (None for no kubeconfig, or an unreadable one)."""
    try:
        _, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # noqa: BLE001 - no kubeconfig, or an unreadable one: the caller falls back
        return None
    namespace = ((active or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


@dataclass
class KubeClient:
    api: kubernetes.client.ApiClient

    @classmethod
    def from_environment(cls) -> KubeClient:
        return cls(kubernetes.client.ApiClient(load_client_configuration()))

    @property
    def server_host(self) -> str:
        """The API server's host name or address: system tasks may not reach it."""
        return urlsplit(str(self.api.configuration.host)).hostname or ""

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None) -> KubeClient:
        """A client for this kubeconfig file; without one, as `from_environment`.
        KubeConfigError when there are no usable credentials."""
        try:
            if not kubeconfig:
                return cls.from_environment()
            configuration = kubernetes.client.Configuration()
            kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
            return cls(kubernetes.client.ApiClient(configuration))
        except (kubernetes.config.ConfigException, OSError) as error:
            raise KubeConfigError(str(error)) from error

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ApiException as exc:
            raise _error(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # no answer at all: status 0
            raise KubeError(0, "Unreachable", f"the Kubernetes API did not answer: {type(exc).__name__}") from exc

    def _custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    async def patch_status(self, plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self._call(
            self._custom().patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            {"status": status},
        )

    async def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self._call(
                self._custom().get_namespaced_custom_object, GROUP, VERSION, namespace, plural, name
            )
            return found
        except KubeError as error:
            if error.status == 404:
                return None
            raise

    async def delete(self, plural: str, namespace: str, name: str) -> bool:
        """Delete one custom object; False when it was already gone."""
        try:
            await self._call(self._custom().delete_namespaced_custom_object, GROUP, VERSION, namespace, plural, name)
        except KubeError as error:
            if error.status == 404:
                return False
            raise
        return True

    def with_token(self, token: str) -> KubeClient:
        """The same cluster, as the holder of `token`: calls are made with the
        caller's authority, not the operator's."""
        configuration = copy.copy(self.api.configuration)
        configuration.cert_file = None
        configuration.key_file = None
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return KubeClient(kubernetes.client.ApiClient(configuration))

    def impersonating(self, user: str, groups: list[str]) -> KubeClient:
        """The operator's credentials acting as `user` (needs the impersonate verb).

        Only the user is impersonated: the client sends one value per header
        name, and Impersonate-Group needs one header per group. RBAC bindings
        naming the ServiceAccount apply; bindings to its groups do not."""
        del groups
        client = kubernetes.client.ApiClient(self.api.configuration)
        client.set_default_header("Impersonate-User", user)
        return KubeClient(client)

    async def apply(
        self, plural: str, namespace: str, name: str, manifest: dict[str, Any], field_manager: str = "sluiceway-api"
    ) -> dict[str, Any]:
        """Server-side apply: exactly these fields, owned by `field_manager`."""
        applied: dict[str, Any] | None = await self._call(
            self._custom().patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            manifest,
            field_manager=field_manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        if applied is None:  # the client does not decode apply responses: read the object back
            applied = await self.get(plural, namespace, name)
        if applied is None:
            raise KubeError(404, "NotFound", f"{plural}/{name} vanished right after it was applied")
        return applied

    async def merge_patch(self, plural: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch of an existing object (404 when there is none)."""
        patched: dict[str, Any] = await self._call(
            self._custom().patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            patch,
            _content_type="application/merge-patch+json",
        )
        return patched

    async def names(self, plural: str, page_size: int = 500) -> list[tuple[str, str]]:
        """(namespace, name) of every object of a kind in every namespace, read
        in pages so a cluster with many WorkflowRuns is never listed in one answer."""
        found: list[tuple[str, str]] = []
        token: str | None = None
        while True:
            extra = {"_continue": token} if token else {}
            page: dict[str, Any] = await self._call(
                self._custom().list_cluster_custom_object, GROUP, VERSION, plural, limit=page_size, **extra
            )
            found.extend((item["metadata"]["namespace"], item["metadata"]["name"]) for item in page.get("items", []))
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return found

    def close(self) -> None:
        self.api.close()


@dataclass(frozen=True)
class CrdVersions:
    storage: str  # the version spec.versions marks storage: what the API server writes now
    stored: tuple[str, ...]  # status.storedVersions: every version an object may still be stored in


class CustomResourceDefinitions:
    """A CRD's versions: which one is written, and which ones objects may still be stored in."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def _api(self) -> kubernetes.client.ApiextensionsV1Api:
        return kubernetes.client.ApiextensionsV1Api(self.client.api)

    async def versions(self, name: str) -> CrdVersions | None:
        try:
            crd = await self.client._call(self._api().read_custom_resource_definition, name)
        except KubeError as error:
            if error.status == 404:
                return None
            raise
        storage = next((v.name for v in crd.spec.versions if v.storage), "")
        return CrdVersions(storage, tuple((crd.status.stored_versions if crd.status else None) or ()))

    async def set_stored_versions(self, name: str, versions: list[str]) -> None:
        await self.client._call(
            self._api().patch_custom_resource_definition_status,
            name,
            {"status": {"storedVersions": versions}},
            _content_type="application/merge-patch+json",
        )


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    duration_seconds: int
    resource_version: str
    transitions: int
    # Kept across writes: a Lease the Helm chart created keeps its release's labels and annotations.
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


def _lease_body(
    name: str, namespace: str, holder: str, duration: int, transitions: int, record: LeaseRecord | None = None
) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record is not None:
        metadata["resourceVersion"] = record.resource_version
        metadata["labels"] = dict(record.labels)
        metadata["annotations"] = dict(record.annotations)
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": transitions,
        },
    }


class Leases:
    """coordination.k8s.io Leases: read, create, and replace with optimistic concurrency."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def _api(self) -> kubernetes.client.CoordinationV1Api:
        return kubernetes.client.CoordinationV1Api(self.client.api)

    async def read(self, namespace: str, name: str) -> LeaseRecord | None:
        try:
            lease = await self.client._call(self._api().read_namespaced_lease, name, namespace)
        except KubeError as error:
            if error.status == 404:
                return None
            raise
        spec = lease.spec
        return LeaseRecord(
            spec.holder_identity or "",
            int(spec.lease_duration_seconds or 0),
            lease.metadata.resource_version,
            int(spec.lease_transitions or 0),
            lease.metadata.labels or {},
            lease.metadata.annotations or {},
        )

    async def create(self, namespace: str, name: str, holder: str, duration: int) -> None:
        await self.client._call(
            self._api().create_namespaced_lease, namespace, _lease_body(name, namespace, holder, duration, 0)
        )

    async def replace(
        self, namespace: str, name: str, holder: str, duration: int, record: LeaseRecord, transitions: int
    ) -> LeaseRecord:
        """Write the lease if nobody changed it since `record` was read (409 otherwise)."""
        body = _lease_body(name, namespace, holder, duration, transitions, record)
        lease = await self.client._call(self._api().replace_namespaced_lease, name, namespace, body)
        return LeaseRecord(
            holder, duration, lease.metadata.resource_version, transitions, record.labels, record.annotations
        )


class Events:
    """Kubernetes Events on the objects the operator reconciles."""

    def __init__(self, client: KubeClient, component: str = "sluiceway") -> None:
        self.client = client
        self.component = component

    async def post(self, involved: dict[str, str], event_type: str, reason: str, message: str) -> None:
        now = kube_time(datetime.datetime.now(datetime.UTC))
        namespace = involved["namespace"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": involved,
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self.client._call(kubernetes.client.CoreV1Api(self.client.api).create_namespaced_event, namespace, body)
