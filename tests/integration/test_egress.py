"""The egress policy of system tasks, against real local servers and a real
PostgreSQL: loopback refused by default and allowed when a Quota lists it,
names checked after resolution (and the connection made to the checked
address), every redirect checked, configured cluster ranges and the API
server refused, gRPC alike. A refused call fails its task terminally with a
reason naming the policy, and the server never sees it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import ResolveResult

from sluiceway.controls.breaker import BreakerConfig, Breakers
from sluiceway.controls.egress import EgressPolicy, denied_ranges
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.store import definitions
from sluiceway.store.tenancy import Tenants
from sluiceway.systemtasks.egress import Egress, EgressRefused
from sluiceway.systemtasks.grpc import GrpcTasks
from sluiceway.systemtasks.http import HttpTasks
from sluiceway.systemtasks.runner import SystemTaskRunner
from tests.support.plane import Plane, finished, post
from tests.support.store import NS, define_task, define_workflow


class Server:
    """A real HTTP server on one loopback address; `redirect_to` makes it answer 302."""

    def __init__(self) -> None:
        self.calls = 0
        self.redirect_to: str | None = None
        self.url = ""

    async def handle(self, _: web.Request) -> web.Response:
        self.calls += 1
        if self.redirect_to:
            return web.Response(status=302, headers={"Location": self.redirect_to})
        return web.json_response({"ok": True})


@pytest.fixture
async def servers() -> AsyncIterator[Callable[[str], Any]]:
    runners: list[web.AppRunner] = []

    async def start(host: str) -> Server:
        server = Server()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        server.url = f"http://{host}:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        runners.append(runner)
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def system_tasks(plane: Plane) -> AsyncIterator[Callable[[EgressPolicy], None]]:
    """Starts the HTTP and gRPC tasks with this operator policy, plus the Quotas of NS."""
    stop = asyncio.Event()
    running: list[asyncio.Task[None]] = []

    def start(base: EgressPolicy) -> None:
        egress = Egress(base, plane.pool, Tenants(ttl=0))
        runner = SystemTaskRunner(
            ExecutionPlane(plane.pool),
            [
                HttpTasks(Breakers(BreakerConfig()), egress=egress),
                GrpcTasks(Breakers(BreakerConfig()), None, egress=egress),
            ],
        )
        running.append(asyncio.create_task(runner.run(stop)))

    yield start
    stop.set()
    await asyncio.wait(running, timeout=15)


def http_task(uri: str) -> dict[str, Any]:
    return {
        "name": "call",
        "taskReferenceName": "call",
        "type": "HTTP",
        "inputParameters": {"http_request": {"uri": uri, "method": "GET"}},
    }


async def allow(plane: Plane, *entries: str) -> None:
    async with plane.pool.acquire() as conn:
        await definitions.upsert_quota(conn, NS, "egress", 1, None, None, None, None, allowed_egress=entries)


async def call(plane: Plane, uri: str) -> dict[str, Any]:
    """Run a one-HTTP-task workflow to `uri`; the finished run."""
    await define_workflow(plane.pool, "call", [http_task(uri)])
    status, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "call"})
    assert status == 201, started
    return await finished(plane, started["id"])


def refused(run: dict[str, Any], *words: str) -> None:
    assert run["status"] == "FAILED", run
    [task] = run["tasks"]
    assert task["status"] == "FAILED_WITH_TERMINAL_ERROR", task
    assert task["reason"].startswith("egress policy: "), task
    for word in words:
        assert word in task["reason"], task


async def test_loopback_is_refused_by_default_and_allowed_when_a_quota_lists_it(
    plane: Plane, servers: Any, system_tasks: Any
) -> None:
    await define_task(plane.pool, "call", retryCount=3)
    local = await servers("127.0.0.1")
    system_tasks(EgressPolicy())
    refused(await call(plane, f"{local.url}/"), "127.0.0.1 is loopback", "allowedEgress")
    # A name is checked on what it resolves to: localhost is loopback too.
    refused(await call(plane, local.url.replace("127.0.0.1", "localhost") + "/"), "localhost resolves to", "loopback")
    assert local.calls == 0  # neither call reached the server
    await allow(plane, "127.0.0.1")
    assert (await call(plane, f"{local.url}/"))["status"] == "COMPLETED"
    assert local.calls == 1


async def test_every_redirect_is_checked(plane: Plane, servers: Any, system_tasks: Any) -> None:
    allowed = await servers("127.0.0.1")
    other = await servers("127.0.0.2")  # loopback too, and not listed
    await allow(plane, "127.0.0.1/32")
    system_tasks(EgressPolicy())
    allowed.redirect_to = f"{other.url}/secret"
    refused(await call(plane, f"{allowed.url}/"), "127.0.0.2 is loopback")
    assert allowed.calls == 1 and other.calls == 0
    # A redirect to an allowed destination is followed.
    allowed.redirect_to = None
    other.redirect_to = f"{allowed.url}/back"
    await allow(plane, "127.0.0.1/32", "127.0.0.2")
    run = await call(plane, f"{other.url}/")
    assert run["status"] == "COMPLETED" and run["output"]["response"]["body"] == {"ok": True}, run


async def test_cluster_ranges_and_the_api_server_are_refused(plane: Plane, system_tasks: Any) -> None:
    denied = denied_ranges(
        service_cidrs=["10.96.0.0/12"], pod_cidrs=["10.244.0.0/16"], api_server_addresses=["192.0.2.10"]
    )
    system_tasks(EgressPolicy(denied))
    refused(await call(plane, "http://10.96.0.1/"), "in the cluster's service range")
    refused(await call(plane, "http://10.244.3.7:8080/"), "in the cluster's pod range")
    refused(await call(plane, "https://192.0.2.10:6443/api"), "the Kubernetes API server")
    refused(await call(plane, "http://[::ffff:10.96.0.1]/"), "service range")  # IPv4-mapped IPv6


async def test_a_grpc_call_to_a_refused_address_fails_naming_the_policy(plane: Plane, system_tasks: Any) -> None:
    system_tasks(EgressPolicy())
    task = {
        "name": "reserve",
        "taskReferenceName": "reserve",
        "type": "GRPC",
        "grpc": {"target": "localhost:50051", "service": "shop.Inventory", "method": "Reserve"},
    }
    await define_workflow(plane.pool, "grpc", [task])
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": "grpc"})
    refused(await finished(plane, started["id"]), "localhost resolves to", "loopback")


class _Rebinding:
    """A resolver answering what an attacker's DNS would: a loopback address for a public-looking name."""

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": family, "proto": 0, "flags": 0}]

    async def close(self) -> None:
        pass


async def test_the_connection_goes_to_the_address_checked(servers: Any) -> None:
    """The check is made inside the connection's own resolution, so a name
    that resolves to a denied address is refused at connect time, whatever an
    earlier lookup said."""
    local = await servers("127.0.0.1")
    egress = Egress(EgressPolicy())
    session = egress.session(EgressPolicy())
    session.connector._resolver._inner = _Rebinding()  # type: ignore[union-attr]
    port = local.url.rsplit(":", 1)[1]
    try:
        with pytest.raises(EgressRefused, match="partner.example resolves to 127.0.0.1, which is loopback"):
            await session.get(f"http://partner.example:{port}/")
        assert local.calls == 0
    finally:
        await egress.close()
