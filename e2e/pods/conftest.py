"""Fixtures for tests whose pods really run (tests/support/pods.py): the local
control plane with a local node as root, or the cluster at
SLUICEWAY_E2E_KUBECONFIG."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pods import PodCluster, existing_cluster, local_pod_cluster


@pytest.fixture(scope="session")
def pod_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodCluster]:
    home = tmp_path_factory.mktemp("helm")
    existing = os.environ.get("SLUICEWAY_E2E_KUBECONFIG")
    if existing:
        yield existing_cluster(Path(existing), home)
        return
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run the pod tests: they need root for the local node")
        pytest.skip("the local node needs root; or set SLUICEWAY_E2E_KUBECONFIG to a cluster with nodes")
    with local_pod_cluster(home) as cluster:
        yield cluster
