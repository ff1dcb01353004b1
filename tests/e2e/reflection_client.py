"""A client that knows nothing of famiglia but what server reflection tells it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

_POOL = descriptor_pool.DescriptorPool()
"""One pool for the whole test process, never collected: upb's Python messages crashed the
interpreter (a segfault while garbage-collecting) once a client's own pool, and the message
classes made from it, were collected between tests (protocolbuffers/protobuf#12047)."""
_LOADED: set[str] = set()


class ReflectionClient:
    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.pool = _POOL
        self._stub = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        self._loaded = _LOADED  # the files already in the pool (every server serves the same protos)

    def close(self) -> None:
        self.channel.close()

    def services(self) -> list[str]:
        reply = next(self._stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        return [s.name for s in reply.list_services_response.service]

    def load_symbol(self, symbol: str) -> None:
        req = reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol)
        reply = next(self._stub.ServerReflectionInfo(iter([req])))
        if reply.HasField("error_response"):
            raise LookupError(reply.error_response.error_message)
        protos = [descriptor_pb2.FileDescriptorProto.FromString(b)
                  for b in reply.file_descriptor_response.file_descriptor_proto]
        pending = {p.name: p for p in protos if p.name not in self._loaded}
        while pending:  # add files after their dependencies
            progressed = False
            for name, proto in list(pending.items()):
                if all(d in self._loaded or d not in pending for d in proto.dependency):
                    try:
                        self.pool.Add(proto)
                    except TypeError:
                        pass
                    self._loaded.add(name)
                    del pending[name]
                    progressed = True
            if not progressed:
                raise RuntimeError(f"cyclic dependencies in {list(pending)}")

    def message(self, full_name: str) -> type:
        try:
            desc = self.pool.FindMessageTypeByName(full_name)
        except KeyError:
            self.load_symbol(full_name)
            desc = self.pool.FindMessageTypeByName(full_name)
        return message_factory.GetMessageClass(desc)

    def _method(self, service: str, method: str):
        self.load_symbol(service)
        sdesc = self.pool.FindServiceByName(service)
        mdesc = sdesc.methods_by_name[method]
        req_cls = message_factory.GetMessageClass(mdesc.input_type)
        resp_cls = message_factory.GetMessageClass(mdesc.output_type)
        return mdesc, req_cls, resp_cls

    def call(self, service: str, method: str, token: str | None = None, **fields: Any):
        mdesc, req_cls, resp_cls = self._method(service, method)
        path = f"/{service}/{method}"
        md = [("authorization", f"Bearer {token}")] if token else []
        request = req_cls(**fields)
        if mdesc.server_streaming:
            rpc = self.channel.unary_stream(path, request_serializer=req_cls.SerializeToString,
                                            response_deserializer=resp_cls.FromString)
            return rpc(request, metadata=md, timeout=10)
        rpc = self.channel.unary_unary(path, request_serializer=req_cls.SerializeToString,
                                       response_deserializer=resp_cls.FromString)
        return rpc(request, metadata=md, timeout=10)

    def unpack(self, any_msg) -> Any:
        full_name = any_msg.type_url.rsplit("/", 1)[-1]
        cls = self.message(full_name)
        return cls.FromString(any_msg.value)

    def stream(self, service: str, method: str, token: str | None = None, **fields: Any) -> Iterator[Any]:
        return self.call(service, method, token, **fields)
