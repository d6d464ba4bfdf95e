"""Presence on Subscribe streams goes to those who work with the agent: the
people (and agents) of the channels it takes part in, through an agent above
it too, the people who hear its inbox, and the accounts a stream asked for.
A stream that is behind gets each agent's latest state, not every change."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from compass_server.store.admin import hash_token
from compass_server.store.types import AccountKind, Actor, PresenceState, TextBlock
from tests.procs import ServerProcess
from tests.relay_client import relay, runner_for
from tests.servers import CallError, GrpcClient
from tests.test_inbox_store import yes_no
from tests.world import World

MARKER = "marker"


def tok(w: World, who: Any) -> str:
    return w.tokens[who.account_id]


async def _until_marker(stream: AsyncIterator[Any]) -> list[Any]:
    """The events up to the marker message, the ready frame left out."""
    seen: list[Any] = []
    async with asyncio.timeout(30):
        async for event in stream:
            kind = event.WhichOneof("kind")
            if kind == "ready":
                continue
            if kind == "message_posted":
                blocks = event.message_posted.message.blocks
                if blocks and blocks[0].text.text == MARKER:
                    return seen
            seen.append(event)
    raise AssertionError("the stream ended before the marker")


def _presence(events: list[Any]) -> list[tuple[str, int, str]]:
    return [
        (
            e.presence_changed.presence.account_id,
            e.presence_changed.presence.state,
            e.presence_changed.presence.status_text,
        )
        for e in events
        if e.WhichOneof("kind") == "presence_changed"
    ]


async def _ready(stream: AsyncIterator[Any]) -> Any:
    ready = await asyncio.wait_for(anext(stream), 10)
    assert ready.WhichOneof("kind") == "ready"
    return ready


async def _marker_for(w: World, *who: Any) -> None:
    """A message every one of `who` reads: the end of what each stream waits for."""
    channel = await w.store.create_channel(
        w.human, f"m-{uuid.uuid4().hex[:6]}", "", [a.account_id for a in who if a != w.human]
    )
    await w.store.append_message(w.human, channel.channel_id, [TextBlock(MARKER)])


async def _their_own_pair(w: World) -> World:
    """Another person with an agent of their own (not ada's) and a channel of the two."""
    tag = uuid.uuid4().hex[:6]
    human = await w.add_account(f"h-{tag}")
    account, token = await w.store.create_account(
        w.workspace_id, f"a-{tag}", AccountKind.AGENT, owner_id=human.account_id
    )
    w.tokens[account.account_id] = token
    agent = Actor(w.workspace_id, account.account_id, AccountKind.AGENT, hash_token(token))
    channel = await w.store.create_channel(human, f"c-{tag}", "", [agent.account_id])
    return World(w.store, w.workspace_id, human, agent, w.other_human, channel, w.tokens)


@pytest.fixture
async def grpc_client(server: Any) -> AsyncIterator[GrpcClient]:
    client = GrpcClient(server.grpc_port)
    yield client
    await client.close()


async def test_a_stream_hears_the_presence_of_agents_it_works_with_only(
    api_world: World, grpc_client: GrpcClient
) -> None:
    w = api_world
    pair = await _their_own_pair(w)
    planner = await w.add_subagent("planner", w.agent)
    ada = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
    other = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, pair.human))
    grace = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.other_human))
    asked = grpc_client.stream(
        "Subscribe",
        pb.SubscribeRequest(presence_of=[str(pair.agent.account_id)]),
        tok(w, w.other_human),
    )
    for stream in (ada, other, grace, asked):
        await _ready(stream)

    await w.post_ask(w.agent)
    await w.post_ask(planner)  # in #general through scout
    await pair.post_ask(pair.agent)
    await _marker_for(w, w.human, pair.human, w.other_human)

    waiting = pb.PRESENCE_STATE_WAITING
    scout, below, theirs = (str(a.account_id) for a in (w.agent, planner, pair.agent))
    assert _presence(await _until_marker(ada)) == [(scout, waiting, ""), (below, waiting, "")]
    assert _presence(await _until_marker(other)) == [(theirs, waiting, "")]
    assert _presence(await _until_marker(grace)) == []
    assert _presence(await _until_marker(asked)) == [(theirs, waiting, "")]


async def test_joining_a_channel_brings_its_agents_presence(
    api_world: World, grpc_client: GrpcClient
) -> None:
    w = api_world
    grace = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.other_human))
    await _ready(grace)
    await w.store.set_status(w.agent, PresenceState.WORKING, "before")
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    await w.store.set_status(w.agent, PresenceState.WORKING, "after")
    await _marker_for(w, w.other_human)
    heard = _presence(await _until_marker(grace))
    assert [text for _, _, text in heard] == ["after"]


async def test_an_owner_hears_its_agents_without_a_channel_even_new_ones(
    api_world: World, grpc_client: GrpcClient, server: Any
) -> None:
    w = api_world
    ada = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
    grace = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.other_human))
    await _ready(ada)
    await _ready(grace)
    # Ada's, in no channel, made after her stream opened.
    loner = await w.add_account("loner", AccountKind.AGENT)
    await server.inbox.post(loner, "k", "Deploy?", "", yes_no())
    await _marker_for(w, w.human, w.other_human)
    assert _presence(await _until_marker(ada)) == [
        (str(loner.account_id), pb.PRESENCE_STATE_WAITING, "")
    ]
    assert _presence(await _until_marker(grace)) == []


