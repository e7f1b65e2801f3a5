"""The pure half of CONTAINER tasks: the pod an attempt runs as, and what a
pod's status means for its attempt. No IO and no clock (`now` is passed in),
so every case is a table in tests/unit/test_container_pods.py.

The pod of an attempt carries everything needed to watch it again after the
operator restarts (its labels and the `sluiceway.dev/attempt` annotation):
adoption reads the pod alone, then asks the database whether its epoch is
still the task's current lease."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sluiceway.model.container import ContainerSpec
from sluiceway.model.execution import ResultStatus

MANAGED_BY = "app.kubernetes.io/managed-by"
COMPONENT = "app.kubernetes.io/component"
COMPONENT_VALUE = "container-task"
RUN_ID = "sluiceway.dev/run-id"
TASK_ID = "sluiceway.dev/task-id"
ATTEMPT = "sluiceway.dev/attempt"
EPOCH = "sluiceway.dev/epoch"
# The annotation holding the attempt's limits, read back on adoption.
LIMITS = "sluiceway.dev/attempt"
# Selects every CONTAINER pod the operator made.
SELECTOR = f"{MANAGED_BY}=sluiceway,{COMPONENT}={COMPONENT_VALUE}"
CONTAINER = "main"
TERMINATION_LOG = "/dev/termination-log"
# Reasons a container waits with that waiting longer will not cure, once the bound has passed.
PULL_ERRORS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
# A kubelet kills the pod this long after startToClose, should the operator be away when it passes.
DEADLINE_SLACK_SECONDS = 30
_MAX_REASON = 900


@dataclass(frozen=True)
class Attempt:
    """One leased attempt of a CONTAINER task, as its pod records it."""

    namespace: str
    run_id: str
    task_id: str
    ref: str
    attempt: int
    epoch: int
    schedule_to_start: int = 0  # seconds a pod may stay unstarted; 0: no bound
    start_to_close: int = 0  # seconds from the lease to the end; 0: no bound
    heartbeat_every: float = 10.0  # how often the lease is renewed while the pod runs
    non_retryable_exit_codes: frozenset[int] = frozenset()
    image_pull_timeout: int = 60

    def limits(self) -> str:
        return json.dumps(
            {
                "ref": self.ref,
                "scheduleToStart": self.schedule_to_start,
                "startToClose": self.start_to_close,
                "heartbeatEvery": self.heartbeat_every,
                "nonRetryableExitCodes": sorted(self.non_retryable_exit_codes),
                "imagePullTimeout": self.image_pull_timeout,
            },
            separators=(",", ":"),
        )

    @classmethod
    def of_pod(cls, pod: dict[str, Any]) -> Attempt | None:
        """The attempt a pod belongs to, from its labels and annotation; None
        when they are not ours or were altered beyond reading."""
        meta = pod.get("metadata") or {}
        labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
        try:
            limits = json.loads(notes.get(LIMITS, "{}"))
            return cls(
                namespace=str(meta["namespace"]),
                run_id=str(labels[RUN_ID]),
                task_id=str(labels[TASK_ID]),
                ref=str(limits.get("ref", "")),
                attempt=int(labels[ATTEMPT]),
                epoch=int(labels[EPOCH]),
                schedule_to_start=int(limits.get("scheduleToStart", 0)),
                start_to_close=int(limits.get("startToClose", 0)),
                heartbeat_every=float(limits.get("heartbeatEvery", 10.0)),
                non_retryable_exit_codes=frozenset(int(c) for c in limits.get("nonRetryableExitCodes", [])),
                image_pull_timeout=int(limits.get("imagePullTimeout", 60)),
            )
        except (KeyError, ValueError, TypeError):
            return None


def pod_name(attempt: Attempt) -> str:
    """`sw-<run>-<ref>-<task>-a<attempt>`: readable in `kubectl get pods`,
    unique per task and attempt (the task id's hash tells two tasks of one
    reference apart, as a dynamic fork's), at most 63 characters."""
    ref = re.sub(r"[^a-z0-9-]+", "-", attempt.ref.lower()).strip("-")[:30].strip("-") or "task"
    task = hashlib.sha256(attempt.task_id.encode()).hexdigest()[:6]
    return f"sw-{attempt.run_id[:8]}-{ref}-{task}-a{attempt.attempt}"


def pod_labels(attempt: Attempt) -> dict[str, str]:
    return {
        MANAGED_BY: "sluiceway",
        COMPONENT: COMPONENT_VALUE,
        RUN_ID: attempt.run_id,
        TASK_ID: attempt.task_id,
        ATTEMPT: str(attempt.attempt),
        EPOCH: str(attempt.epoch),
    }


RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def render_pod(
    spec: ContainerSpec,
    attempt: Attempt,
    task_input: dict[str, Any],
    owner: str | None = None,
) -> dict[str, Any]:
    """The pod of one attempt. `owner`: the name of the WorkflowRun whose uid
    is the run id, when the run has one (the garbage collector then deletes
    the pod with it). The security context is the restricted Pod Security
    profile's, whatever the spec says: the spec has no field to weaken it."""
    meta: dict[str, Any] = {
        "name": pod_name(attempt),
        "namespace": attempt.namespace,
        "labels": pod_labels(attempt),
        "annotations": {LIMITS: attempt.limits()},
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "sluiceway.dev/v1alpha1", "kind": "WorkflowRun", "name": owner, "uid": attempt.run_id}
        ]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": spec.service_account_name,
        "automountServiceAccountToken": spec.automount_service_account_token,
        "enableServiceLinks": False,
        "securityContext": RESTRICTED_POD,
        "terminationGracePeriodSeconds": 10,
        "containers": [_container(spec, attempt, task_input)],
    }
    if attempt.start_to_close:
        pod_spec["activeDeadlineSeconds"] = attempt.start_to_close + DEADLINE_SLACK_SECONDS
    if spec.volumes:
        pod_spec["volumes"] = [_volume(v.to_wire()) for v in spec.volumes]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


