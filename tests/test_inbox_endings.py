"""Every ended inbox ask says how it ended, as a channel ask does: replaced by
the agent's newer ask, answered, withdrawn by its agent or by a person who
closed the item, or declined, each with who, when, through which surface and
a receipt; the inbox's own status fields say what they said before."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import psycopg.types.json
import pytest
from psycopg.rows import dict_row

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass.v1 import inbox_pb2 as ib
from compass_agentkit.receipts import fetch_jwks, verify_receipt
from compass_server.store.db import migrations
from tests.relay_client import RelayClient, relay, runner_for
from tests.test_api_comms import ask_pb

# The fixture is used by name; ruff reads each test's parameter as redefining it.
from tests.test_inbox_api import Client, inbox_client, tok  # noqa: F401
from tests.world import World

ANSWER = [
    pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg"]),
    pb.AskQuestionAnswer(question_id="langs", chosen_option_ids=["py"], custom_text="and Go"),
]


async def _jwks(server: Any) -> dict[str, Any]:
    return await asyncio.to_thread(fetch_jwks, f"http://127.0.0.1:{server.http_port}")


async def _thread(c: Client, w: World, item_id: str) -> dict[str, ib.InboxMessage]:
    """The item's ask messages, by ask id."""
    read = await c.call("GetInboxItem", ib.GetInboxItemRequest(item_id=item_id), tok(w, w.human))
    return {
        m.message.blocks[-1].ask.ask_id: m
        for m in read.thread
        if m.message.blocks and m.message.blocks[-1].HasField("ask")
    }


async def _post(r: RelayClient, key: str) -> gw.InboxPostResponse:
    return await r.ok("scout", "inbox_post", gw.InboxPostRequest(key=key, title=key, ask=ask_pb()))


async def _answer(c: Client, w: World, item_id: str, key: str = "k1") -> ib.AnswerInboxAskResponse:
    answered = await c.call(
        "AnswerInboxAsk",
        ib.AnswerInboxAskRequest(item_id=item_id, client_key=key, answers=ANSWER),
        tok(w, w.human),
    )
    assert answered.outcome == ib.INBOX_ANSWER_OUTCOME_TAKEN, answered
    return answered


def _ended_by(
    ask: pb.Ask, kind: int, who: Any, handle: str, surface: int, reason: str = ""
) -> None:
    ending = ask.ending
    assert ending.kind == kind, ask
    assert (ending.actor_account_id, ending.actor_handle) == (str(who.account_id), handle)
    assert ending.surface == surface
    assert ending.reason == reason
    assert ending.HasField("ended_at")


