"""CONTAINER tasks with real pods on the local node (or the cluster at
SLUICEWAY_E2E_KUBECONFIG): an operator process on this machine leases each
attempt under its gates, runs it as a pod of the image under test (the
Sluiceway image, which runs as a non-root uid: it passes the restricted
profile's runAsNonRoot), and applies what the pod did.

Runs are started over the API (not as WorkflowRuns), so that another
operator watching the whole cluster (the Helm release of test_helm_release)
never starts them too."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluiceway import __version__
from tests.support.api import call
from tests.support.database import Databases
from tests.support.kube import Kube, _install_crds
from tests.support.operators import OperatorProcess, start_operator
from tests.support.pods import PodCluster
from tests.support.waiting import eventually

EXAMPLE = Path(__file__).parents[2] / "examples" / "17-container.yaml"
THUMBNAIL = {"width": 64, "mode": "fast"}

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

API = "sluiceway.dev/v1beta1"
PODS = "app.kubernetes.io/component=container-task"

# What the steps run: python in the image under test. Each reads its input from
# SLUICEWAY_INPUT and writes its output to the termination message.
GREET = """
import json, os, sys
name = json.loads(os.environ["SLUICEWAY_INPUT"])["name"]
print("hello from stdout,", name)
print("a warning on stderr", file=sys.stderr)
with open("/dev/termination-log", "w") as out:
    json.dump({"greeting": os.environ["GREETING"] + " " + name, "tokenLength": len(os.environ["TOKEN"])}, out)
"""
FLAKY = """
import json, os, sys
attempt = int(os.environ["SLUICEWAY_ATTEMPT"])
print("attempt", attempt)
if attempt == 1:
    sys.exit(1)
