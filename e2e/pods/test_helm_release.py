"""The Helm chart installed for real on a cluster whose pods run: the image,
the probes, the development PostgreSQL as a pod found by its Service name, the
examples' workflow completed by worker pods from `spec.workers`, an image
upgrade that loses no task, a drain that respects the PodDisruptionBudget,
graceful shutdown of operator and worker pods, and an uninstall that leaves
only the CRDs.

The tests share one release and run in file order; each sets up the state it
needs (replicas, objects) itself."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sluiceway.devenv.controlplane import REPO_ROOT
from tests.support.kube import Kube
from tests.support.pods import CHART, PodCluster
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NAMESPACE = "sluiceway-e2e"
RELEASE = "sluiceway"  # the full name is then "sluiceway", as in the README
OPERATOR = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
POSTGRES_POD = f"{RELEASE}-dev-postgres-0"
EXAMPLES = REPO_ROOT / "examples"
EXAMPLES_NAMESPACE = "default"  # the examples' RoleBinding names it
LEASE = "sluiceway-operator"
LEASE_SECONDS = 10  # k8s/leadership.py's lease duration
API = "sluiceway.dev/v1beta1"


# --- helpers -------------------------------------------------------------------


def image_values(image: str) -> list[str]:
    repository, tag = image.rsplit(":", 1)
    return ["--set", f"image.repository={repository}", "--set-string", f"image.tag={tag}"]


def upgrade(cluster: PodCluster, *values: str) -> None:
    cluster.helm(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", *values, "--wait", "--timeout", "5m"
    )


def sql(kube: Kube, query: str) -> list[dict[str, Any]]:
    """Rows of a query against the operator's database, run by psql in its pod."""
    wrapped = f"SELECT coalesce(json_agg(t), '[]') FROM ({query}) t"
    out = kube.run(
        "exec",
        "-n",
        NAMESPACE,
        POSTGRES_POD,
        "--",
        "psql",
        "-U",
        "sluiceway",
        "-d",
        "sluiceway",
        "-AtXq",
        "-c",
        wrapped,
    ).stdout
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


def pods(cluster: PodCluster, selector: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = cluster.json("get", "pods", "-n", namespace, "-l", selector)["items"]
    return found


def is_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return "deletionTimestamp" not in pod["metadata"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def ready_operators(cluster: PodCluster) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, OPERATOR) if is_ready(p)]


def holder(kube: Kube) -> str:
    lease = kube.get("lease", LEASE, NAMESPACE) or {}
    found: str = lease.get("spec", {}).get("holderIdentity") or ""
    return found


def run_phase(kube: Kube, name: str, namespace: str) -> str | None:
    run = kube.get("workflowrun", name, namespace) or {}
    phase: str | None = run.get("status", {}).get("phase")
    return phase


def tasks_of(kube: Kube, run: str, namespace: str, task_type: str) -> list[dict[str, Any]]:
    execution = (kube.get("workflowrun", run, namespace) or {}).get("status", {}).get("executionId")
    assert execution, f"WorkflowRun {run} has no execution"
    return sql(
        kube,
        f"SELECT name, status, attempt, interrupt_count, epoch, worker_id FROM tasks "
        f"WHERE execution_id = '{execution}' AND name = '{task_type}' ORDER BY ref",
    )


def workflow_run(name: str, workflow: str, **input: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": workflow, "input": input},
    }


def wait_completed(kube: Kube, name: str, namespace: str, timeout: float = 180) -> None:
    eventually(
        lambda: run_phase(kube, name, namespace) == "Completed",
        timeout=timeout,
        interval=1,
        what=f"WorkflowRun {name} to complete (phase {run_phase(kube, name, namespace)!r})",
    )


class Sampler:
    """Counts ready operator pods in the background; the fewest seen is what a PDB promises about."""

    def __init__(self, cluster: PodCluster) -> None:
        self.cluster, self.fewest, self._stop = cluster, 1_000, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.fewest = min(self.fewest, len(ready_operators(self.cluster)))
            self._stop.wait(0.5)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- the release -----------------------------------------------------------------


