"""Worker pods: a Deployment per TaskDefinition that sets `spec.workers`.

The Deployment is built by a pure function (`build_worker_deployment`), applied
server-side as `sluiceway-operator`, and owned by the TaskDefinition, so
deleting the definition lets the garbage collector delete the Deployment, its
ReplicaSets and its pods. A timer reports the Deployment's readiness in the
TaskDefinition's `status.workers` and, when `spec.workers.autoscaling` is set,
moves the replica count by the policy in `sluiceway.controls.scaling`.

Settings (passed in from the operator's settings as `WorkerPods`, the memo's
`worker_pods`):

- `SLUICEWAY_WORKER_IMAGE`: the image of `spec.workers` that names none.
- `SLUICEWAY_API_URL`: the API address injected into the pods
  (default `http://sluiceway.sluiceway.svc:8080`).
- `SLUICEWAY_AUTOSCALING_INTERVAL`: seconds between two checks of a worker
  Deployment (status, re-creation, autoscaling); default 5.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from pydantic import ValidationError

from sluiceway.controls.policy import resolve
from sluiceway.controls.scaling import Scale, desired_replicas, window_for
from sluiceway.k8s.reconciling import Context, context_of, every, reconciles
from sluiceway.kubeapi.apps import AppsClient
from sluiceway.kubeapi.client import KubeError
from sluiceway.model import GROUP, VERSION
from sluiceway.model.resources import TASK_DEFINITION
from sluiceway.model.taskdefinition import TaskDefinitionSpec, WorkerPodsSpec
from sluiceway.store import diagnostics

DEFAULT_API_URL = "http://sluiceway.sluiceway.svc:8080"
TOKEN_DIRECTORY = "/var/run/secrets/sluiceway"
TOKEN_FILE = f"{TOKEN_DIRECTORY}/token"
TOKEN_EXPIRATION_SECONDS = 3600
# On SIGTERM `sluiceway worker` gives in-flight tasks its shutdown grace (30 s)
# and then hands back what is left: the kubelet's SIGKILL must come later than
# that (Kubernetes' default of 30 s would race the hand-back).
TERMINATION_GRACE_SECONDS = 45
CONTAINER = "worker"
WORKER_LABEL = "sluiceway-worker"
TASK_TYPE_LABEL = "sluiceway.dev/task-type"
OWNER_UID_LABEL = "sluiceway.dev/task-definition-uid"

AUTOSCALING_INTERVAL = 5.0
INITIAL_DELAY = 2.0
_HISTORY = "sluiceway.dev/worker-scale-history"


class MissingImage(ValueError):
    """spec.workers names no image and the operator has no default."""


# --- pure: what the Deployment looks like -------------------------------------


def deployment_name(td_name: str) -> str:
    return f"{td_name}-workers"


_LABEL_VALUE_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def label_value(text: str) -> str:
    """`text` as a valid label value: at most 63 characters of [A-Za-z0-9_.-],
    starting and ending alphanumeric."""
    return _LABEL_VALUE_CHARS.sub("-", text)[:63].strip("-_.")


def worker_image(spec: WorkerPodsSpec, default_image: str | None) -> str:
    image = spec.image or default_image
    if not image:
        raise MissingImage("spec.workers.image is not set and the operator has no SLUICEWAY_WORKER_IMAGE")
    return image


def selector_labels(td_uid: str) -> dict[str, str]:
    """Immutable and unique: the uid tells apart a definition deleted and created again."""
    return {"app.kubernetes.io/name": WORKER_LABEL, OWNER_UID_LABEL: td_uid}


def _injected_env(namespace: str, task_type: str, spec: WorkerPodsSpec, api_url: str) -> list[dict[str, Any]]:
    return [
        {"name": "SLUICEWAY_URL", "value": api_url},
        {"name": "SLUICEWAY_NAMESPACE", "value": namespace},
        {"name": "SLUICEWAY_TASK_TYPE", "value": task_type},
        {"name": "SLUICEWAY_TOKEN_FILE", "value": TOKEN_FILE},
        {"name": "SLUICEWAY_CONCURRENCY", "value": str(spec.concurrency)},
        {"name": "SLUICEWAY_WORKER_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]


def container_env(namespace: str, task_type: str, spec: WorkerPodsSpec, api_url: str) -> list[dict[str, Any]]:
    """The injected variables, then the user's; a user variable of the same name replaces the injected one."""
    own = [{"name": e.name, "value": e.value} for e in spec.env or ()]
    overridden = {e["name"] for e in own}
    return [e for e in _injected_env(namespace, task_type, spec, api_url) if e["name"] not in overridden] + own


