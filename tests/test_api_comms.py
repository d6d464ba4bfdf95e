"""CommsService end to end over gRPC, Connect binary and Connect JSON: one
behaviour, the same codes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store.types import TextBlock
from tests.servers import CallError, Client
from tests.world import World


def ask_pb() -> pb.Ask:
    return pb.Ask(
        questions=[
            pb.AskQuestion(
                question_id="db",
                question="Which database?",
                header="Storage",
                options=[
                    pb.AskOption(id="pg", label="PostgreSQL"),
                    pb.AskOption(id="my", label="MySQL"),
                ],
                recommended=0,
            ),
            pb.AskQuestion(
                question_id="langs",
                question="Which languages?",
                options=[pb.AskOption(id="py", label="Python"), pb.AskOption(id="go", label="Go")],
                allow_multiple=True,
            ),
        ]
    )


GOOD = [
    pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg"]),
    pb.AskQuestionAnswer(question_id="langs", chosen_option_ids=["py", "go"], custom_text="+Rust"),
]


def tok(w: World, who: Any) -> str:
    return w.tokens[who.account_id]


async def post_ask(client: Client, w: World) -> pb.Message:
    res = await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id), blocks=[pb.MessageBlock(ask=ask_pb())]
        ),
        tok(w, w.agent),
    )
    return res.message  # type: ignore[no-any-return]


async def expect(code: str, coro: Any) -> CallError:
    with pytest.raises(CallError) as info:
        await coro
    assert info.value.code == code, info.value
    assert "Traceback" not in info.value.message and "psycopg" not in info.value.message
    return info.value


async def count_messages(client: Client, w: World) -> int:
    res = await client.call(
        "ListMessages",
        pb.ListMessagesRequest(channel_id=str(w.channel.channel_id), page_size=200),
        tok(w, w.human),
    )
    return len(res.messages)


async def test_post_and_answer_an_ask(client: Client, api_world: World) -> None:
    w = api_world
    message = await post_ask(client, w)
    ask = message.blocks[0].ask
    assert ask.ask_id.startswith("ask_") and not ask.answered
    res = await client.call(
        "RespondToAsk", pb.RespondToAskRequest(ask_id=ask.ask_id, answers=GOOD), tok(w, w.human)
    )
    assert res.ask_message.blocks[0].ask.answered
    assert res.answer_message.author_account_id == str(w.human.account_id)
    assert res.answer_message.blocks[0].ask_answer.ask_id == ask.ask_id
    got = await client.call(
        "GetMessage", pb.GetMessageRequest(message_id=message.message_id), tok(w, w.agent)
    )
    q = got.message.blocks[0].ask.questions
    assert list(q[0].chosen_option_ids) == ["pg"]
    assert list(q[1].chosen_option_ids) == ["py", "go"] and q[1].custom_text == "+Rust"
    assert q[0].HasField("recommended") and q[0].recommended == 0
    assert not q[1].HasField("recommended")


async def test_post_drops_server_owned_ask_fields(client: Client, api_world: World) -> None:
    w = api_world
    forged = ask_pb()
    forged.ask_id = "ask_mine"
    forged.answered = True
    forged.cancelled = True
    forged.questions[0].chosen_option_ids.append("pg")
    forged.questions[0].custom_text = "x"
    forged.questions[0].timed_out = True
    res = await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id), blocks=[pb.MessageBlock(ask=forged)]
        ),
        tok(w, w.agent),
    )
    stored = res.message.blocks[0].ask
    assert stored.ask_id != "ask_mine" and not stored.answered and not stored.cancelled
    assert not stored.questions[0].chosen_option_ids and not stored.questions[0].custom_text
    assert not stored.questions[0].timed_out


async def test_post_refuses_an_ask_answer_block(client: Client, api_world: World) -> None:
    w = api_world
    block = pb.MessageBlock(ask_answer=pb.AskAnswerBlock(ask_id="ask_x"))
    await expect(
        "invalid_argument",
        client.call(
            "PostMessage",
            pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=[block]),
            tok(w, w.human),
        ),
    )


REJECTIONS = [
    ([GOOD[0]], "missing"),
    ([*GOOD, GOOD[0]], "more than once"),
    ([*GOOD, pb.AskQuestionAnswer(question_id="nope")], "no question"),
    (
        [pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["pg", "my"]), GOOD[1]],
        "at most one option",
    ),
    ([pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["x"]), GOOD[1]], "no option"),
    ([], "missing"),
]


@pytest.mark.parametrize(("answers", "needle"), REJECTIONS)
async def test_answer_rejection_matrix(
    client: Client, api_world: World, answers: list[pb.AskQuestionAnswer], needle: str
) -> None:
    w = api_world
    ask_id = (await post_ask(client, w)).blocks[0].ask.ask_id
    before = await count_messages(client, w)
    err = await expect(
        "invalid_argument",
        client.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=answers), tok(w, w.human)
        ),
    )
    assert needle in err.message
    assert await count_messages(client, w) == before


async def test_empty_answers_are_an_accepted_skip(client: Client, api_world: World) -> None:
    w = api_world
    ask_id = (await post_ask(client, w)).blocks[0].ask.ask_id
    skip = [pb.AskQuestionAnswer(question_id="db"), pb.AskQuestionAnswer(question_id="langs")]
    res = await client.call(
        "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=skip), tok(w, w.human)
    )
    assert res.ask_message.blocks[0].ask.answered


async def test_respond_outcomes(client: Client, api_world: World) -> None:
    w = api_world
    ask_id = (await post_ask(client, w)).blocks[0].ask.ask_id
    respond = pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD)
    # Visibility first: a non-member is told the same as for an unknown id.
    hidden = await expect("not_found", client.call("RespondToAsk", respond, tok(w, w.other_human)))
    unknown = await expect(
        "not_found",
        client.call(
            "RespondToAsk",
            pb.RespondToAskRequest(ask_id="ask_" + "0" * 32, answers=GOOD),
            tok(w, w.human),
        ),
    )
    assert hidden.message.replace(ask_id, "?") == unknown.message.replace("ask_" + "0" * 32, "?")
    await expect(
        "invalid_argument",
        client.call("RespondToAsk", pb.RespondToAskRequest(answers=GOOD), tok(w, w.human)),
    )
    await expect("permission_denied", client.call("RespondToAsk", respond, tok(w, w.agent)))
    await client.call("RespondToAsk", respond, tok(w, w.human))
    before = await count_messages(client, w)
    err = await expect("already_exists", client.call("RespondToAsk", respond, tok(w, w.human)))
    assert "already answered" in err.message
    assert await count_messages(client, w) == before


async def test_respond_to_a_cancelled_ask_is_already_exists_and_posts_nothing(
    client: Client, api_world: World
) -> None:
    w = api_world
    ask_id = (await post_ask(client, w)).blocks[0].ask.ask_id
    await w.store.cancel_ask(w.agent, ask_id)
    before = await count_messages(client, w)
    err = await expect(
        "already_exists",
        client.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD), tok(w, w.human)
        ),
    )
    assert "already withdrawn" in err.message
    assert await count_messages(client, w) == before


@pytest.mark.parametrize(
    "token",
    [None, "raw:", "raw:Bearer", "raw:Bearer  ", "raw:Basic abc", "nope"],
    ids=["none", "empty", "bare", "blank", "basic", "bad"],
)
async def test_unauthenticated(client: Client, api_world: World, token: str | None) -> None:
    err = await expect(
        "unauthenticated", client.call("ListChannels", pb.ListChannelsRequest(), token)
    )
    assert "token" in err.message or "authorization" in err.message
    good = await client.call(
        "ListChannels", pb.ListChannelsRequest(), tok(api_world, api_world.human)
    )
    assert len(good.channels) == 1


async def test_a_runner_token_does_not_open_comms(client: Client, api_world: World) -> None:
    _, token = await api_world.store.create_runner(api_world.workspace_id, "r1")
    await expect("permission_denied", client.call("ListChannels", pb.ListChannelsRequest(), token))


async def test_channels_dms_topics_and_search(client: Client, api_world: World) -> None:
    w = api_world
    h = tok(w, w.human)
    created = await client.call(
        "CreateChannel", pb.CreateChannelRequest(name="design", topic="t0"), h
    )
    cid = created.channel.channel_id
    await client.call(
        "AddChannelMember",
        pb.AddChannelMemberRequest(channel_id=cid, account_id=str(w.agent.account_id)),
        h,
    )
    topic = await client.call("UpdateTopic", pb.UpdateTopicRequest(channel_id=cid, topic="t1"), h)
    assert topic.channel.topic == "t1"
    assert set(topic.channel.member_account_ids) == {
        str(w.human.account_id),
        str(w.agent.account_id),
    }
    dm = await client.call("OpenDM", pb.OpenDMRequest(account_id=str(w.agent.account_id)), h)
    again = await client.call(
        "OpenDM", pb.OpenDMRequest(account_id=str(w.human.account_id)), tok(w, w.agent)
    )
    assert dm.channel.channel_id == again.channel.channel_id
    assert dm.channel.kind == pb.CHANNEL_KIND_DM
    listed = await client.call("ListChannels", pb.ListChannelsRequest(page_size=2), h)
    assert len(listed.channels) == 2 and listed.next_page_token
    rest = await client.call(
        "ListChannels", pb.ListChannelsRequest(page_size=2, page_token=listed.next_page_token), h
    )
    assert len(rest.channels) == 1 and not rest.next_page_token
    await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=cid, blocks=[pb.MessageBlock(text=pb.TextBlock(text="Needle 100%"))]
        ),
        h,
    )
    found = await client.call("SearchMessages", pb.SearchMessagesRequest(query="needle 100%"), h)
    assert [m.blocks[0].text.text for m in found.messages] == ["Needle 100%"]
    none = await client.call(
        "SearchMessages", pb.SearchMessagesRequest(query="needle"), tok(w, w.other_human)
    )
    assert list(none.messages) == []
    await expect(
        "not_found",
        client.call(
            "UpdateTopic", pb.UpdateTopicRequest(channel_id=cid, topic="x"), tok(w, w.other_human)
        ),
    )
    await expect(
        "invalid_argument", client.call("ListChannels", pb.ListChannelsRequest(page_token="%%%"), h)
    )


async def test_presence_over_the_api(client: Client, api_world: World) -> None:
    w = api_world
    agent = str(w.agent.account_id)

    async def state() -> int:
        res = await client.call(
            "GetPresence", pb.GetPresenceRequest(account_ids=[agent]), tok(w, w.human)
        )
        return res.presences[0].state  # type: ignore[no-any-return]

    assert await state() == pb.PRESENCE_STATE_OFFLINE
    ask_id = (await post_ask(client, w)).blocks[0].ask.ask_id
    assert await state() == pb.PRESENCE_STATE_WAITING
    await client.call(
        "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD), tok(w, w.human)
    )
    assert await state() == pb.PRESENCE_STATE_OFFLINE


async def test_accounts_resolve_to_handles_within_the_workspace(
    client: Client, api_world: World
) -> None:
    w = api_world
    elsewhere = await World.create(w.store)
    ids = [w.agent, w.human, elsewhere.human]
    res = await client.call(
        "GetAccounts",
        pb.GetAccountsRequest(account_ids=[str(a.account_id) for a in ids] + [str(uuid.uuid4())]),
        tok(w, w.other_human),
    )
    assert [(a.account_id, a.handle, a.kind) for a in res.accounts] == [
        (str(w.agent.account_id), "scout", pb.ACCOUNT_KIND_AGENT),
        (str(w.human.account_id), "ada", pb.ACCOUNT_KIND_HUMAN),
    ]
    none = await client.call("GetAccounts", pb.GetAccountsRequest(), tok(w, w.human))
    assert list(none.accounts) == []
    too_many = pb.GetAccountsRequest(account_ids=[str(w.human.account_id)] * 201)
    refused = await expect(
        "invalid_argument", client.call("GetAccounts", too_many, tok(w, w.human))
    )
    assert "200" in refused.message
    await expect("unauthenticated", client.call("GetAccounts", pb.GetAccountsRequest(), None))


# --- the event stream ---------------------------------------------------------


async def next_events(stream: AsyncIterator[Any], n: int) -> list[Any]:
    out = []
    for _ in range(n):
        out.append(await asyncio.wait_for(anext(stream), 10))
    return out


def kind(event: Any) -> str:
    return event.WhichOneof("kind")  # type: ignore[no-any-return]


async def test_subscribe_event_order_for_post_answer_and_cancel(
    client: Client, api_world: World
) -> None:
    w = api_world
    stream = client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
    (ready,) = await next_events(stream, 1)
    assert kind(ready) == "ready"
    # Each step read before the next: a stream that is behind gets only an
    # agent's latest presence (tests/test_presence_interest.py).
    message = await post_ask(client, w)
    ask_id = message.blocks[0].ask.ask_id
    events = await next_events(stream, 2)
    await client.call(
        "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD), tok(w, w.human)
    )
    events += await next_events(stream, 3)
    other = (await post_ask(client, w)).blocks[0].ask.ask_id
    events += await next_events(stream, 2)
    await w.store.cancel_ask(w.agent, other)
    await w.store.cancel_ask(w.agent, other)  # a repeat publishes nothing
    await w.post_text(w.human, "marker")
    events += await next_events(stream, 3)
    seen = [
        (kind(e), e.presence_changed.presence.state if kind(e) == "presence_changed" else None)
        for e in events
    ]
    assert seen == [
        ("message_posted", None),
        ("presence_changed", pb.PRESENCE_STATE_WAITING),
        ("message_updated", None),
        ("message_posted", None),
        ("presence_changed", pb.PRESENCE_STATE_OFFLINE),
        ("message_posted", None),
        ("presence_changed", pb.PRESENCE_STATE_WAITING),
        ("message_updated", None),
        ("presence_changed", pb.PRESENCE_STATE_OFFLINE),
        ("message_posted", None),
    ]
    assert events[2].message_updated.message.blocks[0].ask.answered
    assert events[3].message_posted.message.blocks[0].ask_answer.ask_id == ask_id
    assert events[7].message_updated.message.blocks[0].ask.cancelled
    assert events[9].message_posted.message.blocks[0].text.text == "marker"
    ids = [e.event_id for e in events]
    assert ids == sorted(ids) and ids[0] == ready.event_id + 1
    await stream.aclose()  # type: ignore[attr-defined]


async def test_resume_after_reconnect_misses_nothing_and_repeats_nothing(
    client: Client, api_world: World
) -> None:
    w = api_world
    stream = client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
    await next_events(stream, 1)
    await w.post_text(w.human, "one")
    (first,) = await next_events(stream, 1)
    await stream.aclose()  # type: ignore[attr-defined]
    for text in ("two", "three"):
        await w.post_text(w.human, text)
    resumed = client.stream(
        "Subscribe", pb.SubscribeRequest(after_event_id=first.event_id), tok(w, w.human)
    )
    ready, *events = await next_events(resumed, 3)
    assert kind(ready) == "ready"
    assert [e.message_posted.message.blocks[0].text.text for e in events] == ["two", "three"]
    await w.post_text(w.human, "four")
    (live,) = await next_events(resumed, 1)
    assert live.message_posted.message.blocks[0].text.text == "four"
    await resumed.aclose()  # type: ignore[attr-defined]


async def test_subscribe_shows_only_the_callers_channels(client: Client, api_world: World) -> None:
    w = api_world
    stream = client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.other_human))
    await next_events(stream, 1)
    await w.post_text(w.human, "not for grace")
    dm = await w.store.open_dm(w.human, w.other_human.account_id)
    await w.store.append_message(w.human, dm.channel_id, [TextBlock("hi grace")])
    changed, posted = await next_events(stream, 2)
    assert kind(changed) == "channel_changed"
    assert posted.message_posted.message.blocks[0].text.text == "hi grace"
    await stream.aclose()  # type: ignore[attr-defined]


async def test_subscribe_rejects_a_cursor_from_the_future(client: Client, api_world: World) -> None:
    w = api_world
    stream = client.stream("Subscribe", pb.SubscribeRequest(after_event_id=10**12), tok(w, w.human))
    await expect("invalid_argument", anext(stream))


async def test_malformed_ids_are_not_internal(client: Client, api_world: World) -> None:
    w = api_world
    h = tok(w, w.human)
    await expect("not_found", client.call("GetMessage", pb.GetMessageRequest(message_id="nope"), h))
    await expect("invalid_argument", client.call("GetMessage", pb.GetMessageRequest(), h))
    await expect(
        "not_found",
        client.call("GetMessage", pb.GetMessageRequest(message_id=str(uuid.uuid4())), h),
    )


async def test_an_unexpected_failure_is_internal_with_an_incident_id_and_no_details(
    client: Client, api_world: World, server: Any
) -> None:
    w = api_world
    message = await post_ask(client, w)
    async with await psycopg.AsyncConnection.connect(server.db.url, autocommit=True) as conn:
        # A row no writer can produce: both answered and cancelled.
        await conn.execute(
            "UPDATE messages SET blocks = jsonb_set(jsonb_set(blocks, '{0,ask,answered}', 'true'),"
            " '{0,ask,cancelled}', 'true') WHERE id = %s",
            (uuid.UUID(message.message_id),),
        )
    err = await expect(
        "internal",
        client.call(
            "GetMessage", pb.GetMessageRequest(message_id=message.message_id), tok(w, w.human)
        ),
    )
    assert err.message.startswith("internal error (incident ")
    assert "answered" not in err.message and "cancelled" not in err.message


async def test_searching_a_channel_one_cannot_read_is_not_found(
    client: Client, api_world: World
) -> None:
    """A channel of another workspace, one the caller doesn't take part in, or
    none at all: SearchMessages answers as ListMessages does."""
    w = api_world
    other = await World.create(w.store)
    await other.post_text(other.human, "needle of another workspace")
    h = tok(w, w.human)
    for channel in (other.channel.channel_id, uuid.uuid4()):
        err = await expect(
            "not_found",
            client.call(
                "SearchMessages",
                pb.SearchMessagesRequest(query="needle", channel_id=str(channel)),
                h,
            ),
        )
        assert err.message == f"no channel {channel}"
    err = await expect(
        "not_found",
        client.call(
            "SearchMessages",
            pb.SearchMessagesRequest(query="needle", channel_id=str(w.channel.channel_id)),
            tok(w, w.other_human),
        ),
    )
    found = await client.call(
        "SearchMessages",
        pb.SearchMessagesRequest(query="needle", channel_id=str(w.channel.channel_id)),
        h,
    )
    assert list(found.messages) == []
