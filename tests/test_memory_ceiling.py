"""The worst memory attacks at once, at small scale, against a real server:
its RSS stays under the ceiling docs/database.md works out from its
settings, each cache and window counted at what it really weighs."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.api import mapping as wire
from compass_server.store import Store
from tests.procs import ServerProcess
from tests.relay_client import runner_for
from tests.servers import GrpcClient
from tests.test_cache_weights import many_options
from tests.test_memory_bounds import Stalled, settle
from tests.world import World

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20
LIMITS = {
    "COMPASS_ASK_CACHE_BYTES": 2 * MIB,
    "COMPASS_WIRE_CACHE_BYTES": 2 * MIB,
    "COMPASS_RECEIPT_CACHE_BYTES": 1 * MIB,
    "COMPASS_EVENT_WINDOW_BYTES": 2 * MIB,
    "COMPASS_REPLAY_BYTES": 16 * MIB,
    "COMPASS_REPLAY_BYTES_PER_TOKEN": 8 * MIB,
    "COMPASS_RELAY_OUTBOX_BYTES": 1 * MIB,
    "COMPASS_RELAY_CALL_BYTES": 5 * MIB,
}
# Messages of an ask of 20 questions of 50 small options: ~50 KB as stored,
# ~320 KB decoded, the worst ratio of objects to bytes a client can post.
MESSAGES = 48
READERS = 16
STALLED_STREAMS = 8
CALLS = 24
# Per Subscribe stream: one event in hand, decoded and as a protobuf message
# (~11× its stored bytes for these), held for as long as its client doesn't
# read it.
EVENT_IN_HAND = 1 * MIB
# What the allocators keep of memory freed since (pages parsed and answered,
# events decoded once), as measured here.
SLACK = 16 * MIB


def ceiling(relay_streams: int, streams: int) -> int:
    """docs/database.md's ceiling for one workspace with subscribers."""
    return (
        LIMITS["COMPASS_EVENT_WINDOW_BYTES"]
        + LIMITS["COMPASS_REPLAY_BYTES"]
        + relay_streams
        * (LIMITS["COMPASS_RELAY_OUTBOX_BYTES"] + LIMITS["COMPASS_RELAY_CALL_BYTES"])
        + LIMITS["COMPASS_ASK_CACHE_BYTES"]
        + LIMITS["COMPASS_WIRE_CACHE_BYTES"]
        + LIMITS["COMPASS_RECEIPT_CACHE_BYTES"]
        + streams * EVENT_IN_HAND
        + SLACK
    )


async def test_the_worst_attacks_at_once_stay_under_the_documented_ceiling(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    runner = await runner_for(w)
    server = ServerProcess(
        database_url,
        env={"COMPASS_SLOW_STREAM_SECONDS": "120", **{k: str(v) for k, v in LIMITS.items()}},
    ).start()
    client = GrpcClient(server.grpc_port)
    stalled = Stalled(server.grpc_port)
    post = pb.PostMessageRequest(
        channel_id=str(w.channel.channel_id),
        blocks=[wire.block_to_wire(many_options())],
        allow_identical=True,
    )
    agent = w.tokens[w.agent.account_id]
    try:
        for _ in range(2):
            await client.call("PostMessage", post, agent)
        first = await store.last_event_id(w.human)
        base = await settle(server)

        # Readers that read everything as it comes: the event window and the
        # wire cache.
        async def read_all() -> int:
            events = client.stream(
                "Subscribe",
                pb.SubscribeRequest(after_event_id=first),
                w.tokens[w.human.account_id],
            )
            seen = 0
            async for event in events:
                if event.HasField("message_posted"):
                    seen += 1
                    if seen == MESSAGES:
                        break
            with contextlib.suppress(Exception):
                await events.aclose()  # type: ignore[attr-defined]
            return seen

        reading = asyncio.gather(*(read_all() for _ in range(READERS)))
        # Asks of many small options, posted eight at a time: the ask cache.
        for _ in range(MESSAGES // 8):
            await asyncio.gather(*(client.call("PostMessage", post, agent) for _ in range(8)))

        # Streams that never read, from the start: each holds its page and
        # its event in hand.
        for _ in range(STALLED_STREAMS):
            stalled.subscribe(w.tokens[w.other_human.account_id], first)
        # A relay stream that never reads, its calls for pages of these.
        call = await stalled.relay(runner, str(w.agent.account_id), 1)
        page = pb.ListMessagesRequest(channel_id=str(w.channel.channel_id), page_size=10)

        async def send_calls() -> None:
            for i in range(CALLS):
                await call.write(
                    gw.RunnerFrame(
                        call=gw.RelayCommsCallRequest(
                            session_id="s0",
                            call_id=f"c{i}",
                            call=gw.CommsCallRequest(list_messages=page),
                        )
                    )
                )

        sending = asyncio.ensure_future(send_calls())
        seen = await asyncio.wait_for(reading, 90)
        assert seen == [MESSAGES] * READERS, seen
        await asyncio.sleep(2.0)
        grown = (await settle(server, 4.0) - base) * 1024
        # The RSS keeps the readers' peak, each with its event in hand.
        limit = ceiling(relay_streams=1, streams=READERS + STALLED_STREAMS)
        print(f"RSS grew {grown / MIB:.1f} MiB; the ceiling is {limit / MIB:.0f} MiB")
        assert grown < limit, f"RSS grew {grown / MIB:.0f} MiB, over {limit / MIB:.0f} MiB"
        sending.cancel()
        with contextlib.suppress(BaseException):
            await sending
    finally:
        await stalled.close()
        await client.close()
        assert server.stop() == 0
