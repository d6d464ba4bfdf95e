"""Agent trees on open streams and on the relay: a move takes effect at once
for a Subscribe stream and a relay session of the moved agent (and of the
agents below it); a sub-agent's lane starts when it was put under its
parent; an agent spawns a sub-agent over the relay and its runner binds it."""

from __future__ import annotations

from typing import Any

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store.trees import MAX_TREE_AGENTS
from compass_server.store.types import AccountKind, Actor, TextBlock
from tests.relay_client import relay, runner_for
from tests.servers import Client, GrpcClient
from tests.test_api_comms import kind, next_events
from tests.world import World


def text_of(event: Any) -> str:
    assert kind(event) == "message_posted", event
    return event.message_posted.message.blocks[0].text.text  # type: ignore[no-any-return]


async def moved_away(w: World) -> tuple[Actor, Actor, Actor, Any]:
    """planner under scout (so in general), worker under planner; ranger, a
    root agent, alone in ops."""
    planner = await w.add_subagent("planner", w.agent)
    worker = await w.add_subagent("worker", planner)
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    ops = await w.store.create_channel(w.human, "ops", "", [ranger.account_id])
    return planner, worker, ranger, ops


async def test_an_open_subscribe_stops_delivering_a_channel_its_agent_moved_from(
    client: Client, api_world: World
) -> None:
    w = api_world
    planner, worker, ranger, ops = await moved_away(w)
    streams = {
        who: client.stream("Subscribe", pb.SubscribeRequest(), w.tokens[who.account_id])
        for who in (planner, worker)
    }
    for stream in streams.values():
        (ready,) = await next_events(stream, 1)
        assert kind(ready) == "ready"
    await w.post_text(w.human, "before the move")
    for stream in streams.values():
        assert [text_of(e) for e in await next_events(stream, 1)] == ["before the move"]

    await w.reparent(planner, ranger)
    await w.post_text(w.human, "general, after the move")
    await w.store.append_message(w.human, ops.channel_id, [TextBlock("ops, after the move")])
    for stream in streams.values():
        assert [text_of(e) for e in await next_events(stream, 1)] == ["ops, after the move"]

    # Moved back, general is in reach again (from then on) and ops is not.
    await w.reparent(planner, w.agent)
    await w.store.append_message(w.human, ops.channel_id, [TextBlock("ops, moved back")])
    await w.post_text(w.human, "general, moved back")
    for stream in streams.values():
        assert [text_of(e) for e in await next_events(stream, 1)] == ["general, moved back"]
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_relay_session_stops_delivering_a_channel_its_agent_moved_from(
    server: Any, api_world: World
) -> None:
    w = api_world
    planner, worker, ranger, ops = await moved_away(w)
    async with relay(server.grpc_port, await runner_for(w, planner, worker)) as r:
        for name, who in (("p", planner), ("w", worker)):
            await r.bound(name, who)
        await w.post_text(w.human, "before the move")
        for name in ("p", "w"):
            event = await r.delivery(name)
            assert text_of(event) == "before the move"
            await r.ack(name, event.event_id)

        await w.reparent(planner, ranger)
        await w.post_text(w.human, "general, after the move")
        await w.store.append_message(w.human, ops.channel_id, [TextBlock("ops, after the move")])
        for name in ("p", "w"):
            event = await r.delivery(name)
            assert text_of(event) == "ops, after the move"
            await r.ack(name, event.event_id)
            await r.no_delivery(name)
        # The moved agent's own calls follow the move too.
        result = await r.call(
            "p",
            "list_messages",
            pb.ListMessagesRequest(channel_id=str(w.channel.channel_id)),
        )
        assert result.error.code == "not_found"


async def test_a_subagents_lane_starts_when_it_was_put_under_its_parent(
    server: Any, api_world: World
) -> None:
    w = api_world
    await w.post_text(w.human, "long before planner")
    before = await w.store.last_event_id(w.human)
    planner = await w.add_subagent("planner", w.agent)
    async with relay(server.grpc_port, await runner_for(w, planner)) as r:
        bound = await r.bound("p", planner)
        # Its lane starts where planner came to be: nothing before it.
        assert bound.acked_event_id >= before
        await w.post_text(w.human, "for planner")
        assert text_of(await r.delivery("p")) == "for planner"
        await r.no_delivery("p")