async def test_every_ended_inbox_ask_reads_how_it_ended(
    inbox_client: Client,  # noqa: F811
    api_world: World,
    server: Any,
    database_url: str,
) -> None:
    w, c = api_world, inbox_client
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        first = await _post(r, "deploy")
        second = await _post(r, "deploy")  # replaces the first
        await _answer(c, w, second.item.item_id)
        stale = await _post(r, "stale")
        await r.ok("scout", "inbox_close", gw.InboxCloseRequest(key="stale", reason="not needed"))
        ping = await _post(r, "ping")
        await c.call(
            "CloseInboxItem", ib.CloseInboxItemRequest(item_id=ping.item.item_id), tok(w, w.human)
        )
        declined = await _post(r, "audit")
        await c.call(
            "DeclineInboxAsk",
            ib.DeclineInboxAskRequest(item_id=declined.item.item_id, reason="after the audit"),
            tok(w, w.human),
        )

    keys = await _jwks(server)
    deploy = await _thread(c, w, first.item.item_id)
    replaced, answered = deploy[first.item.ask_id], deploy[second.item.ask_id]
    # The inbox's own fields say what they said.
    assert replaced.ask_status == ib.INBOX_ASK_STATUS_REPLACED and not replaced.withdrawn_reason
    assert answered.ask_status == ib.INBOX_ASK_STATUS_ANSWERED
    ask = replaced.message.blocks[-1].ask
    assert ask.cancelled and not ask.answered
    _ended_by(ask, pb.ASK_ENDING_KIND_REPLACED, w.agent, "scout", pb.ASK_SURFACE_RELAY)
    ask = answered.message.blocks[-1].ask
    assert ask.answered and not ask.cancelled
    _ended_by(ask, pb.ASK_ENDING_KIND_ANSWERED, w.human, "ada", pb.ASK_SURFACE_INBOX)

    withdrawn = (await _thread(c, w, stale.item.item_id))[stale.item.ask_id]
    assert withdrawn.ask_status == ib.INBOX_ASK_STATUS_WITHDRAWN
    assert withdrawn.withdrawn_reason == "not needed"
    ask = withdrawn.message.blocks[-1].ask
    assert ask.cancelled
    _ended_by(
        ask,
        pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT,
        w.agent,
        "scout",
        pb.ASK_SURFACE_RELAY,
        "not needed",
    )

    closed = (await _thread(c, w, ping.item.item_id))[ping.item.ask_id]
    assert closed.ask_status == ib.INBOX_ASK_STATUS_WITHDRAWN and not closed.withdrawn_reason
    ask = closed.message.blocks[-1].ask
    assert ask.cancelled
    _ended_by(ask, pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON, w.human, "ada", pb.ASK_SURFACE_INBOX)

    ask = (await _thread(c, w, declined.item.item_id))[declined.item.ask_id].message.blocks[-1].ask
    _ended_by(
        ask, pb.ASK_ENDING_KIND_DECLINED, w.human, "ada", pb.ASK_SURFACE_INBOX, "after the audit"
    )

    # Each ending carries a receipt the agent verifies offline, saying the same.
    for item, ask_id, ending in (
        (first, first.item.ask_id, "replaced"),
        (first, second.item.ask_id, "answered"),
        (stale, stale.item.ask_id, "withdrawn_by_agent"),
        (ping, ping.item.ask_id, "withdrawn_by_person"),
        (declined, declined.item.ask_id, "declined"),
    ):
        ask = (await _thread(c, w, item.item.item_id))[ask_id].message.blocks[-1].ask
        proof = verify_receipt(ask.ending.receipt, keys, ask=ask, workspace_id=str(w.workspace_id))
        assert proof.ending == ending
        assert proof.claims["asker"] == str(w.agent.account_id)
    proof = verify_receipt(answered.message.blocks[-1].ask.ending.receipt, keys)
    assert proof.answer("langs") == {"id": "langs", "chosen": ["py"], "text": "and Go"}

    # The item's own fields are as before.
    items = {
        i.key: i
        for i in (
            await c.call(
                "ListInboxItems",
                ib.ListInboxItemsRequest(agent_account_id=str(w.agent.account_id)),
                tok(w, w.human),
            )
        ).items
    }
    assert items["deploy"].status == pb.INBOX_ITEM_STATUS_ANSWERED
    assert items["deploy"].answered_by_account_id == str(w.human.account_id)
    assert items["stale"].status == pb.INBOX_ITEM_STATUS_CLOSED
    assert items["stale"].close_reason == "not needed"
    assert items["stale"].closed_by_account_id == str(w.agent.account_id)
    assert items["ping"].status == pb.INBOX_ITEM_STATUS_CLOSED and not items["ping"].close_reason
    assert items["ping"].closed_by_account_id == str(w.human.account_id)

    # As stored; the database holds an ending to its standing, whoever writes it.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for ask_id, ending in (
            (first.item.ask_id, {"kind": "withdrawn_by_person"}),
            (second.item.ask_id, {"kind": "declined"}),
            (ping.item.ask_id, {"kind": "replaced"}),
        ):
            with pytest.raises(psycopg.errors.CheckViolation):
                await conn.execute(
                    "UPDATE inbox_messages SET ending = %s WHERE ask_id = %s",
                    (psycopg.types.json.Jsonb(ending), ask_id),
                )
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(
                "UPDATE inbox_messages SET ask_status = 'open' WHERE ask_id = %s",
                (declined.item.ask_id,),
            )
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cur = await conn.execute(
            "SELECT m.ask_id, m.ask_status, m.ending->>'kind' AS kind,"
            " m.ending->>'actor_id' AS actor FROM inbox_messages m"
            " JOIN inbox_items i ON i.id = m.item_id"
            " WHERE i.agent_id = %s AND m.ask_id IS NOT NULL",
            (w.agent.account_id,),
        )
        stored = {
            r["ask_id"]: (r["ask_status"], r["kind"], r["actor"]) for r in await cur.fetchall()
        }
    agent, human = str(w.agent.account_id), str(w.human.account_id)
    assert stored == {
        first.item.ask_id: ("replaced", "replaced", agent),
        second.item.ask_id: ("answered", "answered", human),
        stale.item.ask_id: ("withdrawn", "withdrawn_by_agent", agent),
        ping.item.ask_id: ("withdrawn", "withdrawn_by_person", human),
        declined.item.ask_id: ("declined", "declined", human),
    }


