"""Every ending of an ask over gRPC, Connect binary and Connect JSON: a
person's decline, the owner's withdraw, named answerers, deadlines, and the
history that records who did what, when, and through which surface."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from typing import Any

import httpx
import pytest
from google.protobuf import duration_pb2, timestamp_pb2

from compass.v1 import comms_pb2 as pb
from compass_server.store import InvalidArgument, Store
from compass_server.store.blocks import MAX_ANSWERERS, MAX_REASON_CHARS
from compass_server.store.types import Actor, PresenceState
from tests.conftest import TEST_DEADLINE_MIN_SECONDS
from tests.servers import CallError, Client
from tests.test_api_comms import GOOD, ask_pb, count_messages, expect, tok
from tests.world import World


def surface_of(client: Client) -> int:
    return pb.ASK_SURFACE_GRPC if client.name == "grpc" else pb.ASK_SURFACE_CONNECT


async def post(client: Client, w: World, author: Actor | None = None, **ask: Any) -> pb.Ask:
    """The agent (or `author`) posts ask_pb() with these extra Ask fields."""
    wire = ask_pb()
    for name, value in ask.items():
        if name == "answerer_account_ids":
            wire.answerer_account_ids.extend(value)
        else:
            getattr(wire, name).CopyFrom(value)
    res = await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id),
            blocks=[pb.MessageBlock(ask=wire)],
            # The same questions again are another ask here, not the open one.
            allow_identical=True,
        ),
        tok(w, author or w.agent),
    )
    return res.message.blocks[0].ask  # type: ignore[no-any-return]


async def read_ask(client: Client, w: World, ask_id: str) -> pb.Ask:
    res = await client.call(
        "ListMessages",
        pb.ListMessagesRequest(channel_id=str(w.channel.channel_id), page_size=200),
        tok(w, w.human),
    )
    for m in res.messages:
        for b in m.blocks:
            if b.HasField("ask") and b.ask.ask_id == ask_id:
                return b.ask
    raise AssertionError(f"no ask {ask_id}")


async def history(client: Client, w: World, ask_id: str, who: Actor) -> pb.GetAskHistoryResponse:
    res: pb.GetAskHistoryResponse = await client.call(
        "GetAskHistory", pb.GetAskHistoryRequest(ask_id=ask_id), tok(w, who)
    )
    return res


async def presence(w: World) -> PresenceState:
    (p,) = await w.store.get_presence(w.human, [w.agent.account_id])
    return p.state


def duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(datetime.timedelta(seconds=seconds))
    return d


def at(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    t = timestamp_pb2.Timestamp()
    t.FromDatetime(when)
    return t


# --- decline -------------------------------------------------------------------


async def test_a_decline_ends_the_ask_with_its_reason_and_posts_nothing(
    client: Client, api_world: World
) -> None:
    w = api_world
    ask = await post(client, w)
    assert await presence(w) is PresenceState.WAITING
    before = await count_messages(client, w)

    res = await client.call(
        "DeclineAsk",
        pb.DeclineAskRequest(ask_id=ask.ask_id, reason="not before the audit"),
        tok(w, w.human),
    )
    declined = res.ask_message.blocks[0].ask
    ending = declined.ending
    assert ending.kind == pb.ASK_ENDING_KIND_DECLINED
    assert (ending.actor_account_id, ending.actor_handle) == (str(w.human.account_id), "ada")
    assert ending.reason == "not before the audit"
    assert ending.surface == surface_of(client)
    assert ending.HasField("ended_at")
    # Clients that know only the flags see neither: a decline is not an answer.
    assert not declined.answered and not declined.cancelled
    assert await read_ask(client, w, ask.ask_id) == declined
    assert await count_messages(client, w) == before
    assert await presence(w) is not PresenceState.WAITING

    again = await expect(
        "already_exists",
        client.call("DeclineAsk", pb.DeclineAskRequest(ask_id=ask.ask_id), tok(w, w.human)),
    )
    assert "already declined" in again.message
    late = await expect(
        "already_exists",
        client.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask.ask_id, answers=GOOD), tok(w, w.human)
        ),
    )
    assert "already declined" in late.message
    assert await count_messages(client, w) == before

    record = await history(client, w, ask.ask_id, w.agent)
    assert [e.kind for e in record.entries] == [
        pb.ASK_HISTORY_KIND_POSTED,
        pb.ASK_HISTORY_KIND_DECLINED,
    ]
    posted, ended = record.entries
    assert (posted.actor_handle, posted.surface) == ("scout", surface_of(client))
    assert (ended.actor_handle, ended.reason) == ("ada", "not before the audit")
    assert ended.at == ending.ended_at and posted.at.ToDatetime() <= ended.at.ToDatetime()


async def test_decline_refusals_come_in_order_and_write_nothing(
    client: Client, api_world: World
) -> None:
    w = api_world
    ask_id = (await post(client, w)).ask_id
    mark = await w.store.last_event_id(w.human)

    def decline(reason: str = "", ask: str = ask_id) -> pb.DeclineAskRequest:
        return pb.DeclineAskRequest(ask_id=ask, reason=reason)

    hidden = await expect(
        "not_found", client.call("DeclineAsk", decline("x" * 5000), tok(w, w.other_human))
    )
    assert ask_id in hidden.message
    await expect("not_found", client.call("DeclineAsk", decline(ask="ask_nope"), tok(w, w.human)))
    await expect("permission_denied", client.call("DeclineAsk", decline(), tok(w, w.agent)))
    await expect("invalid_argument", client.call("DeclineAsk", decline(ask=""), tok(w, w.human)))
    long = await expect(
        "invalid_argument",
        client.call("DeclineAsk", decline("x" * (MAX_REASON_CHARS + 1)), tok(w, w.human)),
    )
    assert str(MAX_REASON_CHARS) in long.message
    await expect("invalid_argument", client.call("DeclineAsk", decline("a\x00b"), tok(w, w.human)))
    assert await w.store.last_event_id(w.human) == mark
    record = await history(client, w, ask_id, w.human)
    assert [e.kind for e in record.entries] == [pb.ASK_HISTORY_KIND_POSTED]

    # State before input: once the ask ended, even a bad reason is told so.
    await client.call("DeclineAsk", decline("busy"), tok(w, w.human))
    err = await expect(
        "already_exists",
        client.call("DeclineAsk", decline("x" * (MAX_REASON_CHARS + 1)), tok(w, w.human)),
    )
    assert "already declined" in err.message


# --- the owner's withdraw -------------------------------------------------------


async def test_the_owner_withdraws_a_stuck_agents_ask(client: Client, api_world: World) -> None:
    w = api_world
    ask_id = (await post(client, w)).ask_id
    withdraw = pb.WithdrawAskRequest(ask_id=ask_id)
    # grace can't see the channel: NOT_FOUND, as for any unknown ask.
    await expect("not_found", client.call("WithdrawAsk", withdraw, tok(w, w.other_human)))
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    denied = await expect(
        "permission_denied", client.call("WithdrawAsk", withdraw, tok(w, w.other_human))
    )
    assert "owner" in denied.message
    await expect("permission_denied", client.call("WithdrawAsk", withdraw, tok(w, w.agent)))

    res = await client.call("WithdrawAsk", withdraw, tok(w, w.human))
    ask = res.ask_message.blocks[0].ask
    assert ask.ending.kind == pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER
    assert ask.ending.actor_handle == "ada" and ask.ending.surface == surface_of(client)
    assert ask.cancelled and not ask.answered
    assert await presence(w) is not PresenceState.WAITING

    # A repeat succeeds and changes nothing.
    mark = await w.store.last_event_id(w.human)
    again = await client.call("WithdrawAsk", withdraw, tok(w, w.human))
    assert again.ask_message.blocks[0].ask == ask
    assert await w.store.last_event_id(w.human) == mark
    # Nobody else ends it now, the agent included.
    err = await expect(
        "already_exists",
        client.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD), tok(w, w.human)
        ),
    )
    assert "withdrawn by its agent's owner" in err.message
    with pytest.raises(Exception, match="withdrawn by its agent's owner"):
        await w.store.cancel_ask(w.agent, ask_id)
    record = await history(client, w, ask_id, w.other_human)
    assert [e.kind for e in record.entries] == [
        pb.ASK_HISTORY_KIND_POSTED,
        pb.ASK_HISTORY_KIND_WITHDRAWN_BY_OWNER,
    ]


async def test_the_owner_outside_the_channel_cannot_see_the_ask(
    client: Client, api_world: World
) -> None:
    w = api_world
    side = await w.store.create_channel(w.agent, "side", "", [w.other_human.account_id])
    message = await w.store.append_message(w.agent, side.channel_id, [ask_of(ask_pb())])
    ask_id = message.blocks[0].ask_id  # type: ignore[union-attr]
    await expect(
        "not_found",
        client.call("WithdrawAsk", pb.WithdrawAskRequest(ask_id=ask_id), tok(w, w.human)),
    )


async def test_the_owners_withdraw_after_an_answer_is_already_exists(
    client: Client, api_world: World
) -> None:
    w = api_world
    ask_id = (await post(client, w)).ask_id
    await client.call(
        "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD), tok(w, w.human)
    )
    err = await expect(
        "already_exists",
        client.call("WithdrawAsk", pb.WithdrawAskRequest(ask_id=ask_id), tok(w, w.human)),
    )
    assert "already answered" in err.message


def ask_of(wire: pb.Ask) -> Any:
    from compass_server.api.mapping import ask_from_wire

    return ask_from_wire(wire)


# --- named answerers ------------------------------------------------------------


async def named_world(w: World) -> tuple[Actor, Actor]:
    """grace and bob join the channel; the agent names them."""
    bob = await w.add_account(f"bob-{uuid.uuid4().hex[:4]}")
    for who in (w.other_human, bob):
        await w.store.add_channel_member(w.human, w.channel.channel_id, who.account_id)
    return w.other_human, bob


async def test_only_the_named_answerers_may_answer_or_decline(
    client: Client, api_world: World
) -> None:
    w = api_world
    grace, bob = await named_world(w)
    names = [str(grace.account_id), str(bob.account_id)]
    ask = await post(client, w, answerer_account_ids=names)
    assert list(ask.answerer_account_ids) == names
    bob_handle = (await w.store.get_account(w.human, bob.account_id)).handle
    assert list(ask.answerer_handles) == ["grace", bob_handle]

    respond = pb.RespondToAskRequest(ask_id=ask.ask_id, answers=GOOD)
    mark = await w.store.last_event_id(w.human)
    denied = await expect(
        "permission_denied", client.call("RespondToAsk", respond, tok(w, w.human))
    )
    assert "other people" in denied.message
    await expect(
        "permission_denied",
        client.call("DeclineAsk", pb.DeclineAskRequest(ask_id=ask.ask_id), tok(w, w.human)),
    )
    # Permission before input: a bad answer from someone not named is still not theirs.
    await expect(
        "permission_denied",
        client.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask.ask_id, answers=[]), tok(w, w.human)
        ),
    )
    assert await w.store.last_event_id(w.human) == mark

    ada_view = await history(client, w, ask.ask_id, w.human)
    assert (ada_view.caller_may_answer, ada_view.caller_may_withdraw) == (False, True)
    grace_view = await history(client, w, ask.ask_id, grace)
    assert (grace_view.caller_may_answer, grace_view.caller_may_withdraw) == (True, False)

    res = await client.call("RespondToAsk", respond, tok(w, bob))
    assert res.ask_message.blocks[0].ask.ending.actor_account_id == str(bob.account_id)
    # Permission before state: ada is still not named, whatever became of the ask.
    await expect("permission_denied", client.call("RespondToAsk", respond, tok(w, w.human)))
    await expect("already_exists", client.call("RespondToAsk", respond, tok(w, grace)))
    after = await history(client, w, ask.ask_id, grace)
    assert (after.caller_may_answer, after.caller_may_withdraw) == (False, False)


async def test_naming_anyone_but_a_person_in_the_channel_is_invalid(
    client: Client, api_world: World
) -> None:
    w = api_world
    _, bob = await named_world(w)
    outsider = await w.add_account(f"out-{uuid.uuid4().hex[:4]}")
    before = await count_messages(client, w)
    cases = {
        "a person outside the channel": [str(outsider.account_id)],
        "an agent": [str(w.agent.account_id)],
        "an unknown account": [str(uuid.uuid4())],
        "a malformed id": ["not-an-id"],
        "one person twice": [str(bob.account_id), str(bob.account_id)],
        "too many": [str(uuid.uuid4()) for _ in range(MAX_ANSWERERS + 1)],
    }
    for what, names in cases.items():
        with pytest.raises(CallError) as info:
            await post(client, w, answerer_account_ids=names)
        assert info.value.code == "invalid_argument", what
    assert await count_messages(client, w) == before

    # Visibility first: an author outside the channel hears only that.
    with pytest.raises(CallError) as info:
        await post(client, w, author=outsider, answerer_account_ids=[str(w.agent.account_id)])
    assert info.value.code == "not_found"


# --- deadlines --------------------------------------------------------------------


async def test_a_deadline_is_set_at_post_within_its_bounds(
    client: Client, api_world: World
) -> None:
    w = api_world
    start = datetime.datetime.now(datetime.UTC)
    by_timeout = await post(client, w, timeout=duration(600))
    assert not by_timeout.HasField("timeout")
    deadline = by_timeout.deadline.ToDatetime(datetime.UTC)
    assert start + datetime.timedelta(seconds=600) <= deadline
    assert deadline <= datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=600)

    when = (start + datetime.timedelta(days=2)).replace(microsecond=0)
    absolute = await post(client, w, deadline=at(when))
    assert absolute.deadline.ToDatetime(datetime.UTC) == when
    assert (await read_ask(client, w, absolute.ask_id)).deadline == absolute.deadline

    refused = {
        "both": {"deadline": at(when), "timeout": duration(600)},
        "too soon": {"timeout": duration(TEST_DEADLINE_MIN_SECONDS / 2)},
        "negative": {"timeout": duration(-60)},
        "in the past": {"deadline": at(start - datetime.timedelta(minutes=5))},
        "too late": {"timeout": duration(31 * 86_400)},
    }
    if client.name != "connect-json":
        # Proto3 JSON can't even write it; binary carries it to the server.
        refused["past the calendar"] = {"deadline": timestamp_pb2.Timestamp(seconds=2**40)}
    before = await count_messages(client, w)
    for what, fields in refused.items():
        with pytest.raises(CallError) as info:
            await post(client, w, **fields)
        assert info.value.code == "invalid_argument", what
    assert await count_messages(client, w) == before


async def test_the_default_bounds_are_one_minute_to_thirty_days(world: World) -> None:
    store = Store(world.store.db)
    channel = world.channel.channel_id
    ask = ask_of(ask_pb())
    for seconds in (59, 30 * 86_400 + 1):
        too = dataclasses.replace(ask, timeout=datetime.timedelta(seconds=seconds))
        with pytest.raises(InvalidArgument, match="1 minute to 30 days"):
            await store.append_message(world.agent, channel, [too])
    for seconds in (61, 30 * 86_400 - 1):
        ok = dataclasses.replace(ask, timeout=datetime.timedelta(seconds=seconds))
        await store.append_message(world.agent, channel, [ok])


async def test_an_ask_expires_at_its_deadline(client: Client, api_world: World) -> None:
    w = api_world
    ask = await post(client, w, timeout=duration(0.5))
    assert await presence(w) is PresenceState.WAITING
    before = await count_messages(client, w)
    expired = await until_ended(client, w, ask.ask_id)
    assert expired.ending.kind == pb.ASK_ENDING_KIND_EXPIRED
    assert expired.ending.surface == pb.ASK_SURFACE_SERVER
    assert not expired.ending.actor_account_id and not expired.ending.actor_handle
    assert expired.ending.ended_at.ToDatetime(datetime.UTC) >= ask.deadline.ToDatetime(datetime.UTC)
    assert all(q.timed_out for q in expired.questions)
    assert all(not q.chosen_option_ids and not q.custom_text for q in expired.questions)
    assert not expired.answered and not expired.cancelled
    assert await count_messages(client, w) == before
    # Reads show the expiry at once; presence follows when the sweep records it, moments later.
    await until_not_waiting(w)
    err = await expect(
        "already_exists",
        client.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask.ask_id, answers=GOOD), tok(w, w.human)
        ),
    )
    assert "already expired" in err.message
    record = await history(client, w, ask.ask_id, w.human)
    assert [(e.kind, e.surface, e.actor_account_id) for e in record.entries][1:] == [
        (pb.ASK_HISTORY_KIND_EXPIRED, pb.ASK_SURFACE_SERVER, "")
    ]


async def until_not_waiting(w: World, wait: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait
    while await presence(w) is PresenceState.WAITING:
        assert loop.time() < give_up, f"the agent still waits {wait}s after its ask expired"
        await asyncio.sleep(0.05)


async def until_ended(client: Client, w: World, ask_id: str, wait: float = 10.0) -> pb.Ask:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + wait
    while True:
        ask = await read_ask(client, w, ask_id)
        if ask.HasField("ending"):
            return ask
        assert loop.time() < give_up, f"ask {ask_id} did not end in {wait}s"
        await asyncio.sleep(0.05)


# --- the record of surfaces --------------------------------------------------------


async def test_the_web_page_names_itself_and_anything_else_is_connect(
    server: Any, api_world: World
) -> None:
    w = api_world
    url = f"http://127.0.0.1:{server.http_port}/compass.v1.CommsService"
    posted = []
    async with httpx.AsyncClient() as http:
        for header in ("web", "curl", None):
            headers = {"authorization": f"Bearer {tok(w, w.agent)}"}
            if header:
                headers["compass-surface"] = header
            res = await http.post(
                f"{url}/PostMessage",
                headers=headers,
                json={
                    "channelId": str(w.channel.channel_id),
                    "blocks": [{"ask": {"questions": [{"questionId": "q", "question": "Go?"}]}}],
                    "allowIdentical": True,
                },
            )
            assert res.status_code == 200, res.text
            posted.append(res.json()["message"]["blocks"][0]["ask"]["askId"])
        declined = await http.post(
            f"{url}/DeclineAsk",
            headers={"authorization": f"Bearer {tok(w, w.human)}", "compass-surface": "web"},
            json={"askId": posted[0], "reason": "later"},
        )
        assert declined.json()["askMessage"]["blocks"][0]["ask"]["ending"]["surface"] == (
            "ASK_SURFACE_WEB"
        )
        read = [
            (
                await http.post(
                    f"{url}/GetAskHistory",
                    headers={"authorization": f"Bearer {tok(w, w.human)}"},
                    json={"askId": ask_id},
                )
            ).json()
            for ask_id in posted
        ]
    assert [r["entries"][0]["surface"] for r in read] == [
        "ASK_SURFACE_WEB",
        "ASK_SURFACE_CONNECT",
        "ASK_SURFACE_CONNECT",
    ]
    assert [e["kind"] for e in read[0]["entries"]] == [
        "ASK_HISTORY_KIND_POSTED",
        "ASK_HISTORY_KIND_DECLINED",
    ]
    assert read[0]["entries"][1]["surface"] == "ASK_SURFACE_WEB"


async def test_the_history_is_for_the_asks_audience(client: Client, api_world: World) -> None:
    w = api_world
    ask_id = (await post(client, w)).ask_id
    hidden = await expect(
        "not_found",
        client.call("GetAskHistory", pb.GetAskHistoryRequest(ask_id=ask_id), tok(w, w.other_human)),
    )
    unknown = await expect(
        "not_found",
        client.call("GetAskHistory", pb.GetAskHistoryRequest(ask_id="ask_x"), tok(w, w.human)),
    )
    assert hidden.message.replace(ask_id, "?") == unknown.message.replace("ask_x", "?")
    await expect(
        "invalid_argument",
        client.call("GetAskHistory", pb.GetAskHistoryRequest(), tok(w, w.human)),
    )
    agent_view = await history(client, w, ask_id, w.agent)
    assert (agent_view.caller_may_answer, agent_view.caller_may_withdraw) == (False, False)
    owner_view = await history(client, w, ask_id, w.human)
    assert (owner_view.caller_may_answer, owner_view.caller_may_withdraw) == (True, True)
    assert owner_view.ask_id == ask_id


async def test_an_ask_id_with_a_nul_is_refused_naming_the_field(
    client: Client, api_world: World
) -> None:
    """The edge's rule for control characters, on every ending's call."""
    w = api_world
    bad = "ask_\x00"
    calls = {
        "RespondToAsk": pb.RespondToAskRequest(ask_id=bad, answers=GOOD),
        "DeclineAsk": pb.DeclineAskRequest(ask_id=bad),
        "WithdrawAsk": pb.WithdrawAskRequest(ask_id=bad),
        "GetAskHistory": pb.GetAskHistoryRequest(ask_id=bad),
    }
    for method, request in calls.items():
        err = await expect("invalid_argument", client.call(method, request, tok(w, w.human)))
        assert err.message.startswith("ask_id has a control character"), (method, err.message)