def _volume(wire: dict[str, Any]) -> dict[str, Any]:
    if "emptyDir" in wire:
        wire["emptyDir"] = wire["emptyDir"] or {}
    return wire


def _container(spec: ContainerSpec, attempt: Attempt, task_input: dict[str, Any]) -> dict[str, Any]:
    own = {key: value for key, value in task_input.items() if key != "container"}
    env: list[dict[str, Any]] = [
        {"name": "SLUICEWAY_INPUT", "value": json.dumps(own, separators=(",", ":"))},
        {"name": "SLUICEWAY_RUN_ID", "value": attempt.run_id},
        {"name": "SLUICEWAY_TASK_ID", "value": attempt.task_id},
        {"name": "SLUICEWAY_ATTEMPT", "value": str(attempt.attempt)},
    ]
    for var in spec.env or ():
        entry: dict[str, Any] = {"name": var.name}
        if var.value_from is not None:
            entry["valueFrom"] = var.value_from.to_wire()
        else:
            entry["value"] = var.value or ""
        env.append(entry)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image,
        "env": env,
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
        "securityContext": RESTRICTED_CONTAINER,
    }
    optional = {
        "imagePullPolicy": spec.image_pull_policy,
        "command": spec.command,
        "args": spec.args,
        "workingDir": spec.working_dir,
        "resources": spec.resources.to_wire() if spec.resources else None,
        "volumeMounts": [m.to_wire() for m in spec.volume_mounts] if spec.volume_mounts else None,
    }
    container.update({key: value for key, value in optional.items() if value is not None})
    return container


