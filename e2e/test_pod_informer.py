"""The pod informer (kubeapi/informers.py) against a real API server: it
follows pods as they are created, changed and deleted, wakes whoever waits
on the one that changed, and lists again when the resourceVersion it would
resume from is gone (410). The control plane has no node, so the pods stay
Pending: only their metadata changes here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from sluiceway.kubeapi.client import KubeClient
from sluiceway.kubeapi.informers import CLUSTER, PodInformer
from sluiceway.kubeapi.pods import Pods
from tests.support.kube import Kube
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.e2e

LABEL = "sluiceway.dev/informer-test"


@pytest.fixture
def scratch(kube: Kube) -> Iterator[str]:
    name = f"inf-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "namespace", name, "--wait=false", check=False)


def create_pod(kube: Kube, namespace: str, name: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {LABEL: namespace}},
        "spec": {"containers": [{"name": "main", "image": "localhost/never-pulled:1"}]},
    }
    kube.run("create", "-n", namespace, "-f", "-", input=json.dumps(pod))


@contextlib.asynccontextmanager
async def running(informer: PodInformer) -> AsyncIterator[PodInformer]:
    task = asyncio.create_task(informer.run())
    try:
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def informer_of(kube: Kube, namespace: str) -> PodInformer:
    return PodInformer(Pods(KubeClient.from_kubeconfig(str(kube.kubeconfig))), f"{LABEL}={namespace}", watch_seconds=5)


async def test_it_follows_created_changed_and_deleted_pods_and_wakes_their_waiter(kube: Kube, scratch: str) -> None:
    create_pod(kube, scratch, "listed")
    async with running(informer_of(kube, scratch)) as informer:
        cache = informer.cache
        await eventually_async(
            lambda: _true(f"{scratch}/listed" in cache.pods and CLUSTER in cache.live), what="a LIST"
        )
        with cache.waiting(f"{scratch}/watched") as changed:
            create_pod(kube, scratch, "watched")
            await asyncio.wait_for(changed.wait(), 30)
            assert cache.lookup(f"{scratch}/watched")[1] is not None
            changed.clear()
            await asyncio.to_thread(kube.run, "annotate", "pod", "watched", "-n", scratch, "seen=yes")
            await asyncio.wait_for(changed.wait(), 30)
            assert (cache.lookup(f"{scratch}/watched")[1] or {})["metadata"]["annotations"]["seen"] == "yes"
            changed.clear()
            # Never scheduled, so deleted at once: the DELETED event takes it out of the cache.
            await asyncio.to_thread(kube.run, "delete", "pod", "watched", "-n", scratch, "--wait=false")
            await asyncio.wait_for(changed.wait(), 30)
            assert cache.lookup(f"{scratch}/watched") == (True, None)
        # Past its watch_seconds the stream is renewed from its version, missing nothing.
        await asyncio.sleep(6)
        create_pod(kube, scratch, "later")
        await eventually_async(lambda: _true(f"{scratch}/later" in cache.pods), what="a pod after a renewal")


async def test_a_version_too_old_to_resume_from_is_listed_again(kube: Kube, scratch: str) -> None:
    create_pod(kube, scratch, "real")
    informer = informer_of(kube, scratch)
    phantom = {"metadata": {"namespace": scratch, "name": "phantom", "resourceVersion": "1"}}
    informer.cache.replace(CLUSTER, [phantom], "1")  # as if listed long ago: compacted since
    async with running(informer):
        await eventually_async(
            lambda: _true(f"{scratch}/real" in informer.cache.pods and CLUSTER in informer.cache.live),
            what="a LIST after 410 Gone",
        )
        assert f"{scratch}/phantom" not in informer.cache.pods, "the relist replaced what was cached"
        assert informer.cache.versions[CLUSTER] != "1"


async def _true(value: bool) -> bool:
    return value
