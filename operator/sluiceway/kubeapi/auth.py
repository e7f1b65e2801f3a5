"""The Kubernetes calls behind the API's authentication and authorization:
TokenReview, SubjectAccessReview, and listing the API-key Secrets. All made
with the operator's own credentials, in threads.

Nothing here logs a token or a key."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import kubernetes

from sluiceway.kubeapi.client import KubeClient

API_KEY_LABEL = "sluiceway.dev/api-key"
SERVICE_ACCOUNT_ANNOTATION = "sluiceway.dev/service-account"
# Where a pod finds its own namespace.
IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class ReviewedToken:
    """A TokenReview's answer. `authenticated` False: the token is not valid."""

    authenticated: bool
    user: str = ""
    groups: tuple[str, ...] = ()
    uid: str = ""
    error: str = ""


@dataclass(frozen=True)
class KeySecret:
    """One API-key Secret as listed: its name, the `key` bytes, the
    ServiceAccount annotation. Raw material, parsed by the API layer."""

    name: str
    key: bytes | None
    service_account: str | None


async def review_token(kube: KubeClient, token: str) -> ReviewedToken:
    """authentication.k8s.io/v1 TokenReview. Raises KubeError when the API
    server does not answer (that is not a verdict on the token)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    api = kubernetes.client.AuthenticationV1Api(kube.api)
    review = await kube._call(api.create_token_review, body)
    status = review.status
    if status is None or not status.authenticated or status.user is None:
        return ReviewedToken(False, error=str(getattr(status, "error", "") or ""))
    user = status.user
    return ReviewedToken(True, user=str(user.username or ""), groups=tuple(user.groups or ()), uid=str(user.uid or ""))


async def review_access(
    kube: KubeClient,
    user: str,
    groups: tuple[str, ...],
    *,
    group: str,
    resource: str,
    verb: str,
    namespace: str,
    name: str | None,
) -> bool:
    """authorization.k8s.io/v1 SubjectAccessReview: may `user` (with `groups`)
    do `verb` on `resource` (named `name`) in `namespace`? Raises KubeError when
    the API server does not answer."""
    attributes: dict[str, str] = {"group": group, "resource": resource, "verb": verb, "namespace": namespace}
    if name:
        attributes["name"] = name
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": list(groups), "resourceAttributes": attributes},
    }
    api = kubernetes.client.AuthorizationV1Api(kube.api)
    review = await kube._call(api.create_subject_access_review, body)
    status = review.status
    return bool(status is not None and status.allowed and not status.denied)


async def list_key_secrets(kube: KubeClient, namespace: str) -> list[KeySecret]:
    """Every Secret in `namespace` labelled `sluiceway.dev/api-key: "true"`."""
    api = kubernetes.client.CoreV1Api(kube.api)
    listed = await kube._call(api.list_namespaced_secret, namespace, label_selector=f"{API_KEY_LABEL}=true")
    found = []
    for item in listed.items or ():
        meta = item.metadata
        raw = (item.data or {}).get("key")
        key: bytes | None = None
        if raw:
            try:
                key = base64.b64decode(raw, validate=True)
            except ValueError:
                key = None
        found.append(
            KeySecret(
                name=str(meta.name),
                key=key,
                service_account=(meta.annotations or {}).get(SERVICE_ACCOUNT_ANNOTATION),
            )
        )
    return found


def own_namespace() -> str | None:
    """The namespace this pod runs in, when it runs in one."""
    try:
        return IN_CLUSTER_NAMESPACE_FILE.read_text().strip() or None
    except OSError:
        return None