def build_worker_deployment(
    td_name: str,
    td_uid: str,
    namespace: str,
    task_type: str,
    spec: WorkerPodsSpec,
    api_url: str,
    default_image: str | None,
    replicas: int,
) -> dict[str, Any]:
    """The apps/v1 Deployment running `spec`'s worker pods, owned by the TaskDefinition."""
    labels = {
        "app.kubernetes.io/name": WORKER_LABEL,
        "app.kubernetes.io/instance": label_value(td_name),
        "app.kubernetes.io/managed-by": "sluiceway",
        TASK_TYPE_LABEL: label_value(task_type),
    }
    pod_labels = {**labels, **selector_labels(td_uid)}
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": worker_image(spec, default_image),
    }
    if spec.command is not None:
        container["command"] = list(spec.command)
    if spec.args is not None:
        container["args"] = list(spec.args)
    container["env"] = container_env(namespace, task_type, spec, api_url)
    if spec.resources is not None:
        resources = spec.resources.to_wire()
        if resources:
            container["resources"] = resources
    container["volumeMounts"] = [
        {"name": "sluiceway-token", "mountPath": TOKEN_DIRECTORY, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    container["securityContext"] = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(td_name),
            "namespace": namespace,
            "labels": pod_labels,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": TASK_DEFINITION.kind,
                    "name": td_name,
                    "uid": td_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector_labels(td_uid)},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": spec.service_account_name,
                    # Workers speak to Sluiceway's API with the projected token below, never
                    # to the Kubernetes API: no default token for a compromised handler to use.
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "sluiceway-token",
                            "projected": {
                                "sources": [
                                    {
                                        "serviceAccountToken": {
                                            "path": "token",
                                            "expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                                        }
                                    }
                                ]
                            },
                        },
                        {"name": "tmp", "emptyDir": {}},
                    ],
                },
            },
        },
    }


# --- pure: decisions about an existing Deployment -----------------------------


class Ownership(enum.Enum):
    ABSENT = "absent"
    OURS = "ours"
    STALE = "stale"  # owned by an earlier TaskDefinition of the same name: the GC is on it
    FOREIGN = "foreign"  # someone else's Deployment with our name: never taken over


def ownership(deployment: Mapping[str, Any] | None, td_name: str, td_uid: str) -> Ownership:
    if deployment is None:
        return Ownership.ABSENT
    for ref in deployment.get("metadata", {}).get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == TASK_DEFINITION.kind
            and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/")
            and ref.get("name") == td_name
        ):
            return Ownership.OURS if ref.get("uid") == td_uid else Ownership.STALE
    return Ownership.FOREIGN


def current_replicas(deployment: Mapping[str, Any] | None) -> int | None:
    if deployment is None:
        return None
    value = deployment.get("spec", {}).get("replicas")
    return int(value) if value is not None else None


def starting_replicas(spec: WorkerPodsSpec, current: int | None) -> int:
    """The replicas to apply on a spec change: `replicas`, or under autoscaling
    the running count kept inside the new bounds (the timer moves it from there)."""
    scaling = spec.autoscaling
    if scaling is None:
        return spec.replicas
    start = scaling.min_replicas if current is None else current
    return max(scaling.min_replicas, min(start, scaling.max_replicas))


