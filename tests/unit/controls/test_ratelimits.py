"""Token buckets per identity and per namespace, with an explicit clock: a
burst, then refusals with the exact wait; worker traffic in its own buckets."""

from __future__ import annotations

import pytest

from sluiceway.controls.ratelimits import Bucket, Limiter, RateLimits, TokenBuckets, Traffic


def limits(**buckets: Bucket) -> RateLimits:
    return RateLimits.off().model_copy(update=buckets)


def test_a_bucket_admits_its_burst_then_says_how_long_to_wait() -> None:
    buckets = TokenBuckets(Bucket(per_second=2, burst=3))
    for _ in range(3):
        assert buckets.wait("alice", 0.0) == 0
        buckets.take("alice", 0.0)
    assert buckets.wait("alice", 0.0) == pytest.approx(0.5)
    assert buckets.wait("alice", 0.25) == pytest.approx(0.25)  # refilling
    assert buckets.wait("alice", 0.5) == 0
    assert buckets.wait("bob", 0.0) == 0  # another key, its own bucket


def test_a_bucket_never_holds_more_than_its_burst() -> None:
    buckets = TokenBuckets(Bucket(per_second=10, burst=2))
    for _ in range(2):
        buckets.take("k", 1000.0)  # after a long idle time: still only 2
    assert buckets.wait("k", 1000.0) > 0


def test_full_buckets_are_forgotten_so_memory_stays_bounded() -> None:
    buckets = TokenBuckets(Bucket(per_second=1, burst=1), max_buckets=10)
    for key in range(100):
        buckets.wait(str(key), float(key) * 10)
    assert len(buckets._levels) <= 10


def test_the_identity_and_the_namespace_are_both_limited() -> None:
    limiter = Limiter(limits(identity=Bucket(per_second=1, burst=2), namespace=Bucket(per_second=1, burst=3)))
    assert limiter.admit(Traffic.API, "alice", "a", 0) is None
    assert limiter.admit(Traffic.API, "alice", "a", 0) is None
    refusal = limiter.admit(Traffic.API, "alice", "a", 0)
    assert refusal is not None
    assert (refusal.bucket, refusal.key, refusal.retry_after_seconds) == ("identity", "alice", 1)
    assert limiter.admit(Traffic.API, "bob", "a", 0) is None  # the namespace's third token
    refusal = limiter.admit(Traffic.API, "carol", "a", 0)
    assert refusal is not None and refusal.bucket == "namespace" and refusal.key == "a"
    assert limiter.admit(Traffic.API, "carol", "b", 0) is None  # another namespace


def test_a_refused_request_takes_no_token() -> None:
    limiter = Limiter(limits(identity=Bucket(per_second=1, burst=5), namespace=Bucket(per_second=1, burst=1)))
    assert limiter.admit(Traffic.API, "alice", "a", 0) is None
    for _ in range(10):
        assert limiter.admit(Traffic.API, "alice", "a", 0) is not None
    assert limiter.admit(Traffic.API, "alice", "b", 0) is None  # alice's own bucket was not drained by refusals


def test_workers_are_not_starved_by_api_calls() -> None:
    limiter = Limiter(
        limits(
            identity=Bucket(per_second=1, burst=1),
            namespace=Bucket(per_second=1, burst=1),
            worker_identity=Bucket(per_second=100, burst=100),
            worker_namespace=Bucket(per_second=100, burst=100),
        )
    )
    assert limiter.admit(Traffic.API, "ci", "a", 0) is None
    assert limiter.admit(Traffic.API, "ci", "a", 0) is not None
    assert all(limiter.admit(Traffic.WORKER, "worker", "a", 0) is None for _ in range(100))


def test_the_setting_is_json_and_names_itself_when_wrong() -> None:
    parsed = RateLimits.parse('{"identity": {"perSecond": 5, "burst": 10}}')
    assert parsed.identity == Bucket(per_second=5, burst=10) and parsed.namespace == RateLimits().namespace
    failures = RateLimits.parse('{"failedAuthentication": {"perSecond": 2, "burst": 5}}').failed_authentication
    assert failures == Bucket(per_second=2, burst=5) and RateLimits().failed_authentication.burst == 20
    with pytest.raises(ValueError, match="SLUICEWAY_API_RATE_LIMITS"):
        RateLimits.parse('{"identity": {"perSecond": -1, "burst": 10}}')