@pytest.fixture(scope="module")
def release(pod_cluster: PodCluster) -> Iterator[PodCluster]:
    cluster = pod_cluster
    cluster.helm(
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NAMESPACE,
        "--create-namespace",
        "--set",
        "devPostgres.enabled=true",
        *image_values(cluster.image),
        *cluster.chart_values,
        "--wait",
        "--timeout",
        "5m",
    )
    yield cluster
    # What the tests left (a failed test may leave anything): objects first, while the operator runs.
    cluster.kube.run("delete", "-f", str(EXAMPLES), "-n", EXAMPLES_NAMESPACE, "--ignore-not-found", check=False)
    cluster.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", check=False)
    cluster.kube.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)


# --- install, probes, image -----------------------------------------------------


def test_the_release_becomes_ready_through_the_charts_probes(release: PodCluster) -> None:
    kube = release.kube
    [operator] = ready_operators(release)
    [container] = operator["spec"]["containers"]
    assert container["image"] == release.image
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", "ready means: PostgreSQL answers"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    [status] = operator["status"]["containerStatuses"]
    assert status["restartCount"] == 0, "the operator waited for its PostgreSQL pod instead of crash-looping"
    # /readyz pings PostgreSQL, which the operator found through its Service's name (cluster DNS).
    dsn = json.loads(kube.run("get", "secret", f"{RELEASE}-dev-postgres", "-n", NAMESPACE, "-o", "json").stdout)
    assert dsn["data"]["dsn"], "the chart's generated DSN"
    [postgres] = pods(release, "app.kubernetes.io/component=dev-postgres")
    assert is_ready(postgres), "the development PostgreSQL is ready by its pg_isready probe"
    assert postgres["spec"]["containers"][0]["readinessProbe"]["exec"]["command"][0] == "pg_isready"

    # The image runs as its non-root user on a read-only root filesystem.
    name = operator["metadata"]["name"]
    assert kube.run("exec", "-n", NAMESPACE, name, "--", "id", "-u").stdout.strip() == "65532"
    write = kube.run("exec", "-n", NAMESPACE, name, "--", "python", "-c", "open('/opt/probe', 'w')", check=False)
    assert write.returncode != 0 and "Read-only file system" in write.stderr, write.stderr
    status = release.helm("status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout
    assert json.loads(status)["info"]["status"] == "deployed"


def test_the_examples_complete_on_worker_pods(release: PodCluster) -> None:
    kube = release.kube
    kube.run("apply", "-f", str(EXAMPLES), "-n", EXAMPLES_NAMESPACE)
    eventually(
        lambda: (
            (kube.get("deployment", "resize-image-workers", EXAMPLES_NAMESPACE) or {})
            .get("status", {})
            .get("readyReplicas")
        ),
        timeout=180,
        interval=1,
        what="the resize-image worker pods from spec.workers to be ready",
    )
    wait_completed(kube, "album-2026-11", EXAMPLES_NAMESPACE)

    workers = {p["metadata"]["name"] for p in pods(release, "sluiceway.dev/task-type=resize_image", EXAMPLES_NAMESPACE)}
    done = tasks_of(kube, "album-2026-11", EXAMPLES_NAMESPACE, "resize_image")
    assert len(done) == 5 and {t["status"] for t in done} == {"COMPLETED"}, done
    assert {t["worker_id"] for t in done} <= workers, "every image was resized in a worker pod"


# --- upgrade, drain ----------------------------------------------------------------


def test_an_image_upgrade_rolls_out_without_losing_a_task(release: PodCluster) -> None:
    """200 resize tasks, two at a time (at least 50 s of work): the run spans the rollout of the operator
    and of the worker pods (whose image follows the operator's)."""
    kube = release.kube
    kube.run("apply", "-f", str(EXAMPLES), "-n", EXAMPLES_NAMESPACE)
    images = [{"url": f"https://example.com/{n}.jpg", "width": 64} for n in range(200)]
    kube.apply(workflow_run("album-upgrade", "thumbnails", images=images), EXAMPLES_NAMESPACE)
    eventually(lambda: run_phase(kube, "album-upgrade", EXAMPLES_NAMESPACE) == "Running", what="the run to start")
    before = {p["metadata"]["name"] for p in pods(release, "sluiceway.dev/task-type=resize_image", EXAMPLES_NAMESPACE)}

    upgrade(release, *image_values(release.upgrade_image))

    def images_of(selector: str, namespace: str) -> set[str]:
        """The images of every pod, the terminating ones included."""
        return {p["spec"]["containers"][0]["image"] for p in pods(release, selector, namespace)}

    eventually(
        lambda: images_of(OPERATOR, NAMESPACE) == {release.upgrade_image},
        timeout=120,
        what="the old operator pod to finish terminating",
    )
    eventually(
        lambda: images_of("sluiceway.dev/task-type=resize_image", EXAMPLES_NAMESPACE) == {release.upgrade_image},
        timeout=120,
        what="the worker pods to follow the operator's image",
    )
    wait_completed(kube, "album-upgrade", EXAMPLES_NAMESPACE, timeout=300)

    done = tasks_of(kube, "album-upgrade", EXAMPLES_NAMESPACE, "resize_image")
    assert len(done) == 200, f"{len(done)} resize tasks"
    assert {t["status"] for t in done} == {"COMPLETED"}
    assert {t["attempt"] for t in done} == {1}, "no task failed, timed out or was retried"
    by = {t["worker_id"] for t in done}
    assert by & before and by - before, "the run spanned the rollout: old and new worker pods both worked on it"


def test_a_drain_respects_the_disruption_budget(release: PodCluster) -> None:
    """With two replicas the PodDisruptionBudget (minAvailable 1) lets one go.
    On a single node its replacement cannot be scheduled (the node is cordoned),
    so the second eviction is refused and the drain gives up: the operator never
    drops below one ready replica. With another node, the drain completes."""
    kube = release.kube
    upgrade(release, "--set", "replicas=2")
    pdb = eventually(
        lambda: (
            (p := kube.get("poddisruptionbudget", RELEASE, NAMESPACE))
            and p.get("status", {}).get("disruptionsAllowed") == 1
            and p
        ),
        what="the PodDisruptionBudget to allow one disruption",
    )
    assert pdb["spec"]["minAvailable"] == 1
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in ready_operators(release)}
    assert len(before) == 2
    node = next(iter(before.values()))
    schedulable = [
        n["metadata"]["name"]
        for n in release.json("get", "nodes")["items"]
        if not n["spec"].get("unschedulable") and n["metadata"]["name"] != node
    ]
    try:
        with Sampler(release) as sampler:
            drain = kube.run(
                "drain",
                node,
                f"--pod-selector={OPERATOR}",
                "--delete-emptydir-data",
                "--ignore-daemonsets",
                "--timeout=15s",
                check=False,
            )
        assert sampler.fewest >= 1, "a ready operator at every moment of the drain"
        if schedulable:
            assert drain.returncode == 0, drain.stderr
        else:
            assert drain.returncode != 0, "one node: the second eviction must be refused"
            assert "disruption budget" in drain.stderr, drain.stderr
            still = {p["metadata"]["name"] for p in ready_operators(release)}
            assert len(still) == 1 and still <= set(before), "exactly one replica was evicted"
    finally:
        kube.run("uncordon", node)
    eventually(lambda: len(ready_operators(release)) == 2, timeout=120, what="two ready replicas again")


