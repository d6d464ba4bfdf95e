"""A client that leaves is not a server error: relay and Subscribe streams
whose clients hang up (never having read, or in the middle of calls) end
quietly, free what they held, and leave the gauges reading what is true."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from compass_server.store.types import TextBlock
from tests.procs import ServerProcess
from tests.relay_client import RelayClient, runner_for
from tests.test_memory_bounds import Stalled, post_big, settle
from tests.test_metrics import scrape, value
from tests.world import World

pytestmark = pytest.mark.timeout(600)

# What the gauges and logs may take to settle on a loaded machine.
DEADLINE = 120.0


def _page_call(w: World) -> gw.CommsCallRequest:
    return gw.CommsCallRequest(
        list_messages=pb.ListMessagesRequest(channel_id=str(w.channel.channel_id))
    )


async def _gauges_settle(server: ServerProcess, **want: float) -> dict[str, float]:
    """Scrapes until every named gauge reads its value; the last readings."""
    return await _gauges_until(server, lambda now: now == want, *want)


async def _gauges_until(
    server: ServerProcess, done: Callable[[dict[str, float]], bool], *names: str
) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    until = loop.time() + DEADLINE
    while True:
        samples = await scrape(server.http_port)
        now = {name: value(samples, name) for name in names}
        if done(now) or loop.time() > until:
            return now
        await asyncio.sleep(0.5)


async def _access_lines(server: ServerProcess, n: int) -> list[str]:
    """The statuses of the streams' access lines, once n are logged."""
    pattern = re.compile(r"grpc (?:AgentGatewayService/Relay|CommsService/Subscribe) (\w+)")
    loop = asyncio.get_running_loop()
    until = loop.time() + DEADLINE
    while True:
        found = [m.group(1) for line in list(server.log) if (m := pattern.search(line))]
        if len(found) >= n or loop.time() > until:
            return found
        await asyncio.sleep(0.5)


def _errors(server: ServerProcess) -> list[str]:
    return [line for line in server.log if " ERROR " in line or "Traceback" in line]


async def test_clients_that_hang_up_are_no_server_errors(database_url: str, store: Store) -> None:
    w = await World.create(store)
    start = await post_big(w, 30)  # ~7.5 MB: more than a stream's outbox and socket
    runners = [await runner_for(w) for _ in range(8)]
    server = ServerProcess(
        database_url,
        env={"COMPASS_LOG_LEVEL": "INFO", "COMPASS_SLOW_STREAM_SECONDS": "120"},
    ).start()
    try:
        # Relay streams that bind, call for pages and never read, then go.
        stalled = Stalled(server.grpc_port)
        for token in runners:
            call = await stalled.relay(token, str(w.agent.account_id), 10)
            for i in range(6):
                await call.write(
                    gw.RunnerFrame(
                        call=gw.RelayCommsCallRequest(
                            session_id="s0", call_id=f"c{i}", call=_page_call(w)
                        )
                    )
                )
        # Subscribe streams replaying the backlog that never read, too.
        for _ in range(4):
            stalled.subscribe(w.tokens[w.human.account_id], start)
        settled = await _gauges_settle(server, compass_relay_sessions=80.0, compass_subscribers=4.0)
        assert settled == {"compass_relay_sessions": 80.0, "compass_subscribers": 4.0}
        await asyncio.sleep(2.0)  # the answers and deliveries fill what the streams hold
        await stalled.close()

        # Relay streams that read, cancelled with their calls in flight.
        for round_ in range(3):
            clients = []
            for token in runners[:4]:
                client = RelayClient.grpc(server.grpc_port, token)
                for i in range(3):
                    await client.bound(f"s{i}", w.agent)
                calls = [client.start_call("s0", _page_call(w)) for _ in range(10)]
                clients.append((client, calls))
            await asyncio.sleep(0.2 * round_)
            for client, calls in clients:
                for pending in calls:
                    pending.cancel()
                await client.close()

        settled = await _gauges_settle(server, compass_relay_sessions=0.0, compass_subscribers=0.0)
        assert settled == {"compass_relay_sessions": 0.0, "compass_subscribers": 0.0}
        assert _errors(server) == []
        # Each stream's access line says its client went away.
        ended = await _access_lines(server, 8 + 4 + 12)
        assert len(ended) == 8 + 4 + 12, ended
        assert set(ended) == {"cancelled"}, ended
    finally:
        assert server.stop() == 0
    assert _errors(server) == []
    assert not [line for line in server.log if "did not finish" in line]


