"""Which requests are worker traffic, with buckets of their own."""

from __future__ import annotations

import pytest

from sluiceway.api.ratelimits import traffic_of
from sluiceway.controls.ratelimits import Traffic


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/ns/a/tasks/poll", (Traffic.WORKER, "a")),
        ("/v1/ns/a/tasks/results", (Traffic.WORKER, "a")),
        ("/v1/ns/a/tasks/heartbeats", (Traffic.WORKER, "a")),
        ("/v1/ns/a/tasks/0b7a/result", (Traffic.WORKER, "a")),
        ("/v1/ns/a/tasks/0b7a/heartbeat", (Traffic.WORKER, "a")),
        ("/v1/ns/a/tasks/0b7a/complete", (Traffic.API, "a")),  # a person, not a worker
        ("/v1/ns/a/tasks", (Traffic.API, "a")),
        ("/v1/ns/a/executions", (Traffic.API, "a")),
        ("/v1/namespaces", (Traffic.API, None)),
    ],
)
def test_the_worker_protocol_is_its_own_traffic(path: str, expected: tuple[Traffic, str | None]) -> None:
    assert traffic_of(path) == expected
