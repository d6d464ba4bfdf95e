"""A subscriber that stops reading can't grow the server's memory: its
stream is closed with a clear status and it resumes from its cursor."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(300)


async def test_a_stalled_subscriber_is_closed_and_resumes_with_nothing_lost(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    human = w.tokens[w.human.account_id]
    server = ServerProcess(database_url, env={"COMPASS_SLOW_STREAM_SECONDS": "2"}).start()
    client = GrpcClient(server.grpc_port)
    try:
        stalled = client.stream("Subscribe", pb.SubscribeRequest(), human)
        ready = await asyncio.wait_for(anext(stalled), 10)
        rss_before = server.rss_kib()
        text = "x" * 4000
        for start in range(0, 1500, 50):
            await asyncio.gather(
                *(w.post_text(w.human, f"{i} {text}") for i in range(start, start + 50))
            )
        await asyncio.sleep(4)  # past the slow-stream limit
        grown_mib = (server.rss_kib() - rss_before) / 1024
        # ~6 MB of events went by; the server held none of them per subscriber.
        assert grown_mib < 40, grown_mib
        got: list[int] = []
        with pytest.raises(CallError) as closed:
            async for event in stalled:
                got.append(event.event_id)
        assert closed.value.code == "resource_exhausted"
        assert "resume" in closed.value.message
        assert len(got) < 1500  # it was cut off, not drained
        resumed = client.stream(
            "Subscribe",
            pb.SubscribeRequest(after_event_id=got[-1] if got else ready.event_id),
            human,
        )
        await asyncio.wait_for(anext(resumed), 10)
        while len(got) < 1500:
            got.append((await asyncio.wait_for(anext(resumed), 10)).event_id)
        assert got == list(range(ready.event_id + 1, ready.event_id + 1501))
        await resumed.aclose()  # type: ignore[attr-defined]
    finally:
        await client.close()
        assert server.stop() == 0


async def test_a_stalled_connect_subscriber_is_let_go(database_url: str, store: Store) -> None:
    """Over Connect the stream is ended once a send waits past the limit (a
    client that doesn't read can't be told more); memory stays bounded."""
    w = await World.create(store)
    server = ServerProcess(
        database_url, env={"COMPASS_SLOW_STREAM_SECONDS": "2", "COMPASS_LOG_LEVEL": "INFO"}
    ).start()
    sock = socket.create_connection(("127.0.0.1", server.http_port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        body = b"{}"
        envelope = b"\x00" + struct.pack(">I", len(body)) + body
        token = w.tokens[w.human.account_id]
        sock.sendall(
            b"POST /compass.v1.CommsService/Subscribe HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/connect+json\r\n"
            + f"Authorization: Bearer {token}\r\nContent-Length: {len(envelope)}\r\n\r\n".encode()
            + envelope
        )
        await asyncio.sleep(0.5)
        rss_before = server.rss_kib()
        text = "x" * 4000
        for start in range(0, 1500, 50):
            await asyncio.gather(
                *(w.post_text(w.human, f"{i} {text}") for i in range(start, start + 50))
            )
        await asyncio.sleep(4)
        assert (server.rss_kib() - rss_before) / 1024 < 40
        assert any("closed a stalled stream" in line for line in server.log), server.log[-5:]
    finally:
        sock.close()
        assert server.stop() == 0
