"""An upgrade from the previous release with runs in flight (docs/upgrades.md),
`make upgrade`: release 0.1.0 is checked out of the project's own history
into a temporary worktree, its image built as the chart's is and loaded on the
local node, its chart installed with two operator replicas; runs start on
worker pods, then `helm upgrade` rolls the current chart and image out while
more runs start. Every run completes, every task exactly once, and no pod of
either version restarts. Figures are printed."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.pods.test_helm_release import (
    EXAMPLES,
    EXAMPLES_NAMESPACE,
    image_values,
    is_ready,
    pods,
    run_phase,
    workflow_run,
)
from sluiceway.devenv.controlplane import REPO_ROOT
from tests.support.pods import CHART, PodCluster
from tests.support.releases import PREVIOUS
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(not os.environ.get("SLUICEWAY_UPGRADE"), reason="the release upgrade runs with `make upgrade`"),
]

NAMESPACE = "sluiceway-upgrade"
RELEASE = "sluiceway"
OPERATOR = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
WORKERS = "sluiceway.dev/task-type=resize_image"


def _previous_release(tmp: Path) -> Path:
    tree = tmp / "release"
    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(tree), PREVIOUS], check=True)
    return tree


def _build_image(tree: Path) -> tuple[Path, str]:
    """The release's image, built by the release's own script (cached by its inputs)."""
    out = subprocess.run(
        ["bash", str(tree / "hack" / "build-image.sh"), "sluiceway"], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    name, archive, reference = out.split()
    return Path(archive), reference


@pytest.fixture(scope="module")
def previous(pod_cluster: PodCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    tree = _previous_release(tmp_path_factory.mktemp("previous"))
    try:
        archive, image = _build_image(tree)
        assert pod_cluster.node is not None, "the upgrade test builds images for the local node"
        pod_cluster.node.import_image(archive)
        yield tree, image
    finally:
        pod_cluster.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", check=False)
        pod_cluster.kube.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(tree)], check=False)


class Watch:
    """Samples the operator and worker pods in the background: every image seen,
    the highest restart count, and the fewest ready operators."""

    def __init__(self, cluster: PodCluster) -> None:
        self.cluster = cluster
        self.images: set[str] = set()
        self.restarts: dict[str, int] = {}
        self.fewest_ready = 1_000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            operators = pods(self.cluster, OPERATOR, NAMESPACE)
            for pod in operators + pods(self.cluster, WORKERS, EXAMPLES_NAMESPACE):
                for status in pod.get("status", {}).get("containerStatuses") or []:
                    self.images.add(status["image"])
                    self.restarts[pod["metadata"]["name"]] = status["restartCount"]
            self.fewest_ready = min(self.fewest_ready, sum(1 for p in operators if is_ready(p)))
            self._stop.wait(0.5)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _album(name: str, images: int) -> dict[str, Any]:
    return workflow_run(
        name, "thumbnails", images=[{"url": f"https://example.com/{n}.jpg", "width": 64} for n in range(images)]
    )


def test_an_upgrade_from_the_previous_release_loses_no_run(pod_cluster: PodCluster, previous: tuple[Path, str]) -> None:
    tree, old_image = previous
    cluster, kube = pod_cluster, pod_cluster.kube
    # CRDs are not upgraded by Helm: the cluster holds the current ones (a superset), as after
    # `kubectl apply -f charts/sluiceway/crds` (docs/upgrades.md), so the old release installs without its own.
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
    cluster.helm(
        "install", RELEASE, str(tree / "charts" / "sluiceway"), "-n", NAMESPACE, "--create-namespace", "--skip-crds",
        "--set", "devPostgres.enabled=true", "--set", "replicas=2", *image_values(old_image), *cluster.chart_values,
        "--wait", "--timeout", "5m",
    )  # fmt: skip
    kube.run("apply", "-f", str(EXAMPLES), "-n", EXAMPLES_NAMESPACE)
    before = [f"before-{n}" for n in range(3)]
    for name in before:
        kube.apply(_album(name, 40), EXAMPLES_NAMESPACE)
    eventually(
        lambda: all(run_phase(kube, n, EXAMPLES_NAMESPACE) == "Running" for n in before),
        timeout=120,
        what="the runs started before the upgrade to be running",
    )
    new_image = cluster.image
    with Watch(cluster) as watch:
        began = time.monotonic()
        upgrading = threading.Thread(
            target=cluster.helm,
            args=(
                "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reset-then-reuse-values",  # as docs/upgrades.md
                *image_values(new_image), "--wait", "--timeout", "10m",
            ),
        )  # fmt: skip
        upgrading.start()
        during = [f"during-{n}" for n in range(3)]
        for name in during:
            kube.apply(_album(name, 20), EXAMPLES_NAMESPACE)
            time.sleep(3)
        upgrading.join()
        upgraded = time.monotonic() - began
        eventually(
            lambda: (
                {c["image"] for p in pods(cluster, OPERATOR, NAMESPACE) for c in p["spec"]["containers"]} == {new_image}
            ),
            timeout=180,
            what="every operator pod to run the new image",
        )
        after = ["after-0"]
        kube.apply(_album("after-0", 10), EXAMPLES_NAMESPACE)
        runs = before + during + after
        eventually(
            lambda: all(run_phase(kube, n, EXAMPLES_NAMESPACE) == "Completed" for n in runs),
            timeout=600,
            interval=2,
            what="every run to complete: " + ", ".join(f"{n}={run_phase(kube, n, EXAMPLES_NAMESPACE)}" for n in runs),
        )
    counts = _task_counts(cluster, runs)
    expected = {**dict.fromkeys(before, 40), **dict.fromkeys(during, 20), "after-0": 10}
    print(
        f"\nupgrade {old_image} -> {new_image}: helm upgrade took {upgraded:.0f}s; runs in flight when it began: "
        f"{len(before)} ({sum(expected[n] for n in before)} tasks), started during it: {len(during)}; "
        f"images seen: {sorted(watch.images)}; restarts: {max(watch.restarts.values(), default=0)}; "
        f"fewest ready operators: {watch.fewest_ready}; completed tasks per run: {counts}"
    )
    assert counts == expected, "every task of every run completed exactly once"
    assert old_image in watch.images and new_image in watch.images, watch.images
    assert max(watch.restarts.values(), default=0) == 0, f"a pod of one version restarted: {watch.restarts}"


def _task_counts(cluster: PodCluster, runs: list[str]) -> dict[str, int]:
    """Completed resize tasks per run, one row per task reference (a task done twice would be two)."""
    kube = cluster.kube
    counts = {}
    for name in runs:
        execution = (kube.get("workflowrun", name, EXAMPLES_NAMESPACE) or {}).get("status", {}).get("executionId")
        query = (
            f"SELECT count(*) FROM tasks WHERE execution_id = '{execution}'"
            " AND name = 'resize_image' AND status = 'COMPLETED'"
        )
        out = kube.run(
            "exec", "-n", NAMESPACE, f"{RELEASE}-dev-postgres-0", "--",
            "psql", "-U", "sluiceway", "-d", "sluiceway", "-AtXq", "-c", query,
        ).stdout  # fmt: skip
        counts[name] = int(out.strip())
    return counts
