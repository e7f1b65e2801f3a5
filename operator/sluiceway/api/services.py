"""What the API handlers need, built once by the composition root."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fastapi import Request

from sluiceway.api.authenticator import Authenticator
from sluiceway.controls.payloads import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_REQUEST_BYTES
from sluiceway.controls.ratelimits import RateLimits
from sluiceway.kubeapi.client import KubeClient
from sluiceway.kubeapi.secrets import SecretSource
from sluiceway.store.database import Pool
from sluiceway.store.executions import IDEMPOTENCY_WINDOW_SECONDS
from sluiceway.store.logs import DEFAULT_CAP_BYTES
from sluiceway.store.notifications import Notifications
from sluiceway.store.policies import Policies
from sluiceway.store.tenancy import Tenants


@dataclass
class Services:
    pool: Pool
    notifications: Notifications | None = None
    policies: Policies = field(default_factory=Policies)  # the process's one, shared with the decider
    kube: KubeClient | None = None  # the operator's own client; None without Kubernetes
    authenticate: bool = False  # False: local development, writes use the operator's identity
    authenticator: Authenticator | None = None  # identities and access decisions when authenticate is on
    idempotency_window: float = IDEMPOTENCY_WINDOW_SECONDS  # how long a requestId names its run
    log_cap_bytes: int = DEFAULT_CAP_BYTES  # what one task may keep of its log
    secrets: SecretSource | None = None  # the Secrets webhooks verify with; None: no webhook verifies
    tenants: Tenants = field(default_factory=Tenants)  # what each namespace's Quotas allow
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES  # one JSON value; a Quota may lower it
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # one request body
    rate_limits: RateLimits = field(default_factory=RateLimits.off)  # per identity and namespace, in this replica
    # Poller bookkeeping is written at most once per interval per worker and
    # queue: "who polled and when" needs seconds, not every poll.
    poll_record_interval: float = 5.0
    _last_recorded: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.notifications is not None and self.policies not in self.notifications.caches:
            self.notifications.caches.append(self.policies)

    def should_record_poll(self, namespace: str, task_types: list[str], worker_id: str) -> list[str]:
        now = time.monotonic()
        due = []
        for task_type in task_types:
            key = (namespace, task_type, worker_id)
            if now - self._last_recorded.get(key, 0.0) >= self.poll_record_interval:
                self._last_recorded[key] = now
                due.append(task_type)
        if len(self._last_recorded) > 100_000:  # forget long-gone workers
            self._last_recorded.clear()
        return due


def services_of(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def services(request: Request) -> Services:
    """The route dependency: `svc: Services = Depends(services)`."""
    return services_of(request)
