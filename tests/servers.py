"""Clients that make the same call over gRPC, Connect binary and Connect JSON."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from connectrpc.errors import ConnectError
from google.protobuf.message import Message

from compass.v1 import (
    admin_connect,
    admin_pb2,
    comms_connect,
    comms_pb2,
    preferences_connect,
    preferences_pb2,
)
from compass_server.transport.binding import snake

# Extra metadata or headers for one call (a traceparent, say).
Pair = tuple[str, str]

# Method names are unique across these services: a call finds its service by name.
SERVICES: dict[str, tuple[Any, Any]] = {
    "CommsService": (comms_pb2, comms_connect.CommsServiceClient),
    "AdminService": (admin_pb2, admin_connect.AdminServiceClient),
    "IdentityService": (admin_pb2, admin_connect.IdentityServiceClient),
    "PreferencesService": (preferences_pb2, preferences_connect.PreferencesServiceClient),
}


class CallError(Exception):
    """A call's failure as the client saw it: the status token and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def authorization(token: str | None) -> str | None:
    """The header for a token; "raw:<value>" sends <value> as it is."""
    if token is None:
        return None
    return token[4:] if token.startswith("raw:") else f"Bearer {token}"


def _service_of(method: str) -> str:
    for service, (module, _) in SERVICES.items():
        if method in module.DESCRIPTOR.services_by_name[service].methods_by_name:
            return service
    raise KeyError(method)


def _method(name: str) -> Any:
    module = SERVICES[_service_of(name)][0]
    return module.DESCRIPTOR.services_by_name[_service_of(name)].methods_by_name[name]


def _path(method: str) -> str:
    return f"/compass.v1.{_service_of(method)}/{method}"


def _response_class(name: str) -> type[Message]:
    module = SERVICES[_service_of(name)][0]
    return getattr(module, _method(name).output_type.name)  # type: ignore[no-any-return]


class GrpcClient:
    name = "grpc"

    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")

    async def close(self) -> None:
        await self.channel.close()

    @staticmethod
    def _metadata(token: str | None) -> list[tuple[str, str]]:
        value = authorization(token)
        return [("authorization", value)] if value is not None else []

    async def call(
        self, method: str, request: Message, token: str | None, extra: Sequence[Pair] = ()
    ) -> Any:
        rpc = self.channel.unary_unary(
            _path(method),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_response_class(method).FromString,
        )
        try:
            return await rpc(request, metadata=[*self._metadata(token), *extra], timeout=30)
        except grpc.aio.AioRpcError as exc:
            raise CallError(exc.code().name.lower(), exc.details() or "") from None

    async def stream(self, method: str, request: Message, token: str | None) -> AsyncIterator[Any]:
        rpc = self.channel.unary_stream(
            _path(method),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_response_class(method).FromString,
        )
        call = rpc(request, metadata=self._metadata(token))
        try:
            async for item in call:
                yield item
        except grpc.aio.AioRpcError as exc:
            raise CallError(exc.code().name.lower(), exc.details() or "") from None
        finally:
            call.cancel()


class ConnectClient:
    def __init__(self, port: int, codec: str) -> None:
        from connectrpc.compat import google_protobuf_codecs

        codecs = {c.name(): c for c in google_protobuf_codecs()}
        self.name = f"connect-{codec}"
        self.clients = {
            service: client_class(
                f"http://127.0.0.1:{port}", codec=codecs[codec], timeout_ms=30_000
            )
            for service, (_, client_class) in SERVICES.items()
        }

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()

    @staticmethod
    def _headers(token: str | None) -> dict[str, str]:
        value = authorization(token)
        return {"authorization": value} if value is not None else {}

    async def call(
        self, method: str, request: Message, token: str | None, extra: Sequence[Pair] = ()
    ) -> Any:
        try:
            rpc = getattr(self.clients[_service_of(method)], snake(method))
            return await rpc(request, headers={**self._headers(token), **dict(extra)})
        except ConnectError as exc:
            raise CallError(exc.code.value, exc.message) from None

    async def stream(self, method: str, request: Message, token: str | None) -> AsyncIterator[Any]:
        try:
            rpc = getattr(self.clients[_service_of(method)], snake(method))
            async for item in rpc(request, headers=self._headers(token)):
                yield item
        except ConnectError as exc:
            raise CallError(exc.code.value, exc.message) from None


Client = GrpcClient | ConnectClient


BIN = pathlib.Path(sys.executable).parent


def serve_process(database_url: str, *flags: str, **env: str) -> subprocess.Popen[str]:
    """`compass-server serve` as its own process on free loopback ports, with
    no COMPASS_ setting from the test's environment but `env` (log level INFO
    unless given); it prints its ports as one JSON line when ready."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("COMPASS_")}
    return subprocess.Popen(
        [
            BIN / "compass-server",
            "serve",
            *("--database-url", database_url, "--grpc-listen", "0", "--http-listen", "0"),
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**base, "COMPASS_LOG_LEVEL": "INFO", **env},
    )


def stop_process(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM, then its exit status and everything it wrote to stderr."""
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    err = proc.stderr.read() if proc.stderr else ""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return code, err
