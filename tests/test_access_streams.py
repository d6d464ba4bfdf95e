"""Streams and sessions end when access goes: a revoked runner token ends its
relay on either transport, a bind racing an unassignment never leaves a live
session, and a lost notification is caught up by the listener's reconnect and
by the re-check beat."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from compass_server.events.hub import EventHub
from compass_server.store.admin import ACCESS_CHANNEL, AdminStore
from compass_server.store.types import Operator
from tests.relay_client import RelayClient, runner_for
from tests.servers import CallError, GrpcClient
from tests.test_admin_api import ended
from tests.world import World

pytestmark = pytest.mark.timeout(120)


async def taken_away(r: RelayClient, session_id: str) -> None:
    """The hub said why the session ended, then that it is unbound; its calls
    are refused from then on."""
    why = await r.session_frame(session_id)
    assert why.WhichOneof("frame") == "session_error", why
    assert why.session_error.error.code == "not_found", why
    assert (await r.session_frame(session_id)).WhichOneof("frame") == "unbound"
    result = await r.call(session_id, "list_channels", pb.ListChannelsRequest())
    assert result.error.code == "not_found", result


async def sessions_of(database_url: str, runner_id: uuid.UUID) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (
            await conn.execute(
                "SELECT count(*) FROM agent_sessions WHERE runner_id = %s", (runner_id,)
            )
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("transport", ["grpc", "connect"])
async def test_a_revoked_runner_token_ends_its_relay(
    server: Any, api_world: World, transport: str
) -> None:
    w = api_world
    token = await runner_for(w, w.agent)
    signed = await server.store.admin.sign_in(token)
    r = (
        RelayClient.grpc(server.grpc_port, token)
        if transport == "grpc"
        else RelayClient.connect(server.http_port, token)
    )
    try:
        await r.bound("s1", w.agent)
        await server.store.admin.revoke_token(Operator(w.workspace_id), signed.token_id)
        end = await asyncio.wait_for(r.ended, 5)
        assert end.code == "unauthenticated" and "revoked" in end.message, end
    finally:
        await r.close()


async def test_binds_racing_an_unassignment_leave_no_live_session(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    admin, by = server.store.admin, Operator(w.workspace_id)
    runner, issued = await admin.create_runner(by, "racer")
    r = RelayClient.grpc(server.grpc_port, issued.secret)
    try:
        for i in range(10):
            await admin.assign_agent(by, runner.runner_id, w.agent.account_id)
            name = f"s{i}"
            bind, (_, unbound) = await asyncio.gather(
                r.bind(name, w.agent),
                admin.unassign_agent(by, runner.runner_id, w.agent.account_id),
            )
            if bind.WhichOneof("frame") == "bound":
                # Bound before the unassignment: it is taken away again.
                await taken_away(r, name)
            else:
                assert bind.session_error.error.code == "not_found", bind
                assert unbound == 0
        assert not r.ended.done()
    finally:
        await r.close()
    assert await sessions_of(database_url, runner.runner_id) == 0


async def waiting_on_locks(conn: Any, n: int) -> None:
    for _ in range(200):
        row = await (
            await conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        ).fetchone()
        if row[0] >= n:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {n} backends ever waited on a lock")


async def test_an_unassignment_committing_right_after_a_bind_takes_its_session(
    server: Any, api_world: World, database_url: str
) -> None:
    """The bind holds its assignment row until it commits; the unassignment
    waits for it, then removes the session it bound, and the server that holds
    that session drops it even though it registered it after hearing the news."""
    w = api_world
    admin, by = server.store.admin, Operator(w.workspace_id)
    runner, issued = await admin.create_runner(by, "lined-up")
    await admin.assign_agent(by, runner.runner_id, w.agent.account_id)
    r = RelayClient.grpc(server.grpc_port, issued.secret)
    try:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as watch:
            async with await psycopg.AsyncConnection.connect(database_url) as holder:
                # The bind stops at the agent's row with its assignment row held.
                await holder.execute(
                    "SELECT 1 FROM accounts WHERE id = %s FOR UPDATE", (w.agent.account_id,)
                )
                bind = asyncio.ensure_future(r.bind("s1", w.agent))
                await waiting_on_locks(watch, 1)
                unassign = asyncio.ensure_future(
                    admin.unassign_agent(by, runner.runner_id, w.agent.account_id)
                )
                await waiting_on_locks(watch, 2)
                await holder.rollback()
            bound = await bind
            _, unbound = await unassign
        assert bound.WhichOneof("frame") == "bound", bound
        assert unbound == 1
        await taken_away(r, "s1")
    finally:
        await r.close()
    assert await sessions_of(database_url, runner.runner_id) == 0


async def test_an_unassignment_heard_before_the_bound_session_is_registered_still_takes_it(
    server: Any, api_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notification can come in between the bind's commit and the stream
    registering the session: the stream notices and checks again."""
    w = api_world
    admin, by = server.store.admin, Operator(w.workspace_id)
    runner, issued = await admin.create_runner(by, "late")
    await admin.assign_agent(by, runner.runner_id, w.agent.account_id)
    bind = server.gateway.bind

    async def slow_bind(*args: Any) -> Any:
        binding = await bind(*args)
        heard = server.gateway.unassignments
        await admin.unassign_agent(by, runner.runner_id, w.agent.account_id)
        for _ in range(250):  # until this server heard it
            if server.gateway.unassignments != heard:
                break
            await asyncio.sleep(0.02)
        return binding

    monkeypatch.setattr(server.gateway, "bind", slow_bind)
    r = RelayClient.grpc(server.grpc_port, issued.secret)
    try:
        assert (await r.bind("s1", w.agent)).WhichOneof("frame") == "bound"
        await taken_away(r, "s1")
    finally:
        await r.close()


