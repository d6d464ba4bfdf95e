"""Many lanes waiting in one workspace: an event wakes the lanes that hear it,
not every lane, and each hears it once; a new agent's lane starts where the
agent came to be."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from typing import Any

import psycopg

from compass.v1 import agent_gateway_pb2 as gw
from compass_server.store.types import Answer, PresenceState, TextBlock
from tests.conftest import running_server
from tests.relay_client import RelayClient, relay, runner_for
from tests.test_api_comms import ask_pb
from tests.test_metrics import scrape, value
from tests.world import World

WAKEUPS = "compass_delivery_wakeups_total"


async def caught_up(port: int) -> None:
    for _ in range(200):
        if value(await scrape(port), "compass_delivery_lag_events") == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the lanes did not catch up")


async def unbound(w: World) -> None:
    """Until the server has ended the agent's session: its cursor is saved first."""
    async with await psycopg.AsyncConnection.connect(w.store.db.url) as conn:
        for _ in range(200):
            cur = await conn.execute(
                "SELECT count(*) FROM agent_sessions WHERE agent_id = %s", (w.agent.account_id,)
            )
            row = await cur.fetchone()
            await conn.rollback()
            if row is not None and row[0] == 0:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the session was not ended")


async def busy_elsewhere(w: World, other: World, port: int) -> int:
    """A busy channel the agent is not in, while its lane waits: the log's
    head once the server's lanes have passed it."""
    for i in range(30):
        await w.store.append_message(other.human, other.channel.channel_id, [TextBlock(f"x{i}")])
    head = await w.store.last_event_id(w.human)
    await caught_up(port)
    return head


async def test_an_event_wakes_only_the_lanes_that_hear_it_and_each_once(
    server: Any, api_world: World
) -> None:
    w = api_world
    pairs = [w] + [await w.add_pair() for _ in range(11)]
    async with contextlib.AsyncExitStack() as stack:
        lanes: list[RelayClient] = []
        for pair in pairs:
            r = await stack.enter_async_context(
                relay(server.grpc_port, await runner_for(pair, pair.agent))
            )
            await r.bound("s", pair.agent)
            lanes.append(r)
        # The first pair's agent also takes part in the fourth pair's channel,
        # joined while its lane waits.
        await w.store.add_channel_member(
            pairs[3].human, pairs[3].channel.channel_id, w.agent.account_id
        )
        await caught_up(server.http_port)
        await asyncio.sleep(0.2)
        before = value(await scrape(server.http_port), WAKEUPS)
        await w.store.append_message(
            pairs[3].human, pairs[3].channel.channel_id, [TextBlock("for three and one")]
        )
        for i in (0, 3):
            heard = await lanes[i].delivery("s")
            assert heard.message_posted.message.blocks[0].text.text == "for three and one"
        await asyncio.gather(*(r.no_delivery("s") for r in lanes))
        woken = value(await scrape(server.http_port), WAKEUPS) - before
        # The two lanes that hear it, not the twelve in the workspace.
        assert woken == 2, woken

        # An answer reaches the asking agent's lane only, once.
        posted = await lanes[5].ok(
            "s",
            "post_ask",
            gw.PostAskRequest(channel_id=str(pairs[5].channel.channel_id), ask=ask_pb()),
        )
        await asyncio.sleep(0.2)
        before = value(await scrape(server.http_port), WAKEUPS)
        await w.store.answer_ask(pairs[5].human, posted.ask_id, [Answer("db"), Answer("langs")])
        answer = await lanes[5].delivery("s")
        assert answer.message_posted.message.blocks[0].ask_answer.ask_id == posted.ask_id
        await asyncio.gather(*(r.no_delivery("s") for r in lanes))
        assert value(await scrape(server.http_port), WAKEUPS) - before <= 2


async def test_a_new_agents_first_bind_reads_nothing_from_before_the_agent(
    server: Any, api_world: World
) -> None:
    w = api_world
    for i in range(20):
        await w.post_text(w.human, f"before the new agent: {i}")
    head = await w.store.last_event_id(w.human)
    new = await w.add_pair()
    await new.store.append_message(new.human, new.channel.channel_id, [TextBlock("since it came")])
    async with relay(server.grpc_port, await runner_for(new, new.agent)) as r:
        bound = await r.bound("s1", new.agent)
        # Its lane starts where the agent came to be, not at the log's start.
        assert bound.acked_event_id == head
        heard = await r.delivery("s1")
        assert heard.message_posted.message.blocks[0].text.text == "since it came"
        await r.no_delivery("s1")
        # What it asks after binding is answered on its lane.
        posted = await r.ok(
            "s1",
            "post_ask",
            gw.PostAskRequest(channel_id=str(new.channel.channel_id), ask=ask_pb()),
        )
        await w.store.answer_ask(new.human, posted.ask_id, [Answer("db"), Answer("langs")])
        answer = await r.delivery("s1")
        assert answer.message_posted.message.blocks[0].ask_answer.ask_id == posted.ask_id
        await r.no_delivery("s1")


async def test_a_lane_waiting_when_its_stream_ends_resumes_past_what_it_passed(
    server: Any, api_world: World
) -> None:
    w = api_world
    other = await w.add_pair()
    token = await runner_for(w)
    async with relay(server.grpc_port, token) as r:
        await r.bound("s1", w.agent)
        head = await busy_elsewhere(w, other, server.http_port)
        await r.no_delivery("s1")
    # The stream ended with the lane waiting (a stop, a dropped runner): bound
    # again once the server has ended that session, it does not read those
    # events again.
    await unbound(w)
    async with relay(server.grpc_port, token) as r:
        again = await r.bound("s1", w.agent)
        assert again.acked_event_id >= head
        await w.post_text(w.human, "still heard")
        heard = await r.delivery("s1")
        assert heard.message_posted.message.blocks[0].text.text == "still heard"


async def test_a_server_stopping_with_lanes_waiting_saves_where_they_were(
    server: Any, database_url: str, tmp_path: pathlib.Path, api_world: World
) -> None:
    """A stop ends every session at once, and each agent's next bind (on any
    server) resumes past what its lane passed while it waited."""
    w = api_world
    other = await w.add_pair()
    token = await runner_for(w)
    async with running_server(database_url, tmp_path) as first:
        r = RelayClient.grpc(first.grpc_port, token)
        try:
            await r.bound("s1", w.agent)
            head = await busy_elsewhere(w, other, first.http_port)
            await first.stop(1.0)
            ended = await asyncio.wait_for(r.ended, 10)
            assert ended.code == "unavailable", ended
        finally:
            await r.close()
    (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
    assert presence.state is PresenceState.OFFLINE
    async with relay(server.grpc_port, token) as r:
        again = await r.bound("s1", w.agent)
        assert again.acked_event_id >= head
