"""Withdrawing an ask over the relay: the outcome table, the events it
publishes, and the race against an answer over gRPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store.types import AccountKind, Ask, AskAnswerBlock, EventKind, Message
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import CallError, GrpcClient
from tests.test_api_comms import GOOD, ask_pb
from tests.world import World


@pytest.fixture
async def grpc(server: Any) -> AsyncIterator[GrpcClient]:
    client = GrpcClient(server.grpc_port)
    yield client
    await client.close()


def ask_of(m: Message) -> Ask:
    (ask,) = [b for b in m.blocks if isinstance(b, Ask)]
    return ask


async def cancel(r: RelayClient, session: str, ask_id: str) -> gw.CommsCallResult:
    return await r.call(session, "cancel_ask", gw.CancelAskRequest(ask_id=ask_id))


async def respond(grpc: GrpcClient, w: World, ask_id: str) -> Any:
    return await grpc.call(
        "RespondToAsk",
        pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD),
        w.tokens[w.human.account_id],
    )


async def test_cancel_outcomes_and_their_events(
    server: Any, api_world: World, grpc: GrpcClient
) -> None:
    w = api_world
    store = w.store
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    await store.add_channel_member(w.human, w.channel.channel_id, ranger.account_id)
    outsider = await w.add_account("outsider", AccountKind.AGENT)
    async with relay(server.grpc_port, await runner_for(w, w.agent, ranger, outsider)) as r:
        await r.bound("scout", w.agent)
        await r.bound("ranger", ranger)
        await r.bound("outsider", outsider)
        posted = await r.ok(
            "scout",
            "post_ask",
            gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask_pb()),
        )
        ask_id = posted.ask_id
        message_id = posted.message.message_id

        # Refusals first; none of them writes or publishes anything.
        mark = await store.last_event_id(w.human)
        assert (await cancel(r, "scout", "")).error.code == "invalid_argument"
        denied = await cancel(r, "ranger", ask_id)
        assert denied.error.code == "permission_denied" and ask_id in denied.error.message
        hidden = await cancel(r, "outsider", ask_id)
        unknown = await cancel(r, "scout", "ask_unknown")
        assert hidden.error.code == unknown.error.code == "not_found"
        assert await store.last_event_id(w.human) == mark

        # Open → cancelled: one MessageUpdated, no MessagePosted.
        assert (await cancel(r, "scout", ask_id)).HasField("cancel_ask")
        events = await store.read_events(w.human, mark, 100)
        messages = [e for e in events if e.message is not None]
        assert [e.kind for e in messages] == [EventKind.MESSAGE_UPDATED]
        assert messages[0].message is not None
        assert str(messages[0].message.message_id) == message_id
        assert ask_of(messages[0].message).cancelled
        got = await store.get_message(w.human, messages[0].message.message_id)
        assert (ask_of(got).cancelled, ask_of(got).answered) == (True, False)

        # A repeat succeeds and changes nothing.
        mark = await store.last_event_id(w.human)
        assert (await cancel(r, "scout", ask_id)).HasField("cancel_ask")
        assert await store.last_event_id(w.human) == mark

        # Nobody answers a withdrawn ask, and no ask_answer appears.
        before = len((await store.list_messages(w.human, w.channel.channel_id, 200, "")).items)
        with pytest.raises(CallError) as refused:
            await respond(grpc, w, ask_id)
        assert refused.value.code == "already_exists"
        after = len((await store.list_messages(w.human, w.channel.channel_id, 200, "")).items)
        assert after == before

        # An answered ask can't be withdrawn.
        second = await w.post_ask()
        answered_id = ask_of(second).ask_id
        await respond(grpc, w, answered_id)
        mark = await store.last_event_id(w.human)
        late = await cancel(r, "scout", answered_id)
        assert late.error.code == "already_exists" and "answered" in late.error.message
        assert await store.last_event_id(w.human) == mark
        reread = await store.get_message(w.human, second.message_id)
        assert (ask_of(reread).answered, ask_of(reread).cancelled) == (True, False)


TRIALS = 200


@pytest.mark.timeout(180)
async def test_answer_and_cancel_race_has_exactly_one_winner(
    server: Any, api_world: World, grpc: GrpcClient
) -> None:
    w = api_world
    store = w.store
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        outcomes: dict[str, str] = {}
        for _ in range(TRIALS):
            ask_id = ask_of(await w.post_ask()).ask_id
            cancelled, answered = await asyncio.gather(
                cancel(r, "scout", ask_id), respond(grpc, w, ask_id), return_exceptions=True
            )
            assert isinstance(cancelled, gw.CommsCallResult), cancelled
            if cancelled.HasField("cancel_ask"):
                assert isinstance(answered, CallError) and answered.code == "already_exists"
                outcomes[ask_id] = "cancelled"
            else:
                assert cancelled.error.code == "already_exists", cancelled
                assert isinstance(answered, pb.RespondToAskResponse), answered
                outcomes[ask_id] = "answered"

        asks: dict[str, Ask] = {}
        answer_messages: dict[str, int] = {}
        token = ""
        while True:
            page = await store.list_messages(w.human, w.channel.channel_id, 200, token)
            for m in page.items:
                for b in m.blocks:
                    if isinstance(b, Ask):
                        asks[b.ask_id] = b
                    elif isinstance(b, AskAnswerBlock):
                        answer_messages[b.ask_id] = answer_messages.get(b.ask_id, 0) + 1
            token = page.next_page_token
            if not token:
                break
        assert set(asks) == set(outcomes)
        for ask_id, ask in asks.items():
            assert ask.answered != ask.cancelled, ask_id
            assert ("answered" if ask.answered else "cancelled") == outcomes[ask_id]
            assert answer_messages.get(ask_id, 0) == (1 if ask.answered else 0), ask_id
