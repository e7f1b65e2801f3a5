"""A real gRPC server for the end-to-end tests, described at run time (no
generated code) and serving reflection, as a service in a cluster would."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection

SERVICE = "shop.Inventory"


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="shop_e2e.proto", package="shop", syntax="proto3")
    request = file.message_type.add(name="ReserveRequest")
    request.field.add(name="sku", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    request.field.add(name="answer", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    reply = file.message_type.add(name="ReserveReply")
    reply.field.add(name="reservation", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    file.service.add(name="Inventory").method.add(
        name="Reserve", input_type=".shop.ReserveRequest", output_type=".shop.ReserveReply"
    )
    return file


class Shop:
    """Reserve answers with the status code its request names ("OK" by default)."""

    def __init__(self) -> None:
        self.pool = descriptor_pool.DescriptorPool()
        self.pool.Add(_file())
        self.request = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("shop.ReserveRequest"))
        self.reply = message_factory.GetMessageClass(self.pool.FindMessageTypeByName("shop.ReserveReply"))
        self.calls = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.unary_unary_rpc_method_handler(
            self.reserve,
            request_deserializer=self.request.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Reserve": handler}),))
        reflection.enable_server_reflection([SERVICE, reflection.SERVICE_NAME], self.server, pool=self.pool)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def reserve(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls += 1
        if request.answer and request.answer != "OK":
            context.abort(getattr(grpc.StatusCode, request.answer), f"asked for {request.answer}")
        return self.reply(reservation=f"reserved {request.sku}")

    def __enter__(self) -> Shop:
        self.server.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.stop(None)
