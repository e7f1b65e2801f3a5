"""Every kopf handler of the operator, registered in one place. The handlers
themselves live with their concern:

- `definitions`: TaskDefinition, Semaphore, Quota (stored in PostgreSQL);
- `workflows`: Workflow (versioned definitions) and WorkflowRun (one run);
- `schedules`: Schedule (fired by every replica's scheduler, outside kopf);
- `status_reports`: periodic, change-only status of what each object governs;
- `worker_pods`: a worker Deployment per TaskDefinition with `spec.workers`.

They read what they need from the memo: `memo.context` (a `Context`) and
`memo.worker_pods` (a `WorkerPods`)."""

from __future__ import annotations

from typing import Any

import kopf

from sluiceway.k8s.definitions import register_definitions
from sluiceway.k8s.schedules import register_schedules
from sluiceway.k8s.status_reports import STATUS_INTERVAL, register_status_reports
from sluiceway.k8s.worker_pods import WorkerPods, register_worker_pods
from sluiceway.k8s.workflows import register_workflows


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # In a pod: the ServiceAccount token. Elsewhere: $KUBECONFIG.
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


def register(
    registry: kopf.OperatorRegistry, *, worker_pods: WorkerPods, status_interval: float = STATUS_INTERVAL
) -> None:
    """Attach every handler to `registry`: status reports every
    `status_interval` seconds, worker Deployments checked every
    `worker_pods.interval` (pass the same `worker_pods` in the memo)."""
    kopf.on.login(registry=registry)(login)
    register_definitions(registry)
    register_workflows(registry, ttl_interval=status_interval)
    register_schedules(registry)
    register_status_reports(registry, status_interval)
    register_worker_pods(registry, worker_pods.interval)