# --- graceful shutdown ---------------------------------------------------------------


def takeover(kube: Kube, old: str, timeout: float = 60) -> tuple[float, bool]:
    """Seconds until a replica other than `old` holds the Lease, and whether it was seen released."""
    start, released = time.monotonic(), False
    while time.monotonic() - start < timeout:
        current = holder(kube)
        if current == "":
            released = True
        elif current != old:
            return time.monotonic() - start, released
        time.sleep(0.05)
    raise AssertionError(f"no replica took the Lease from {old} within {timeout}s")


def test_a_terminating_leader_hands_over_before_it_exits(release: PodCluster) -> None:
    """SIGTERM (a pod deletion) releases the Lease once the reconcilers have
    stopped, so the other replica leads within seconds; SIGKILL cannot release
    it, and the other replica waits out the lease duration."""
    kube = release.kube
    upgrade(release, "--set", "replicas=2")
    eventually(lambda: len(ready_operators(release)) == 2, timeout=120, what="two ready replicas")
    leader = eventually(lambda: holder(kube), what="a leader")

    kube.run("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
    graceful, released = takeover(kube, leader)
    print(f"\nhandover after SIGTERM: {graceful:.2f} s")
    # The Lease can be released and taken between two samples, so `released`
    # may go unseen; the takeover time is the proof: a Lease that was not
    # released is taken only once it expires, at least LEASE_SECONDS - 2.5 s
    # after the last renewal (every 2 s), as the SIGKILL case below measures.
    print(f"released state observed: {released}")
    assert graceful < LEASE_SECONDS - 2.5, "a released Lease is taken at once, not after it expires"

    if release.node is None:
        return  # SIGKILL needs the node's runtime: containerd answers only on the local node
    eventually(lambda: len(ready_operators(release)) == 2, timeout=120, what="two ready replicas again")
    leader = holder(kube)
    [status] = (kube.get("pod", leader, NAMESPACE) or {})["status"]["containerStatuses"]
    container = status["containerID"].removeprefix("containerd://")
    killed = release.node.ctr("tasks", "kill", "--signal", "SIGKILL", container)
    assert killed.returncode == 0, killed.stderr
    # Gone for good, as a node that died would take it: no restart in place.
    kube.run("delete", "pod", leader, "-n", NAMESPACE, "--grace-period=0", "--force", "--wait=false")
    crashed, released = takeover(kube, leader)
    print(f"handover after SIGKILL: {crashed:.2f} s")
    assert not released, "a killed leader cannot release its Lease"
    assert crashed > LEASE_SECONDS - 2.5, "the other replica waited for the lease to expire (renewed every 2 s)"
    assert graceful < crashed


SLOW_WORKER = """
import asyncio, logging, os
from sluiceway.worker import Worker

logging.basicConfig(level=logging.INFO)
worker = Worker(
    os.environ["SLUICEWAY_URL"],
    os.environ["SLUICEWAY_NAMESPACE"],
    worker_id=os.environ["SLUICEWAY_WORKER_ID"],
    token_file=os.environ["SLUICEWAY_TOKEN_FILE"],
    shutdown_grace=float(os.environ["SHUTDOWN_GRACE"]),
)


@worker.task("slow_step")
async def slow_step(task):
    await asyncio.sleep(float(task.input["seconds"]))
    return {"worker": worker.worker_id}


worker.run_forever()
"""


@pytest.fixture
def slow_workers(release: PodCluster) -> Iterator[tuple[str, Any]]:
    """A namespace with a `slow_step` task type whose worker pods run the SDK
    with a given shutdown grace; returns (namespace, start(grace))."""
    kube = release.kube
    namespace = f"shutdown-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", namespace)

    def start(grace: float) -> None:
        manifests = [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "slow-worker"}},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "slow-worker"},
                "rules": [
                    {
                        "apiGroups": ["sluiceway.dev"],
                        "resources": ["taskdefinitions"],
                        "resourceNames": ["slow_step"],
                        "verbs": ["poll", "update"],
                    }
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "slow-worker"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slow-worker"},
                "subjects": [{"kind": "ServiceAccount", "name": "slow-worker", "namespace": namespace}],
            },
            {
                "apiVersion": API,
                "kind": "TaskDefinition",
                "metadata": {"name": "slow-step"},
                "spec": {
                    "name": "slow_step",
                    "retryCount": 0,  # a lost task fails the run instead of hiding in a retry
                    "startToCloseTimeout": 120,
                    "workers": {
                        "command": ["python", "-c", SLOW_WORKER],
                        "serviceAccountName": "slow-worker",
                        "replicas": 1,
                        "env": [{"name": "SHUTDOWN_GRACE", "value": str(grace)}],
                    },
                },
            },
            {
                "apiVersion": API,
                "kind": "Workflow",
                "metadata": {"name": "slow"},
                "spec": {
                    "tasks": [
                        {
                            "name": "slow_step",
                            "taskReferenceName": "step",
                            "inputParameters": {"seconds": "${workflow.input.seconds}"},
                        }
                    ]
                },
            },
        ]
        kube.apply(yaml.safe_dump_all(manifests), namespace)
        eventually(
            lambda: (
                (kube.get("deployment", "slow-step-workers", namespace) or {}).get("status", {}).get("readyReplicas")
            ),
            timeout=120,
            interval=1,
            what="the slow_step worker pod to be ready",
        )

    yield namespace, start
    kube.delete_sluiceway_objects(namespace)
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)


