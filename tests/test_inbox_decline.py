"""A person's decline in an agent's inbox: the item's open ask ends declined,
with an optional reason the agent hears on its delivery lane; the item is
closed by that person and its revision stays. An inbox ask takes no deadline
and names no answerers."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2 as ib
from compass_server.store import InvalidArgument
from compass_server.store.blocks import MAX_REASON_CHARS
from compass_server.store.types import Answer, AskStatus, EndingKind, InboxStatus, Surface
from tests.relay_client import relay, runner_for
from tests.test_api_comms import ask_pb

# The fixture is used by name; ruff reads each test's parameter as redefining it.
from tests.test_inbox_api import Client, expect, inbox_client, tok  # noqa: F401
from tests.world import World, two_question_ask


async def test_a_decline_closes_the_item_and_reaches_the_agent_with_its_reason(
    inbox_client: Client,  # noqa: F811
    api_world: World,
    server: Any,
) -> None:
    w, c, inbox = api_world, inbox_client, server.inbox
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        posted = await r.ok(
            "scout", "inbox_post", gw.InboxPostRequest(key="deploy", title="Deploy?", ask=ask_pb())
        )
        item_id = posted.item.item_id
        res = await c.call(
            "DeclineInboxAsk",
            ib.DeclineInboxAskRequest(item_id=item_id, reason="not before the audit"),
            tok(w, w.human),
        )
        item = res.item
        assert item.status == pb.INBOX_ITEM_STATUS_CLOSED
        assert item.closed_by_account_id == str(w.human.account_id)
        assert item.revision == posted.item.revision and not item.close_reason

        heard = (await r.delivery("scout")).inbox_item_changed
        assert heard.status == pb.INBOX_ITEM_STATUS_CLOSED
        assert heard.actor_account_id == str(w.human.account_id)
        ask = heard.message.blocks[-1].ask
        assert ask.ask_id == posted.item.ask_id
        assert ask.ending.kind == pb.ASK_ENDING_KIND_DECLINED
        assert (ask.ending.actor_handle, ask.ending.reason) == ("ada", "not before the audit")
        assert ask.ending.surface == pb.ASK_SURFACE_INBOX
        assert not ask.answered and not ask.cancelled

    thread = await c.call("GetInboxItem", ib.GetInboxItemRequest(item_id=item_id), tok(w, w.human))
    (message,) = thread.thread
    assert message.ask_status == ib.INBOX_ASK_STATUS_DECLINED
    assert message.message.blocks[-1].ask.ending.reason == "not before the audit"

    # Nothing else ends it now; the decliner may take it back, as with a close.
    again = await expect(
        "already_exists",
        c.call("DeclineInboxAsk", ib.DeclineInboxAskRequest(item_id=item_id), tok(w, w.human)),
    )
    assert "declined" in again.message
    answered = await inbox.answer(w.human, uuid.UUID(item_id), [], "k1")
    assert answered.outcome.value == "not_open" and "declined" in answered.reason
    reopened = await c.call(
        "ReopenInboxItem", ib.ReopenInboxItemRequest(item_id=item_id), tok(w, w.human)
    )
    assert reopened.item.status == pb.INBOX_ITEM_STATUS_OPEN
    thread = await c.call("GetInboxItem", ib.GetInboxItemRequest(item_id=item_id), tok(w, w.human))
    ask = thread.thread[0].message.blocks[-1].ask
    assert thread.thread[0].ask_status == ib.INBOX_ASK_STATUS_OPEN and not ask.HasField("ending")


async def test_decline_refusals_in_order(
    inbox_client: Client,  # noqa: F811
    api_world: World,
    server: Any,
) -> None:
    w, c, inbox = api_world, inbox_client, server.inbox
    item, _ = await inbox.post(w.agent, "deploy", "Deploy?", "", two_question_ask())
    note, _ = await inbox.post(w.agent, "fyi", "FYI", "green")
    item_id = str(item.item_id)

    def decline(reason: str = "", item: str = item_id) -> ib.DeclineInboxAskRequest:
        return ib.DeclineInboxAskRequest(item_id=item, reason=reason)

    await expect(
        "not_found", c.call("DeclineInboxAsk", decline(), tok(w, w.other_human))
    )  # not granted
    await expect("permission_denied", c.call("DeclineInboxAsk", decline(), tok(w, w.agent)))
    await expect(
        "already_exists",
        c.call("DeclineInboxAsk", decline(item=str(note.item_id)), tok(w, w.human)),
    )
    await expect(
        "invalid_argument",
        c.call("DeclineInboxAsk", decline("x" * (MAX_REASON_CHARS + 1)), tok(w, w.human)),
    )
    await expect("invalid_argument", c.call("DeclineInboxAsk", decline("a\x00"), tok(w, w.human)))
    still = await inbox.read_thread(w.human, item.item_id)
    assert still.item.status is InboxStatus.OPEN

    await inbox.answer(w.human, item.item_id, [Answer("db", ("pg",)), Answer("langs")], "k")
    err = await expect("already_exists", c.call("DeclineInboxAsk", decline(), tok(w, w.human)))
    assert "answered" in err.message


async def test_the_store_types_the_decline_on_the_ask(world: World, server: Any) -> None:
    inbox = server.inbox.__class__(world.store.db)
    item, _ = await inbox.post(world.agent, "k", "T", "", two_question_ask())
    declined = await inbox.decline(world.human, item.item_id, "", surface=Surface.INBOX)
    assert declined.status is InboxStatus.CLOSED and declined.closed_by == world.human.account_id
    thread = await inbox.read_thread(world.human, item.item_id)
    (message,) = thread.messages
    assert message.ask_status is AskStatus.DECLINED
    ask = message.ask
    assert ask is not None and ask.ending is not None
    assert (ask.ending.kind, ask.ending.reason) == (EndingKind.DECLINED, "")
    assert ask.ending.actor_id == world.human.account_id and ask.ending.at is not None


async def test_an_inbox_ask_takes_no_deadline_and_names_no_answerers(
    world: World, server: Any
) -> None:
    inbox = server.inbox
    ask = two_question_ask()
    for wrong in (
        dataclasses.replace(ask, timeout=datetime.timedelta(hours=1)),
        dataclasses.replace(ask, deadline=datetime.datetime.now(datetime.UTC)),
        dataclasses.replace(ask, answerer_ids=(world.human.account_id,)),
    ):
        with pytest.raises(InvalidArgument, match="inbox ask"):
            await inbox.post(world.agent, f"k-{uuid.uuid4().hex[:4]}", "T", "", wrong)