async def test_an_agent_spawns_a_subagent_its_runner_binds_at_once(
    server: Any, api_world: World
) -> None:
    w = api_world
    grpc = GrpcClient(server.grpc_port)
    try:
        async with relay(server.grpc_port, await runner_for(w, w.agent)) as r:
            await r.bound("scout", w.agent)
            spawned = await r.ok("scout", "spawn_agent", gw.SpawnAgentRequest(handle="planner"))
            sub = spawned.agent
            assert (sub.handle, sub.kind, sub.parent_account_id) == (
                "planner",
                pb.ACCOUNT_KIND_AGENT,
                str(w.agent.account_id),
            )
            frame = await r.bind("planner", sub.account_id)
            assert frame.WhichOneof("frame") == "bound", frame
            posted = await r.ok(
                "planner",
                "post_ask",
                gw.PostAskRequest(
                    channel_id=str(w.channel.channel_id),
                    ask=pb.Ask(questions=[pb.AskQuestion(question_id="go", question="Ship?")]),
                ),
            )
            assert posted.message.author_account_id == sub.account_id
            # The person sees whose question it is: planner, under scout, owned by ada.
            ada = w.tokens[w.human.account_id]
            got = await grpc.call(
                "GetAccounts", pb.GetAccountsRequest(account_ids=[sub.account_id]), ada
            )
            assert got.accounts[0].parent_account_id == str(w.agent.account_id)
            presence = await grpc.call(
                "GetPresence", pb.GetPresenceRequest(account_ids=[sub.account_id]), ada
            )
            assert presence.presences[0].state == pb.PRESENCE_STATE_WAITING

            # Its handle is the workspace's; a taken one, or none, is refused.
            for handle, code in (("planner", "already_exists"), ("", "invalid_argument")):
                result = await r.call("scout", "spawn_agent", gw.SpawnAgentRequest(handle=handle))
                assert result.error.code == code, result
            # A tree is bounded: past MAX_TREE_AGENTS, resource_exhausted.
            for i in range(MAX_TREE_AGENTS - 2):
                await w.add_subagent(f"filler{i}", w.agent)
            result = await r.call("scout", "spawn_agent", gw.SpawnAgentRequest(handle="extra"))
            assert result.error.code == "resource_exhausted", result
            assert "100 agents" in result.error.message
    finally:
        await grpc.close()


async def test_after_a_move_a_subscribe_replay_and_the_relay_lane_hear_the_same(
    client: Client, server: Any, api_world: World
) -> None:
    """One rule for both: a channel's events are heard from when the account
    took part in it, so a replay after a move holds none of the new chain's
    channel from before the move."""
    w = api_world
    planner, _, ranger, ops = await moved_away(w)
    mark = await w.store.last_event_id(w.human)

    async def post_in_ops(text: str) -> None:
        await w.store.append_message(w.human, ops.channel_id, [TextBlock(text)])

    await post_in_ops("ops, before the move")
    await w.post_text(w.human, "general, before the move")
    await w.reparent(planner, ranger)
    await post_in_ops("ops, after the move")
    await w.post_text(w.human, "general, after the move")
    await post_in_ops("end")

    replayed = []
    stream = client.stream(
        "Subscribe", pb.SubscribeRequest(after_event_id=mark), w.tokens[planner.account_id]
    )
    (ready,) = await next_events(stream, 1)
    assert kind(ready) == "ready"
    while not replayed or replayed[-1] != "end":
        (event,) = await next_events(stream, 1)
        if kind(event) == "message_posted":
            replayed.append(text_of(event))
    await stream.aclose()  # type: ignore[attr-defined]

    delivered = []
    async with relay(server.grpc_port, await runner_for(w, planner)) as r:
        await r.bound("p", planner)
        while not delivered or delivered[-1] != "end":
            event = await r.delivery("p")
            await r.ack("p", event.event_id)
            delivered.append(text_of(event))

    assert replayed == delivered == ["ops, after the move", "end"]
