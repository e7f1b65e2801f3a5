"""How an attempt's watcher learns of its pod: from the informer's cache
while its stream is live, reading the pod from the API only when the cache
cannot tell (the stream is down, or has not brought a pod just created), and
then at most every fallback_interval; a pod the cache had and lost was deleted."""

from __future__ import annotations

from typing import Any

from sluiceway.kubeapi.informers import CLUSTER
from sluiceway.systemtasks.container_pods import Attempt
from sluiceway.systemtasks.containers import ContainerTasks, _Sight

ATTEMPT = Attempt(namespace="shop", run_id="r", task_id="t", ref="step", attempt=1, epoch=1)


def pod(phase: str, version: str = "1") -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": "p", "resourceVersion": version}, "status": {"phase": phase}}


class Reads:
    """The API's answer to a GET of the pod, and how often it was asked."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.gets = 0

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.gets += 1
        return self.answer


def tasks(reads: Reads) -> ContainerTasks:
    return ContainerTasks(None, reads, fallback_interval=5.0)  # type: ignore[arg-type]


async def test_a_live_cache_answers_without_a_read() -> None:
    reads = Reads(pod("Pending"))
    containers = tasks(reads)
    containers.informer.cache.replace(CLUSTER, [pod("Running")], "1")
    containers.informer.cache.up(CLUSTER)
    sight = _Sight("p", pod("Pending"), next_read=0.0)
    assert (await containers._look(ATTEMPT, sight, now=100.0) or {})["status"]["phase"] == "Running"
    assert reads.gets == 0 and not sight.reads


async def test_a_pod_the_live_cache_had_and_lost_was_deleted() -> None:
    reads = Reads(pod("Running"))
    containers = tasks(reads)
    cache = containers.informer.cache
    cache.replace(CLUSTER, [pod("Running")], "1")
    cache.up(CLUSTER)
    sight = _Sight("p", pod("Pending"), next_read=0.0)
    await containers._look(ATTEMPT, sight, now=100.0)
    cache.apply(CLUSTER, {"type": "DELETED", "object": pod("Running", "2")})
    assert await containers._look(ATTEMPT, sight, now=101.0) is None
    assert reads.gets == 0


async def test_a_pod_just_created_and_not_yet_in_the_cache_is_read_at_most_every_fallback_interval() -> None:
    reads = Reads(pod("Running"))
    containers = tasks(reads)
    containers.informer.cache.replace(CLUSTER, [], "1")
    containers.informer.cache.up(CLUSTER)
    sight = _Sight("p", pod("Pending"), next_read=105.0)
    assert (await containers._look(ATTEMPT, sight, now=100.0) or {})["status"]["phase"] == "Pending"
    assert reads.gets == 0 and sight.reads, "not yet: the watch should bring it first"
    assert (await containers._look(ATTEMPT, sight, now=105.0) or {})["status"]["phase"] == "Running"
    assert reads.gets == 1 and sight.next_read == 110.0


async def test_while_the_stream_is_down_the_pod_is_read_at_most_every_fallback_interval() -> None:
    reads = Reads(pod("Running"))
    containers = tasks(reads)
    containers.informer.cache.replace(CLUSTER, [pod("Pending")], "1")  # listed, never live
    sight = _Sight("p", pod("Pending"), next_read=0.0)
    for now in (0.0, 1.0, 2.0, 4.9, 5.0, 9.0):
        await containers._look(ATTEMPT, sight, now)
    assert reads.gets == 2, "at 0 and at 5"
    reads.answer = None
    await containers._look(ATTEMPT, sight, 10.0)
    assert sight.pod is None, "a read that finds no pod: it was deleted"
