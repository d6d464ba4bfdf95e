"""The agent's side of quorum asks and standing answers, over the relay:
votes short of the quorum reach the agent's reads (get_ask) but never its
delivery lane; the K-th answer arrives once, as one answer message carrying
every answer. An ask a standing answer answers comes back answered from
post_ask itself, and the lane carries its answer message once."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit.receipts import fetch_jwks, verify_receipt
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import GrpcClient
from tests.test_api_comms import GOOD, ask_pb
from tests.world import World


async def post_ask(r: RelayClient, w: World, ask: pb.Ask) -> gw.PostAskResponse:
    res: gw.PostAskResponse = await r.ok(
        "scout", "post_ask", gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask)
    )
    return res


def answered_by(event: pb.Event) -> pb.AskAnswerBlock:
    assert event.HasField("message_posted"), event
    (block,) = event.message_posted.message.blocks
    assert block.HasField("ask_answer"), event
    return block.ask_answer


async def test_a_quorum_reaches_the_agent_once_with_every_answer(
    server: Any, api_world: World
) -> None:
    w = api_world
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ada, grace = (w.tokens[p.account_id] for p in (w.human, w.other_human))
    grpc = GrpcClient(server.grpc_port)
    try:
        async with relay(server.grpc_port, await runner_for(w)) as r:
            await r.bound("scout", w.agent)
            ask = ask_pb()
            ask.answerer_account_ids.extend(
                [str(w.human.account_id), str(w.other_human.account_id)]
            )
            ask.quorum = 2
            posted = await post_ask(r, w, ask)
            assert posted.message.blocks[-1].ask.quorum == 2

            await grpc.call(
                "RespondToAsk", pb.RespondToAskRequest(ask_id=posted.ask_id, answers=GOOD), grace
            )
            await r.no_delivery("scout")
            read: gw.GetAskResponse = await r.ok(
                "scout", "get_ask", gw.GetAskRequest(ask_id=posted.ask_id)
            )
            assert [v.handle for v in read.ask.quorum_votes] == ["grace"]
            assert not read.ask.HasField("ending")

            await grpc.call(
                "RespondToAsk", pb.RespondToAskRequest(ask_id=posted.ask_id, answers=GOOD), ada
            )
            event = await r.delivery("scout")
            await r.ack("scout", event.event_id)
            block = answered_by(event)
            assert block.ask_id == posted.ask_id
            assert [v.handle for v in block.quorum_votes] == ["grace", "ada"]
            await r.no_delivery("scout")
            # Its receipt carries both answers, as the delivery does.
            keys = await asyncio.to_thread(fetch_jwks, f"http://127.0.0.1:{server.http_port}")
            heard = pb.Ask(
                ask_id=block.ask_id,
                questions=block.questions,
                answered=True,
                quorum=2,
                quorum_votes=block.quorum_votes,
            )
            proof = verify_receipt(block.receipt, keys, ask=heard)
            assert [a["by"]["handle"] for a in proof.answers] == ["grace", "ada"]
            verify_receipt(block.receipt, keys, ask=posted.message.blocks[-1].ask)
    finally:
        await grpc.close()


async def test_a_standing_answer_answers_the_agents_post_at_once(
    server: Any, api_world: World
) -> None:
    w = api_world
    ada = w.tokens[w.human.account_id]
    grpc = GrpcClient(server.grpc_port)
    try:
        async with relay(server.grpc_port, await runner_for(w)) as r:
            await r.bound("scout", w.agent)
            first = await post_ask(r, w, ask_pb())
            terms = pb.StandingAnswerTerms()
            terms.duration.FromTimedelta(datetime.timedelta(days=1))
            made = await grpc.call(
                "RespondToAsk",
                pb.RespondToAskRequest(ask_id=first.ask_id, answers=GOOD, standing=terms),
                ada,
            )
            rule = made.standing_answer.standing_answer_id
            event = await r.delivery("scout")
            await r.ack("scout", event.event_id)
            assert answered_by(event).ask_id == first.ask_id

            again = await post_ask(r, w, ask_pb())
            ask = again.message.blocks[-1].ask
            assert ask.answered and ask.ending.kind == pb.ASK_ENDING_KIND_ANSWERED
            assert (ask.ending.actor_handle, ask.ending.standing_answer_id) == ("ada", rule)
            assert ask.ending.surface == pb.ASK_SURFACE_STANDING_ANSWER
            keys = await asyncio.to_thread(fetch_jwks, f"http://127.0.0.1:{server.http_port}")
            assert verify_receipt(ask.ending.receipt, keys, ask=ask).claims["rule"] == rule
            assert [list(q.chosen_option_ids) for q in ask.questions] == [
                list(g.chosen_option_ids) for g in GOOD
            ]
            event = await r.delivery("scout")
            await r.ack("scout", event.event_id)
            assert answered_by(event).ask_id == again.ask_id
            assert event.message_posted.message.author_handle == "ada"
            await r.no_delivery("scout")
            presence = await grpc.call(
                "GetPresence",
                pb.GetPresenceRequest(account_ids=[str(w.agent.account_id)]),
                ada,
            )
            assert presence.presences[0].state != pb.PRESENCE_STATE_WAITING
    finally:
        await grpc.close()
