"""Every CommsCallRequest arm has a dispatcher entry and a row here, and every
arm runs as the session's bound agent: two agents on one stream, each arm's
effect shows the agent whose session made the call, never the other."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2 as ib
from compass_server.store.inbox import InboxStore
from compass_server.store.types import AccountKind, Actor, Channel, TextBlock
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import GrpcClient
from tests.test_api_comms import ask_pb
from tests.world import World


@dataclass
class Agent:
    session: str
    actor: Actor
    handle: str
    private: Channel  # ada and this agent only

    @property
    def id(self) -> str:
        return str(self.actor.account_id)


@dataclass
class Ctx:
    w: World
    r: RelayClient
    grpc: GrpcClient

    async def ada_posts(self, channel: Channel, text: str) -> str:
        m = await self.w.store.append_message(self.w.human, channel.channel_id, [TextBlock(text)])
        return str(m.message_id)

    async def as_ada(self, method: str, request: Any) -> Any:
        return await self.grpc.call(method, request, self.w.tokens[self.w.human.account_id])


def code(result: gw.CommsCallResult) -> str:
    assert result.WhichOneof("result") == "error", result
    return result.error.code


async def post_message(c: Ctx, me: Agent, other: Agent) -> None:
    res = await c.r.ok(
        me.session,
        "post_message",
        pb.PostMessageRequest(
            channel_id=str(c.w.channel.channel_id),
            blocks=[pb.MessageBlock(text=pb.TextBlock(text=f"from {me.handle}"))],
        ),
    )
    assert res.message.author_account_id == me.id
    got = await c.as_ada("GetMessage", pb.GetMessageRequest(message_id=res.message.message_id))
    assert (got.message.author_account_id, got.message.author_handle) == (me.id, me.handle)


async def states(c: Ctx) -> dict[str, int]:
    presences = await c.as_ada("GetPresence", pb.GetPresenceRequest())
    return {p.account_id: p.state for p in presences.presences}


async def post_ask(c: Ctx, me: Agent, other: Agent) -> None:
    before = await states(c)
    res = await c.r.ok(
        me.session,
        "post_ask",
        gw.PostAskRequest(channel_id=str(c.w.channel.channel_id), text="need a call", ask=ask_pb()),
    )
    assert res.message.author_account_id == me.id
    assert [b.WhichOneof("block") for b in res.message.blocks] == ["text", "ask"]
    assert res.message.blocks[0].text.text == "need a call"
    assert res.ask_id and res.ask_id == res.message.blocks[1].ask.ask_id
    after = await states(c)
    assert (before[me.id], after[me.id]) == (pb.PRESENCE_STATE_IDLE, pb.PRESENCE_STATE_WAITING)
    assert after[other.id] == before[other.id]


async def list_messages(c: Ctx, me: Agent, other: Agent) -> None:
    await c.ada_posts(me.private, f"only for {me.handle}")
    req = pb.ListMessagesRequest(channel_id=str(me.private.channel_id))
    res = await c.r.ok(me.session, "list_messages", req)
    assert [m.blocks[0].text.text for m in res.messages] == [f"only for {me.handle}"]
    assert code(await c.r.call(other.session, "list_messages", req)) == "not_found"


async def list_channels(c: Ctx, me: Agent, other: Agent) -> None:
    res = await c.r.ok(me.session, "list_channels", pb.ListChannelsRequest())
    names = {ch.name for ch in res.channels}
    assert names == {"general", me.private.name}


async def get_message(c: Ctx, me: Agent, other: Agent) -> None:
    message_id = await c.ada_posts(me.private, "look")
    req = pb.GetMessageRequest(message_id=message_id)
    res = await c.r.ok(me.session, "get_message", req)
    assert res.message.channel_id == str(me.private.channel_id)
    assert code(await c.r.call(other.session, "get_message", req)) == "not_found"


async def search_messages(c: Ctx, me: Agent, other: Agent) -> None:
    await c.ada_posts(me.private, f"zebra-{me.handle}")
    req = pb.SearchMessagesRequest(query=f"zebra-{me.handle}")
    res = await c.r.ok(me.session, "search_messages", req)
    assert len(res.messages) == 1
    theirs = await c.r.ok(other.session, "search_messages", req)
    assert len(theirs.messages) == 0


async def open_dm(c: Ctx, me: Agent, other: Agent) -> None:
    grace = str(c.w.other_human.account_id)
    res = await c.r.ok(me.session, "open_dm", pb.OpenDMRequest(account_id=grace))
    assert set(res.channel.member_account_ids) == {me.id, grace}


async def create_channel(c: Ctx, me: Agent, other: Agent) -> None:
    req = pb.CreateChannelRequest(name=f"made-by-{me.handle}")
    res = await c.r.ok(me.session, "create_channel", req)
    assert list(res.channel.member_account_ids) == [me.id]


async def add_channel_member(c: Ctx, me: Agent, other: Agent) -> None:
    grace = str(c.w.other_human.account_id)
    req = pb.AddChannelMemberRequest(channel_id=str(me.private.channel_id), account_id=grace)
    assert code(await c.r.call(other.session, "add_channel_member", req)) == "not_found"
    res = await c.r.ok(me.session, "add_channel_member", req)
    assert grace in res.channel.member_account_ids


async def update_topic(c: Ctx, me: Agent, other: Agent) -> None:
    req = pb.UpdateTopicRequest(channel_id=str(me.private.channel_id), topic=f"{me.handle}'s")
    assert code(await c.r.call(other.session, "update_topic", req)) == "not_found"
    res = await c.r.ok(me.session, "update_topic", req)
    assert res.channel.topic == f"{me.handle}'s"


async def set_status(c: Ctx, me: Agent, other: Agent) -> None:
    req = gw.SetAgentStatusRequest(state=pb.PRESENCE_STATE_WORKING, text=f"{me.handle} busy")
    res = await c.r.ok(me.session, "set_status", req)
    assert res.presence.account_id == me.id
    presences = await c.as_ada("GetPresence", pb.GetPresenceRequest())
    by_id = {p.account_id: p for p in presences.presences}
    assert (by_id[me.id].state, by_id[me.id].status_text) == (
        pb.PRESENCE_STATE_WORKING,
        f"{me.handle} busy",
    )
    assert by_id[other.id].status_text != f"{me.handle} busy"


async def cancel_ask(c: Ctx, me: Agent, other: Agent) -> None:
    posted = await c.r.ok(
        me.session,
        "post_ask",
        gw.PostAskRequest(channel_id=str(c.w.channel.channel_id), ask=ask_pb()),
    )
    req = gw.CancelAskRequest(ask_id=posted.ask_id)
    # The other agent sees the ask but did not write it.
    assert code(await c.r.call(other.session, "cancel_ask", req)) == "permission_denied"
    assert (await c.r.call(me.session, "cancel_ask", req)).HasField("cancel_ask")
    got = await c.as_ada("GetMessage", pb.GetMessageRequest(message_id=posted.message.message_id))
    assert got.message.blocks[0].ask.cancelled


async def get_ask(c: Ctx, me: Agent, other: Agent) -> None:
    posted = await c.r.ok(
        me.session,
        "post_ask",
        gw.PostAskRequest(channel_id=str(me.private.channel_id), ask=ask_pb()),
    )
    req = gw.GetAskRequest(ask_id=posted.ask_id)
    opened = await c.r.ok(me.session, "get_ask", req)
    assert opened.ask.ask_id == posted.ask_id
    assert not opened.ask.answered and not opened.ask.cancelled
    assert opened.message.message_id == posted.message.message_id
    # Not a member of me's private channel: the same as an unknown id.
    assert code(await c.r.call(other.session, "get_ask", req)) == "not_found"
    assert code(await c.r.call(me.session, "get_ask", gw.GetAskRequest(ask_id="ask_none"))) == (
        "not_found"
    )
    assert code(await c.r.call(me.session, "get_ask", gw.GetAskRequest())) == "invalid_argument"

    await c.as_ada(
        "RespondToAsk",
        pb.RespondToAskRequest(
            ask_id=posted.ask_id,
            answers=[
                pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg"]),
                pb.AskQuestionAnswer(question_id="langs", custom_text="later"),
            ],
        ),
    )
    answered = await c.r.ok(me.session, "get_ask", req)
    assert answered.ask.answered and not answered.ask.cancelled
    db, langs = answered.ask.questions
    assert (list(db.chosen_option_ids), langs.custom_text) == (["pg"], "later")
    assert [b.ask.answered for b in answered.message.blocks if b.HasField("ask")] == [True]


async def inbox_thread(c: Ctx, item_id: str) -> Any:
    """The item and its thread as ada, who owns both agents, reads them."""
    return await InboxStore(c.w.store.db).read_thread(c.w.human, uuid.UUID(item_id))


async def inbox_post(c: Ctx, me: Agent, other: Agent) -> None:
    req = gw.InboxPostRequest(key="deploy", title="Deploy?", body=f"{me.handle} asks", ask=ask_pb())
    res = await c.r.ok(me.session, "inbox_post", req)
    assert res.item.agent_account_id == me.id and res.item.key == "deploy"
    assert res.message.ask_status == ib.INBOX_ASK_STATUS_OPEN
    thread = await inbox_thread(c, res.item.item_id)
    assert thread.item.agent_id == me.actor.account_id
    assert [m.author_id for m in thread.messages] == [me.actor.account_id]


async def inbox_reply(c: Ctx, me: Agent, other: Agent) -> None:
    key = f"reply-{me.handle}"
    posted = await c.r.ok(me.session, "inbox_post", gw.InboxPostRequest(key=key, body="hi"))
    req = gw.InboxReplyRequest(key=key, text=f"more from {me.handle}")
    # Keys are the agent's own: the other agent has no item under this one.
    assert code(await c.r.call(other.session, "inbox_reply", req)) == "not_found"
    res = await c.r.ok(me.session, "inbox_reply", req)
    assert res.item.item_id == posted.item.item_id
    thread = await inbox_thread(c, res.item.item_id)
    assert [m.author_id for m in thread.messages] == [me.actor.account_id] * 2


async def inbox_close(c: Ctx, me: Agent, other: Agent) -> None:
    key = f"close-{me.handle}"
    await c.r.ok(me.session, "inbox_post", gw.InboxPostRequest(key=key, ask=ask_pb()))
    req = gw.InboxCloseRequest(key=key, reason=f"{me.handle} found it")
    assert code(await c.r.call(other.session, "inbox_close", req)) == "not_found"
    res = await c.r.ok(me.session, "inbox_close", req)
    assert res.item.status == pb.INBOX_ITEM_STATUS_CLOSED and res.item.revision == 2
    assert res.item.closed_by_account_id == me.id
    assert res.item.close_reason == f"{me.handle} found it"


async def spawn_agent(c: Ctx, me: Agent, other: Agent) -> None:
    res = await c.r.ok(me.session, "spawn_agent", gw.SpawnAgentRequest(handle=f"{me.handle}-sub"))
    sub = res.agent
    assert (sub.handle, sub.parent_account_id) == (f"{me.handle}-sub", me.id)
    # The runner binds it at once; it reaches its parent's channels, not the other's.
    frame = await c.r.bind(f"s-{sub.handle}", sub.account_id)
    assert frame.WhichOneof("frame") == "bound", frame
    listed = await c.r.ok(f"s-{sub.handle}", "list_channels", pb.ListChannelsRequest())
    ids = {ch.channel_id for ch in listed.channels}
    assert str(me.private.channel_id) in ids and str(other.private.channel_id) not in ids


Row = Callable[[Ctx, Agent, Agent], Awaitable[None]]
ROWS: dict[str, Row] = {
    "post_message": post_message,
    "post_ask": post_ask,
    "list_messages": list_messages,
    "list_channels": list_channels,
    "get_message": get_message,
    "search_messages": search_messages,
    "open_dm": open_dm,
    "create_channel": create_channel,
    "add_channel_member": add_channel_member,
    "update_topic": update_topic,
    "set_status": set_status,
    "cancel_ask": cancel_ask,
    "inbox_post": inbox_post,
    "inbox_reply": inbox_reply,
    "inbox_close": inbox_close,
    "get_ask": get_ask,
    "spawn_agent": spawn_agent,
}

CALL = gw.CommsCallRequest.DESCRIPTOR.oneofs_by_name["call"]
RESULT = gw.CommsCallResult.DESCRIPTOR.oneofs_by_name["result"]


def test_every_arm_has_a_dispatcher_entry_a_result_arm_and_a_test_row(server: Any) -> None:
    arms = {f.name for f in CALL.fields}
    table = set(server.gateway.dispatcher.arms)
    assert arms - table == set(), "arms with no dispatcher entry"
    assert table - arms == set(), "dispatcher entries for arms the contract lacks"
    assert arms - set(ROWS) == set(), "arms with no attribution row in this test"
    results = {f.name: f for f in RESULT.fields}
    for f in CALL.fields:
        assert f.name in results, f"{f.name} has no result arm"
        assert results[f.name].number == f.number, f"{f.name}'s result arm has another number"
    assert results["error"].message_type.name == "CommsCallError"


@pytest.mark.parametrize("arm", [f.name for f in CALL.fields])
async def test_every_arm_runs_as_the_bound_agent(server: Any, api_world: World, arm: str) -> None:
    w = api_world
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    await w.store.add_channel_member(w.human, w.channel.channel_id, ranger.account_id)
    agents = []
    for actor, handle in [(w.agent, "scout"), (ranger, "ranger")]:
        private = await w.store.create_channel(w.human, f"with-{handle}", "", [actor.account_id])
        agents.append(Agent(f"s-{handle}", actor, handle, private))
    scout, rangers = agents
    grpc = GrpcClient(server.grpc_port)
    try:
        async with relay(server.grpc_port, await runner_for(w, w.agent, ranger)) as r:
            for a in agents:
                await r.bound(a.session, a.actor)
            ctx = Ctx(w, r, grpc)
            await ROWS[arm](ctx, scout, rangers)
            await ROWS[arm](ctx, rangers, scout)
    finally:
        await grpc.close()
