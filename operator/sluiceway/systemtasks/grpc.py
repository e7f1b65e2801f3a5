"""GRPC tasks: unary gRPC calls made by the operator, on the real grpcio stack.

    type: GRPC
    grpc:
      target: inventory.shop.svc:50051
      service: shop.Inventory          # the circuit breaker's key
      method: Reserve
      deadlineSeconds: 10
      tls: {caSecretRef: {name, key}, serverName: inventory.shop}    # plaintext without it
      metadataFrom: [{name: authorization, secretRef: {name, key}}]
      descriptorSet: <base64 FileDescriptorSet>                     # else server reflection
    inputParameters:
      request: {sku: "${workflow.input.sku}", quantity: 2}          # JSON onto the input message
      metadata: {x-tenant: acme}

Output: `{"response": <the reply as JSON>}`. The method's types come from
the descriptor set when the task gives one, else from the server's
reflection service (asked once per target and service, then cached).

Status codes are classified as the execution-controls reference says: a
request the server refuses as such (INVALID_ARGUMENT, NOT_FOUND,
PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION, ...) fails
terminally; UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED (and
INTERNAL, UNKNOWN, CANCELLED) are retried by the task's policy. Calls go
through a circuit breaker keyed by the configured service name, the name an
operator knows, so two services on one host fail apart; only server-side
failures count toward it. With tracing on, each call's metadata carries the
task attempt's `traceparent`, as HTTP tasks' headers do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pydantic import ValidationError

from sluiceway.controls.breaker import Breakers, BreakerState
from sluiceway.kubeapi.secrets import SecretSource, SecretUnavailable
from sluiceway.model.execution import ResultStatus, TaskResult
from sluiceway.model.workflow import GrpcCall, TaskType
from sluiceway.observability import metrics, tracing
from sluiceway.plane.dispatch import Lease
from sluiceway.systemtasks.egress import Egress, EgressRefused, resolve_checked
from sluiceway.systemtasks.http import TargetRefused, check_host

# The request was wrong, or the caller may not: a retry reproduces it.
TERMINAL_CODES = frozenset(
    {
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "FAILED_PRECONDITION",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "DATA_LOSS",
    }
)
# The server's health: these count toward the service's circuit breaker.
SERVER_FAILURE_CODES = frozenset(
    {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "INTERNAL", "UNKNOWN", "DATA_LOSS"}
)
_STATE_VALUE = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}
_DESCRIPTOR_TTL = 300.0
_MAX_REFLECTED_FILES = 256


def classify(code: str) -> tuple[bool, bool]:
    """(terminal, server failure) of a status code's name."""
    return code in TERMINAL_CODES, code in SERVER_FAILURE_CODES


class CallRefused(Exception):
    """The task's call cannot be made as written: a terminal failure naming the field."""


@dataclass(frozen=True)
class Method:
    input: type[Message]
    output: type[Message]


