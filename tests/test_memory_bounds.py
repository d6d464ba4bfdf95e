"""Whatever clients do, the server's memory stays under its limits: streams
that never read, relay sessions that never ack, replays of large events, many
large asks. Each limit's refusal is what a client sees past it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from compass_server.store.types import PresenceState, TextBlock
from tests.conftest import running_server
from tests.procs import ServerProcess
from tests.relay_client import RELAY, relay, runner_for
from tests.servers import CallError, GrpcClient
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(300)

MIB = 1 << 20
# 8 blocks of 7,900 emoji: ~253 KB as stored, just under the message limit.
BIG = [TextBlock("😀" * 7_900) for _ in range(8)]


async def post_big(w: World, n: int) -> int:
    """Posts n of the largest messages; the id of the event before them."""
    before = await w.store.last_event_id(w.human)
    for start in range(0, n, 10):
        await asyncio.gather(
            *(
                w.store.append_message(w.human, w.channel.channel_id, BIG)
                for _ in range(min(10, n - start))
            )
        )
    return before


class Stalled:
    """Streams opened against a server and never read."""

    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 16 * MIB)]
        )
        self.calls: list[Any] = []

    def subscribe(self, token: str, after: int) -> None:
        rpc = self.channel.unary_stream(
            "/compass.v1.CommsService/Subscribe",
            request_serializer=pb.SubscribeRequest.SerializeToString,
            response_deserializer=pb.Event.FromString,
        )
        self.calls.append(
            rpc(
                pb.SubscribeRequest(after_event_id=after),
                metadata=[("authorization", f"Bearer {token}")],
            )
        )

    async def relay(self, token: str, agent: str, sessions: int) -> Any:
        rpc = self.channel.stream_stream(
            RELAY,
            request_serializer=gw.RunnerFrame.SerializeToString,
            response_deserializer=gw.HubFrame.FromString,
        )
        call = rpc(metadata=[("authorization", f"Bearer {token}")])
        for i in range(sessions):
            await call.write(
                gw.RunnerFrame(bind=gw.BindSession(session_id=f"s{i}", agent_account_id=agent))
            )
        self.calls.append(call)
        return call

    async def close(self) -> None:
        for call in self.calls:
            call.cancel()
        await self.channel.close()


async def settle(server: ServerProcess, seconds: float = 3.0) -> int:
    """The server's RSS once it stops growing (KiB)."""
    last = server.rss_kib()
    for _ in range(int(seconds / 0.5)):
        await asyncio.sleep(0.5)
        now = server.rss_kib()
        if abs(now - last) < 512:
            break
        last = now
    return server.rss_kib()


async def test_memory_stays_bounded_whatever_the_clients_do(
    database_url: str, store: Store
) -> None:
    """The issue's cases at small scale: 40 of the largest messages (~10 MB),
    then 10 Subscribe streams replaying them that never read, a relay stream
    binding 20 sessions of one agent that never reads, and one whose 20
    sessions read but never ack. The log is ten times the event window, so
    every replay reads it."""
    w = await World.create(store)
    start = await post_big(w, 40)
    stalling_runner, other_runner = await runner_for(w), await runner_for(w)
    server = ServerProcess(
        database_url,
        env={
            "COMPASS_SLOW_STREAM_SECONDS": "120",
            "COMPASS_EVENT_WINDOW_BYTES": str(1 * MIB),
            "COMPASS_REPLAY_BYTES": str(8 * MIB),
            "COMPASS_REPLAY_BYTES_PER_TOKEN": str(2 * MIB),
            "COMPASS_REPLAY_PAGE_BYTES": str(1 * MIB),
            "COMPASS_RELAY_OUTBOX_BYTES": str(2 * MIB),
            "COMPASS_WIRE_CACHE_BYTES": str(4 * MIB),
            "COMPASS_RELAY_WINDOW": "8",
        },
    ).start()
    stalled = Stalled(server.grpc_port)
    reader = GrpcClient(server.grpc_port)
    try:
        # A well-behaved subscriber reads it all once: the steady state.
        events = reader.stream(
            "Subscribe", pb.SubscribeRequest(after_event_id=start), w.tokens[w.human.account_id]
        )
        got = [e async for e in _take(events, 41)]
        assert [e.event_id for e in got[1:]] == list(range(start + 1, start + 41))
        base = await settle(server)

        for _ in range(10):
            stalled.subscribe(w.tokens[w.human.account_id], start)
        await stalled.relay(stalling_runner, str(w.agent.account_id), 20)
        async with relay(server.grpc_port, other_runner) as acking_never:
            for i in range(20):
                await acking_never.bound(f"n{i}", w.agent)
            # Each takes its window of deliveries and never acks.
            for i in range(20):
                for _ in range(8):
                    await acking_never.delivery(f"n{i}", wait=30)
            grown = (await settle(server, 6.0) - base) / 1024
            # Replay budget 8 MB + relay outboxes 2 × 2 MB + window 1 MB + wire
            # cache 4 MB, and one event in hand per stream; without the bounds
            # this was over 400 MB.
            assert grown < 80, f"RSS grew {grown:.0f} MB"
            print(f"RSS grew {grown:.1f} MB over {base / 1024:.0f} MB")
        # Still serving everyone else: the stalled streams hold their own
        # shares of the replay budget, not another's.
        fresh = reader.stream(
            "Subscribe",
            pb.SubscribeRequest(after_event_id=start),
            w.tokens[w.agent.account_id],
        )
        got = [e async for e in _take(fresh, 41)]
        assert got[-1].event_id == start + 40
    finally:
        await stalled.close()
        await reader.close()
        assert server.stop() == 0