open("/dev/termination-log", "w").write(json.dumps({"attempt": attempt}))
"""


def operator_settings(**extra: str) -> dict[str, str]:
    return {
        "SLUICEWAY_NAMESPACES": "ct-*",
        "SLUICEWAY_LEADER_ELECTION": "false",
        "SLUICEWAY_STATUS_INTERVAL": "1",
        "SLUICEWAY_CONTAINER_SWEEP_INTERVAL": "2",
        **extra,
    }


@pytest.fixture(scope="module")
def database(databases: Databases) -> str:
    import asyncio

    return asyncio.run(databases.create("containers"))


@pytest.fixture(scope="module")
def operator(
    pod_cluster: PodCluster, database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    _install_crds(pod_cluster.kube)  # a no-op when the Helm release installed them first
    process = start_operator(
        "container-operator",
        database,
        tmp_path_factory.mktemp("container-operator"),
        kubeconfig=pod_cluster.kube.kubeconfig,
        log_level="DEBUG",
        settings=operator_settings(),
    )
    yield process
    process.stop()


@pytest.fixture
def namespace(pod_cluster: PodCluster, operator: OperatorProcess) -> Iterator[str]:
    name = f"ct-{uuid.uuid4().hex[:8]}"
    kube = pod_cluster.kube
    kube.run("create", "namespace", name)
    # The namespace enforces the restricted Pod Security profile: a pod that did not meet it is refused.
    kube.run("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    yield name
    kube.delete_sluiceway_objects(name)
    kube.run("delete", "namespace", name, "--wait=false", check=False)


def apply(kube: Kube, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    kube.apply({"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}, namespace)
    eventually(
        lambda: (
            (o := kube.get(kind.lower(), name, namespace))
            and o.get("status", {}).get("observedGeneration") == o["metadata"]["generation"]
        ),
        timeout=60,
        what=f"{kind} {name} to be reconciled",
    )


def step(image: str, script: str, **container: Any) -> dict[str, Any]:
    return {"image": image, "imagePullPolicy": "IfNotPresent", "command": ["python", "-c", script], **container}


def container_workflow(kube: Kube, namespace: str, name: str, container: dict[str, Any], **task: Any) -> None:
    spec = {
        "name": name,
        "tasks": [{"name": name, "taskReferenceName": "step", "type": "CONTAINER", "container": container, **task}],
    }
    kube.apply({"apiVersion": API, "kind": "Workflow", "metadata": {"name": name}, "spec": spec}, namespace)
    eventually(
        lambda: (o := kube.get("workflow", name, namespace)) and o.get("status", {}).get("version"),
        timeout=60,
        what=f"Workflow {name}",
    )


def start(operator: OperatorProcess, namespace: str, name: str, input: dict[str, Any] | None = None) -> str:
    status, body = call(
        "POST", f"{operator.api_url}/v1/ns/{namespace}/executions", {"name": name, "input": input or {}}
    )
    assert status == 201, body
    return str(body["id"])


def run_of(operator: OperatorProcess, namespace: str, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}")[1]
    return found


def finished(operator: OperatorProcess, namespace: str, run_id: str, timeout: float = 180) -> dict[str, Any]:
    found: dict[str, Any] = eventually(
        lambda: (v := run_of(operator, namespace, run_id))["status"] not in ("RUNNING", "PAUSED") and v,
        timeout=timeout,
        what=f"run {run_id} to end",
    )
    return found


def pods(kube: Kube, namespace: str, selector: str = PODS) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        kube.run("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
    )["items"]
    return items


def no_pods_left(kube: Kube, namespace: str, run_id: str) -> None:
    eventually(
        lambda: not pods(kube, namespace, f"sluiceway.dev/run-id={run_id}"),
        timeout=60,
        what="the run's pods to be deleted",
    )


def log_messages(operator: OperatorProcess, namespace: str, run_id: str) -> list[str]:
    page = call("GET", f"{operator.api_url}/v1/ns/{namespace}/executions/{run_id}/logs")[1]
    return [line["message"] for line in page["lines"]]


def test_a_step_runs_with_its_input_env_and_secret_and_its_logs_outlive_its_pod(
    pod_cluster: PodCluster, operator: OperatorProcess, namespace: str
) -> None:
    kube = pod_cluster.kube
    kube.run("create", "secret", "generic", "api", "-n", namespace, "--from-literal=token=s3cr3t")
    env = [
        {"name": "GREETING", "value": "${workflow.input.greeting}"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
    ]
    container_workflow(
        kube,
        namespace,
        "greet",
        step(pod_cluster.image, GREET, env=env),
        inputParameters={"name": "${workflow.input.name}"},
    )
    run_id = start(operator, namespace, "greet", {"name": "ada", "greeting": "hello"})
    pod = eventually(lambda: (found := pods(kube, namespace)) and found[0], timeout=60, what="the step's pod")
    labels = pod["metadata"]["labels"]
    assert labels["sluiceway.dev/run-id"] == run_id and labels["sluiceway.dev/attempt"] == "1"
    assert pod["spec"]["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    run = finished(operator, namespace, run_id)
    assert run["status"] == "COMPLETED", run
    assert run["tasks"][0]["output"] == {"greeting": "hello ada", "tokenLength": 6}
    no_pods_left(kube, namespace, run_id)
    messages = log_messages(operator, namespace, run_id)
    assert "hello from stdout, ada" in messages and "a warning on stderr" in messages, messages


def test_the_container_example_runs_as_written(
    pod_cluster: PodCluster, operator: OperatorProcess, namespace: str
) -> None:
    """examples/17-container.yaml, only its image swapped for the image under
    test (the same one on the local node): a thumbnail made, and an empty image
    refused by its non-retryable exit code 3 on the first of three attempts."""
    kube = pod_cluster.kube
    text = EXAMPLE.read_text()
    image = f"ghcr.io/sluiceway/sluiceway:{__version__}"
    assert image in text, "the example names the image `make up NODE=1` puts on the node"
    kube.apply(text.replace(image, pod_cluster.image), namespace)
    eventually(
        lambda: (o := kube.get("workflow", "thumbnail", namespace)) and o.get("status", {}).get("version"),
        timeout=60,
        what="the example's Workflow",
    )
    made = finished(operator, namespace, start(operator, namespace, "thumbnail", {**THUMBNAIL, "image": "cat.png"}))
    assert made["status"] == "COMPLETED", made
    assert made["output"] == {"thumbnail": "cat.png.64.jpg"}
    assert "resizing cat.png to 64 px at quality 85" in log_messages(operator, namespace, made["id"])

    refused = finished(operator, namespace, start(operator, namespace, "thumbnail", {**THUMBNAIL, "image": ""}))
    assert refused["status"] == "FAILED", refused
    assert [t["attempt"] for t in refused["tasks"]] == [1], "exit code 3 is not retried although retryCount is 2"
    assert "exit code 3 is non-retryable" in refused["tasks"][0]["reason"]
    no_pods_left(kube, namespace, refused["id"])


def test_a_non_retryable_exit_code_fails_at_once_and_a_crash_is_retried(
    pod_cluster: PodCluster, operator: OperatorProcess, namespace: str
) -> None:
    kube = pod_cluster.kube
    apply(kube, namespace, "TaskDefinition", "refuse", {"retryCount": 3, "retryDelaySeconds": 1})
    apply(kube, namespace, "TaskDefinition", "flaky", {"retryCount": 2, "retryDelaySeconds": 1})
    refuse = "import sys; print('bad input'); open('/dev/termination-log','w').write('no such sku'); sys.exit(3)"
    container_workflow(kube, namespace, "refuse", step(pod_cluster.image, refuse, nonRetryableExitCodes=[3]))
    container_workflow(kube, namespace, "flaky", step(pod_cluster.image, FLAKY, nonRetryableExitCodes=[3]))

    refused = finished(operator, namespace, start(operator, namespace, "refuse"))
    assert refused["status"] == "FAILED"
    attempts = [t for t in refused["tasks"] if t["referenceName"] == "step"]
    assert len(attempts) == 1, "one attempt: exit code 3 is non-retryable although retryCount is 3"
    assert attempts[0]["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert "exit code 3 is non-retryable: no such sku" in attempts[0]["reason"]

    run_id = start(operator, namespace, "flaky")
    flaky = finished(operator, namespace, run_id)
    assert flaky["status"] == "COMPLETED", flaky
    assert [t["output"] for t in flaky["tasks"] if t["attempt"] == 2] == [{"attempt": 2}]
    statuses = [(t["attempt"], t["status"]) for t in flaky["tasks"] if t["referenceName"] == "step"]
    assert sorted(statuses) == [(1, "FAILED"), (2, "COMPLETED")], statuses
    assert "exit code 1" in next(t["reason"] for t in flaky["tasks"] if t["attempt"] == 1)
    no_pods_left(kube, namespace, run_id)
    assert {"attempt 1", "attempt 2"} <= set(log_messages(operator, namespace, run_id))


def test_start_to_close_deletes_the_pod_and_times_the_attempt_out(
    pod_cluster: PodCluster, operator: OperatorProcess, namespace: str
) -> None:
    kube = pod_cluster.kube
    apply(kube, namespace, "TaskDefinition", "sleeper", {"retryCount": 0, "startToCloseTimeout": 5})
    sleep = "import time; print('going to sleep', flush=True); time.sleep(600)"
    container_workflow(kube, namespace, "sleeper", step(pod_cluster.image, sleep))
    run_id = start(operator, namespace, "sleeper")
    eventually(
        lambda: any(p["status"].get("phase") == "Running" for p in pods(kube, namespace)),
        timeout=60,
        what="the pod to run",
    )
    run = finished(operator, namespace, run_id, timeout=120)
    assert run["status"] == "TIMED_OUT" or run["tasks"][0]["status"] == "TIMED_OUT", run
    no_pods_left(kube, namespace, run_id)
    assert "going to sleep" in log_messages(operator, namespace, run_id), "its log is kept although it was killed"


def test_a_running_step_is_watched_not_polled(
    pod_cluster: PodCluster, operator: OperatorProcess, namespace: str
) -> None:
    """While its pod runs for 30 s, the operator reads it from its informer (one
    WATCH stream of every CONTAINER pod), not with a GET a second: the API server
    answers far fewer GETs of single pods than the step ran seconds, the kubelet's
    own status reads included. Nothing else reads pods by name meanwhile."""
    kube = pod_cluster.kube
    container_workflow(kube, namespace, "nap", step(pod_cluster.image, "import time; time.sleep(30)"))
    before = kube.requests_served("GET", "pods")
    run = finished(operator, namespace, start(operator, namespace, "nap"))
    gets = kube.requests_served("GET", "pods") - before
    assert run["status"] == "COMPLETED", run
    print(f"a step that slept 30 s: {gets} GETs of pods")
    assert gets < 10, f"{gets} GETs of pods while a step slept 30 s: polled, not watched"


def test_a_cap_of_two_holds_with_ten_ready(pod_cluster: PodCluster, operator: OperatorProcess, namespace: str) -> None:
    kube = pod_cluster.kube
    apply(kube, namespace, "TaskDefinition", "capped", {"concurrentExecLimit": 2})
    container_workflow(kube, namespace, "capped", step(pod_cluster.image, "import time; time.sleep(3)"))
    runs = [start(operator, namespace, "capped") for _ in range(10)]
    worst_live = worst_running = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = pods(kube, namespace)
        # A pod whose attempt ended is deleted before its result frees the slot: only
        # pods not being deleted belong to attempts that still hold one.
        live = [p for p in found if not p["metadata"].get("deletionTimestamp")]
        worst_live = max(worst_live, len(live))
        worst_running = max(worst_running, sum(p["status"].get("phase") == "Running" for p in live))
        if all(run_of(operator, namespace, r)["status"] != "RUNNING" for r in runs):
            break
        time.sleep(0.3)
    print(f"cap 2, 10 ready: at most {worst_live} pods alive, {worst_running} running at once")
    assert worst_live <= 2 and worst_running <= 2
    assert worst_running == 2, "the cap is reached, not only respected"
    assert [run_of(operator, namespace, r)["status"] for r in runs] == ["COMPLETED"] * 10


def test_an_operator_restart_mid_attempt_adopts_the_pod_and_applies_its_result(
    pod_cluster: PodCluster, databases: Databases, tmp_path: Path
) -> None:
    """A pair of operators of their own, with a database and namespaces (cr-*)
    of their own: the first is killed while its pod runs, the second adopts it."""
    import asyncio

    database = asyncio.run(databases.create("restart"))
    kube = pod_cluster.kube
    _install_crds(kube)  # when this test runs alone
    namespace = f"cr-{uuid.uuid4().hex[:8]}"
    settings = operator_settings(SLUICEWAY_NAMESPACES="cr-*")
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = start_operator("restart-1", database, tmp_path / "first", kubeconfig=kube.kubeconfig, settings=settings)
    second: OperatorProcess | None = None
    kube.run("create", "namespace", namespace)
    kube.run("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    try:
        # Renewed every 10 s, so orphaned after 20 s without renewal, long before the lease's 40 s run out.
        apply(kube, namespace, "TaskDefinition", "survivor", {"retryCount": 1, "responseTimeoutSeconds": 40})
        script = (
            "import time; print('working', flush=True); time.sleep(12); "
            "open('/dev/termination-log', 'w').write('{\"done\": true}')"
        )
        container_workflow(kube, namespace, "survivor", step(pod_cluster.image, script))
        run_id = start(first, namespace, "survivor")
        eventually(
            lambda: any(p["status"].get("phase") == "Running" for p in pods(kube, namespace)),
            timeout=60,
            what="the pod to run",
        )
        first.kill()  # mid-attempt, without a word
        second = start_operator(
            "restart-2", database, tmp_path / "second", kubeconfig=kube.kubeconfig, log_level="INFO", settings=settings
        )
        run = finished(second, namespace, run_id, timeout=180)
        assert run["status"] == "COMPLETED", run
        steps = [t for t in run["tasks"] if t["referenceName"] == "step"]
        assert [(t["attempt"], t["output"]) for t in steps] == [(1, {"done": True})], "the first attempt's own result"
        assert "adopted" in second.logs(400)
        no_pods_left(kube, namespace, run_id)
        assert "working" in log_messages(second, namespace, run_id)
    finally:
        first.stop()
        if second is not None:
            kube.delete_sluiceway_objects(namespace)  # while an operator can clear the finalizers
            second.stop()
        kube.run("delete", "namespace", namespace, "--wait=false", check=False)
