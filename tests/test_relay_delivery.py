"""The delivery lane: what an agent hears, in order, at least once, resumed
after its acked cursor, with a bounded number of unacked deliveries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.relay.gateway import WINDOW
from compass_server.store.types import Answer, TextBlock
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import GrpcClient
from tests.test_api_comms import GOOD, ask_pb
from tests.world import World


@pytest.fixture
async def grpc(server: Any) -> AsyncIterator[GrpcClient]:
    client = GrpcClient(server.grpc_port)
    yield client
    await client.close()


def text_of(event: pb.Event) -> str:
    return event.message_posted.message.blocks[0].text.text


async def settle(r: RelayClient, session: str) -> None:
    """Frames are handled in order: once a later call has its result, every
    earlier ack is stored."""
    await r.ok(session, "list_channels", pb.ListChannelsRequest())


async def test_the_answer_reaches_the_asking_agent(
    server: Any, api_world: World, grpc: GrpcClient
) -> None:
    w = api_world
    elsewhere = await w.store.create_channel(w.human, "people", "", [w.other_human.account_id])
    async with relay(server.grpc_port, await runner_for(w)) as r:
        bound = await r.bound("s1", w.agent)
        assert bound.acked_event_id == 0
        posted = await r.ok(
            "s1",
            "post_ask",
            gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask_pb()),
        )
        await w.store.append_message(w.human, elsewhere.channel_id, [TextBlock("not for you")])
        await r.no_delivery("s1")
        answered = await grpc.call(
            "RespondToAsk",
            pb.RespondToAskRequest(ask_id=posted.ask_id, answers=GOOD),
            w.tokens[w.human.account_id],
        )
        # One change, one signal: the answer message, not also the ask's update.
        answer = await r.delivery("s1")
        assert answer.WhichOneof("kind") == "message_posted"
        message = answer.message_posted.message
        assert message.message_id == answered.answer_message.message_id
        assert message.author_account_id == str(w.human.account_id)
        block = message.blocks[0].ask_answer
        assert block.ask_id == posted.ask_id
        assert [list(q.chosen_option_ids) for q in block.questions] == [["pg"], ["py", "go"]]
        await r.no_delivery("s1")


async def test_the_agent_hears_its_channels_from_when_it_joined(
    server: Any, api_world: World
) -> None:
    w = api_world
    store = w.store
    later = await store.create_channel(w.human, "later", "", [])
    await store.append_message(w.human, later.channel_id, [TextBlock("before you came")])
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s1", w.agent)
        await store.append_message(w.agent, w.channel.channel_id, [TextBlock("my own")])
        await store.add_channel_member(w.human, later.channel_id, w.agent.account_id)
        await store.append_message(w.human, later.channel_id, [TextBlock("welcome")])
        first = await r.delivery("s1")
        assert text_of(first) == "welcome"
        await r.no_delivery("s1")
    # A new stream joins from the stored membership, with the same rule.
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s2", w.agent)
        again = await r.delivery("s2")
        assert text_of(again) == "welcome"
        await r.no_delivery("s2")


@pytest.mark.timeout(60)
async def test_a_dropped_runner_resumes_after_its_last_ack(server: Any, api_world: World) -> None:
    w = api_world
    token = await runner_for(w)
    for i in range(30):
        await w.post_text(w.human, f"m{i}")
    r = RelayClient.grpc(server.grpc_port, token)
    try:
        await r.bound("s1", w.agent)
        seen = [await r.delivery("s1") for _ in range(12)]
        assert [text_of(e) for e in seen] == [f"m{i}" for i in range(12)]
        await r.ack("s1", seen[9].event_id)
        await settle(r, "s1")
    finally:
        # Dropped mid-delivery: m10 and m11 arrived but were never acked.
        await r.close()
    for i in range(30, 35):
        await w.post_text(w.human, f"m{i}")
    async with relay(server.grpc_port, token) as r2:
        bound = await r2.bound("s1", w.agent)
        assert bound.acked_event_id == seen[9].event_id
        rest = [await r2.delivery("s1") for _ in range(25)]
        assert [text_of(e) for e in rest] == [f"m{i}" for i in range(10, 35)]
        ids = [e.event_id for e in rest]
        assert ids == sorted(ids) and ids[0] > seen[9].event_id
        await r2.ack("s1", ids[-1])
        await settle(r2, "s1")
        await r2.no_delivery("s1")
    async with relay(server.grpc_port, token) as r3:
        bound = await r3.bound("s1", w.agent)
        # Past its last ack, and past what it went by without hearing.
        assert bound.acked_event_id >= ids[-1]
        await r3.no_delivery("s1")


@pytest.mark.timeout(60)
async def test_unacked_deliveries_in_flight_are_bounded(server: Any, api_world: World) -> None:
    w = api_world
    extra = 20
    for i in range(WINDOW + extra):
        await w.post_text(w.human, f"m{i}")
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s1", w.agent)
        first = [await r.delivery("s1") for _ in range(WINDOW)]
        await r.no_delivery("s1", 0.5)
        await r.ack("s1", first[9].event_id)
        more = [await r.delivery("s1") for _ in range(10)]
        await r.no_delivery("s1", 0.3)
        await r.ack("s1", more[-1].event_id)
        rest = [await r.delivery("s1") for _ in range(extra - 10)]
        texts = [text_of(e) for e in first + more + rest]
        assert texts == [f"m{i}" for i in range(WINDOW + extra)]


async def test_acks_are_checked(server: Any, api_world: World) -> None:
    w = api_world
    await w.post_text(w.human, "one")
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s1", w.agent)
        event = await r.delivery("s1")
        for session, event_id, code in [
            ("s1", event.event_id + 1, "invalid_argument"),
            ("s1", -1, "invalid_argument"),
            ("nobody", event.event_id, "not_found"),
        ]:
            await r.ack(session, event_id)
            frame = await r.session_frame(session)
            assert frame.session_error.error.code == code, frame
        await r.ack("s1", event.event_id)
        await settle(r, "s1")
        # Acking less than the cursor never moves it back (read while s1 is
        # still bound: its unbinding moves the cursor past what it skipped).
        await r.ack("s1", 0)
        await settle(r, "s1")
        async with relay(server.grpc_port, await runner_for(w)) as other:
            assert (await other.bound("s2", w.agent)).acked_event_id == event.event_id


async def test_its_own_changes_bring_the_agent_nothing(server: Any, api_world: World) -> None:
    """The agent learns of what it did from each call's result: its posts, its
    withdrawals, its status, its channels and its inbox writes come back on
    no delivery. A change by someone else comes as exactly one."""
    w = api_world
    channel = str(w.channel.channel_id)
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s1", w.agent)
        on_it = [pb.MessageBlock(text=pb.TextBlock(text="on it"))]
        await r.ok("s1", "post_message", pb.PostMessageRequest(channel_id=channel, blocks=on_it))
        first = await r.ok("s1", "post_ask", gw.PostAskRequest(channel_id=channel, ask=ask_pb()))
        await r.ok("s1", "cancel_ask", gw.CancelAskRequest(ask_id=first.ask_id))
        second = await r.ok("s1", "post_ask", gw.PostAskRequest(channel_id=channel, ask=ask_pb()))
        await r.ok("s1", "set_status", gw.SetAgentStatusRequest(state=pb.PRESENCE_STATE_WORKING))
        made = await r.ok(
            "s1",
            "create_channel",
            pb.CreateChannelRequest(name="scouting", member_account_ids=[str(w.human.account_id)]),
        )
        await r.ok(
            "s1",
            "update_topic",
            pb.UpdateTopicRequest(channel_id=made.channel.channel_id, topic="maps"),
        )
        await r.ok("s1", "open_dm", pb.OpenDMRequest(account_id=str(w.human.account_id)))
        await r.ok(
            "s1",
            "inbox_post",
            gw.InboxPostRequest(key="deploy", title="Deploy?", body="now?", ask=ask_pb()),
        )
        await r.ok("s1", "inbox_reply", gw.InboxReplyRequest(key="deploy", text="ping"))
        await r.ok("s1", "inbox_close", gw.InboxCloseRequest(key="deploy", reason="moot"))
        await r.no_delivery("s1")

        # Others' changes: one delivery each.
        await w.store.append_message(w.human, w.channel.channel_id, [TextBlock("hello")])
        assert text_of(await r.delivery("s1")) == "hello"
        await w.store.answer_ask(w.human, second.ask_id, [Answer("db"), Answer("langs")])
        heard = await r.delivery("s1")
        assert heard.message_posted.message.blocks[0].ask_answer.ask_id == second.ask_id
        await r.no_delivery("s1")


async def test_a_lane_resumes_after_the_events_it_passed_without_hearing(
    server: Any, api_world: World
) -> None:
    w = api_world
    # A busy channel the agent is not in: nothing of it is the agent's to hear.
    other = await w.add_pair()
    for i in range(40):
        await w.store.append_message(other.human, other.channel.channel_id, [TextBlock(f"x{i}")])
    head = await w.store.last_event_id(w.human)
    token = await runner_for(w)
    async with relay(server.grpc_port, token) as r:
        bound = await r.bound("s1", w.agent)
        assert bound.acked_event_id < head
        await r.no_delivery("s1", 1.0)
        await r.unbind("s1")
    # Bound again (after a restart, say), it does not read those events again.
    async with relay(server.grpc_port, token) as r:
        again = await r.bound("s1", w.agent)
        assert again.acked_event_id >= head
        await w.post_text(w.human, "still heard")
        heard = await r.delivery("s1")
        assert text_of(heard) == "still heard"
        await r.no_delivery("s1")


async def test_a_lane_never_resumes_past_a_delivery_it_did_not_ack(
    server: Any, api_world: World
) -> None:
    w = api_world
    other = await w.add_pair()
    token = await runner_for(w)
    async with relay(server.grpc_port, token) as r:
        await r.bound("s1", w.agent)
        await w.post_text(w.human, "unacked")
        first = await r.delivery("s1")
        for i in range(10):
            await w.store.append_message(
                other.human, other.channel.channel_id, [TextBlock(f"x{i}")]
            )
        await r.no_delivery("s1", 1.0)
        await r.unbind("s1")
    async with relay(server.grpc_port, token) as r:
        again = await r.bound("s1", w.agent)
        assert again.acked_event_id < first.event_id
        assert text_of(await r.delivery("s1")) == "unacked"