def workers_status(td_name: str, image: str, deployment: Mapping[str, Any]) -> dict[str, Any]:
    """`status.workers` of the TaskDefinition, from the Deployment."""
    status = deployment.get("status") or {}
    return {
        "deployment": deployment_name(td_name),
        "image": image,
        "desiredReplicas": int(deployment.get("spec", {}).get("replicas") or 0),
        "replicas": int(status.get("replicas") or 0),
        "updatedReplicas": int(status.get("updatedReplicas") or 0),
        "readyReplicas": int(status.get("readyReplicas") or 0),
    }


# --- the handlers ---------------------------------------------------------------


@dataclass
class WorkerPods:
    """What the worker-pod handlers need besides the Context, passed to kopf as
    the memo's `worker_pods`: the settings, and one Kubernetes apps client."""

    api_url: str = DEFAULT_API_URL
    default_image: str | None = None
    interval: float = AUTOSCALING_INTERVAL  # seconds between two checks of a Deployment
    _apps: AppsClient | None = field(default=None, repr=False)

    @property
    def window(self) -> int:
        """Evaluations in the autoscaler's stabilization window."""
        return window_for(self.interval)

    def apps(self) -> AppsClient:
        if self._apps is None:
            self._apps = AppsClient.from_environment()
        return self._apps

    def close(self) -> None:
        if self._apps is not None:
            self._apps.close()
            self._apps = None

    async def apply(
        self, name: str, uid: str, namespace: str, parsed: TaskDefinitionSpec, workers: WorkerPodsSpec, replicas: int
    ) -> dict[str, Any]:
        manifest = build_worker_deployment(
            name, uid, namespace, parsed.name or name, workers, self.api_url, self.default_image, replicas
        )
        return await self.apps().apply_deployment(namespace, deployment_name(name), manifest)


def worker_pods_of(memo: kopf.Memo) -> WorkerPods:
    pods: WorkerPods = memo.worker_pods
    return pods


def _parse(spec: Mapping[str, Any]) -> TaskDefinitionSpec | None:
    """The parsed spec; None when invalid (the definition handler reports why)."""
    try:
        return TaskDefinitionSpec.model_validate(dict(spec))
    except ValidationError:
        return None


def _retry(error: KubeError, what: str) -> kopf.TemporaryError:
    return kopf.TemporaryError(f"{what}: {error.status} {error.reason}: {error.message}", delay=10)


async def reconcile_worker_deployment(
    spec: kopf.Spec,
    status: kopf.Status,
    name: str,
    namespace: str,
    uid: str,
    patch: kopf.Patch,
    logger: kopf.Logger,
    memo: kopf.Memo,
    old: Mapping[str, Any] | None = None,
    **_: Any,
) -> None:
    """Apply the Deployment `spec.workers` describes; delete ours when it goes."""
    pods = worker_pods_of(memo)
    target = deployment_name(name)
    parsed = _parse(spec)
    if parsed is None:
        return
    workers = parsed.workers
    had_workers = status.get("workers") is not None or bool(isinstance(old, Mapping) and old.get("workers"))
    if workers is None and not had_workers:
        return  # never had worker pods: nothing to look up
    try:
        existing = await pods.apps().get_deployment(namespace, target)
        owner = ownership(existing, name, uid)
        if workers is None:
            memo.pop(_HISTORY, None)
            if owner is Ownership.OURS:
                await pods.apps().delete_deployment(namespace, target)
                logger.info(f"spec.workers was removed: deleted Deployment {target}")
            if status.get("workers") is not None:
                patch.status["workers"] = None
            return
        if owner is Ownership.FOREIGN:
            raise kopf.PermanentError(f"Deployment {target} exists and is not managed by this TaskDefinition")
        if owner is Ownership.STALE:
            raise kopf.TemporaryError(
                f"Deployment {target} of an earlier TaskDefinition {name} is still being garbage-collected", delay=5
            )
        if workers.autoscaling is None:
            memo.pop(_HISTORY, None)
        image = worker_image(workers, pods.default_image)
        applied = await pods.apply(
            name, uid, namespace, parsed, workers, starting_replicas(workers, current_replicas(existing))
        )
    except MissingImage as error:
        raise kopf.PermanentError(str(error)) from error
    except KubeError as error:
        if error.status in (400, 422):
            raise kopf.PermanentError(f"Deployment {target} refused: {error.message}") from error
        raise _retry(error, f"cannot apply Deployment {target}") from error
    patch.status["workers"] = workers_status(name, image, applied)


