"""The agent's side of its inbox through the relay: it posts, replies and
closes with its arms, and hears people's answers, replies and closes on its
delivery lane, never its own writes and never another agent's inbox."""

from __future__ import annotations

import uuid
from typing import Any

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2 as ib
from compass_server.store.types import AccountKind, Answer
from tests.relay_client import relay, runner_for
from tests.test_api_comms import ask_pb
from tests.test_inbox_store import GIF, PNG
from tests.world import World


async def test_people_answers_replies_and_closes_reach_the_agent(
    server: Any, api_world: World
) -> None:
    w = api_world
    inbox = server.inbox
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    async with relay(server.grpc_port, await runner_for(w, w.agent, ranger)) as r:
        await r.bound("scout", w.agent)
        await r.bound("ranger", ranger)
        posted = await r.ok(
            "scout",
            "inbox_post",
            gw.InboxPostRequest(
                key="deploy",
                title="Deploy?",
                body="Chart attached",
                ask=ask_pb(),
                pictures=[ib.InboxFile(name="chart.png", data=PNG)],
            ),
        )
        assert posted.item.status == pb.INBOX_ITEM_STATUS_OPEN and posted.item.revision == 1
        (picture,) = posted.message.attachments
        assert picture.content_type == "image/png"
        await r.ok("scout", "inbox_reply", gw.InboxReplyRequest(key="deploy", text="ping"))
        # Its own post and reply don't come back to it.
        await r.no_delivery("scout")

        item_id = uuid.UUID(posted.item.item_id)
        await inbox.reply(w.human, item_id, "which region?", [])
        replied = (await r.delivery("scout")).inbox_item_changed
        assert replied.item_id == posted.item.item_id and replied.key == "deploy"
        assert replied.actor_account_id == str(w.human.account_id)
        assert replied.message.blocks[0].text.text == "which region?"

        taken = await inbox.answer(
            w.human,
            item_id,
            [Answer("db", ("pg",)), Answer("langs", ("py",), "and Rust")],
            "c1",
            text="eu-west",
        )
        heard = await r.delivery("scout")
        answered = heard.inbox_item_changed
        assert answered.status == pb.INBOX_ITEM_STATUS_ANSWERED and answered.revision == 1
        text, snapshot = answered.message.blocks
        assert text.text.text == "eu-west"
        assert snapshot.ask_answer.ask_id == posted.item.ask_id
        assert [list(q.chosen_option_ids) for q in snapshot.ask_answer.questions] == [
            ["pg"],
            ["py"],
        ]
        assert answered.message.message_id == str(taken.message.message_id)
        await r.ack("scout", heard.event_id)

        # A member's close writes no message; the agent hears it with the
        # withdrawn ask, whose ending names the member.
        second = await r.ok(
            "scout", "inbox_post", gw.InboxPostRequest(key="second", body="Again?", ask=ask_pb())
        )
        await inbox.close(w.human, uuid.UUID(second.item.item_id))
        closed = (await r.delivery("scout")).inbox_item_changed
        assert closed.status == pb.INBOX_ITEM_STATUS_CLOSED
        assert closed.actor_account_id == str(w.human.account_id)
        assert closed.message.message_id == second.message.message.message_id
        ask = closed.message.blocks[-1].ask
        assert ask.ending.kind == pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON and ask.cancelled

        # The agent's own close is its act: nothing comes back.
        third = await r.ok(
            "scout", "inbox_post", gw.InboxPostRequest(key="third", body="?", ask=ask_pb())
        )
        gone = await r.ok("scout", "inbox_close", gw.InboxCloseRequest(key="third", reason="moot"))
        assert gone.item.revision == third.item.revision + 1
        await r.no_delivery("scout")
        await r.no_delivery("ranger")


async def test_inbox_arms_refuse_what_the_rules_refuse(server: Any, api_world: World) -> None:
    w = api_world
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s", w.agent)

        async def code(arm: str, request: Any) -> str:
            result = await r.call("s", arm, request)
            assert result.WhichOneof("result") == "error", result
            return result.error.code

        assert await code("inbox_post", gw.InboxPostRequest(key="", body="x")) == "invalid_argument"
        assert await code("inbox_post", gw.InboxPostRequest(key="k")) == "invalid_argument"
        bad = gw.InboxPostRequest(key="k", body="x", pictures=[ib.InboxFile(data=b"%PDF-1.7")])
        assert await code("inbox_post", bad) == "invalid_argument"
        assert await code("inbox_reply", gw.InboxReplyRequest(key="nope", text="x")) == "not_found"
        await r.ok("s", "inbox_post", gw.InboxPostRequest(key="k", body="fyi"))
        assert (
            await code("inbox_close", gw.InboxCloseRequest(key="k", reason="x")) == "already_exists"
        )
        await r.ok("s", "inbox_post", gw.InboxPostRequest(key="k", ask=ask_pb()))
        assert await code("inbox_close", gw.InboxCloseRequest(key="k")) == "invalid_argument"
        many = [ib.InboxFile(name=f"{i}.gif", data=GIF) for i in range(11)]
        assert (
            await code("inbox_reply", gw.InboxReplyRequest(key="k", pictures=many))
            == "resource_exhausted"
        )
