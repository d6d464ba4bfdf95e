"""The channels an account takes part in: bounded per account, and held once
per account however many of its streams and relay sessions are open."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from compass_server.store.types import TextBlock
from tests.conftest import running_server
from tests.procs import ServerProcess
from tests.relay_client import RelayClient, runner_for
from tests.servers import CallError, GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(300)


async def test_channels_per_account_are_bounded_on_every_way_in(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    async with running_server(
        database_url, tmp_path_factory.mktemp("channels"), channels_per_account=3
    ) as srv:
        w = await World.create(srv.store)  # ada is in "general"
        client = GrpcClient(srv.grpc_port)
        ada, grace = w.tokens[w.human.account_id], w.tokens[w.other_human.account_id]
        try:
            for name in ("two", "three"):
                await client.call("CreateChannel", pb.CreateChannelRequest(name=name), ada)
            with pytest.raises(CallError) as info:
                await client.call("CreateChannel", pb.CreateChannelRequest(name="four"), ada)
            assert info.value.code == "resource_exhausted"
            assert "3 channels" in info.value.message, info.value.message

            # Another's channel naming her, adding her, a DM: each refused, whole.
            with pytest.raises(CallError) as info:
                await client.call(
                    "CreateChannel",
                    pb.CreateChannelRequest(
                        name="grace's", member_account_ids=[str(w.human.account_id)]
                    ),
                    grace,
                )
            assert info.value.code == "resource_exhausted"
            own = await client.call("CreateChannel", pb.CreateChannelRequest(name="g"), grace)
            with pytest.raises(CallError) as info:
                await client.call(
                    "AddChannelMember",
                    pb.AddChannelMemberRequest(
                        channel_id=own.channel.channel_id, account_id=str(w.human.account_id)
                    ),
                    grace,
                )
            assert info.value.code == "resource_exhausted"
            with pytest.raises(CallError) as info:
                await client.call(
                    "OpenDM", pb.OpenDMRequest(account_id=str(w.human.account_id)), grace
                )
            assert info.value.code == "resource_exhausted"

            listed = await client.call("ListChannels", pb.ListChannelsRequest(), ada)
            assert sorted(c.name for c in listed.channels) == ["general", "three", "two"]
            listed = await client.call("ListChannels", pb.ListChannelsRequest(), grace)
            assert [c.name for c in listed.channels] == ["g"]
        finally:
            await client.close()


async def test_concurrent_joins_never_pass_the_bound(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    async with running_server(
        database_url, tmp_path_factory.mktemp("racing"), channels_per_account=5
    ) as srv:
        w = await World.create(srv.store)
        client = GrpcClient(srv.grpc_port)
        try:
            tokens = [w.tokens[w.human.account_id], w.tokens[w.other_human.account_id]]
            results = await asyncio.gather(
                *(
                    client.call(
                        "CreateChannel",
                        pb.CreateChannelRequest(
                            name=f"c{i}", member_account_ids=[str(w.agent.account_id)]
                        ),
                        tokens[i % 2],
                    )
                    for i in range(12)
                ),
                return_exceptions=True,
            )
            refused = [r for r in results if isinstance(r, CallError)]
            assert all(r.code == "resource_exhausted" for r in refused), refused
            assert len(results) - len(refused) == 4  # the agent was in "general"
            async with await psycopg.AsyncConnection.connect(database_url) as conn:
                row = await (
                    await conn.execute(
                        "SELECT count(*) FROM channel_members WHERE account_id = %s",
                        (w.agent.account_id,),
                    )
                ).fetchone()
            assert row is not None and row[0] == 5
        finally:
            await client.close()


async def _join_many(
    database_url: str, w: World, n: int, who: uuid.UUID | None = None
) -> uuid.UUID:
    """Puts the world's person (or `who`) in n more channels, directly in the
    database; the last one's id."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            """
            WITH c AS (
              INSERT INTO channels (id, workspace_id, name, topic, kind)
              SELECT gen_random_uuid(), %(ws)s, 'bulk-' || i, '', 'channel'
              FROM generate_series(1, %(n)s) i
              RETURNING id
            )
            INSERT INTO channel_members (channel_id, account_id, workspace_id)
            SELECT id, %(who)s, %(ws)s FROM c
            RETURNING channel_id
            """,
            {"ws": w.workspace_id, "who": who or w.human.account_id, "n": n},
        )
        rows = await cur.fetchall()
    return uuid.UUID(str(rows[-1][0]))


async def test_streams_of_one_account_share_its_channels(database_url: str, store: Store) -> None:
    """An account in 3,000 channels opens 150 Subscribe streams: the server
    holds its channels once, not once per stream (that was ~0.7 MB each)."""
    w = await World.create(store)
    bulk = await _join_many(database_url, w, 3_000)
    server = ServerProcess(
        database_url, env={"COMPASS_SUBSCRIBE_STREAMS_PER_ACCOUNT": "200"}
    ).start()
    client = GrpcClient(server.grpc_port)
    token = w.tokens[w.human.account_id]
    try:
        first = client.stream("Subscribe", pb.SubscribeRequest(), token)
        await anext(first)
        await asyncio.sleep(1.0)
        base = server.rss_kib()
        streams: list[Any] = []
        for _ in range(6):
            batch = [client.stream("Subscribe", pb.SubscribeRequest(), token) for _i in range(25)]
            await asyncio.gather(*(anext(s) for s in batch))
            streams += batch
        await asyncio.sleep(2.0)
        grown = (server.rss_kib() - base) / 1024
        print(f"150 streams grew RSS by {grown:.1f} MB")
        assert grown < 30, f"RSS grew {grown:.0f} MB"
        # Every stream still hears the bulk channels.
        await store.append_message(w.human, bulk, [TextBlock("hi")])
        for s in streams[:5]:
            event = await asyncio.wait_for(anext(s), 10)
            assert event.HasField("message_posted"), event
    finally:
        await client.close()
        assert server.stop() == 0


async def _join(database_url: str, w: World, channel_id: uuid.UUID, who: uuid.UUID) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute(
            "INSERT INTO channel_members (channel_id, account_id, workspace_id)"
            " VALUES (%s, %s, %s)",
            (channel_id, who, w.workspace_id),
        )


async def test_relay_sessions_of_one_agent_share_its_channels(
    database_url: str, store: Store
) -> None:
    """200 relay sessions of one agent in 2,000 channels: the server holds
    the channels it hears them by once, not once per session (that grew it
    by ~50 MB)."""
    w = await World.create(store)
    bulk = await _join_many(database_url, w, 2_000, w.agent.account_id)
    runner = await runner_for(w)
    server = ServerProcess(database_url, env={"COMPASS_RELAY_SESSIONS_PER_STREAM": "201"}).start()
    client = RelayClient.grpc(server.grpc_port, runner)
    try:
        # One session first: what any session costs once (the agent's
        # channels read, the workspace's feed) is in the baseline.
        await client.bound("first", w.agent)
        await w.post_text(w.human, "warm")
        warm = await client.delivery("first")
        await client.ack("first", warm.event_id)  # the sessions bound next start after it
        await asyncio.sleep(1.0)
        base = server.rss_kib()
        for start in range(0, 200, 20):
            await asyncio.gather(
                *(client.bound(f"s{i}", w.agent) for i in range(start, start + 20))
            )
        # Every session is waiting on its lane.
        await w.post_text(w.human, "all here")
        for i in range(200):
            event = await client.delivery(f"s{i}", wait=30)
            assert event.message_posted.message.blocks[0].text.text == "all here"
        await asyncio.sleep(2.0)
        grown = (server.rss_kib() - base) / 1024
        print(f"200 relay sessions grew RSS by {grown:.1f} MB")
        assert grown < 25, f"RSS grew {grown:.0f} MB"
        # Each still hears a channel of the 2,000.
        await _join(database_url, w, bulk, w.other_human.account_id)
        await store.append_message(w.other_human, bulk, [TextBlock("in bulk")])
        for i in range(0, 200, 20):
            event = await client.delivery(f"s{i}", wait=30)
            assert event.message_posted.message.blocks[0].text.text == "in bulk"
    finally:
        await client.close()
        assert server.stop() == 0
