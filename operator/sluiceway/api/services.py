"""What the API handlers need, built once by the composition root: the
execution plane they call, and what only the HTTP edge uses (who the caller
is and what they may do, the Secrets webhooks verify with, request limits)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from sluiceway.api.authenticator import Authenticator
from sluiceway.controls.payloads import DEFAULT_MAX_REQUEST_BYTES
from sluiceway.controls.ratelimits import RateLimits
from sluiceway.kubeapi.client import KubeClient
from sluiceway.kubeapi.secrets import SecretSource
from sluiceway.plane import Plane
from sluiceway.store.database import Pool


@dataclass
class Services:
    plane: Plane
    kube: KubeClient | None = None  # the operator's own client; None without Kubernetes
    authenticate: bool = False  # False: local development, writes use the operator's identity
    authenticator: Authenticator | None = None  # identities and access decisions when authenticate is on
    secrets: SecretSource | None = None  # the Secrets webhooks verify with; None: no webhook verifies
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # one request body
    rate_limits: RateLimits = field(default_factory=RateLimits.off)  # per identity and namespace, in this replica

    @property
    def pool(self) -> Pool:
        """The plane's pool, for the routes that only read."""
        return self.plane.pool


def services_of(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def services(request: Request) -> Services:
    """The route dependency: `svc: Services = Depends(services)`."""
    return services_of(request)
