"""The pure half of CONTAINER tasks: the pod an attempt runs as (its name,
labels, owner and restricted security context) and what a pod's status means
for its attempt (exit codes, OOM, pull errors, scheduleToStart)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sluiceway.model.container import ContainerSpec
from sluiceway.model.execution import ResultStatus
from sluiceway.model.workflow import WorkflowSpec
from sluiceway.systemtasks.container_pods import (
    Attempt,
    classify,
    log_lines,
    next_check,
    pod_name,
    render_pod,
)

RUN = "0f0e0d0c-0000-4000-8000-000000000001"
TASK = "1f0e0d0c-0000-4000-8000-000000000002"
ATTEMPT = Attempt(
    namespace="shop",
    run_id=RUN,
    task_id=TASK,
    ref="Resize_Images",
    attempt=2,
    epoch=7,
    schedule_to_start=30,
    start_to_close=120,
    non_retryable_exit_codes=frozenset({3}),
    image_pull_timeout=60,
)


def spec(**fields: Any) -> ContainerSpec:
    return ContainerSpec.model_validate({"image": "localhost/tools:1", **fields})


def test_the_pod_is_named_from_run_task_and_attempt_and_fits_a_label() -> None:
    name = pod_name(ATTEMPT)
    assert name.startswith("sw-0f0e0d0c-resize-images-") and name.endswith("-a2")
    assert len(name) <= 63
    other_task = pod_name(Attempt(**{**ATTEMPT.__dict__, "task_id": "2f0e0d0c-0000-4000-8000-000000000003"}))
    assert other_task != name, "two tasks of one reference (a dynamic fork's) get two pods"
    long = pod_name(Attempt(**{**ATTEMPT.__dict__, "ref": "x" * 128, "attempt": 100}))
    assert len(long) <= 63


def test_the_pod_meets_the_restricted_profile_whatever_the_spec() -> None:
    pod = render_pod(spec(), ATTEMPT, {"size": 3})
    security = pod["spec"]["securityContext"]
    assert security == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    container = pod["spec"]["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["spec"]["restartPolicy"] == "Never", "one attempt is one pod: retries are the operator's"
    assert pod["spec"]["automountServiceAccountToken"] is False
    for unsafe in ("hostNetwork", "hostPID", "hostIPC", "nodeName"):
        assert unsafe not in pod["spec"]


def test_a_spec_cannot_ask_for_an_unsafe_volume_or_a_privileged_container() -> None:
    with pytest.raises(ValidationError, match="exactly one of configMap"):
        spec(volumes=[{"name": "host", "hostPath": {"path": "/"}}])
    pod = render_pod(spec(securityContext={"privileged": True}, hostNetwork=True), ATTEMPT, {})
    assert "privileged" not in str(pod) and "hostNetwork" not in pod["spec"], "unknown fields are dropped"


def test_labels_owner_and_the_attempts_limits() -> None:
    pod = render_pod(spec(), ATTEMPT, {}, owner="nightly-run")
    meta = pod["metadata"]
    assert meta["labels"] == {
        "app.kubernetes.io/managed-by": "sluiceway",
        "app.kubernetes.io/component": "container-task",
        "sluiceway.dev/run-id": RUN,
        "sluiceway.dev/task-id": TASK,
        "sluiceway.dev/attempt": "2",
        "sluiceway.dev/epoch": "7",
    }
    assert meta["ownerReferences"] == [
        {"apiVersion": "sluiceway.dev/v1alpha1", "kind": "WorkflowRun", "name": "nightly-run", "uid": RUN}
    ]
    assert "ownerReferences" not in render_pod(spec(), ATTEMPT, {})["metadata"], "a run started over the API"
    assert Attempt.of_pod(pod) == ATTEMPT, "adoption reads the attempt back from the pod alone"
    assert pod["spec"]["activeDeadlineSeconds"] == 150, "the kubelet's backstop past startToClose"


def test_the_container_gets_its_input_env_volumes_and_the_termination_log() -> None:
    pod = render_pod(
        spec(
            command=["python", "-c"],
            args=["print(1)"],
            workingDir="/work",
            resources={"limits": {"memory": "64Mi"}},
            env=[
                {"name": "MODE", "value": "fast"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
                {"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "region"}}},
            ],
            volumes=[
                {"name": "scratch", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
            ],
            volumeMounts=[{"name": "scratch", "mountPath": "/tmp"}],
        ),
        ATTEMPT,
        {"size": 3, "container": {"image": "ignored"}},
    )
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["SLUICEWAY_INPUT"]["value"] == '{"size":3}', "the input, without the spec"
    assert env["SLUICEWAY_ATTEMPT"]["value"] == "2"
    assert env["MODE"]["value"] == "fast"
    assert env["TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "api", "key": "token", "optional": False}}
    assert env["REGION"]["valueFrom"]["configMapKeyRef"]["key"] == "region"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["workingDir"] == "/work"
    assert container["resources"] == {"limits": {"memory": "64Mi"}}
    assert pod["spec"]["volumes"][0] == {"name": "scratch", "emptyDir": {}}
    assert container["volumeMounts"] == [{"name": "scratch", "mountPath": "/tmp", "readOnly": False}]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"env": [{"name": "A", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}, "exclude"),
        ({"env": [{"name": "A", "valueFrom": {}}]}, "exactly one of secretKeyRef"),
        ({"env": [{"name": "SLUICEWAY_INPUT", "value": "x"}]}, "set by the operator"),
        ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "env: A listed more than once"),
        ({"volumeMounts": [{"name": "nope", "mountPath": "/x"}]}, r"volumeMounts\[0\].name"),
        ({"nonRetryableExitCodes": [0]}, "greater than or equal to 1"),
        ({"imagePullTimeoutSeconds": -1}, "greater than or equal to 0"),
        ({"workingDir": "relative"}, "pattern"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        spec(**fields)


def test_a_container_task_needs_its_container() -> None:
    task = {"name": "resize", "taskReferenceName": "resize", "type": "CONTAINER"}
    with pytest.raises(ValidationError, match="a CONTAINER task needs container"):
        WorkflowSpec.model_validate({"tasks": [task]})
    WorkflowSpec.model_validate({"tasks": [{**task, "container": {"image": "x"}}]})


# -- the verdict on a pod ------------------------------------------------------------


def terminated(code: int, reason: str = "Error", message: str = "") -> dict[str, Any]:
    state = {"terminated": {"exitCode": code, "reason": reason, "message": message}}
    phase = "Succeeded" if code == 0 else "Failed"
    return {"status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]}}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    state = {"waiting": {"reason": reason, "message": message}}
    return {"status": {"phase": "Pending", "containerStatuses": [{"name": "main", "state": state}]}}


RUNNING = {"status": {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]}}
UNSCHEDULABLE = {
    "status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes: cpu"}
        ],
    }
}


@pytest.mark.parametrize(
    ("pod", "status", "output", "reason"),
    [
        (terminated(0, "Completed", '{"width": 640}'), ResultStatus.COMPLETED, {"width": 640}, ""),
        (terminated(0, "Completed", ""), ResultStatus.COMPLETED, {}, ""),
        (terminated(0, "Completed", "[1, 2]"), ResultStatus.COMPLETED, {"result": [1, 2]}, ""),
        (terminated(0, "Completed", "done!"), ResultStatus.FAILED_WITH_TERMINAL_ERROR, {}, "is not JSON"),
        (
            terminated(3, message="bad input"),
            ResultStatus.FAILED_WITH_TERMINAL_ERROR,
            {},
            "exit code 3 is non-retryable: bad input",
        ),
        (terminated(1), ResultStatus.FAILED, {}, "exit code 1 (Error)"),
        (terminated(137, "OOMKilled"), ResultStatus.FAILED, {}, "OOMKilled (exit code 137)"),
        ({"status": {"phase": "Failed", "reason": "Evicted", "message": "disk"}}, ResultStatus.FAILED, {}, "Evicted"),
    ],
)
def test_how_a_pod_ended_classifies_its_attempt(
    pod: dict[str, Any], status: ResultStatus, output: dict[str, Any], reason: str
) -> None:
    verdict = classify(pod, ATTEMPT, now=1000, created=990, pull_failing_since=None)
    assert verdict.status is status
    assert verdict.output == output
    assert reason in verdict.reason
    assert not verdict.kill, "an ended pod needs no kill"


def test_a_running_pod_goes_on_past_schedule_to_start() -> None:
    assert classify(RUNNING, ATTEMPT, now=1000, created=0, pull_failing_since=None).status is None


def test_a_pod_not_started_in_schedule_to_start_is_killed_and_retried() -> None:
    assert classify(UNSCHEDULABLE, ATTEMPT, now=1029, created=1000, pull_failing_since=None).status is None
    verdict = classify(UNSCHEDULABLE, ATTEMPT, now=1030, created=1000, pull_failing_since=None)
    assert verdict.status is ResultStatus.FAILED and verdict.kill
    assert "scheduleToStartTimeout" in verdict.reason and "Unschedulable: 0/1 nodes: cpu" in verdict.reason


def test_pull_errors_turn_terminal_after_the_bound() -> None:
    pod = waiting("ImagePullBackOff", "network is unreachable")
    first = classify(pod, ATTEMPT, now=1000, created=1000, pull_failing_since=None)
    assert first.status is None and first.waiting == "ImagePullBackOff"
    assert classify(pod, ATTEMPT, now=1059, created=1000, pull_failing_since=1000).status is None
    verdict = classify(pod, ATTEMPT, now=1060, created=1000, pull_failing_since=1000)
    assert verdict.status is ResultStatus.FAILED_WITH_TERMINAL_ERROR and verdict.kill
    assert "ImagePullBackOff" in verdict.reason and "network is unreachable" in verdict.reason
    no_bound = Attempt(**{**ATTEMPT.__dict__, "image_pull_timeout": 0})
    assert classify(waiting("ErrImagePull"), no_bound, now=1, created=1, pull_failing_since=None).kill


def test_a_pulling_image_counts_against_schedule_to_start() -> None:
    pod = waiting("ContainerCreating")
    assert classify(pod, ATTEMPT, now=1031, created=1000, pull_failing_since=None).kill


@pytest.mark.parametrize(
    ("pod", "pull_since", "due"),
    [
        (UNSCHEDULABLE, None, 1030),  # scheduleToStart
        (waiting("ContainerCreating"), None, 1030),
        (RUNNING, None, 1120),  # started: only startToClose
        (waiting("ImagePullBackOff"), 1010.0, 1030),  # the earlier of scheduleToStart and the pull bound
    ],
)
def test_the_watcher_wakes_no_later_than_a_verdict_that_time_alone_changes(
    pod: dict[str, Any], pull_since: float | None, due: float
) -> None:
    """No event may come while a pod waits: the watcher sleeps until next_check,
    so classify must not act before it (nor the watcher's startToClose)."""
    assert next_check(pod, ATTEMPT, created=1000, pull_failing_since=pull_since) == due
    acts = next(t for t in range(1000, 1200) if classify(pod, ATTEMPT, t, 1000, pull_since).status or t >= 1120)
    assert due <= acts


def test_a_pull_error_wakes_the_watcher_at_its_bound() -> None:
    unbounded = Attempt(**{**ATTEMPT.__dict__, "schedule_to_start": 0, "start_to_close": 0})
    pod = waiting("ErrImagePull")
    assert next_check(pod, unbounded, created=1000, pull_failing_since=1005.0) == 1065
    assert classify(pod, unbounded, 1065, 1000, 1005.0).kill
    assert next_check(RUNNING, unbounded, created=1000, pull_failing_since=None) is None, "only a change can end it"


def test_log_lines_keep_their_timestamps() -> None:
    text = '2026-12-02T18:00:00.1Z hello world\n2026-12-02T18:00:01Z {"a": 1}\nno stamp\n'
    assert log_lines(text) == [
        ("2026-12-02T18:00:00.1Z", "hello world"),
        ("2026-12-02T18:00:01Z", '{"a": 1}'),
        (None, "no stamp"),
    ]