def leased(kube: Kube, run: str, namespace: str) -> str:
    """The worker pod that holds the run's slow_step task, once one does."""

    def holder() -> str | None:
        if not (kube.get("workflowrun", run, namespace) or {}).get("status", {}).get("executionId"):
            return None  # the operator has not started the run yet
        tasks = tasks_of(kube, run, namespace, "slow_step")
        return tasks[0]["worker_id"] if tasks and tasks[0]["status"] == "IN_PROGRESS" else None

    found: str = eventually(holder, timeout=60, interval=0.5, what="a worker pod to lease the task")
    return found


def gone(kube: Kube, pod: str, namespace: str) -> float:
    """Seconds until the pod has terminated and is deleted."""
    start = time.monotonic()
    eventually(lambda: kube.get("pod", pod, namespace) is None, timeout=90, interval=0.2, what=f"pod {pod} to go")
    return time.monotonic() - start


GRACE_PERIOD = 45  # the worker pods' terminationGracePeriodSeconds (k8s/worker_pods.py)


def test_a_terminated_worker_pod_finishes_its_task_within_the_grace_period(
    release: PodCluster, slow_workers: tuple[str, Any]
) -> None:
    kube = release.kube
    namespace, start = slow_workers
    start(grace=30)
    kube.apply(workflow_run("finish", "slow", seconds=6), namespace)
    pod = leased(kube, "finish", namespace)

    kube.run("delete", "pod", pod, "-n", namespace, "--wait=false")  # SIGTERM
    took = gone(kube, pod, namespace)
    wait_completed(kube, "finish", namespace)
    [task] = tasks_of(kube, "finish", namespace, "slow_step")
    assert task["status"] == "COMPLETED" and task["attempt"] == 1
    assert task["worker_id"] == pod, "the terminating pod finished its own task"
    assert took < GRACE_PERIOD - 10, f"the pod exited by itself after {took:.1f}s, long before SIGKILL"