async def test_the_agent_hears_each_ending_a_person_made_with_its_receipt(
    inbox_client: Client,  # noqa: F811
    api_world: World,
    server: Any,
) -> None:
    w, c = api_world, inbox_client
    keys = await _jwks(server)
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        deploy = await _post(r, "deploy")
        ping = await _post(r, "ping")
        await _answer(c, w, deploy.item.item_id)
        heard = (await r.delivery("scout")).inbox_item_changed
        assert heard.status == pb.INBOX_ITEM_STATUS_ANSWERED
        (answer,) = [b.ask_answer for b in heard.message.blocks if b.HasField("ask_answer")]
        assert answer.ask_id == deploy.item.ask_id
        proof = verify_receipt(answer.receipt, keys, workspace_id=str(w.workspace_id))
        assert (proof.ending, proof.by_handle) == ("answered", "ada")
        assert proof.answer("db") == {"id": "db", "chosen": ["pg"], "text": ""}

        await c.call(
            "CloseInboxItem", ib.CloseInboxItemRequest(item_id=ping.item.item_id), tok(w, w.human)
        )
        heard = (await r.delivery("scout")).inbox_item_changed
        assert heard.status == pb.INBOX_ITEM_STATUS_CLOSED
        assert heard.actor_account_id == str(w.human.account_id)
        ask = heard.message.blocks[-1].ask
        assert ask.ask_id == ping.item.ask_id and ask.cancelled
        _ended_by(ask, pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON, w.human, "ada", pb.ASK_SURFACE_INBOX)
        proof = verify_receipt(ask.ending.receipt, keys, ask=ask)
        assert proof.ending == "withdrawn_by_person"

        # What the agent did itself it learned from its calls.
        await _post(r, "deploy")
        await r.ok("scout", "inbox_close", gw.InboxCloseRequest(key="deploy", reason="done"))
        await r.no_delivery("scout")