async def test_delivery_lag_reads_zero_once_its_streams_are_gone(
    database_url: str, store: Store
) -> None:
    """Sessions behind a backlog show as lag while they are bound; once their
    runner hangs up there is nobody behind, and the gauge says so."""
    w = await World.create(store)
    runner = await runner_for(w)
    server = ServerProcess(
        database_url, env={"COMPASS_RELAY_WINDOW": "4", "COMPASS_SLOW_STREAM_SECONDS": "120"}
    ).start()
    try:
        client = RelayClient.grpc(server.grpc_port, runner)
        for i in range(5):
            await client.bound(f"s{i}", w.agent)
        # Deliveries it takes and never acks: each session's window fills.
        for _ in range(30):
            await w.store.append_message(w.human, w.channel.channel_id, [TextBlock("hi")])
        behind = await _gauges_until(
            server,
            lambda now: now["compass_delivery_lag_events"] >= 1,
            "compass_delivery_lag_events",
        )
        assert behind["compass_delivery_lag_events"] >= 1, behind
        await client.close()
        settled = await _gauges_settle(
            server, compass_relay_sessions=0.0, compass_delivery_lag_events=0.0
        )
        assert settled == {"compass_relay_sessions": 0.0, "compass_delivery_lag_events": 0.0}
    finally:
        assert server.stop() == 0


async def test_calls_of_a_stream_that_hung_up_hold_nothing(database_url: str, store: Store) -> None:
    """A runner that asks for large pages and hangs up without reading them,
    again and again: what its calls answer goes nowhere and is let go, and
    the server stops promptly."""
    w = await World.create(store)
    await post_big(w, 20)  # one page of messages is ~5 MB
    runner = await runner_for(w)
    # Large buffers mapped on their own and unmapped when freed, so RSS
    # follows what is held rather than what glibc keeps for reuse.
    env = {"COMPASS_SLOW_STREAM_SECONDS": "120", "MALLOC_MMAP_THRESHOLD_": "262144"}
    server = ServerProcess(database_url, env=env).start()
    try:

        async def hang_up_on_pages() -> None:
            stalled = Stalled(server.grpc_port)
            call = await stalled.relay(runner, str(w.agent.account_id), 1)
            for i in range(4):
                await call.write(
                    gw.RunnerFrame(
                        call=gw.RelayCommsCallRequest(
                            session_id="s0", call_id=f"c{i}", call=_page_call(w)
                        )
                    )
                )
            await asyncio.sleep(1.5)  # the calls answer into the stream's outbox
            await stalled.close()

        # The allocator keeps what one stream's answers needed at their peak;
        # a few streams first, so what is measured is what stays per stream.
        for _ in range(3):
            await hang_up_on_pages()
        await _gauges_settle(server, compass_relay_sessions=0.0)
        base = await settle(server)
        for _ in range(12):
            await hang_up_on_pages()
        await _gauges_settle(server, compass_relay_sessions=0.0)
        grown = (await settle(server) - base) / 1024
        print(f"12 streams that hung up on their pages grew RSS by {grown:.1f} MB")
        # Kept, what the twelve outboxes dropped grows RSS by ~45 MB; let go,
        # by under 10.
        assert grown < 24, f"RSS grew {grown:.0f} MB"
    finally:
        assert server.stop() == 0
    assert not [line for line in server.log if "did not finish" in line], server.log


async def test_a_runner_that_finishes_writing_gets_every_answer(
    database_url: str, store: Store
) -> None:
    """A runner that sends its calls and half-closes, reading only then: the
    stream ends after the last answer, none dropped on the way."""
    w = await World.create(store)
    await post_big(w, 20)  # one page of messages is ~5 MB, more than the outbox
    runner = await runner_for(w)
    server = ServerProcess(database_url, env={"COMPASS_SLOW_STREAM_SECONDS": "120"}).start()
    try:
        stalled = Stalled(server.grpc_port)
        call = await stalled.relay(runner, str(w.agent.account_id), 1)
        for i in range(4):
            await call.write(
                gw.RunnerFrame(
                    call=gw.RelayCommsCallRequest(
                        session_id="s0", call_id=f"c{i}", call=_page_call(w)
                    )
                )
            )
        await call.done_writing()
        await asyncio.sleep(3.0)  # the answers wait for the runner to read
        results = []
        async with asyncio.timeout(DEADLINE):
            async for frame in call:
                if frame.WhichOneof("frame") == "result":
                    results.append(frame.result)
        assert sorted(r.call_id for r in results) == ["c0", "c1", "c2", "c3"]
        assert all(r.result.WhichOneof("result") == "list_messages" for r in results)
        await stalled.close()
    finally:
        assert server.stop() == 0
