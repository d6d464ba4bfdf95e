"""A stream whose client goes away ends within seconds and frees its place,
whatever the server was doing: even blocked sending a backlog larger than
the socket buffers. Over HTTP/1.1, h2c and gRPC."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Awaitable, Callable

import grpc
import h2.config
import h2.connection
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_memory_bounds import post_big
from tests.world import World

pytestmark = pytest.mark.timeout(300)

PATH = "/compass.v1.CommsService/Subscribe"


def _envelope(after: int) -> bytes:
    body = json.dumps({"afterEventId": str(after)}).encode()
    return b"\x00" + struct.pack(">I", len(body)) + body


def _small_socket(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


async def _http1(port: int, token: str, after: int) -> Callable[[], Awaitable[None]]:
    sock = _small_socket(port)
    envelope = _envelope(after)
    sock.sendall(
        f"POST {PATH} HTTP/1.1\r\nHost: t\r\nContent-Type: application/connect+json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(envelope)}\r\n\r\n".encode()
        + envelope
    )
    assert b"200" in await asyncio.to_thread(sock.recv, 1024)
    return _closing(sock)


async def _h2c(port: int, token: str, after: int) -> Callable[[], Awaitable[None]]:
    sock = _small_socket(port)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    envelope = _envelope(after)
    conn.send_headers(
        1,
        [
            (":method", "POST"),
            (":path", PATH),
            (":scheme", "http"),
            (":authority", "t"),
            ("content-type", "application/connect+json"),
            ("authorization", f"Bearer {token}"),
        ],
    )
    conn.send_data(1, envelope, end_stream=True)
    sock.sendall(conn.data_to_send())
    assert await asyncio.to_thread(sock.recv, 65536)
    return _closing(sock)


async def _grpc(port: int, token: str, after: int) -> Callable[[], Awaitable[None]]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    rpc = channel.unary_stream(
        PATH,
        request_serializer=pb.SubscribeRequest.SerializeToString,
        response_deserializer=pb.Event.FromString,
    )
    call = rpc(
        pb.SubscribeRequest(after_event_id=after),
        metadata=[("authorization", f"Bearer {token}")],
    )
    await call.read()

    async def close() -> None:
        await channel.close(grace=None)

    return close


def _closing(sock: socket.socket) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        sock.close()

    return close


Open = Callable[[int, str, int], Awaitable[Callable[[], Awaitable[None]]]]


@pytest.mark.parametrize("transport", ["http1", "h2c", "grpc"], ids=["http1", "h2c", "grpc"])
async def test_a_stream_whose_client_went_away_frees_its_place(
    database_url: str, store: Store, transport: str
) -> None:
    w = await World.create(store)
    start = await post_big(w, 40)  # ~10 MB: more than any socket buffer
    server = ServerProcess(
        database_url,
        env={
            "COMPASS_SUBSCRIBE_STREAMS_PER_ACCOUNT": "2",
            "COMPASS_SLOW_STREAM_SECONDS": "600",
        },
    ).start()
    token = w.tokens[w.human.account_id]
    open_stream: Open = {"http1": _http1, "h2c": _h2c, "grpc": _grpc}[transport]
    port = server.grpc_port if transport == "grpc" else server.http_port
    client = GrpcClient(server.grpc_port)

    async def subscribe() -> None:
        await asyncio.wait_for(anext(client.stream("Subscribe", pb.SubscribeRequest(), token)), 10)

    try:
        for _ in range(2):
            # The account's streams, each blocked on a backlog its client
            # doesn't read: no room for another...
            closers = [await open_stream(port, token, start) for _ in range(2)]
            await asyncio.sleep(1.0)
            with pytest.raises(CallError) as info:
                await subscribe()
            assert info.value.code == "resource_exhausted"
            # ...until their clients go away: within seconds, there is.
            for close in closers:
                await close()
            for _ in range(20):
                try:
                    await subscribe()
                    break
                except CallError as exc:
                    assert exc.code == "resource_exhausted", exc
                    await asyncio.sleep(0.5)
            else:
                pytest.fail("the streams never ended after their clients went away")
            await client.close()
            client = GrpcClient(server.grpc_port)
            await asyncio.sleep(0.5)
    finally:
        await client.close()
        assert server.stop() == 0