class GrpcTasks:
    types = frozenset({TaskType.GRPC})
    holds_slot = True

    def __init__(
        self,
        breakers: Breakers,
        secrets: SecretSource | None,
        allowed_hosts: tuple[str, ...] = (),
        egress: Egress | None = None,
    ) -> None:
        self.breakers = breakers
        self.secrets = secrets
        self.allowed_hosts = allowed_hosts
        self.egress = egress or Egress()
        self._channels: dict[tuple[Any, ...], grpc.aio.Channel] = {}
        self._methods: dict[tuple[Any, ...], tuple[float, Method]] = {}

    async def start(self) -> None:
        """Channels are opened on first use."""

    async def stop(self) -> None:
        await self.egress.close()
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()

    def _result(self, lease: Lease, status: ResultStatus, **fields: Any) -> TaskResult:
        return TaskResult(task_id=lease.task_id, epoch=lease.epoch, status=status, **fields)

    async def call(self, lease: Lease) -> TaskResult:
        try:
            spec = GrpcCall.model_validate(lease.input.get("grpc"))
        except ValidationError as error:
            return self._result(
                lease, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason=f"grpc: {error.errors()[0]['msg']}"
            )
        breaker = self.breakers(spec.service)
        verdict = breaker.allow(time.monotonic() * 1000)
        self._observe(spec.service)
        if not verdict.allowed:
            metrics.BREAKER_REJECTIONS.labels(spec.service).inc()
            return self._result(
                lease,
                ResultStatus.FAILED,
                reason=f"circuitBreaker:{spec.service} open: failing fast, next probe in "
                f"{verdict.retry_in_ms / 1000:.1f} s",
            )
        result, server_failure = await self._call(lease, spec)
        breaker.record(time.monotonic() * 1000, server_failure, probe=verdict.probe)
        self._observe(spec.service)
        return result

    def _observe(self, service: str) -> None:
        metrics.BREAKER_STATE.labels(f"grpc:{service}").set(_STATE_VALUE[self.breakers(service).state])

    async def _call(self, lease: Lease, spec: GrpcCall) -> tuple[TaskResult, bool]:
        where = f"{spec.service}/{spec.method} at {spec.target}"
        try:
            address = await self._address(lease.namespace, spec)
            channel = await self._channel(lease.namespace, spec, address)
            method = await self._method(channel, spec)
            request = _request(method, lease.input.get("request"))
            metadata = await self._metadata(lease, spec)
        except (CallRefused, TargetRefused, EgressRefused) as error:
            metrics.GRPC_TASK_CALLS.labels(spec.service, "refused").inc()
            return self._result(lease, ResultStatus.FAILED_WITH_TERMINAL_ERROR, reason=str(error)), False
        except grpc.aio.AioRpcError as error:  # reflection failed
            return self._failed(lease, spec, error, f"asking {where} for its descriptors")
        except OSError as error:
            return self._result(lease, ResultStatus.FAILED, reason=f"cannot resolve {spec.target}: {error}"), True
        call = channel.unary_unary(
            f"/{spec.service}/{spec.method}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=method.output.FromString,
        )
        try:
            reply = await call(request, timeout=spec.deadline_seconds, metadata=metadata)
        except grpc.aio.AioRpcError as error:
            return self._failed(lease, spec, error, f"calling {where}")
        metrics.GRPC_TASK_CALLS.labels(spec.service, "OK").inc()
        output = {"response": json_format.MessageToDict(reply), "code": "OK"}
        return self._result(lease, ResultStatus.COMPLETED, output=output), False

    def _failed(self, lease: Lease, spec: GrpcCall, error: grpc.aio.AioRpcError, doing: str) -> tuple[TaskResult, bool]:
        code = error.code().name
        terminal, server_failure = classify(code)
        metrics.GRPC_TASK_CALLS.labels(spec.service, code).inc()
        details = (error.details() or "")[:1000]
        reason = f"gRPC {code} {doing}: {details}" if details else f"gRPC {code} {doing}"
        status = ResultStatus.FAILED_WITH_TERMINAL_ERROR if terminal else ResultStatus.FAILED
        return self._result(lease, status, reason=reason, output={"code": code}), server_failure

    async def _secret(self, namespace: str, field: str, ref: Any) -> bytes:
        if self.secrets is None:
            raise CallRefused(f"grpc.{field}: this operator reads no Secrets (no Kubernetes API)")
        try:
            return await self.secrets.value(namespace, ref)
        except SecretUnavailable as error:
            raise CallRefused(f"grpc.{field}: {error}") from error

    async def _address(self, namespace: str, spec: GrpcCall) -> str:
        """The address to dial: the target's host resolved and checked by the
        namespace's egress policy (gRPC dials it, not the name, so DNS cannot
        answer differently after the check)."""
        host, _, port = spec.target.rpartition(":")
        host = host.strip("[]")
        check_host(host, self.allowed_hosts)
        addresses = await resolve_checked(await self.egress.policy(namespace), host, int(port))
        address = addresses[0]
        return f"ipv6:[{address}]:{port}" if ":" in address else f"ipv4:{address}:{port}"

    async def _channel(self, namespace: str, spec: GrpcCall, address: str) -> grpc.aio.Channel:
        # The checked address is dialled; the target names the server (authority, TLS).
        named = [("grpc.default_authority", spec.target)]
        if spec.tls is None:
            key: tuple[Any, ...] = (spec.target, address)
            credentials = None
        else:
            tls = spec.tls
            ca = await self._secret(namespace, "tls.caSecretRef", tls.ca_secret_ref) if tls.ca_secret_ref else None
            cert = (
                await self._secret(namespace, "tls.certSecretRef", tls.cert_secret_ref) if tls.cert_secret_ref else None
            )
            private = (
                await self._secret(namespace, "tls.keySecretRef", tls.key_secret_ref) if tls.key_secret_ref else None
            )
            key = (spec.target, address, tls.server_name, _digest(ca), _digest(cert), _digest(private))
            credentials = grpc.ssl_channel_credentials(
                root_certificates=ca, private_key=private, certificate_chain=cert
            )
        channel = self._channels.get(key)
        if channel is None:
            if credentials is None:
                channel = grpc.aio.insecure_channel(address, options=named)
            else:
                server_name = (spec.tls.server_name if spec.tls else None) or spec.target.rpartition(":")[0].strip("[]")
                # The name TLS verifies is also the authority the calls carry.
                options = [("grpc.ssl_target_name_override", server_name)]
                channel = grpc.aio.secure_channel(address, credentials, options=options)
            self._channels[key] = channel
        return channel

    async def _metadata(self, lease: Lease, spec: GrpcCall) -> list[tuple[str, str]]:
        literal = lease.input.get("metadata") or {}
        if not isinstance(literal, dict):
            raise CallRefused("inputParameters.metadata must be an object of lower-case keys to strings")
        pairs = [(str(k).lower(), str(v)) for k, v in literal.items()]
        for entry in spec.metadata_from or []:
            value = await self._secret(lease.namespace, f"metadataFrom[{entry.name}]", entry.secret_ref)
            pairs.append((entry.name, value.decode(errors="replace").strip()))
        own = {name for name, _ in pairs}
        context = tracing.propagation_headers(lease.execution_id, lease.task_id, lease.epoch)
        return pairs + [(name, value) for name, value in context.items() if name not in own]

    async def _method(self, channel: grpc.aio.Channel, spec: GrpcCall) -> Method:
        source = _digest(spec.descriptor_set.encode()) if spec.descriptor_set else None
        key = (spec.target, spec.service, spec.method, source)
        cached = self._methods.get(key)
        if cached is not None and time.monotonic() < cached[0]:
            return cached[1]
        if spec.descriptor_set:
            files = _descriptor_set(spec.descriptor_set)
        else:
            files = await _reflect(channel, spec.service, spec.deadline_seconds)
        method = _method_of(files, spec)
        self._methods[key] = (time.monotonic() + _DESCRIPTOR_TTL, method)
        return method


