"""The pod informer (kubeapi/informers.py) against a real API server: it
follows pods as they are created, changed and deleted, wakes whoever waits
on the one that changed, renews its stream from where it was, and, where it
may not watch, never trusts what it listed. (410 Gone cannot be had on
demand from this API server, whose watch cache serves old versions: the
relist is a unit test, tests/unit/kubeapi.) The control plane has no node, so the pods stay
Pending: only their metadata changes here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from sluiceway.kubeapi.client import KubeClient
from sluiceway.kubeapi.informers import CLUSTER, PodInformer
from sluiceway.kubeapi.pods import Pods
from tests.support.kube import Cluster, Kube
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


async def test_where_the_watch_is_refused_its_namespace_is_never_live_and_its_waiters_are_told(
    cluster: Cluster, kube: Kube, scratch: str, tmp_path: Path
) -> None:
    """An identity that may get and list pods in one namespace, not watch them
    (a chart from before the informer): the cache is listed but never trusted,
    and each refused stream wakes the waiters, which read their pods themselves."""
    if cluster.control_plane is None:
        pytest.skip("writes a token kubeconfig for the local control plane")
    kube.run("create", "serviceaccount", "reader", "-n", scratch)
    kube.run("create", "role", "reader", "-n", scratch, "--verb=get,list", "--resource=pods")
    kube.run("create", "rolebinding", "reader", "-n", scratch, "--role=reader", f"--serviceaccount={scratch}:reader")
    token = kube.run("create", "token", "reader", "-n", scratch).stdout.strip()
    config = cluster.control_plane.write_kubeconfig(tmp_path / "reader.kubeconfig", token=token, user="reader")
    create_pod(kube, scratch, "listed")
    pods = Pods(KubeClient.from_kubeconfig(str(config)))
    informer = PodInformer(pods, f"{LABEL}={scratch}", (scratch,), watch_seconds=5, max_backoff=0.5)
    key = f"{scratch}/listed"
    async with running(informer):
        await eventually_async(lambda: _true(key in informer.cache.pods), what="the namespace's LIST")
        assert informer.scopes == (scratch,), "not allowed to list cluster-wide: the named namespace instead"
        looks = []

        async def look() -> None:
            while True:  # also while a stream is being asked for, until it is refused
                looks.append(informer.cache.lookup(key)[0] or informer.snapshot() is not None)
                await asyncio.sleep(0.001)

        looking = asyncio.create_task(look())
        for _ in range(3):  # each refused stream in turn
            with informer.cache.waiting(key) as told:
                await asyncio.wait_for(told.wait(), 30)
        looking.cancel()
        assert len(looks) > 100 and not any(looks), "listed, never watched: never trusted"


async def _true(value: bool) -> bool:
    return value
