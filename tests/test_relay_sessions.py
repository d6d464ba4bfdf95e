"""The relay stream over gRPC: sign-in, binding sessions, in-band errors that
leave the stream up, one result per call, calls that don't wait on each other."""

from __future__ import annotations

import asyncio
import logging
import pathlib
from typing import Any

import psycopg
import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store.types import AccountKind, PresenceState
from tests.conftest import running_server
from tests.relay_client import RelayClient, relay, runner_for
from tests.world import World


async def presence_of(w: World, account_id: Any) -> PresenceState:
    (p,) = await w.store.get_presence(w.human, [account_id])
    return p.state


async def test_an_account_token_cannot_open_the_relay(server: Any, api_world: World) -> None:
    w = api_world
    for token, code in [
        (w.tokens[w.agent.account_id], "permission_denied"),
        (None, "unauthenticated"),
        ("cpr_not-a-token", "unauthenticated"),
    ]:
        client = RelayClient.grpc(server.grpc_port, token)
        try:
            ended = await asyncio.wait_for(client.ended, 10)
            assert ended.code == code, ended
        finally:
            await client.close()


async def test_bind_refusals_are_in_band_and_the_stream_stays_up(
    server: Any, api_world: World
) -> None:
    w = api_world
    unassigned = await w.add_account("loner", AccountKind.AGENT)
    elsewhere = await World.create(w.store)
    token = await runner_for(w)
    async with relay(server.grpc_port, token) as r:
        for session_id, agent, code in [
            ("a", unassigned, "not_found"),
            ("b", elsewhere.agent, "not_found"),
            ("c", w.human, "not_found"),
            ("d", "not-a-uuid", "not_found"),
            ("e", "", "invalid_argument"),
            ("", w.agent, "invalid_argument"),
        ]:
            frame = await r.bind(session_id, agent)
            assert frame.WhichOneof("frame") == "session_error", frame
            assert frame.session_error.session_id == session_id
            assert frame.session_error.error.code == code, frame
            assert frame.session_error.error.message
        bound = await r.bound("s1", w.agent)
        assert bound.agent_account_id == str(w.agent.account_id)
        again = await r.bind("s1", w.agent)
        assert again.session_error.error.code == "already_exists"
        assert await presence_of(w, unassigned.account_id) is PresenceState.OFFLINE
        assert await presence_of(w, w.agent.account_id) is PresenceState.IDLE


async def test_calls_on_unknown_or_unbound_sessions_and_calls_with_no_arm(
    server: Any, api_world: World
) -> None:
    w = api_world
    async with relay(server.grpc_port, await runner_for(w)) as r:
        listing = pb.ListChannelsRequest()
        result = await r.call("nobody", "list_channels", listing)
        assert result.error.code == "not_found", result
        await r.bound("s1", w.agent)
        empty = await asyncio.wait_for(r.start_call("s1", gw.CommsCallRequest()), 10)
        assert empty.error.code == "invalid_argument"
        assert "post_message" in empty.error.message and "cancel_ask" in empty.error.message
        traced = gw.CommsCallRequest(trigger_traceparent="00-abc-def-01")
        assert (await asyncio.wait_for(r.start_call("s1", traced), 10)).error.code == (
            "invalid_argument"
        )
        assert (await r.call("s1", "list_channels", listing)).HasField("list_channels")
        for state in [pb.PRESENCE_STATE_WAITING, pb.PRESENCE_STATE_OFFLINE, 0]:
            status = gw.SetAgentStatusRequest(state=state)
            assert (await r.call("s1", "set_status", status)).error.code == "invalid_argument"
        unbound = await r.unbind("s1")
        assert unbound.WhichOneof("frame") == "unbound"
        assert (await r.call("s1", "list_channels", listing)).error.code == "not_found"
        again = await r.unbind("s1")
        assert again.session_error.error.code == "not_found"
        assert await presence_of(w, w.agent.account_id) is PresenceState.OFFLINE


