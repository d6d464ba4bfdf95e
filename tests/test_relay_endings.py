"""The agent's side of every ending, over the relay: post_ask carries a
deadline and named answerers inside its Ask, and each ending of its ask
(declined with a reason, withdrawn by its owner, expired, withdrawn by
itself) reaches its delivery lane once, saying who, how and why."""

from __future__ import annotations

import datetime
from typing import Any

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import GrpcClient
from tests.test_api_comms import ask_pb
from tests.world import World


async def post_ask(r: RelayClient, w: World, **fields: Any) -> gw.PostAskResponse:
    ask = ask_pb()
    if "seconds" in fields:
        ask.timeout.FromTimedelta(datetime.timedelta(seconds=fields["seconds"]))
    ask.answerer_account_ids.extend(fields.get("answerers", []))
    res: gw.PostAskResponse = await r.ok(
        "scout", "post_ask", gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask)
    )
    return res


async def ending_delivered(r: RelayClient, ask_id: str) -> pb.AskEnding:
    """The next delivery that ends ask_id some way other than an answer;
    deliveries of other things are skipped."""
    while True:
        event = await r.delivery("scout")
        await r.ack("scout", event.event_id)
        if event.HasField("message_updated"):
            for b in event.message_updated.message.blocks:
                if b.HasField("ask") and b.ask.ask_id == ask_id:
                    assert b.ask.HasField("ending"), event
                    return b.ask.ending


async def test_each_ending_reaches_the_agent_once_saying_who_how_and_why(
    server: Any, api_world: World
) -> None:
    w = api_world
    ada = w.tokens[w.human.account_id]
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    grpc = GrpcClient(server.grpc_port)
    try:
        async with relay(server.grpc_port, await runner_for(w)) as r:
            await r.bound("scout", w.agent)

            named = await post_ask(r, w, seconds=3600, answerers=[str(w.human.account_id)])
            ask = named.message.blocks[-1].ask
            assert list(ask.answerer_account_ids) == [str(w.human.account_id)]
            assert list(ask.answerer_handles) == ["ada"]
            assert ask.HasField("deadline") and not ask.HasField("timeout")
            await grpc.call(
                "DeclineAsk",
                pb.DeclineAskRequest(ask_id=named.ask_id, reason="not before the audit"),
                ada,
            )
            ending = await ending_delivered(r, named.ask_id)
            assert ending.kind == pb.ASK_ENDING_KIND_DECLINED
            assert (ending.actor_handle, ending.reason) == ("ada", "not before the audit")

            stuck = await post_ask(r, w)
            await grpc.call("WithdrawAsk", pb.WithdrawAskRequest(ask_id=stuck.ask_id), ada)
            ending = await ending_delivered(r, stuck.ask_id)
            assert (ending.kind, ending.actor_handle) == (
                pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER,
                "ada",
            )

            late = await post_ask(r, w, seconds=0.3)
            ending = await ending_delivered(r, late.ask_id)
            assert (ending.kind, ending.surface, ending.actor_account_id) == (
                pb.ASK_ENDING_KIND_EXPIRED,
                pb.ASK_SURFACE_SERVER,
                "",
            )

            mine = await post_ask(r, w)
            await r.ok("scout", "cancel_ask", gw.CancelAskRequest(ask_id=mine.ask_id))
            # The agent's own withdrawal came back with its call: nothing on the lane.
            await r.no_delivery("scout")

            record = await grpc.call(
                "GetAskHistory", pb.GetAskHistoryRequest(ask_id=mine.ask_id), ada
            )
            assert [(e.kind, e.surface, e.actor_handle) for e in record.entries] == [
                (pb.ASK_HISTORY_KIND_POSTED, pb.ASK_SURFACE_RELAY, "scout"),
                (pb.ASK_HISTORY_KIND_WITHDRAWN_BY_AGENT, pb.ASK_SURFACE_RELAY, "scout"),
            ]
            # The relay can't end an ask any other way: no arm answers or declines.
            arms = set(gw.CommsCallRequest.DESCRIPTOR.oneofs_by_name["call"].fields)
            names = {f.name for f in arms}
            assert not names & {"respond_to_ask", "decline_ask", "withdraw_ask"}

            refused = await r.call(
                "scout",
                "post_ask",
                gw.PostAskRequest(
                    channel_id=str(w.channel.channel_id),
                    ask=pb.Ask(
                        questions=ask_pb().questions, answerer_account_ids=[str(w.agent.account_id)]
                    ),
                ),
            )
            assert refused.error.code == "invalid_argument"
    finally:
        await grpc.close()
