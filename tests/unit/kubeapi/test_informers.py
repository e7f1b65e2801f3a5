"""The pod informer: what each LIST and WATCH event does to its cache, the
resourceVersion it resumes from, which waiter each change wakes, when a
scope's pods may be trusted; and its loop (relist on 410 Gone, back off on
other errors, per named namespace where listing cluster-wide is forbidden)
against a scripted stream instead of an API server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from sluiceway.kubeapi.client import KubeError
from sluiceway.kubeapi.informers import CLUSTER, PodCache, PodInformer, backoff


def pod(namespace: str, name: str, version: str, phase: str = "Pending") -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": version},
        "status": {"phase": phase},
    }


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def test_added_modified_and_deleted_keep_the_cache_and_the_version_to_resume_from() -> None:
    cache = PodCache()
    cache.replace(CLUSTER, [], "10")
    assert cache.apply(CLUSTER, event("ADDED", pod("shop", "a", "11"))) == "shop/a"
    assert cache.apply(CLUSTER, event("MODIFIED", pod("shop", "a", "12", "Running"))) == "shop/a"
    assert cache.pods["shop/a"]["status"]["phase"] == "Running"
    assert cache.versions[CLUSTER] == "12"
    assert cache.apply(CLUSTER, event("DELETED", pod("shop", "a", "13", "Succeeded"))) == "shop/a"
    assert "shop/a" not in cache.pods
    assert cache.versions[CLUSTER] == "13"


def test_a_bookmark_moves_the_version_only() -> None:
    cache = PodCache()
    cache.replace(CLUSTER, [pod("shop", "a", "5")], "5")
    assert cache.apply(CLUSTER, event("BOOKMARK", {"metadata": {"resourceVersion": "40"}})) is None
    assert cache.versions[CLUSTER] == "40"
    assert list(cache.pods) == ["shop/a"]


def test_a_relist_replaces_its_scope_only() -> None:
    cache = PodCache()
    cache.replace("shop", [pod("shop", "a", "1"), pod("shop", "b", "1")], "1")
    cache.replace("mail", [pod("mail", "m", "1")], "1")
    cache.replace("shop", [pod("shop", "b", "2")], "7")
    assert sorted(cache.pods) == ["mail/m", "shop/b"], "shop/a vanished; mail's pods are not shop's LIST's"
    assert cache.versions == {"shop": "7", "mail": "1"}


def test_a_change_wakes_the_waiter_on_that_pod_and_no_other() -> None:
    cache = PodCache()
    cache.replace(CLUSTER, [pod("shop", "a", "1"), pod("shop", "b", "1")], "1")
    with cache.waiting("shop/a") as a, cache.waiting("shop/b") as b, cache.waiting("mail/a") as other:
        cache.apply(CLUSTER, event("MODIFIED", pod("shop", "a", "2")))
        assert a.is_set() and not b.is_set() and not other.is_set()
        a.clear()
        cache.apply(CLUSTER, event("DELETED", pod("shop", "b", "3")))
        assert b.is_set() and not a.is_set()
    assert not cache._waiters, "a waiter that left is forgotten"


def test_a_relist_wakes_the_waiters_of_pods_that_changed_appeared_or_vanished() -> None:
    cache = PodCache()
    cache.replace(CLUSTER, [pod("shop", "same", "1"), pod("shop", "moved", "1"), pod("shop", "gone", "1")], "1")
    keys = ["shop/same", "shop/moved", "shop/gone", "shop/new"]
    with cache.waiting(keys[0]) as same, cache.waiting(keys[1]) as moved:
        with cache.waiting(keys[2]) as gone, cache.waiting(keys[3]) as new:
            cache.replace(CLUSTER, [pod("shop", "same", "1"), pod("shop", "moved", "2"), pod("shop", "new", "2")], "2")
            assert [e.is_set() for e in (same, moved, gone, new)] == [False, True, True, True]


def test_a_pod_is_trusted_only_while_a_live_stream_covers_its_namespace() -> None:
    cache = PodCache()
    cache.replace("shop", [pod("shop", "a", "1")], "1")
    assert cache.lookup("shop/a") == (False, pod("shop", "a", "1")), "listed, but no stream keeps it current"
    cache.up("shop")
    assert cache.lookup("shop/a")[0] and not cache.lookup("mail/a")[0]
    cache.up(CLUSTER)
    assert cache.lookup("mail/a") == (True, None)


def test_a_broken_stream_wakes_its_waiters_and_an_expired_one_is_listed_again() -> None:
    cache = PodCache()
    cache.replace("shop", [pod("shop", "a", "1")], "1")
    cache.replace("mail", [], "1")
    cache.up("shop")
    cache.up("mail")
    with cache.waiting("shop/a") as mine, cache.waiting("mail/x") as other:
        cache.down("shop")
        assert mine.is_set() and not other.is_set(), "they read their pods themselves until it is back"
    assert cache.lookup("shop/a")[0] is False
    assert cache.versions["shop"] == "1", "resumed from where it was"
    cache.down("shop", expired=True)
    assert "shop" not in cache.versions, "410 Gone: listed again"


def test_the_snapshot_is_given_only_when_every_scope_is_live() -> None:
    cache = PodCache()
    cache.replace("shop", [pod("shop", "a", "1")], "1")
    cache.replace("mail", [pod("mail", "b", "1")], "1")
    cache.up("shop")
    assert cache.snapshot(("shop", "mail")) is None
    cache.up("mail")
    assert sorted(p["metadata"]["name"] for p in cache.snapshot(("shop", "mail")) or []) == ["a", "b"]


def test_the_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff(n, 30.0) for n in (1, 2, 3, 7, 100)] == [0.5, 1.0, 2.0, 30.0, 30.0]


class Scripted:
    """Pods whose LIST and WATCH answer from a script: each watch call takes
    the next step, a list of events or a KubeError; with none left, it waits
    (an open stream with nothing to say), and once `streams` wait, `idle` is set."""

    def __init__(
        self, steps: list[list[dict[str, Any]] | KubeError], forbidden: bool = False, streams: int = 1
    ) -> None:
        self.steps = steps
        self.forbidden = forbidden
        self.streams = streams
        self.lists: list[str | None] = []
        self.watches: list[tuple[str | None, str]] = []
        self.idle = asyncio.Event()

    async def list_at(self, selector: str, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
        self.lists.append(namespace)
        if self.forbidden and namespace is None:
            raise KubeError(403, "Forbidden", "pods is forbidden")
        return [pod(namespace or "shop", "a", "100")], "100"

    async def watch(
        self,
        selector: str,
        resource_version: str,
        deliver: Callable[[dict[str, Any]], object],
        namespace: str | None = None,
        timeout_seconds: int = 60,
        opened: Callable[[], object] = lambda: None,
    ) -> None:
        self.watches.append((namespace, resource_version))
        if isinstance(self.steps[0] if self.steps else None, KubeError):
            raise self.steps.pop(0)  # refused: never opened
        opened()
        if not self.steps:
            self.streams -= 1
            if self.streams == 0:
                self.idle.set()
            await asyncio.Event().wait()
        step = self.steps.pop(0)
        if isinstance(step, KubeError):
            raise step
        for item in step:
            deliver(item)


async def informed(pods: Scripted, namespaces: tuple[str, ...] = ()) -> PodInformer:
    """An informer run until every stream of `pods` is open and quiet."""
    informer = PodInformer(pods, "app=x", namespaces, max_backoff=0.01)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(pods.idle.wait(), 5)
    assert informer.snapshot() is not None, "every stream open: the sweep may read the cache"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert informer.snapshot() is None, "stopped: nothing keeps the cache current"
    return informer


async def test_the_stream_resumes_from_the_last_version_and_relists_on_410_gone() -> None:
    pods = Scripted(
        [
            [event("MODIFIED", pod("shop", "a", "101", "Running"))],  # ended by the server's timeout
            KubeError(0, "Unreachable", "reset"),  # broken: resumed, not relisted
            KubeError(410, "Gone", "too old"),
            [event("BOOKMARK", {"metadata": {"resourceVersion": "150"}})],
        ]
    )
    informer = await informed(pods)
    assert pods.watches == [(None, "100"), (None, "101"), (None, "101"), (None, "100"), (None, "150")]
    assert pods.lists == [None, None], "listed at start and after the 410 only"
    assert informer.cache.versions[CLUSTER] == "150"


async def test_where_listing_cluster_wide_is_forbidden_each_named_namespace_is_watched() -> None:
    pods = Scripted([], forbidden=True, streams=2)
    informer = await informed(pods, ("ct-a", "ct-b"))
    assert informer.scopes == ("ct-a", "ct-b")
    assert pods.lists == [None, "ct-a", "ct-b"]
    assert sorted(pods.watches) == [("ct-a", "100"), ("ct-b", "100")]
    assert set(informer.cache.pods) == {"ct-a/a", "ct-b/a"}


async def test_with_no_namespace_named_a_forbidden_list_is_retried_backing_off() -> None:
    pods = Scripted([], forbidden=True)
    task = asyncio.create_task(PodInformer(pods, "app=x", (), max_backoff=0.01).run())  # type: ignore[arg-type]
    await asyncio.sleep(0.2)
    task.cancel()
    assert set(pods.lists) == {None} and len(pods.lists) > 2 and not pods.watches