async def test_every_call_gets_exactly_one_result_with_its_call_id(
    server: Any, api_world: World
) -> None:
    w = api_world
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s1", w.agent)
        posts = [
            r.start_call(
                "s1",
                gw.CommsCallRequest(
                    post_message=pb.PostMessageRequest(
                        channel_id=str(w.channel.channel_id),
                        blocks=[pb.MessageBlock(text=pb.TextBlock(text=f"n{i}"))],
                    )
                ),
            )
            for i in range(40)
        ]
        results = await asyncio.wait_for(asyncio.gather(*posts), 20)
        texts = sorted(x.post_message.message.blocks[0].text.text for x in results)
        assert texts == sorted(f"n{i}" for i in range(40))
        await asyncio.sleep(0.2)
        assert r.extra_results == []


async def test_a_slow_call_does_not_hold_up_the_next(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    asked = await w.post_ask()
    ask_id = asked.blocks[0].ask_id  # type: ignore[union-attr]
    async with relay(server.grpc_port, await runner_for(w)) as r:
        await r.bound("s1", w.agent)
        async with await psycopg.AsyncConnection.connect(database_url) as holder:
            # Another transaction holds the ask's row, so cancel_ask waits on it.
            await holder.execute(
                "SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (asked.message_id,)
            )
            cancel = r.start_call(
                "s1", gw.CommsCallRequest(cancel_ask=gw.CancelAskRequest(ask_id=ask_id))
            )
            listing = await r.call("s1", "list_channels", pb.ListChannelsRequest())
            assert [c.name for c in listing.list_channels.channels] == ["general"]
            assert not cancel.done()
            await holder.rollback()
        result = await asyncio.wait_for(cancel, 10)
        assert result.WhichOneof("result") == "cancel_ask", result


async def test_the_relay_over_connect(server: Any, api_world: World) -> None:
    w = api_world
    r = RelayClient.connect(server.http_port, await runner_for(w))
    try:
        await r.bound("s1", w.agent)
        posted = await r.ok(
            "s1",
            "post_message",
            pb.PostMessageRequest(
                channel_id=str(w.channel.channel_id),
                blocks=[pb.MessageBlock(text=pb.TextBlock(text="over connect"))],
            ),
        )
        assert posted.message.author_account_id == str(w.agent.account_id)
        await w.post_text(w.human, "heard over connect")
        event = await r.delivery("s1")
        assert event.message_posted.message.blocks[0].text.text == "heard over connect"
        assert (await r.call("s1", "cancel_ask", gw.CancelAskRequest())).error.code == (
            "invalid_argument"
        )
    finally:
        await r.close()
    for _ in range(100):
        if await presence_of(w, w.agent.account_id) is PresenceState.OFFLINE:
            break
        await asyncio.sleep(0.05)
    assert await presence_of(w, w.agent.account_id) is PresenceState.OFFLINE


async def test_a_runner_that_closes_right_after_a_call_is_quiet_and_costs_no_connection(
    database_url: str, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An ordinary disconnect: the calls the runner sent still run to their
    end (their results go nowhere), a delivery lane reading the log stops
    without cutting its connection, nothing is logged as a warning and every
    pooled connection goes back whole."""
    caplog.set_level(logging.INFO)
    async with running_server(database_url, tmp_path) as srv:
        w = await World.create(srv.store)
        token = await runner_for(w)
        before = srv.db.pool.get_stats()
        posted = pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id),
            blocks=[pb.MessageBlock(text=pb.TextBlock(text="hello"))],
        )
        for i in range(12):
            r = RelayClient.grpc(srv.grpc_port, token)
            await r.bound("scout", w.agent)
            r.start_call("scout", gw.CommsCallRequest(post_message=posted))
            await asyncio.sleep(0.002 * (i % 4))
            await r.close()
        # Every session unbound, every call run.
        for _ in range(200):
            if not srv.gateway.streams:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        after = srv.db.pool.get_stats()
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == [], [f"{r.name}: {r.getMessage()}" for r in warned]
    assert after.get("returns_bad", 0) == before.get("returns_bad", 0)
    # Opened and no longer in the pool: thrown away.
    assert after["connections_num"] - after["pool_size"] == (
        before["connections_num"] - before["pool_size"]
    )
