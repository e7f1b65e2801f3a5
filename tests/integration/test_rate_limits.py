"""API rate limits through the HTTP app on a real PostgreSQL: a burst over
the caller's bucket gets 429 with Retry-After, the namespace's bucket limits
every caller in it, and workers keep polling and reporting while the API
buckets are empty."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from sluiceway.controls.ratelimits import Bucket, RateLimits
from sluiceway.store.database import Pool
from tests.integration.test_metrics import added, scrape_http
from tests.support.plane import Plane, execution_plane
from tests.support.store import NS

BURST = 5


@pytest.fixture
async def plane(pool: Pool, database_url: str) -> AsyncIterator[Plane]:
    limits = RateLimits.off().model_copy(
        update={
            "identity": Bucket(per_second=0.2, burst=BURST),  # one token each 5 s: none refills during the test
            "namespace": Bucket(per_second=0.2, burst=BURST * 2),
            "worker_identity": Bucket(per_second=100, burst=100),
            "worker_namespace": Bucket(per_second=100, burst=100),
        }
    )
    async with execution_plane(pool, database_url, rate_limits=limits) as running:
        yield running


Answer = tuple[int, dict[str, str], dict[str, object]]


async def burst(plane: Plane, path: str, count: int, source: str = "127.0.0.1") -> list[Answer]:
    """`count` GETs from the loopback address `source` (the caller's identity with authentication off)."""
    answers: list[Answer] = []
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with aiohttp.ClientSession(connector=connector) as http:
        for _ in range(count):
            async with http.get(f"{plane.url}{path}") as response:
                answers.append((response.status, dict(response.headers), await response.json()))
    return answers


async def test_a_burst_over_the_identity_bucket_is_refused_with_retry_after(plane: Plane) -> None:
    before = await scrape_http(plane)
    answers = await burst(plane, f"/v1/ns/{NS}/executions", BURST + 3)
    after = await scrape_http(plane)  # /metrics is outside /v1: never limited
    assert added(before, after, "sluiceway_api_rate_limited_total", traffic="api", bucket="identity") == 3
    assert [status for status, _, _ in answers] == [200] * BURST + [429] * 3
    _, headers, body = answers[-1]
    assert body["error"] == "RATE_LIMITED" and body["bucket"] == "identity" and body["control"] == "apiRateLimit"
    assert int(headers["Retry-After"]) >= 1 and body["retryAfterSeconds"] == int(headers["Retry-After"])
    assert "address:127.0.0.1" in str(body["message"])


async def test_the_namespace_bucket_limits_every_caller_in_it(plane: Plane) -> None:
    before = await scrape_http(plane)
    first = await burst(plane, f"/v1/ns/{NS}/executions", BURST, source="127.0.0.1")
    second = await burst(plane, f"/v1/ns/{NS}/executions", BURST, source="127.0.0.2")
    third = await burst(plane, f"/v1/ns/{NS}/executions", 1, source="127.0.0.3")  # a fresh identity
    assert all(status == 200 for status, _, _ in first + second)
    assert third[0][0] == 429 and third[0][2]["bucket"] == "namespace"
    after = await scrape_http(plane)
    assert added(before, after, "sluiceway_api_rate_limited_total", traffic="api", bucket="namespace") == 1
    assert added(before, after, "sluiceway_api_rate_limited_total", traffic="api", bucket="identity") == 0
    other = await burst(plane, "/v1/ns/team-b/executions", 1, source="127.0.0.3")
    assert other[0][0] == 200  # another namespace has its own bucket


async def test_workers_keep_polling_while_the_api_buckets_are_empty(plane: Plane) -> None:
    await burst(plane, f"/v1/ns/{NS}/executions", BURST * 2)
    assert (await burst(plane, f"/v1/ns/{NS}/executions", 1))[0][0] == 429
    async with aiohttp.ClientSession() as http:
        for _ in range(20):
            async with http.post(
                f"{plane.url}/v1/ns/{NS}/tasks/poll",
                json={"taskTypes": ["work"], "workerId": "w1", "pollTimeoutSeconds": 0},
            ) as response:
                assert response.status == 200, await response.text()