async def report_worker_deployment(
    spec: kopf.Spec,
    status: kopf.Status,
    name: str,
    namespace: str,
    uid: str,
    patch: kopf.Patch,
    logger: kopf.Logger,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    """Report the Deployment in `status.workers`, put it back if it was
    deleted behind our back, and autoscale it."""
    pods = worker_pods_of(memo)
    parsed = _parse(spec)
    if parsed is None or parsed.workers is None:
        return
    workers = parsed.workers
    target = deployment_name(name)
    try:
        image = worker_image(workers, pods.default_image)
        deployment = await pods.apps().get_deployment(namespace, target)
        owner = ownership(deployment, name, uid)
        if owner is Ownership.ABSENT:  # deleted behind our back: put it back
            deployment = await pods.apply(name, uid, namespace, parsed, workers, starting_replicas(workers, None))
            logger.info(f"re-created the missing Deployment {target}")
        elif owner is not Ownership.OURS:
            return
        assert deployment is not None
        if workers.autoscaling is not None:
            scale = await _evaluate(
                context_of(memo),
                namespace,
                parsed.name or name,
                parsed,
                workers,
                current_replicas(deployment) or 0,
                memo.get(_HISTORY) or (),
                pods.window,
            )
            memo[_HISTORY] = scale.history
            if scale.replicas != current_replicas(deployment):
                logger.info(
                    f"scaling Deployment {target} from {current_replicas(deployment)} to "
                    f"{scale.replicas} replicas (demand {scale.demand}, gate ceiling "
                    f"{'none' if scale.ceiling is None else scale.ceiling})"
                )
                deployment = await pods.apply(name, uid, namespace, parsed, workers, scale.replicas)
    except MissingImage:
        return  # reported by the reconciler
    except KubeError as error:
        raise _retry(error, f"cannot read or scale Deployment {target}") from error
    report = workers_status(name, image, deployment)
    if status.get("workers") != report:
        patch.status["workers"] = report


async def close_worker_client(memo: kopf.Memo, **_: Any) -> None:
    worker_pods_of(memo).close()


def register_worker_pods(registry: kopf.OperatorRegistry, interval: float = AUTOSCALING_INTERVAL) -> None:
    """Reconcile a worker Deployment for every TaskDefinition with `spec.workers`,
    and check it every `interval` seconds (the memo's `worker_pods.interval`)."""
    reconciles(registry, TASK_DEFINITION, reconcile_worker_deployment)
    every(
        registry,
        TASK_DEFINITION,
        report_worker_deployment,
        interval=interval,
        initial_delay=min(INITIAL_DELAY, interval),
        field="spec.workers",
    )
    kopf.on.cleanup(registry=registry)(close_worker_client)


async def _evaluate(
    context: Context,
    namespace: str,
    task_type: str,
    parsed: TaskDefinitionSpec,
    workers: WorkerPodsSpec,
    current: int,
    history: tuple[int, ...],
    window: int,
) -> Scale:
    """Read the queue and the semaphores, then decide with the pure policy."""
    assert workers.autoscaling is not None
    gates = resolve(parsed).gates
    async with context.pool.acquire() as conn:
        found = await diagnostics.queues(conn, namespace, task_type)
        permits = {s.name: s.permits for s in await diagnostics.semaphores(conn, namespace)} if gates.semaphores else {}
    queue = found[0] if found else diagnostics.Queue(task_type, 0, 0, 0, 0, None)
    return desired_replicas(
        ready=queue.ready,
        in_flight=queue.in_flight,
        delayed=queue.delayed,
        gates=gates,
        min_replicas=workers.autoscaling.min_replicas,
        max_replicas=workers.autoscaling.max_replicas,
        target_tasks_per_replica=workers.target_tasks_per_replica(),
        concurrency=workers.concurrency,
        current_replicas=current,
        history=history,
        window=window,
        semaphore_permits=permits,
    )