async def _take(events: AsyncIterator[Any], n: int) -> AsyncIterator[Any]:
    for _ in range(n):
        yield await asyncio.wait_for(anext(events), 30)
    with contextlib.suppress(Exception):
        await events.aclose()  # type: ignore[attr-defined]


async def test_many_large_asks_do_not_grow_memory_past_the_ask_cache(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    server = ServerProcess(database_url, env={"COMPASS_ASK_CACHE_BYTES": str(4 * MIB)}).start()
    client = GrpcClient(server.grpc_port)
    question = pb.AskQuestion(question_id="q", question="😀" * 1_990, options=[])
    ask = pb.Ask(
        questions=[
            pb.AskQuestion(question_id=f"q{i}", question=question.question) for i in range(20)
        ]
    )  # ~160 KB as stored
    request = pb.PostMessageRequest(
        channel_id=str(w.channel.channel_id), blocks=[pb.MessageBlock(ask=ask)]
    )
    token = w.tokens[w.agent.account_id]
    try:
        for _ in range(10):
            await client.call("PostMessage", request, token)
        base = await settle(server)
        for _ in range(30):
            await asyncio.gather(*(client.call("PostMessage", request, token) for _ in range(10)))
        grown = (await settle(server) - base) / 1024
        # 300 asks are ~48 MB; the cache keeps 4 MB of them.
        assert grown < 30, f"RSS grew {grown:.0f} MB"
        print(f"RSS grew {grown:.1f} MB over {base / 1024:.0f} MB")
    finally:
        await client.close()
        assert server.stop() == 0


# --- each limit, and what a client gets past it --------------------------------------


@pytest.fixture(scope="module")
async def tight(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """A server of its own with small limits."""
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("tight"),
        subscribe_streams_per_account=2,
        relay_streams_per_runner=2,
        relay_sessions_per_stream=3,
        relay_window=2,
        relay_ack_timeout_seconds=1.0,
        event_window_bytes=1 * MIB,
        replay_page_bytes=1 * MIB,
        replay_bytes=1 * MIB,
    ) as srv:
        yield srv


async def test_subscribe_streams_per_account_are_capped(tight: Any) -> None:
    w = await World.create(tight.store)
    client = GrpcClient(tight.grpc_port)
    token = w.tokens[w.human.account_id]
    try:
        first = client.stream("Subscribe", pb.SubscribeRequest(), token)
        second = client.stream("Subscribe", pb.SubscribeRequest(), token)
        await anext(first)
        await anext(second)
        with pytest.raises(CallError) as info:
            await anext(client.stream("Subscribe", pb.SubscribeRequest(), token))
        assert info.value.code == "resource_exhausted"
        assert "Subscribe streams" in info.value.message
        # Another account is not affected; a closed stream frees its place.
        await anext(client.stream("Subscribe", pb.SubscribeRequest(), w.tokens[w.agent.account_id]))
        await first.aclose()  # type: ignore[attr-defined]
        await asyncio.sleep(0.3)
        await anext(client.stream("Subscribe", pb.SubscribeRequest(), token))
    finally:
        await client.close()


async def test_relay_streams_per_runner_and_sessions_per_stream_are_capped(tight: Any) -> None:
    w = await World.create(tight.store)
    token = await runner_for(w)
    async with relay(tight.grpc_port, token) as one, relay(tight.grpc_port, token) as two:
        for i in range(3):
            await one.bound(f"s{i}", w.agent)
        frame = await one.bind("s3", w.agent)
        assert frame.WhichOneof("frame") == "session_error", frame
        assert frame.session_error.error.code == "resource_exhausted"
        assert "sessions" in frame.session_error.error.message
        await one.unbind("s0")
        await one.bound("s3", w.agent)
        await two.bound("t0", w.agent)
        async with relay(tight.grpc_port, token) as three:
            ended = await asyncio.wait_for(three.ended, 10)
            assert ended.code == "resource_exhausted", ended
            assert "relay streams" in ended.message


async def test_a_session_that_never_acks_is_ended(tight: Any) -> None:
    w = await World.create(tight.store)
    token = await runner_for(w)
    async with relay(tight.grpc_port, token) as r:
        await r.bound("s", w.agent)
        for i in range(3):
            await w.post_text(w.human, f"m{i}")
        first = await r.delivery("s")
        await r.delivery("s")
        # Its window (2) is full; no ack comes.
        frame = await r.session_frame("s")
        assert frame.WhichOneof("frame") == "session_error", frame
        assert frame.session_error.error.code == "resource_exhausted"
        assert "unacked" in frame.session_error.error.message
        (p,) = await w.store.get_presence(w.human, [w.agent.account_id])
        assert p.state is PresenceState.OFFLINE
        # Bound again, it resumes after its acked cursor: nothing is lost.
        bound = await r.bound("s", w.agent)
        assert bound.acked_event_id < first.event_id
        again = await r.delivery("s")
        assert again.event_id == first.event_id


async def test_replays_share_one_budget_and_all_arrive_in_order(tight: Any) -> None:
    """Three subscribers replay ~10 MB through a replay budget of one page:
    they take turns, and each gets every event once, in order."""
    w = await World.create(tight.store)
    start = await post_big(w, 40)
    await w.store.append_message(w.agent, w.channel.channel_id, [two_question_ask()])
    client = GrpcClient(tight.grpc_port)
    try:

        async def replay(token: str) -> list[int]:
            events = client.stream("Subscribe", pb.SubscribeRequest(after_event_id=start), token)
            return [e.event_id async for e in _take(events, 43)][1:]

        tokens = [w.tokens[w.human.account_id], w.tokens[w.agent.account_id]]
        got = await asyncio.gather(*(replay(t) for t in tokens))
        for ids in got:
            assert ids == list(range(start + 1, start + 43)), ids
        assert tight.hub.replay.used == 0
    finally:
        await client.close()


async def test_a_page_of_messages_is_bounded_in_bytes_and_pages_on(store: Store) -> None:
    """200 of the largest messages would be ~50 MB in one response; a page
    stops at MAX_PAGE_BYTES and its token leads on, nothing skipped."""
    from compass_server.store.messages import MAX_PAGE_BYTES

    w = await World.create(store)
    await post_big(w, 40)  # ~10 MB
    seen: list[Any] = []
    pages = 0
    token = ""
    while True:
        page = await store.list_messages(w.human, w.channel.channel_id, 200, token)
        weight = sum(len(b.text.encode()) for m in page.items for b in m.blocks)  # type: ignore[union-attr]
        assert weight <= MAX_PAGE_BYTES
        seen.extend(m.message_id for m in page.items)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert len(seen) == len(set(seen)) == 40 and pages > 1
    found = await store.search_messages(w.human, "😀", None, 200, "")
    assert 0 < len(found.items) < 40 and found.next_page_token


async def test_the_replay_budget_keeps_each_owner_to_its_share() -> None:
    """One owner at its share waits alone; the others are served past it; a
    taker cancelled while waiting leaves nothing taken."""
    from compass_server.events.hub import Budget

    budget = Budget(total=4, per_owner=2)
    greedy, other = uuid.uuid4(), uuid.uuid4()
    await budget.take(greedy, 1)
    await budget.take(greedy, 1)
    blocked = asyncio.ensure_future(budget.take(greedy, 1))
    await asyncio.sleep(0)
    assert not blocked.done()
    # Not held up by the greedy owner's waiter.
    await asyncio.wait_for(budget.take(other, 1), 1)
    await asyncio.wait_for(budget.take(other, 1), 1)
    assert budget.used == 4
    # The total is spent: a third owner waits its turn, and is cancelled.
    third = asyncio.ensure_future(budget.take(uuid.uuid4(), 1))
    await asyncio.sleep(0)
    third.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await third
    budget.give(other, 1)
    await asyncio.sleep(0)
    assert not blocked.done()  # still over its own share
    budget.give(greedy, 1)
    await asyncio.wait_for(blocked, 1)
    budget.give(greedy, 2)
    budget.give(other, 1)
    assert budget.used == 0 and not budget.owners


async def test_the_replay_budget_serves_in_order_of_arrival_across_owners() -> None:
    """When the total is short, takers are served in the order they came,
    whoever they are: a large one first in line is not passed by later small
    ones of other owners (it would starve)."""
    from compass_server.events.hub import Budget

    budget = Budget(total=10, per_owner=10)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    await budget.take(a, 8)
    large = asyncio.ensure_future(budget.take(b, 5))
    await asyncio.sleep(0)
    small = asyncio.ensure_future(budget.take(c, 1))
    await asyncio.sleep(0)
    assert not large.done() and not small.done()
    # The small one would fit, but the large one came first.
    budget.give(a, 3)
    await asyncio.wait_for(large, 1)
    await asyncio.sleep(0)
    assert not small.done() and budget.used == 10
    budget.give(a, 5)
    await asyncio.wait_for(small, 1)
    budget.give(b, 5)
    budget.give(c, 1)
    assert budget.used == 0 and not budget.owners


async def test_a_relay_stream_that_stops_reading_stops_taking_calls(
    database_url: str, store: Store
) -> None:
    """A runner sends 120 calls for the largest pages of messages (~4 MB
    each) and never reads: the server holds its call budget of answers and
    its outbox, not 64 pages at once (that was hundreds of MB); reading
    again, the runner gets every answer."""
    w = await World.create(store)
    await post_big(w, 40)
    token = await runner_for(w)
    server = ServerProcess(
        database_url,
        env={
            "COMPASS_RELAY_OUTBOX_BYTES": str(2 * MIB),
            "COMPASS_RELAY_CALL_BYTES": str(8 * MIB),
            "COMPASS_SLOW_STREAM_SECONDS": "120",
        },
    ).start()
    stalled = Stalled(server.grpc_port)
    try:
        base = await settle(server)
        call = await stalled.relay(token, str(w.agent.account_id), 1)
        page = pb.ListMessagesRequest(channel_id=str(w.channel.channel_id), page_size=200)

        async def send_all() -> None:
            for i in range(120):
                await call.write(
                    gw.RunnerFrame(
                        call=gw.RelayCommsCallRequest(
                            session_id="s0",
                            call_id=f"c{i}",
                            call=gw.CommsCallRequest(list_messages=page),
                        )
                    )
                )

        sending = asyncio.ensure_future(send_all())
        await asyncio.sleep(3.0)
        grown = (await settle(server, 6.0) - base) / 1024
        print(f"a stream not reading 120 page calls grew RSS by {grown:.1f} MB")
        assert grown < 60, f"RSS grew {grown:.0f} MB"

        answered = 0
        async for frame in call:
            if frame.WhichOneof("frame") == "result":
                result = frame.result.result
                assert result.WhichOneof("result") == "list_messages", result
                assert len(result.list_messages.messages) >= 10
                answered += 1
                if answered == 120:
                    break
        await asyncio.wait_for(sending, 30)
    finally:
        await stalled.close()
        assert server.stop() == 0
