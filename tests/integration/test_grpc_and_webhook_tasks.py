"""GRPC and WEBHOOK system tasks against real servers started by the test: a
grpcio server with server reflection (its service described at run time, no
generated code), and an aiohttp receiver that verifies signatures; a real
PostgreSQL and the real decider behind them."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio
import pytest
from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluiceway.controls import webhooks as verification
from sluiceway.controls.breaker import BreakerConfig, Breakers, BreakerState
from sluiceway.controls.egress import EgressPolicy
from sluiceway.kubeapi.secrets import StaticSecrets
from sluiceway.model.webhook import WebhookSpec
from sluiceway.observability import tracing
from sluiceway.plane import Plane as ExecutionPlane
from sluiceway.systemtasks.egress import Egress
from sluiceway.systemtasks.grpc import GrpcTasks, classify
from sluiceway.systemtasks.http import HttpTasks
from sluiceway.systemtasks.runner import SystemTaskRunner
from sluiceway.systemtasks.webhook import WebhookTasks
from tests.integration.test_metrics import added, scrape
from tests.support.plane import Plane, finished, post
from tests.support.store import NS, define_task, define_workflow

SERVICE = "shop.Inventory"


def shop_file() -> descriptor_pb2.FileDescriptorProto:
    """shop.proto, written as a descriptor: ReserveRequest{sku, quantity, answer} -> ReserveReply{reservation}."""
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    request = file.message_type.add(name="ReserveRequest")
    for number, (name, kind) in enumerate(
        [("sku", "TYPE_STRING"), ("quantity", "TYPE_INT32"), ("answer", "TYPE_STRING")], start=1
    ):
        request.field.add(name=name, number=number, type=getattr(descriptor_pb2.FieldDescriptorProto, kind), label=1)
    reply = file.message_type.add(name="ReserveReply")
    reply.field.add(name="reservation", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    reply.field.add(name="metadata_seen", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    service = file.service.add(name="Inventory")
    service.method.add(name="Reserve", input_type=".shop.ReserveRequest", output_type=".shop.ReserveReply")
    return file


class Shop:
    """A real gRPC server: Reserve answers with the status code the request names."""

    def __init__(self) -> None:
        self.pool = descriptor_pool.DescriptorPool()
        self.pool.Add(shop_file())
        self.request = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("shop.ReserveRequest"))
        self.reply = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("shop.ReserveReply"))
        self.calls = 0
        self.metadata: list[dict[str, str]] = []  # each call's
        self.target = ""
        self.server: grpc.aio.Server | None = None

    async def reserve(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.calls += 1
        self.metadata.append({k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)})
        if request.answer and request.answer != "OK":
            await context.abort(getattr(grpc.StatusCode, request.answer), f"asked for {request.answer}")
        seen = dict(context.invocation_metadata() or ()).get("authorization", "")
        return self.reply(reservation=f"{request.sku}x{request.quantity}", metadata_seen=seen)

    async def start(self, tls: tuple[bytes, bytes] | None = None) -> None:
        self.server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(
            self.reserve,
            request_deserializer=self.request.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Reserve": handler}),))
        reflection.enable_server_reflection([SERVICE, reflection.SERVICE_NAME], self.server, pool=self.pool)
        if tls is None:
            port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            port = self.server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([tls]))
        await self.server.start()
        self.target = f"127.0.0.1:{port}"


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    server = Shop()
    await server.start()
    yield server
    assert server.server is not None
    await server.server.stop(None)


BREAKER = BreakerConfig(enabled=True, minimum_requests=3, failure_ratio=0.5, open_ms=60_000, max_open_ms=60_000)


@pytest.fixture
async def system_tasks(plane: Plane) -> AsyncIterator[Callable[[], tuple[Breakers, Breakers]]]:
    stop = asyncio.Event()
    running: list[asyncio.Task[None]] = []

    def start(extra: dict[str, bytes] | None = None) -> tuple[Breakers, Breakers]:
        by_host, by_service = Breakers(BREAKER), Breakers(BREAKER)
        secrets = StaticSecrets(
            {(NS, "creds"): {"token": b"Bearer s3cret", "hmac": b"callback-key-123", **(extra or {})}}
        )
        # The test servers listen on loopback, which the egress policy denies by default.
        egress = Egress(EgressPolicy(allowed=("127.0.0.1",)))
        runner = SystemTaskRunner(
            ExecutionPlane(plane.pool),
            [
                HttpTasks(by_host, egress=egress),
                WebhookTasks(by_host, secrets, egress=egress),
                GrpcTasks(by_service, secrets, egress=egress),
            ],
            concurrency=4,
        )
        running.append(asyncio.create_task(runner.run(stop)))
        return by_host, by_service

    yield start
    stop.set()
    await asyncio.wait(running, timeout=15)


def grpc_task(shop: Shop, answer: str = "OK", **grpc_extra: Any) -> dict[str, Any]:
    return {
        "name": "reserve",
        "taskReferenceName": "reserve",
        "type": "GRPC",
        "grpc": {"target": shop.target, "service": SERVICE, "method": "Reserve", "deadlineSeconds": 5, **grpc_extra},
        "inputParameters": {"request": {"sku": "${workflow.input.sku}", "quantity": 2, "answer": answer}},
    }


async def run(plane: Plane, workflow: str, input: dict[str, Any] | None = None) -> dict[str, Any]:
    _, started = await post(plane, f"/v1/ns/{NS}/executions", {"name": workflow, "input": input or {}})
    return await finished(plane, started["id"])


async def test_a_grpc_call_through_reflection_completes_with_the_reply(
    plane: Plane, shop: Shop, system_tasks: Any
) -> None:
    await define_workflow(
        plane.pool,
        "reserve",
        [grpc_task(shop, metadataFrom=[{"name": "authorization", "secretRef": {"name": "creds", "key": "token"}}])],
    )
    system_tasks()
    result = await run(plane, "reserve", {"sku": "A1"})
    assert result["status"] == "COMPLETED", result
    assert result["output"]["response"] == {"reservation": "A1x2", "metadataSeen": "Bearer s3cret"}


async def test_a_descriptor_set_in_the_spec_replaces_reflection(plane: Plane, shop: Shop, system_tasks: Any) -> None:
    encoded = base64.b64encode(descriptor_pb2.FileDescriptorSet(file=[shop_file()]).SerializeToString()).decode()
    await define_workflow(plane.pool, "described", [grpc_task(shop, descriptorSet=encoded)])
    system_tasks()
    assert (await run(plane, "described", {"sku": "B2"}))["output"]["response"]["reservation"] == "B2x2"


async def test_a_grpc_call_over_tls_verifies_the_server_against_the_ca_from_a_secret(
    plane: Plane, system_tasks: Any, tmp_path: Any
) -> None:
    from sluiceway.devenv.certificates import Authority

    authority = Authority(tmp_path)
    pair = authority.issue("shop", "shop.test", hosts=("shop.test",), server=True)
    secure = Shop()
    await secure.start(tls=(pair.key.read_bytes(), pair.cert.read_bytes()))
    try:
        trusted = {"caSecretRef": {"name": "creds", "key": "ca"}, "serverName": "shop.test"}
        await define_task(plane.pool, "reserve", retryCount=0)
        await define_workflow(plane.pool, "secure", [grpc_task(secure, tls=trusted)])
        await define_workflow(plane.pool, "wrong_name", [grpc_task(secure, tls={**trusted, "serverName": "evil.test"})])
        system_tasks({"ca": authority.pair.cert.read_bytes()})
        assert (await run(plane, "secure", {"sku": "T1"}))["output"]["response"]["reservation"] == "T1x2"
        refused = await run(plane, "wrong_name", {"sku": "T1"})
        assert refused["status"] == "FAILED" and "gRPC UNAVAILABLE" in refused["reasonForIncompletion"]
    finally:
        assert secure.server is not None
        await secure.server.stop(None)


@pytest.mark.parametrize(
    ("code", "terminal"),
    [
        ("INVALID_ARGUMENT", True),
        ("NOT_FOUND", True),
        ("PERMISSION_DENIED", True),
        ("UNAUTHENTICATED", True),
        ("FAILED_PRECONDITION", True),
        ("UNAVAILABLE", False),
        ("DEADLINE_EXCEEDED", False),
        ("RESOURCE_EXHAUSTED", False),
        ("ABORTED", False),
    ],
)
async def test_status_codes_are_classified_as_the_reference_says(
    plane: Plane, shop: Shop, system_tasks: Any, code: str, terminal: bool
) -> None:
    assert classify(code)[0] is terminal
    await define_task(plane.pool, "reserve", retryCount=1, retryDelaySeconds=0.1, jitter=0)
    await define_workflow(plane.pool, "classified", [grpc_task(shop, code)])
    system_tasks()
    result = await run(plane, "classified", {"sku": "C3"})
    statuses = [t["status"] for t in result["tasks"]]
    assert result["status"] == "FAILED" and f"gRPC {code}" in result["reasonForIncompletion"]
    assert statuses == (["FAILED_WITH_TERMINAL_ERROR"] if terminal else ["FAILED", "FAILED"]), statuses


async def test_the_breaker_is_keyed_by_the_service_name_and_opens_on_server_failures(
    plane: Plane, shop: Shop, system_tasks: Any
) -> None:
    await define_task(plane.pool, "reserve", retryCount=0)
    await define_workflow(plane.pool, "down", [grpc_task(shop, "UNAVAILABLE")])
    await define_workflow(plane.pool, "bad_input", [grpc_task(shop, "INVALID_ARGUMENT")])
    by_host, by_service = system_tasks()
    for _ in range(3):  # client errors say nothing of the service's health
        await run(plane, "bad_input", {"sku": "x"})
    assert by_service(SERVICE).state is BreakerState.CLOSED
    for _ in range(3):
        await run(plane, "down", {"sku": "x"})
    assert by_service(SERVICE).state is BreakerState.OPEN and by_host.by_target == {}
    calls = shop.calls
    fast = await run(plane, "down", {"sku": "x"})
    assert shop.calls == calls, "an open breaker does not call the service"
    assert fast["tasks"][0]["status"] == "FAILED" and f"circuitBreaker:{SERVICE} open" in fast["reasonForIncompletion"]


async def test_a_bad_request_or_method_fails_terminally_naming_the_field(
    plane: Plane, shop: Shop, system_tasks: Any
) -> None:
    typo = grpc_task(shop)
    typo["inputParameters"]["request"]["quantity"] = "many"
    await define_workflow(plane.pool, "typo", [typo])
    await define_workflow(
        plane.pool, "nomethod", [grpc_task(shop) | {"grpc": {**grpc_task(shop)["grpc"], "method": "Nope"}}]
    )
    system_tasks()
    typoed = await run(plane, "typo", {"sku": "x"})
    assert typoed["tasks"][0]["status"] == "FAILED_WITH_TERMINAL_ERROR"
    assert "inputParameters.request" in typoed["reasonForIncompletion"]
    missing = await run(plane, "nomethod", {"sku": "x"})
    assert "grpc.method" in missing["reasonForIncompletion"] and "Nope" in missing["reasonForIncompletion"]


async def test_grpc_task_calls_are_counted_by_service_and_status_code(
    plane: Plane, shop: Shop, system_tasks: Any
) -> None:
    await define_task(plane.pool, "reserve", retryCount=0)
    await define_workflow(plane.pool, "ok", [grpc_task(shop)])
    await define_workflow(plane.pool, "bad", [grpc_task(shop, "INVALID_ARGUMENT")])
    no_secret = [{"name": "authorization", "secretRef": {"name": "missing", "key": "token"}}]
    await define_workflow(plane.pool, "refused", [grpc_task(shop, metadataFrom=no_secret)])
    system_tasks()
    before = scrape()
    assert [(await run(plane, w, {"sku": "x"}))["status"] for w in ("ok", "ok", "bad", "refused")] == [
        "COMPLETED",
        "COMPLETED",
        "FAILED",
        "FAILED",
    ]
    after = scrape()
    counted = {
        code: added(before, after, "sluiceway_grpc_task_calls_total", service=SERVICE, code=code)
        for code in ("OK", "INVALID_ARGUMENT", "refused", "UNAVAILABLE")
    }
    assert counted == {"OK": 2, "INVALID_ARGUMENT": 1, "refused": 1, "UNAVAILABLE": 0}


# -- WEBHOOK ------------------------------------------------------------------------


class Receiver:
    """A callback receiver that verifies Sluiceway's signature, as a user's would."""

    def __init__(self) -> None:
        self.answers: list[int] = []
        self.received: list[tuple[dict[str, str], bytes, bool]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        spec = WebhookSpec.model_validate({"hmac": {"secretRef": {"name": "creds", "key": "hmac"}}})
        headers = {k.lower(): v for k, v in request.headers.items()}
        ok = verification.verify(spec, b"callback-key-123", headers, body, time.time()) is None
        self.received.append((headers, body, ok))
        status = self.answers.pop(0) if self.answers else 200
        return web.json_response({"thanks": True}, status=status if ok else 401)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    server = Receiver()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield server
    await runner.cleanup()


def callback(url: str) -> dict[str, Any]:
    return {
        "name": "notify",
        "taskReferenceName": "notify",
        "type": "WEBHOOK",
        "signing": {"secretRef": {"name": "creds", "key": "hmac"}},
        "inputParameters": {"url": url, "body": {"order": "${workflow.input.order}", "state": "shipped"}},
    }


async def test_a_webhook_task_sends_a_signed_callback_the_receiver_verifies(
    plane: Plane, receiver: Receiver, system_tasks: Any
) -> None:
    await define_workflow(plane.pool, "notify", [callback(f"{receiver.url}/hooks")])
    system_tasks()
    result = await run(plane, "notify", {"order": 7})
    assert result["status"] == "COMPLETED", result
    [(headers, body, verified)] = receiver.received
    assert verified and body == b'{"order":7,"state":"shipped"}'
    assert headers["x-sluiceway-delivery"] == f"{result['id']}/notify"


async def test_a_webhook_task_is_classified_like_http_and_shares_its_breaker_by_host(
    plane: Plane, receiver: Receiver, system_tasks: Any
) -> None:
    receiver.answers = [503, 404]
    await define_task(plane.pool, "notify", retryCount=3, retryDelaySeconds=0.1, jitter=0)
    await define_workflow(plane.pool, "notify", [callback(f"{receiver.url}/hooks")])
    by_host, _ = system_tasks()
    result = await run(plane, "notify", {"order": 8})
    assert [t["status"] for t in result["tasks"]] == ["FAILED", "FAILED_WITH_TERMINAL_ERROR"], "503 retried, 404 final"
    host = receiver.url.removeprefix("http://")
    assert list(by_host.by_target) == [host], "the same breaker HTTP tasks calling this host use"


async def test_grpc_and_webhook_calls_carry_their_attempts_traceparent(
    plane: Plane, shop: Shop, receiver: Receiver, system_tasks: Any
) -> None:
    """Tracing on: the gRPC metadata and the signed callback's headers carry
    the W3C traceparent of the task attempt's span (the signature, over the
    timestamp and body, still verifies)."""
    await define_workflow(plane.pool, "reserve", [grpc_task(shop)])
    await define_workflow(plane.pool, "notify", [callback(f"{receiver.url}/hooks")])
    system_tasks()
    spans = InMemorySpanExporter()
    tracing.install(spans, batch=False)
    try:
        reserved = await run(plane, "reserve", {"sku": "T1"})
        notified = await run(plane, "notify", {"order": 9})
        await asyncio.sleep(0.2)
    finally:
        tracing.uninstall()
    assert reserved["status"] == notified["status"] == "COMPLETED"

    def traceparent_of(task_type: str) -> str:
        [attempt] = [s for s in spans.get_finished_spans() if s.name == f"task {task_type}"]
        return f"00-{attempt.context.trace_id:032x}-{attempt.context.span_id:016x}-01"

    assert shop.metadata[-1]["traceparent"] == traceparent_of("reserve")
    assert traceparent_of("reserve").startswith(f"00-{uuid.UUID(reserved['id']).hex}-"), "the run's trace"
    [(headers, _, verified)] = receiver.received
    assert verified and headers["traceparent"] == traceparent_of("notify")