async def test_a_revocation_whose_notification_is_lost_ends_streams_on_the_next_beat(
    server: Any, api_world: World, database_url: str
) -> None:
    """Revoked behind the server's back (no notification): the cached sign-in
    and the open stream both go within the cache time."""
    w = api_world
    token = w.tokens[w.other_human.account_id]
    client = GrpcClient(server.grpc_port)
    try:
        await client.call("WhoAmI", ad.WhoAmIRequest(), token)
        stream = client.stream("Subscribe", pb.SubscribeRequest(), token)
        assert (await asyncio.wait_for(anext(stream), 10)).WhichOneof("kind") == "ready"
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "UPDATE credentials SET revoked_at = now() WHERE account_id = %s",
                (w.other_human.account_id,),
            )
        started = time.monotonic()
        beat = server.auth.cache_seconds
        err = await ended(stream, beat + 3)
        assert err.code == "unauthenticated", err
        while True:
            try:
                await client.call("WhoAmI", ad.WhoAmIRequest(), token)
            except CallError as exc:
                assert exc.code == "unauthenticated"
                break
            assert time.monotonic() - started < beat + 3
            await asyncio.sleep(0.1)
    finally:
        await client.close()


async def test_the_hub_tells_watchers_when_its_listener_came_back(
    server: Any, database_url: str
) -> None:
    heard: asyncio.Queue[str | None] = asyncio.Queue()
    hub = EventHub(server.store, database_url)
    hub.watch(ACCESS_CHANNEL, heard.put_nowait)
    await hub.start()
    try:
        tag = uuid.uuid4().hex
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (ACCESS_CHANNEL, f"first:{tag}"))
            assert await asyncio.wait_for(heard.get(), 5) == f"first:{tag}"
            # Every listener of this database drops (the others reconnect too).
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
                " AND pid <> pg_backend_pid()"
            )
            assert await asyncio.wait_for(heard.get(), 10) is None
            await conn.execute("SELECT pg_notify(%s, %s)", (ACCESS_CHANNEL, f"again:{tag}"))
            assert await asyncio.wait_for(heard.get(), 5) == f"again:{tag}"
    finally:
        await hub.close()


async def test_a_revocation_returns_once_every_live_server_applied_it(
    server: Any, api_world: World, database_url: str
) -> None:
    """A live server that has not yet dropped the token holds the revocation
    back; it returns as soon as that server records that it did."""
    w = api_world
    admin = AdminStore(server.store.db, confirm_seconds=30)
    lagging = uuid.uuid4()
    signed = await admin.sign_in(w.tokens[w.other_human.account_id])
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO servers (id, access_seen) VALUES (%s, 0)", (lagging,))
        try:
            revoking = asyncio.ensure_future(
                admin.revoke_token(Operator(w.workspace_id), signed.token_id)
            )
            done, _ = await asyncio.wait({revoking}, timeout=0.5)
            assert not done, "the revocation returned before every live server applied it"
            await admin.applied(lagging, None)
            token = await asyncio.wait_for(revoking, 5)
            assert not token.active
        finally:
            await conn.execute("DELETE FROM servers WHERE id = %s", (lagging,))


async def test_a_subscriber_whose_token_stopped_leaves_the_others_feed_running(
    server: Any, api_world: World, database_url: str
) -> None:
    """The workspace's shared feed reads the log with its latest subscriber's
    credential; when that one is revoked behind the server's back, the
    others still hear what comes next, before any beat."""
    w = api_world
    client = GrpcClient(server.grpc_port)
    try:
        mine = client.stream("Subscribe", pb.SubscribeRequest(), w.tokens[w.human.account_id])
        assert (await asyncio.wait_for(anext(mine), 10)).WhichOneof("kind") == "ready"
        theirs = client.stream(
            "Subscribe", pb.SubscribeRequest(), w.tokens[w.other_human.account_id]
        )
        assert (await asyncio.wait_for(anext(theirs), 10)).WhichOneof("kind") == "ready"
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "UPDATE credentials SET revoked_at = now() WHERE account_id = %s",
                (w.other_human.account_id,),
            )
        await w.post_text(w.agent, "still heard")

        async def heard() -> None:
            async for event in mine:
                if event.WhichOneof("kind") == "message_posted":
                    assert event.message_posted.message.blocks[0].text.text == "still heard"
                    return

        # Well before the re-check beat ends the revoked stream.
        await asyncio.wait_for(heard(), server.auth.cache_seconds * 0.8)
    finally:
        await client.close()
