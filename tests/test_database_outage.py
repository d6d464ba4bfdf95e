"""While the database is down, calls fail at once with UNAVAILABLE; none
waits on it longer than database.wait_seconds, even when it accepts
connections and never answers (frozen); everything recovers by itself."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from connectrpc.errors import ConnectError

from compass.v1 import comms_pb2 as pb
from compass_server.store import Database, Store
from tests.procs import ServerProcess
from tests.servers import CallError, ConnectClient, GrpcClient
from tests.test_faults import own_postgres  # noqa: F401  (the fixture, by name)
from tests.world import World

pytestmark = pytest.mark.timeout(300)

# What a call may take to fail while the server knows the database is down:
# well under a second on a quiet machine, with room for a loaded one.
AT_ONCE = 3.0


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def _until_ready(port: int, want: int, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while (got := await asyncio.to_thread(_readyz, port)) != want:
        assert time.monotonic() < deadline, f"/readyz stayed {got}, never {want}"
        await asyncio.sleep(0.2)


async def _grpc_list(port: int, token: str, deadline: float) -> tuple[str, str, float]:
    """ListChannels over gRPC with a deadline: (status, message, seconds taken)."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        rpc = channel.unary_unary(
            "/compass.v1.CommsService/ListChannels",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.ListChannelsResponse.FromString,
        )
        start = time.monotonic()
        try:
            await rpc(
                pb.ListChannelsRequest(),
                metadata=[("authorization", f"Bearer {token}")],
                timeout=deadline,
            )
            return "ok", "", time.monotonic() - start
        except grpc.aio.AioRpcError as exc:
            return exc.code().name.lower(), exc.details() or "", time.monotonic() - start


async def _connect_list(port: int, token: str) -> tuple[str, str, float]:
    client = ConnectClient(port, "json")
    start = time.monotonic()
    try:
        await client.call("ListChannels", pb.ListChannelsRequest(), token)
        return "ok", "", time.monotonic() - start
    except CallError as exc:
        return exc.code, exc.message, time.monotonic() - start
    except ConnectError as exc:
        return exc.code.value, exc.message, time.monotonic() - start
    finally:
        await client.close()


async def _world(url: str) -> World:
    db = Database(url, min_size=1, max_size=2)
    await db.open()
    try:
        return await World.create(Store(db))
    finally:
        await db.close()


def _processes_of(pg_data: pathlib.Path) -> Iterator[int]:
    """The postmaster of the cluster under `pg_data` and every process it started."""
    postmaster = int((pg_data / "postmaster.pid").read_text().split()[0])
    yield postmaster
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid …: comm may hold spaces, so read after its ")".
        if int(stat.rpartition(")")[2].split()[1]) == postmaster:
            yield int(entry.name)


def _signal_all(pg_data: pathlib.Path, signum: int) -> None:
    for pid in _processes_of(pg_data):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


async def test_calls_fail_at_once_while_the_database_is_stopped_and_recover(
    own_postgres: Any,  # noqa: F811
) -> None:
    pg, url = own_postgres
    w = await _world(url)
    token = w.tokens[w.human.account_id]
    server = ServerProcess(url).start()
    watcher = GrpcClient(server.grpc_port)
    heard: list[Any] = []
    ended: list[str] = []

    async def subscribe() -> None:
        try:
            async for event in watcher.stream("Subscribe", pb.SubscribeRequest(), token):
                heard.append(event)
        except CallError as exc:
            ended.append(exc.code)

    stream = asyncio.create_task(subscribe())
    try:
        assert (await _grpc_list(server.grpc_port, token, 10))[0] == "ok"
        await asyncio.to_thread(pg.stop)
        # The first call may be the one that finds out; it still fails well
        # within the client's deadline, as UNAVAILABLE.
        status, message, _ = await _grpc_list(server.grpc_port, token, 10)
        assert status == "unavailable", (status, message)
        await _until_ready(server.http_port, 503)
        for _ in range(5):
            status, message, took = await _grpc_list(server.grpc_port, token, 10)
            assert status == "unavailable" and took < AT_ONCE, (status, message, took)
            assert "database" in message and "retry" in message, message
            status, message, took = await _connect_list(server.http_port, token)
            assert status == "unavailable" and took < AT_ONCE, (status, message, took)
        # The people's pages say so too: 503, never a 500.
        for path in ("/a/" + "x" * 43, "/auth/address/" + "y" * 43):
            code, body = await asyncio.to_thread(_get, server.http_port, path)
            assert code == 503 and "try again" in body, (path, code, body)
        await asyncio.to_thread(pg.start)
        await _until_ready(server.http_port, 200)
        assert (await _grpc_list(server.grpc_port, token, 10))[0] == "ok"
        assert (await _connect_list(server.http_port, token))[0] == "ok"
        # A stream open through the outage ended cleanly, or carries on and
        # hears what is posted once the database is back.
        poster = GrpcClient(server.grpc_port)
        try:
            await poster.call(
                "PostMessage",
                pb.PostMessageRequest(
                    channel_id=str(w.channel.channel_id),
                    blocks=[pb.MessageBlock(text=pb.TextBlock(text="back"))],
                ),
                token,
            )
        finally:
            await poster.close()
        deadline = time.monotonic() + 30
        while not ended and not any(e.HasField("message_posted") for e in heard):
            assert time.monotonic() < deadline, "the stream neither ended nor heard the post"
            await asyncio.sleep(0.1)
        assert ended in ([], ["unavailable"]), ended
    finally:
        stream.cancel()
        await watcher.close()
        assert server.stop() == 0
    assert not [line for line in server.log if "Traceback" in line], server.log[-20:]


async def test_no_call_outwaits_the_bound_while_the_database_is_frozen(
    own_postgres: Any,  # noqa: F811
) -> None:
    pg, url = own_postgres
    w = await _world(url)
    token = w.tokens[w.human.account_id]
    server = ServerProcess(url, env={"COMPASS_DATABASE_WAIT_SECONDS": "3"}).start()
    pg_data = pathlib.Path(pg.data_dir)
    frozen = False
    try:
        assert (await _grpc_list(server.grpc_port, token, 10))[0] == "ok"
        _signal_all(pg_data, signal.SIGSTOP)
        frozen = True
        # Calls in flight when it froze, and the first after, end within the bound
        # (3 s here) and a few seconds to notice, not at the client's 60 s deadline.
        first = await asyncio.gather(
            *(_grpc_list(server.grpc_port, token, 60) for _ in range(4)),
            _connect_list(server.http_port, token),
        )
        for status, message, took in first:
            assert status == "unavailable" and took < 15, (status, message, took)
        await _until_ready(server.http_port, 503)
        # Now it knows: at once.
        for _ in range(3):
            status, message, took = await _grpc_list(server.grpc_port, token, 60)
            assert status == "unavailable" and took < AT_ONCE, (status, message, took)
        _signal_all(pg_data, signal.SIGCONT)
        frozen = False
        await _until_ready(server.http_port, 200)
        assert (await _grpc_list(server.grpc_port, token, 10))[0] == "ok"
        assert (await _connect_list(server.http_port, token))[0] == "ok"
    finally:
        if frozen:
            _signal_all(pg_data, signal.SIGCONT)
        assert server.stop() == 0
    assert not [line for line in server.log if "Traceback" in line], server.log[-20:]
