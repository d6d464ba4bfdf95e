"""gRPC on grpc.aio, with health and reflection, adapting service bindings."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc._cython import cygrpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from compass_server.api import surface
from compass_server.api.auth import Authenticator
from compass_server.api.errors import ApiError, Status, to_api_error
from compass_server.api.text import check_strings
from compass_server.events.hub import Closed
from compass_server.store.types import Surface
from compass_server.telemetry.calls import Observer
from compass_server.transport.binding import Method, ServiceBinding

log = logging.getLogger(__name__)

# Inbox pictures ride in requests; one request carries at most this much.
MAX_MESSAGE_BYTES = 8 << 20
FELL_BEHIND = ApiError(
    Status.RESOURCE_EXHAUSTED,
    "the stream fell behind (the client stopped reading); reconnect and resume from the last"
    " event id you received",
)
SHUTTING_DOWN = ApiError(
    Status.UNAVAILABLE, "the server is shutting down; reconnect and resume from your cursor"
)
# How grpc.aio fails a write once the call is over on the client's side (it
# hung up, or cancelled): grpc.aio's own stream handlers take it so too.
CLIENT_GONE: type[Exception] = cygrpc.ExecuteBatchError


def _error(exc: BaseException) -> ApiError:
    return SHUTTING_DOWN if isinstance(exc, Closed) else to_api_error(exc)


async def _abort(context: grpc.aio.ServicerContext[Any, Any], err: ApiError) -> None:
    await context.abort(grpc.StatusCode[err.status.name], err.message)


def _metadata(context: grpc.aio.ServicerContext[Any, Any], key: str) -> str | None:
    for name, value in context.invocation_metadata() or ():
        if name == key:
            return value if isinstance(value, str) else value.decode()
    return None


def _authorization(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    return _metadata(context, "authorization")


def _trace_headers(
    observer: Observer, context: grpc.aio.ServicerContext[Any, Any]
) -> dict[str, str] | None:
    """The W3C trace context a caller sent, read only when tracing is on."""
    if observer.tracer is None:
        return None
    return {
        key: value
        for key in ("traceparent", "tracestate")
        if (value := _metadata(context, key)) is not None
    }


def _parser(method: Method) -> Any:
    """Requests are parsed here, not by grpcio, whose parse failure reaches the
    client as UNKNOWN with the exception's text. A stream's frames are checked
    by the service, which answers a bad frame in-band."""
    name = method.request.DESCRIPTOR.full_name

    def parse(data: bytes) -> Any:
        try:
            request = method.request.FromString(data)
        except DecodeError:
            raise ApiError(Status.INVALID_ARGUMENT, f"the request is not a valid {name}") from None
        if not method.client_streaming:
            check_strings(request)
        return request

    return parse


async def _parsed(requests: AsyncIterator[bytes], parse: Any) -> AsyncIterator[Any]:
    async for data in requests:
        yield parse(data)


def _handler(
    binding: ServiceBinding,
    method: Method,
    auth: Authenticator,
    slow_stream_seconds: float,
    observer: Observer,
) -> grpc.RpcMethodHandler:
    resolve = binding.resolver(auth)
    fn = getattr(binding.impl, method.attr)
    parse = _parser(method)
    name = f"{binding.short_name}/{method.name}"
    kwargs = {
        "request_deserializer": None,
        "response_serializer": method.response.SerializeToString,
    }

    if not method.server_streaming:

        async def unary(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            with observer.call("grpc", name, headers=_trace_headers(observer, context)) as call:
                try:
                    signed = await resolve(_authorization(context))
                    call.signed_in(signed.principal)
                    with surface.through(Surface.GRPC):
                        return await fn(binding.caller(signed), parse(request))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    err = _error(exc)
                call.status = err.status.token
            await _abort(context, err)

        return grpc.unary_unary_rpc_method_handler(unary, **kwargs)

    async def stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        with observer.call("grpc", name, headers=_trace_headers(observer, context)) as call:
            try:
                signed = await resolve(_authorization(context))
                call.signed_in(signed.principal)
                arg = _parsed(request, parse) if method.client_streaming else parse(request)
                with auth.guard(signed) as guard:
                    # Closed here, whichever way the call ends: what the stream
                    # holds is let go now, not when a collection finds it.
                    items = guard.watch(fn(binding.caller(signed), arg))
                    async with contextlib.aclosing(items):
                        async for item in items:
                            # A client that stops reading holds a write here; past the
                            # limit its stream is closed, so it can't pin server memory.
                            try:
                                async with asyncio.timeout(slow_stream_seconds):
                                    await context.write(item)
                            except TimeoutError:
                                err = FELL_BEHIND
                                break
                            except CLIENT_GONE:
                                call.status = "cancelled"
                                return
                        else:
                            return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if context.done():
                    call.status = "cancelled"
                    return  # the client went away mid-stream; nobody to tell
                err = _error(exc)
            call.status = err.status.token
        await _abort(context, err)

    if method.client_streaming:
        return grpc.stream_stream_rpc_method_handler(stream, **kwargs)
    return grpc.unary_stream_rpc_method_handler(stream, **kwargs)


class GrpcServer:
    def __init__(
        self,
        bindings: Sequence[ServiceBinding],
        auth: Authenticator,
        *,
        slow_stream_seconds: float = 30.0,
        observer: Observer | None = None,
        reuse_port: bool = False,
    ) -> None:
        observer = observer or Observer(access=False)
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                # Only workers of one `serve` share a port; never two servers by accident.
                ("grpc.so_reuseport", int(reuse_port)),
            ]
        )
        for binding in bindings:
            handlers = {
                m.name: _handler(binding, m, auth, slow_stream_seconds, observer)
                for m in binding.methods
            }
            self.server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(binding.full_name, handlers),)
            )
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = [b.full_name for b in bindings]
        reflection.enable_server_reflection(
            [
                *names,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ],
            self.server,
        )
        self._names = names
        self.port = 0

    async def start(self, listen: str, credentials: grpc.ServerCredentials | None = None) -> int:
        """Listens (with TLS when given credentials) and serves; health
        says NOT_SERVING until `serving(True)`."""
        if credentials is None:
            self.port = self.server.add_insecure_port(listen)
        else:
            self.port = self.server.add_secure_port(listen, credentials)
        if self.port == 0:
            raise OSError(f"can't listen for gRPC on {listen}")
        await self.serving(False)
        await self.server.start()
        return self.port

    async def serving(self, ready: bool) -> None:
        """What health reports for the server and each of its services."""
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if ready
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ["", *self._names]:
            await self.health.set(name, status)

    async def stop(self, grace: float) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
