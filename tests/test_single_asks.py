"""No double-asking. A post's client key makes a retry return what the first
attempt posted (PostMessage and the relay's post_ask, over every
transport); an ask identical to an open ask of the same author in the same
channel returns that ask, marked ALREADY_OPEN, unless the post allows it;
"identical" is exactly what people see of an ask (held to its definition by
a property test); retries racing each other post once; and the kit and
compass-mcp pass a key for every logical post, so a call whose answer was
lost posts once."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import pathlib
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_agentkit.relay import CallUnavailable
from compass_agentkit.tools import SPECS, Tool
from compass_server.store.errors import Conflict, InvalidArgument
from compass_server.store.posts import MAX_CLIENT_KEY_CHARS, PostOutcome
from compass_server.store.types import Ask, AskOption, Block, TextBlock
from tests.relay_client import relay, runner_for
from tests.servers import CallError
from tests.test_api_comms import ask_pb
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)


def _post(channel: Any, *blocks: pb.MessageBlock, **fields: Any) -> pb.PostMessageRequest:
    return pb.PostMessageRequest(channel_id=str(channel.channel_id), blocks=blocks, **fields)


def _ask_block(ask: pb.Ask | None = None) -> pb.MessageBlock:
    return pb.MessageBlock(ask=ask or ask_pb())


async def _asks_in(client: Any, w: World) -> list[str]:
    page = await client.call(
        "ListMessages",
        pb.ListMessagesRequest(channel_id=str(w.channel.channel_id)),
        w.tokens[w.human.account_id],
    )
    return [b.ask.ask_id for m in page.messages for b in m.blocks if b.HasField("ask")]


async def test_a_retried_post_with_its_key_returns_what_it_posted(
    client: Any, api_world: World
) -> None:
    w = api_world
    scout = w.tokens[w.agent.account_id]
    request = _post(
        w.channel,
        pb.MessageBlock(text=pb.TextBlock(text="Before I merge:")),
        _ask_block(),
        client_key="call-1",
    )
    first = await client.call("PostMessage", request, scout)
    again = await client.call("PostMessage", request, scout)
    assert (first.outcome, again.outcome) == (pb.POST_OUTCOME_POSTED, pb.POST_OUTCOME_REPEATED)
    assert again.message == first.message
    assert await _asks_in(client, w) == [first.message.blocks[1].ask.ask_id]
    # A plain message keyed the same way, too.
    note = _post(w.channel, pb.MessageBlock(text=pb.TextBlock(text="on it")), client_key="n-1")
    a = await client.call("PostMessage", note, scout)
    b = await client.call("PostMessage", note, scout)
    assert b.outcome == pb.POST_OUTCOME_REPEATED and b.message.message_id == a.message.message_id
    # The same key with another post is refused, and posts nothing.
    other = _post(w.channel, pb.MessageBlock(text=pb.TextBlock(text="off it")), client_key="n-1")
    with pytest.raises(CallError) as refused:
        await client.call("PostMessage", other, scout)
    assert refused.value.code == "already_exists"
    assert f"message {a.message.message_id}" in refused.value.message
    # Keys are the author's own: ada's "n-1" is another key.
    mine = await client.call("PostMessage", other, w.tokens[w.human.account_id])
    assert mine.outcome == pb.POST_OUTCOME_POSTED
    # A key past the limit is refused.
    long = _post(
        w.channel,
        pb.MessageBlock(text=pb.TextBlock(text="x")),
        client_key="k" * (MAX_CLIENT_KEY_CHARS + 1),
    )
    with pytest.raises(CallError) as too_long:
        await client.call("PostMessage", long, scout)
    assert too_long.value.code == "invalid_argument"
    assert "client_key has 129 characters; the limit is 128" in too_long.value.message


async def test_an_identical_open_ask_comes_back_instead_of_a_second(
    client: Any, api_world: World
) -> None:
    w = api_world
    scout = w.tokens[w.agent.account_id]
    first = await client.call("PostMessage", _post(w.channel, _ask_block()), scout)
    ask_id = first.message.blocks[0].ask.ask_id
    # Another agent restarted mid-call: its own ids and deadline, the same ask.
    restarted = ask_pb()
    restarted.questions[0].question_id = "database"
    restarted.questions[0].options[0].id = "postgres"
    restarted.questions[0].ClearField("recommended")
    restarted.timeout.FromTimedelta(datetime.timedelta(hours=1))
    again = await client.call("PostMessage", _post(w.channel, _ask_block(restarted)), scout)
    assert again.outcome == pb.POST_OUTCOME_ALREADY_OPEN
    assert again.message.message_id == first.message.message_id
    assert again.message.blocks[0].ask.ask_id == ask_id
    assert await _asks_in(client, w) == [ask_id]
    # Unless the post says otherwise.
    forced = await client.call(
        "PostMessage", _post(w.channel, _ask_block(), allow_identical=True), scout
    )
    assert forced.outcome == pb.POST_OUTCOME_POSTED
    # Once it ended (both now), the same ask is posted anew.
    ada = w.tokens[w.human.account_id]
    for ended in (ask_id, forced.message.blocks[0].ask.ask_id):
        await client.call("DeclineAsk", pb.DeclineAskRequest(ask_id=ended), ada)
    fresh = await client.call("PostMessage", _post(w.channel, _ask_block()), scout)
    assert fresh.outcome == pb.POST_OUTCOME_POSTED
    # A keyed retry of a post that found the open ask finds it again by its key.
    keyed = _post(w.channel, _ask_block(), client_key="after-restart")
    found = await client.call("PostMessage", keyed, scout)
    assert (found.outcome, found.message.message_id) == (
        pb.POST_OUTCOME_ALREADY_OPEN,
        fresh.message.message_id,
    )
    repeated = await client.call("PostMessage", keyed, scout)
    assert (repeated.outcome, repeated.message.message_id) == (
        pb.POST_OUTCOME_REPEATED,
        fresh.message.message_id,
    )


async def test_the_relay_post_ask_takes_a_key_and_finds_the_open_ask(
    server: Any, api_world: World
) -> None:
    w = api_world
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        request = gw.PostAskRequest(
            channel_id=str(w.channel.channel_id), text="Quick one", ask=ask_pb(), client_key="k"
        )
        first: gw.PostAskResponse = await r.ok("scout", "post_ask", request)
        again: gw.PostAskResponse = await r.ok("scout", "post_ask", request)
        request.client_key = "another call"
        same: gw.PostAskResponse = await r.ok("scout", "post_ask", request)
        request.text, request.client_key = "Quick one, reworded", "a third call"
        other: gw.PostAskResponse = await r.ok("scout", "post_ask", request)
    assert first.outcome == pb.POST_OUTCOME_POSTED
    assert (again.outcome, again.ask_id) == (pb.POST_OUTCOME_REPEATED, first.ask_id)
    assert (same.outcome, same.ask_id) == (pb.POST_OUTCOME_ALREADY_OPEN, first.ask_id)
    assert other.outcome == pb.POST_OUTCOME_POSTED and other.ask_id != first.ask_id


async def test_retries_racing_each_other_post_once(world: World) -> None:
    w = world
    store = w.store

    async def keyed() -> Any:
        return await store.post(w.agent, w.channel.channel_id, [ask_of("race")], client_key="r")

    async def unkeyed() -> Any:
        return await store.post(w.agent, w.channel.channel_id, [ask_of("race 2")])

    # At once, so the writes go to the database together and alone.
    for racer in (keyed, unkeyed):
        posts = await asyncio.gather(*(racer() for _ in range(12)))
        messages = {p.message.message_id for p in posts}
        assert len(messages) == 1, posts
        outcomes = [p.outcome for p in posts]
        assert outcomes.count(PostOutcome.POSTED) == 1, outcomes
    # One open ask each: scout waits on two.
    assert await store.open_asks() >= 2


def ask_of(title: str, **changes: Any) -> Ask:
    """A two-question ask whose first question reads `title`."""
    ask = two_question_ask()
    first = dataclasses.replace(ask.questions[0], question=title)
    return dataclasses.replace(ask, questions=(first, *ask.questions[1:]), **changes)


async def test_identity_is_the_authors_own_and_the_channels_own(world: World) -> None:
    w = world
    store = w.store
    posted = await store.post(w.agent, w.channel.channel_id, [ask_of("mine")])
    other = await w.add_pair()
    # Another author (even of the same questions) or another channel asks anew.
    theirs = await store.post(w.human, w.channel.channel_id, [ask_of("mine")])
    elsewhere = await store.post(other.agent, other.channel.channel_id, [ask_of("mine")])
    assert theirs.outcome is elsewhere.outcome is PostOutcome.POSTED
    # A message of two asks is never matched.
    two: list[Block] = [ask_of("mine"), ask_of("yours")]
    assert (await store.post(w.agent, w.channel.channel_id, two)).outcome is PostOutcome.POSTED
    assert (await store.post(w.agent, w.channel.channel_id, two)).outcome is PostOutcome.POSTED
    # Past its deadline (swept or not), an ask is no longer open.
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=61)
    soon = await store.post(w.agent, w.channel.channel_id, [ask_of("soon", deadline=due)])
    assert soon.outcome is PostOutcome.POSTED
    again = await store.post(w.agent, w.channel.channel_id, [ask_of("soon")])
    assert again.outcome is PostOutcome.ALREADY_OPEN
    assert posted.outcome is PostOutcome.POSTED
    with pytest.raises(InvalidArgument):
        await store.post(w.agent, w.channel.channel_id, [TextBlock("x")], client_key="k" * 129)
    await store.post(w.agent, w.channel.channel_id, [TextBlock("x")], client_key="same")
    with pytest.raises(Conflict):
        await store.post(w.agent, w.channel.channel_id, [TextBlock("y")], client_key="same")


# --- what "identical" means -----------------------------------------------------------

# Each change to a posted ask, and whether the result is still the same ask.
SEEN = {
    "question": True,
    "header": True,
    "multiple": True,
    "option label": True,
    "option description": True,
    "option preview": True,
    "option order": True,
    "an option more": True,
    "question order": True,
    "text": True,
    "answerers": True,
}
UNSEEN = {"question id": False, "option id": False, "recommended": False, "deadline": False}


def _changed(ask: Ask, text: str, change: str, answerer: uuid.UUID) -> tuple[Ask, str]:
    q0, q1 = ask.questions
    o = q0.options
    match change:
        case "question":
            q0 = dataclasses.replace(q0, question=q0.question + "?")
        case "header":
            q0 = dataclasses.replace(q0, header=q0.header + "!")
        case "multiple":
            q0 = dataclasses.replace(q0, allow_multiple=not q0.allow_multiple)
        case "option label":
            q0 = dataclasses.replace(q0, options=(dataclasses.replace(o[0], label="Pg"), *o[1:]))
        case "option description":
            q0 = dataclasses.replace(
                q0, options=(dataclasses.replace(o[0], description="fast"), *o[1:])
            )
        case "option preview":
            q0 = dataclasses.replace(q0, options=(dataclasses.replace(o[0], preview="p"), *o[1:]))
        case "option order":
            q0 = dataclasses.replace(q0, options=(o[1], o[0]))
        case "an option more":
            q0 = dataclasses.replace(q0, options=(*o, AskOption("sq", "SQLite")))
        case "question order":
            q0, q1 = q1, q0
        case "text":
            text += " (again)"
        case "answerers":
            return dataclasses.replace(ask, answerer_ids=(answerer,)), text
        case "question id":
            q0 = dataclasses.replace(q0, question_id="renamed")
        case "option id":
            q0 = dataclasses.replace(q0, options=(dataclasses.replace(o[0], id="x"), *o[1:]))
        case "recommended":
            q0 = dataclasses.replace(q0, recommended=1)
        case "deadline":
            due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=2)
            return dataclasses.replace(ask, deadline=due), text
    return dataclasses.replace(ask, questions=(q0, q1)), text


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    changes=hs.lists(hs.sampled_from(sorted({**SEEN, **UNSEEN})), unique=True, max_size=3),
    title=hs.text(min_size=1, max_size=20).filter(lambda t: t.strip() == t and t.isprintable()),
)
async def test_identical_is_exactly_what_people_see(
    api_world: World, changes: list[str], title: str
) -> None:
    w = api_world
    store = w.store
    text = f"About {uuid.uuid4()}"
    base = ask_of(title)
    first = await store.post(w.agent, w.channel.channel_id, [TextBlock(text), base])
    assert first.outcome is PostOutcome.POSTED
    ask, said = base, text
    for change in changes:
        ask, said = _changed(ask, said, change, w.human.account_id)
    second = await store.post(w.agent, w.channel.channel_id, [TextBlock(said), ask])
    seen = any(change in SEEN for change in changes)
    assert second.outcome is (PostOutcome.POSTED if seen else PostOutcome.ALREADY_OPEN), changes
    if not seen:
        assert second.message.message_id == first.message.message_id


# --- the kit and compass-mcp ------------------------------------------------------------


async def test_the_kit_keys_each_post_so_a_lost_answer_posts_once(
    server: Any, api_world: World
) -> None:
    w = api_world
    spec = next(s for s in SPECS if s.name == "comms_post_ask")
    args = {
        "channel_id": str(w.channel.channel_id),
        "questions": [{"id": "go", "question": "Ship it?", "options": [{"label": "yes"}]}],
    }
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("scout", w.agent)
        sent: list[gw.CommsCallRequest] = []

        async def drops_the_first_answer(call: gw.CommsCallRequest) -> gw.CommsCallResult:
            sent.append(call)
            result = await r.call("scout", call.WhichOneof("call") or "", call.post_ask)
            if len(sent) == 1:
                raise CallUnavailable("the relay stream dropped; the call may or may not have run")
            return result

        text = await Tool(spec, drops_the_first_answer).handler(args)
        asks = await _asks_in_store(w)
        assert len(asks) == 1
        assert f'Posted ask id="{asks[0]}"' in text
        # Sent twice, as one logical call under one key.
        assert len(sent) == 2 and sent[0].post_ask.client_key == sent[1].post_ask.client_key
        assert sent[0].post_ask.client_key
        # A second logical call asking the same is told the ask is open already.
        again = await Tool(spec, lambda c: r.call("scout", "post_ask", c.post_ask)).handler(args)
        assert f'Ask id="{asks[0]}" asks the same and is still open' in again
        assert await _asks_in_store(w) == asks


async def _asks_in_store(w: World) -> list[str]:
    page = await w.store.list_messages(w.human, w.channel.channel_id, 50, "")
    return [b.ask_id for m in page.items for b in m.blocks if isinstance(b, Ask)]


async def test_compass_mcp_asking_again_waits_on_the_open_ask(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    from tests.test_mcp_server import QUESTIONS, mcp_for, text_of

    async with mcp_for(server, api_world, tmp_path) as m:
        first = await m.call("ask", {"questions": QUESTIONS, "wait_seconds": 1})
    # compass-mcp restarted: the client asks the same again.
    async with mcp_for(server, api_world, tmp_path) as m:
        again = m.ask_task({"questions": QUESTIONS, "wait_seconds": 30})
        async with asyncio.timeout(30):
            while True:
                if m.progress:
                    break
                await asyncio.sleep(0.02)
        assert first.structured_content is not None
        ask_id = first.structured_content["ask_id"]
        assert m.progress[0].startswith(f"Ask {ask_id} is already open in channel")
        await m.ada_answers(ask_id)
        result = await asyncio.wait_for(again, 30)
    assert text_of(result).startswith(f"Ask {ask_id} was answered:")
    assert await _asks_in_store(api_world) == [ask_id]
