"""Presence as the relay moves it: IDLE once bound, WAITING while the agent
has an open ask, OFFLINE when its runner disconnects, its server stops, or
its server dies and the next one reaps the sessions it left behind."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import pathlib
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.app import CompassServer, Settings
from compass_server.relay.liveness import STALE_AFTER, Heartbeat
from compass_server.store.types import EventKind, PresenceState
from tests.relay_client import RelayClient, relay, runner_for
from tests.servers import GrpcClient
from tests.test_api_comms import GOOD, ask_pb
from tests.world import World

BIN = pathlib.Path(sys.executable).parent


async def presence(w: World) -> PresenceState:
    (p,) = await w.store.get_presence(w.human, [w.agent.account_id])
    return p.state


async def eventually(w: World, state: PresenceState) -> None:
    for _ in range(100):
        if await presence(w) is state:
            return
        await asyncio.sleep(0.05)
    assert await presence(w) is state


async def presence_events(w: World, after: int) -> list[PresenceState]:
    events = await w.store.read_events(w.human, after, 1000)
    return [
        e.presence.state
        for e in events
        if e.kind is EventKind.PRESENCE_CHANGED
        and e.presence is not None
        and e.presence.account_id == w.agent.account_id
    ]


@pytest.fixture
async def second_server(database_url: str, tmp_path: pathlib.Path) -> AsyncIterator[CompassServer]:
    srv = CompassServer(
        Settings(
            database_url=database_url,
            data_dir=tmp_path,
            grpc_listen="127.0.0.1:0",
            http_listen="127.0.0.1:0",
            pool_size=4,
        )
    )
    await srv.start()
    try:
        yield srv
    finally:
        if not srv.gateway.closed:
            await srv.stop(0.5)


async def test_presence_follows_asks_status_and_the_stream(server: Any, api_world: World) -> None:
    w = api_world
    grpc = GrpcClient(server.grpc_port)
    mark = await w.store.last_event_id(w.human)
    try:
        r = RelayClient.grpc(server.grpc_port, await runner_for(w))
        try:
            await r.bound("s1", w.agent)
            assert await presence(w) is PresenceState.IDLE
            post = gw.PostAskRequest(channel_id=str(w.channel.channel_id), ask=ask_pb())
            first = await r.ok("s1", "post_ask", post)
            assert await presence(w) is PresenceState.WAITING
            await grpc.call(
                "RespondToAsk",
                pb.RespondToAskRequest(ask_id=first.ask_id, answers=GOOD),
                w.tokens[w.human.account_id],
            )
            assert await presence(w) is PresenceState.IDLE
            second = await r.ok("s1", "post_ask", post)
            status = gw.SetAgentStatusRequest(state=pb.PRESENCE_STATE_WORKING, text="digging")
            # An open ask wins over the agent's own status.
            res = await r.ok("s1", "set_status", status)
            assert res.presence.state == pb.PRESENCE_STATE_WAITING
            await r.ok("s1", "cancel_ask", gw.CancelAskRequest(ask_id=second.ask_id))
            assert await presence(w) is PresenceState.WORKING
        finally:
            await r.close()
        await eventually(w, PresenceState.OFFLINE)
    finally:
        await grpc.close()
    assert await presence_events(w, mark) == [
        PresenceState.IDLE,
        PresenceState.WAITING,
        PresenceState.IDLE,
        PresenceState.WAITING,
        PresenceState.WAITING,  # the same state with the new status text
        PresenceState.WORKING,
        PresenceState.OFFLINE,
    ]


async def test_an_agent_with_two_sessions_stays_online_until_both_end(
    server: Any, api_world: World
) -> None:
    w = api_world
    token = await runner_for(w)
    async with relay(server.grpc_port, token) as a:
        await a.bound("s1", w.agent)
        async with relay(server.grpc_port, token) as b:
            await b.bound("s1", w.agent)
        await asyncio.sleep(0.2)
        assert await presence(w) is PresenceState.IDLE
        await a.unbind("s1")
        assert await presence(w) is PresenceState.OFFLINE


async def test_stopping_the_server_unbinds_its_sessions(
    second_server: CompassServer, api_world: World
) -> None:
    w = api_world
    r = RelayClient.grpc(second_server.grpc_port, await runner_for(w))
    try:
        await r.bound("s1", w.agent)
        assert await presence(w) is PresenceState.IDLE
        await second_server.stop(0.5)
        assert await presence(w) is PresenceState.OFFLINE
        ended = await asyncio.wait_for(r.ended, 10)
        assert ended.code == "unavailable", ended
    finally:
        await r.close()


async def test_a_server_leaving_ends_every_session_it_still_holds(
    second_server: CompassServer, api_world: World, database_url: str
) -> None:
    """A stop whose unbinding was cut short by its bound still leaves no
    session behind: none would ever be reaped once the server's row is gone,
    and its agent would look present for good."""
    w = api_world
    r = RelayClient.grpc(second_server.grpc_port, await runner_for(w))
    try:
        await r.bound("s1", w.agent)
        assert await presence(w) is PresenceState.IDLE
        await second_server.heartbeat.stop()
        assert await presence(w) is PresenceState.OFFLINE
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM agent_sessions WHERE server_id = %s",
                (second_server.settings.server_id,),
            )
            assert (await cur.fetchone()) == (0,)
    finally:
        await r.close()


async def test_a_server_reaped_as_silent_ends_its_streams(
    second_server: CompassServer, api_world: World, database_url: str
) -> None:
    w = api_world
    r = RelayClient.grpc(second_server.grpc_port, await runner_for(w))
    try:
        await r.bound("s1", w.agent)
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "DELETE FROM servers WHERE id = %s", (second_server.settings.server_id,)
            )
        await second_server.heartbeat.beat()
        ended = await asyncio.wait_for(r.ended, 10)
        assert ended.code == "unavailable", ended
        await eventually(w, PresenceState.OFFLINE)
    finally:
        await r.close()


@pytest.mark.timeout(120)
async def test_sessions_of_a_killed_server_are_reaped(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    env = {k: v for k, v in os.environ.items() if k != "COMPASS_DATABASE_URL"}
    proc = await asyncio.create_subprocess_exec(
        BIN / "compass-server",
        "serve",
        "--database-url",
        database_url,
        "--grpc-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        port = json.loads(line)["grpc_port"]
        killed = RelayClient.grpc(port, await runner_for(w))
        # And a session on a live server, which the reap must leave alone.
        ranger = await w.add_account("ranger", kind=w.agent.kind)
        live = RelayClient.grpc(server.grpc_port, await runner_for(w, ranger))
        try:
            await killed.bound("s1", w.agent)
            await live.bound("s1", ranger)
            proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), 30)
            # Nobody unbound: the dead server's session still holds the agent online.
            assert await presence(w) is PresenceState.IDLE
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                cur = await conn.execute(
                    "SELECT server_id FROM agent_sessions WHERE agent_id = %s",
                    (w.agent.account_id,),
                )
                (dead_id,) = [row[0] for row in await cur.fetchall()]
                # Its last heartbeat is now older than the stale limit.
                await conn.execute(
                    "UPDATE servers SET heartbeat_at = heartbeat_at - %s WHERE id = %s",
                    (STALE_AFTER + datetime.timedelta(seconds=5), dead_id),
                )
            mark = await w.store.last_event_id(w.human)
            # The next server to start reaps it.
            starting = Heartbeat(w.store, uuid.uuid4(), lambda: None)
            await starting.start()
            await starting.stop()
            assert await presence(w) is PresenceState.OFFLINE
            assert await presence_events(w, mark) == [PresenceState.OFFLINE]
            (theirs,) = await w.store.get_presence(w.human, [ranger.account_id])
            assert theirs.state is PresenceState.IDLE
        finally:
            await killed.close()
            await live.close()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