# -- what a pod's status means ----------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What to do about an attempt's pod now. `status` None: it goes on
    (watch again); else the attempt ends with this result, after the pod is
    deleted when `kill` (it still runs or waits)."""

    status: ResultStatus | None = None
    reason: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    kill: bool = False
    waiting: str | None = None  # the container's waiting reason, to time pull errors by


GOES_ON = Verdict()


def classify(
    pod: dict[str, Any], attempt: Attempt, now: float, created: float, pull_failing_since: float | None
) -> Verdict:
    """The verdict on `pod` at `now` (seconds, the caller's clock), created
    at `created`; `pull_failing_since`: when the watcher first saw a pull or
    configuration error it has seen ever since (None: it has not)."""
    status = pod.get("status") or {}
    state = _state(status)
    ended = state.get("terminated")
    if ended is not None:
        return _ended(ended, attempt)
    if status.get("phase") == "Failed":  # evicted, or killed at activeDeadlineSeconds before it started
        return Verdict(ResultStatus.FAILED, _cut(f"pod failed: {status.get('reason', '')} {status.get('message', '')}"))
    waiting = state.get("waiting") or {}
    reason = str(waiting.get("reason", ""))
    if reason in PULL_ERRORS:
        since = now if pull_failing_since is None else pull_failing_since
        if now - since >= attempt.image_pull_timeout:
            return Verdict(
                ResultStatus.FAILED_WITH_TERMINAL_ERROR,
                _cut(f"{reason} for {attempt.image_pull_timeout} s or more: {waiting.get('message', '')}"),
                kill=True,
            )
        return Verdict(waiting=reason)
    if "running" not in state and attempt.schedule_to_start and now - created >= attempt.schedule_to_start:
        return Verdict(
            ResultStatus.FAILED,
            _cut(f"scheduleToStartTimeout: the pod did not start within {attempt.schedule_to_start} s{_why(status)}"),
            kill=True,
        )
    return GOES_ON


def next_check(pod: dict[str, Any], attempt: Attempt, created: float, pull_failing_since: float | None) -> float | None:
    """When the verdict on `pod` may change though the pod does not: the
    earliest of the bounds `classify` and the watcher time (startToClose,
    scheduleToStart while the container has not run, the pull error's bound);
    None: only a change of the pod can change it."""
    bounds = []
    if attempt.start_to_close:
        bounds.append(created + attempt.start_to_close)
    if attempt.schedule_to_start and "running" not in _state(pod.get("status") or {}):
        bounds.append(created + attempt.schedule_to_start)
    if pull_failing_since is not None:
        bounds.append(pull_failing_since + attempt.image_pull_timeout)
    return min(bounds, default=None)


def _state(status: dict[str, Any]) -> dict[str, Any]:
    for container in status.get("containerStatuses") or ():
        if container.get("name") == CONTAINER:
            return dict(container.get("state") or {})
    return {}


def _why(status: dict[str, Any]) -> str:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f" ({condition.get('reason', '')}: {condition.get('message', '')})"
    return ""


def _ended(ended: dict[str, Any], attempt: Attempt) -> Verdict:
    code = int(ended.get("exitCode", -1))
    message = str(ended.get("message") or "")
    if code == 0:
        return _output(message)
    why = str(ended.get("reason") or "Error")
    said = f": {message.strip()}" if message.strip() else ""
    if code in attempt.non_retryable_exit_codes:
        return Verdict(ResultStatus.FAILED_WITH_TERMINAL_ERROR, _cut(f"exit code {code} is non-retryable{said}"))
    if why == "OOMKilled":
        return Verdict(ResultStatus.FAILED, _cut(f"OOMKilled (exit code {code}): over its memory limit"))
    return Verdict(ResultStatus.FAILED, _cut(f"exit code {code} ({why}){said}"))


def _output(message: str) -> Verdict:
    """The task's output: the JSON the container wrote to its termination
    message. Nothing written is an empty output; an object is the output;
    any other JSON value is `{"result": value}`; text that is not JSON fails
    the task terminally (running it again writes the same)."""
    if not message.strip():
        return Verdict(ResultStatus.COMPLETED)
    try:
        value = json.loads(message)
    except ValueError as error:
        return Verdict(
            ResultStatus.FAILED_WITH_TERMINAL_ERROR,
            _cut(f"the output written to {TERMINATION_LOG} is not JSON ({error}): {message[:200]!r}"),
        )
    return Verdict(ResultStatus.COMPLETED, output=value if isinstance(value, dict) else {"result": value})


def _cut(reason: str) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= _MAX_REASON else reason[: _MAX_REASON - 1] + "…"


def log_lines(text: str) -> list[tuple[str | None, str]]:
    """(timestamp, message) of each line of a pod's log read with timestamps."""
    lines: list[tuple[str | None, str]] = []
    for line in text.splitlines():
        stamp, _, rest = line.partition(" ")
        if stamp[:2].isdigit() and "T" in stamp:
            lines.append((stamp, rest))
        else:
            lines.append((None, line))
    return lines