def test_a_terminated_worker_pod_hands_back_what_it_cannot_finish(
    release: PodCluster, slow_workers: tuple[str, Any]
) -> None:
    kube = release.kube
    namespace, start = slow_workers
    start(grace=1)
    kube.apply(workflow_run("hand-back", "slow", seconds=10), namespace)
    pod = leased(kube, "hand-back", namespace)

    kube.run("delete", "pod", pod, "-n", namespace, "--wait=false")  # SIGTERM
    took = gone(kube, pod, namespace)
    wait_completed(kube, "hand-back", namespace)
    [task] = tasks_of(kube, "hand-back", namespace, "slow_step")
    assert task["status"] == "COMPLETED"
    assert task["worker_id"] != pod, "another pod leased the handed-back task and finished it"
    # Seed 002: the interrupted attempt did start, so it is spent and counted.
    assert task["attempt"] == 2 and task["interrupt_count"] == 1, "the hand-back spent one attempt"
    assert took < GRACE_PERIOD - 10, f"the pod exited by itself after {took:.1f}s, long before SIGKILL"


# --- uninstall (last: it removes the release) ---------------------------------------------


NAMESPACE_DEFAULTS = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


def test_uninstall_leaves_only_the_crds(release: PodCluster) -> None:
    kube = release.kube
    # Sluiceway objects go first, while the operator can still remove its finalizers.
    kube.run("delete", "-f", str(EXAMPLES), "-n", EXAMPLES_NAMESPACE, "--ignore-not-found", "--wait=true")
    kube.run("delete", "workflowrun", "album-upgrade", "-n", EXAMPLES_NAMESPACE, "--ignore-not-found")
    eventually(
        lambda: kube.get("deployment", "resize-image-workers", EXAMPLES_NAMESPACE) is None,
        timeout=60,
        what="the worker Deployment to go with its TaskDefinition",
    )

    release.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait")

    kinds = kube.run("api-resources", "--verbs=list", "--namespaced", "-o", "name").stdout.split()
    kinds = [k for k in kinds if k not in ("events", "events.events.k8s.io")]

    def left() -> list[tuple[str, str]]:
        found = release.json("get", ",".join(kinds), "-n", NAMESPACE)["items"]
        return [
            (o["kind"], o["metadata"]["name"])
            for o in found
            if (o["kind"], o["metadata"]["name"]) not in NAMESPACE_DEFAULTS
        ]

    eventually(lambda: left() == [], timeout=120, interval=1, what=f"an empty namespace (left: {left()})")
    labelled = release.json("get", "clusterroles,clusterrolebindings", "-l", f"app.kubernetes.io/instance={RELEASE}")
    assert labelled["items"] == []
    crds = {c["metadata"]["name"] for c in release.json("get", "crds")["items"]}
    assert {f"{k}.sluiceway.dev" for k in ("taskdefinitions", "workflows", "workflowruns")} <= crds, "CRDs stay"