async def _behind(w: World, client: GrpcClient) -> list[Any]:
    """What a stream resuming from before 30 changes of scout's status gets."""
    first = client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
    cursor = (await _ready(first)).event_id
    with contextlib.suppress(Exception):
        await first.aclose()  # type: ignore[attr-defined]
    for i in range(30):
        state = PresenceState.WORKING if i % 2 else PresenceState.IDLE
        await w.store.set_status(w.agent, state, f"step {i}")
        if i == 10:
            await w.post_text(w.human, "in between")
    await _marker_for(w, w.human)
    resumed = client.stream(
        "Subscribe", pb.SubscribeRequest(after_event_id=cursor), tok(w, w.human)
    )
    await _ready(resumed)
    return await _until_marker(resumed)


def _latest_once(w: World, events: list[Any]) -> None:
    # The message in between comes in its place; the agent's changes, once,
    # as they ended (with no session the agent shows offline, whatever its status).
    assert _presence(events) == [(str(w.agent.account_id), pb.PRESENCE_STATE_OFFLINE, "step 29")]
    texts = [
        e.message_posted.message.blocks[0].text.text
        for e in events
        if e.WhichOneof("kind") == "message_posted"
    ]
    assert texts == ["in between"]


async def test_a_stream_behind_gets_each_agents_latest_presence_once(
    api_world: World, grpc_client: GrpcClient
) -> None:
    _latest_once(api_world, await _behind(api_world, grpc_client))


async def test_a_stream_behind_the_window_reading_the_log_gets_the_latest_once(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    server = ServerProcess(database_url, env={"COMPASS_EVENT_WINDOW_BYTES": "1"}).start()
    client = GrpcClient(server.grpc_port)
    try:
        _latest_once(w, await _behind(w, client))
    finally:
        await client.close()
        server.stop()


async def test_presence_of_is_checked(api_world: World, grpc_client: GrpcClient) -> None:
    w = api_world
    for bad, said in (
        (["nope"], "presence_of"),
        ([str(uuid.uuid4())] * 257, "256"),
    ):
        stream = grpc_client.stream(
            "Subscribe", pb.SubscribeRequest(presence_of=bad), tok(w, w.human)
        )
        with pytest.raises(CallError) as err:
            await asyncio.wait_for(anext(stream), 10)
        assert err.value.code == "invalid_argument"
        assert said in err.value.message


async def test_get_presence_of_the_agents_the_caller_works_with(
    api_world: World, grpc_client: GrpcClient
) -> None:
    w = api_world
    pair = await _their_own_pair(w)
    planner = await w.add_subagent("planner", w.agent)
    heard = pb.GetPresenceRequest(heard=True)
    mine = await grpc_client.call("GetPresence", heard, tok(w, w.human))
    assert sorted(p.account_id for p in mine.presences) == sorted(
        str(a.account_id) for a in (w.agent, planner)
    )
    theirs = await grpc_client.call("GetPresence", heard, tok(w, pair.human))
    assert [p.account_id for p in theirs.presences] == [str(pair.agent.account_id)]
    none = await grpc_client.call("GetPresence", heard, tok(w, w.other_human))
    assert list(none.presences) == []
    everyone = await grpc_client.call("GetPresence", pb.GetPresenceRequest(), tok(w, w.other_human))
    assert len(everyone.presences) == 3


async def test_a_stream_resuming_over_what_loaded_while_no_page_was_open_hears_a_subagent(
    api_world: World, grpc_client: GrpcClient, server: Any
) -> None:
    """The feed lives on for scout's relay session while no page is open; a
    page resuming over what it loaded meanwhile still hears planner, who is
    in #general only through scout."""
    w = api_world
    planner = await w.add_subagent("planner", w.agent)
    async with relay(server.grpc_port, await runner_for(w)) as runner:
        await runner.bound("s", w.agent)
        first = grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, w.human))
        cursor = (await _ready(first)).event_id
        with contextlib.suppress(Exception):
            await first.aclose()  # type: ignore[attr-defined]
        await w.post_ask(planner)
        await _marker_for(w, w.human)
        resumed = grpc_client.stream(
            "Subscribe", pb.SubscribeRequest(after_event_id=cursor), tok(w, w.human)
        )
        await _ready(resumed)
        heard = _presence(await _until_marker(resumed))
    assert heard == [(str(planner.account_id), pb.PRESENCE_STATE_WAITING, "")]


async def test_get_presence_heard_lists_exactly_the_agents_a_stream_hears(
    api_world: World, grpc_client: GrpcClient, server: Any
) -> None:
    """The page's sidebar (GetPresence heard) and its stream name the same
    agents, by every way of working with one: a channel, an agent above,
    ownership alone, and a grant of an inbox."""
    w = api_world
    pair = await _their_own_pair(w)
    planner = await w.add_subagent("planner", w.agent)
    loner = await w.add_account("loner", AccountKind.AGENT)  # ada's, in no channel
    await server.inbox.grant(pair.human, pair.agent.account_id, w.other_human.account_id)
    agents = (w.agent, planner, loner, pair.agent)
    people = {"ada": w.human, "grace": w.other_human, "theirs": pair.human}
    streams = {
        name: grpc_client.stream("Subscribe", pb.SubscribeRequest(), tok(w, who))
        for name, who in people.items()
    }
    for stream in streams.values():
        await _ready(stream)
    for agent in agents:
        await w.store.set_status(agent, PresenceState.WORKING, "on it")
    await _marker_for(w, *people.values())
    tags = ("scout", "planner", "loner", "pair")
    names = {str(a.account_id): n for a, n in zip(agents, tags, strict=True)}
    heard, listed = {}, {}
    for name, who in people.items():
        heard[name] = sorted(names[a] for a, _, _ in _presence(await _until_marker(streams[name])))
        said = await grpc_client.call("GetPresence", pb.GetPresenceRequest(heard=True), tok(w, who))
        listed[name] = sorted(names[p.account_id] for p in said.presences)
    assert heard == {"ada": ["loner", "planner", "scout"], "grace": ["pair"], "theirs": ["pair"]}
    assert listed == heard