def _digest(value: bytes | None) -> str | None:
    return None if value is None else hashlib.sha256(value).hexdigest()


def _descriptor_set(encoded: str) -> list[descriptor_pb2.FileDescriptorProto]:
    try:
        parsed = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, DecodeError) as error:
        raise CallRefused(f"grpc.descriptorSet: not a base64 FileDescriptorSet: {error}") from error
    return list(parsed.file)


async def _reflect(
    channel: grpc.aio.Channel, service: str, deadline: float
) -> list[descriptor_pb2.FileDescriptorProto]:
    """The file defining `service` and every file it imports, from the server's reflection service."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    stream = stub.ServerReflectionInfo(timeout=deadline)
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    asked: set[str] = set()
    try:
        await stream.write(reflection_pb2.ServerReflectionRequest(file_containing_symbol=service))
        pending = 1
        while pending:
            answer = await stream.read()
            pending -= 1
            if answer is grpc.aio.EOF:
                break
            if answer.HasField("error_response"):
                raise CallRefused(
                    f"grpc.service: the server's reflection does not know {service}: "
                    f"{answer.error_response.error_message}"
                )
            for raw in answer.file_descriptor_response.file_descriptor_proto:
                file = descriptor_pb2.FileDescriptorProto.FromString(raw)
                files.setdefault(file.name, file)
            for file in list(files.values()):
                for dependency in file.dependency:
                    if dependency not in files and dependency not in asked and len(asked) < _MAX_REFLECTED_FILES:
                        asked.add(dependency)
                        await stream.write(reflection_pb2.ServerReflectionRequest(file_by_filename=dependency))
                        pending += 1
        await stream.done_writing()
    finally:
        stream.cancel()
    return list(files.values())


def _method_of(files: list[descriptor_pb2.FileDescriptorProto], spec: GrpcCall) -> Method:
    pool = descriptor_pool.DescriptorPool()
    by_name = {f.name: f for f in files}
    added: set[str] = set()

    def add(name: str) -> None:  # dependencies first, as the pool requires
        if name in added or name not in by_name:
            return
        added.add(name)
        for dependency in by_name[name].dependency:
            add(dependency)
        pool.Add(by_name[name])

    try:
        for name in by_name:
            add(name)
        service = pool.FindServiceByName(spec.service)
    except (KeyError, TypeError) as error:
        raise CallRefused(f"grpc.service: {spec.service} is not described: {error}") from error
    method = service.methods_by_name.get(spec.method)
    if method is None:
        raise CallRefused(f"grpc.method: {spec.service} has no method {spec.method}")
    if method.client_streaming or method.server_streaming:
        raise CallRefused(f"grpc.method: {spec.service}/{spec.method} streams; only unary calls are made")
    return Method(
        message_factory.GetMessageClass(method.input_type), message_factory.GetMessageClass(method.output_type)
    )


def _request(method: Method, raw: Any) -> Message:
    message = method.input()
    if raw is None:
        return message
    if not isinstance(raw, dict):
        raise CallRefused("inputParameters.request must be an object (the input message as JSON)")
    try:
        json_format.ParseDict(raw, message)
    except json_format.ParseError as error:
        raise CallRefused(f"inputParameters.request: {error}") from error
    return message