async def test_an_ask_that_waits_again_has_no_ending(
    inbox_client: Client,  # noqa: F811
    api_world: World,
    server: Any,
) -> None:
    w, c = api_world, inbox_client
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        deploy = await _post(r, "deploy")
        ping = await _post(r, "ping")
    item_id = deploy.item.item_id
    await _answer(c, w, item_id)
    await c.call(
        "TakeBackInboxAnswer", ib.TakeBackInboxAnswerRequest(item_id=item_id), tok(w, w.human)
    )
    ask = (await _thread(c, w, item_id))[deploy.item.ask_id].message.blocks[-1].ask
    assert not ask.HasField("ending") and not ask.answered and not ask.cancelled
    await _answer(c, w, item_id, "k2")
    ask = (await _thread(c, w, item_id))[deploy.item.ask_id].message.blocks[-1].ask
    _ended_by(ask, pb.ASK_ENDING_KIND_ANSWERED, w.human, "ada", pb.ASK_SURFACE_INBOX)

    item_id = ping.item.item_id
    await c.call("CloseInboxItem", ib.CloseInboxItemRequest(item_id=item_id), tok(w, w.human))
    await c.call("ReopenInboxItem", ib.ReopenInboxItemRequest(item_id=item_id), tok(w, w.human))
    ask = (await _thread(c, w, item_id))[ping.item.ask_id].message.blocks[-1].ask
    assert not ask.HasField("ending") and not ask.cancelled


async def test_asks_that_ended_before_endings_were_recorded(
    inbox_client: Client,  # noqa: F811
    api_world: World,
    server: Any,
    database_url: str,
) -> None:
    """The upgrade gives the inbox asks that ended before it their endings:
    answered and replaced ones exactly as they would be written now, a
    withdrawn one its kind and who, when the database still knows. One an
    older server ends meanwhile reads its kind."""
    w, c = api_world, inbox_client
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        first = await _post(r, "deploy")
        second = await _post(r, "deploy")
        await _answer(c, w, second.item.item_id)
        stale = await _post(r, "stale")
        await r.ok("scout", "inbox_close", gw.InboxCloseRequest(key="stale", reason="not needed"))
        ping = await _post(r, "ping")
        await c.call(
            "CloseInboxItem", ib.CloseInboxItemRequest(item_id=ping.item.item_id), tok(w, w.human)
        )
    ask_ids = [first.item.ask_id, second.item.ask_id, stale.item.ask_id, ping.item.ask_id]
    written = {
        ask_id: (await _thread(c, w, item.item.item_id))[ask_id].message.blocks[-1].ask.ending
        for item, ask_id in zip((first, first, stale, ping), ask_ids, strict=True)
    }
    (upgrade,) = [sql for version, _, sql in migrations() if version == 45]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # As an older server left them: no ending beside the standing.
        await conn.execute(
            "UPDATE inbox_messages SET ending = NULL WHERE ask_id = ANY(%s)", (ask_ids,)
        )
        async with conn.transaction():
            await conn.execute(upgrade.encode())

    got = {
        ask_id: (await _thread(c, w, item.item.item_id))[ask_id].message.blocks[-1].ask.ending
        for item, ask_id in zip((first, first, stale, ping), ask_ids, strict=True)
    }
    for ask_id in (first.item.ask_id, second.item.ask_id):
        assert got[ask_id] == written[ask_id], ask_id
    for ask_id, kind, who in (
        (stale.item.ask_id, pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT, w.agent),
        (ping.item.ask_id, pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON, w.human),
    ):
        ending = got[ask_id]
        assert ending.kind == kind and ending.actor_account_id == str(who.account_id)
        # When is not known: no time, and nothing to sign.
        assert not ending.HasField("ended_at") and not ending.receipt
    assert got[stale.item.ask_id].reason == "not needed"

    # An older server's close during the upgrade writes no ending: it reads its kind.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE inbox_messages SET ending = NULL WHERE ask_id = ANY(%s)",
            ([first.item.ask_id, stale.item.ask_id],),
        )
    deploy = await _thread(c, w, first.item.item_id)
    ending = deploy[first.item.ask_id].message.blocks[-1].ask.ending
    assert ending.kind == pb.ASK_ENDING_KIND_REPLACED and not ending.actor_account_id
    ending = (await _thread(c, w, stale.item.item_id))[stale.item.ask_id].message.blocks[-1].ask
    assert ending.ending.kind == pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT
    assert ending.ending.reason == "not needed" and ending.cancelled
    assert uuid.UUID(deploy[second.item.ask_id].message.author_account_id) == w.agent.account_id
