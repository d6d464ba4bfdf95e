"""Many lanes catching up at once (a restart binds every agent again): the
log is read a few pages at a time, and binds and writes still get through."""

from __future__ import annotations

import asyncio
import pathlib

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store.types import TextBlock
from tests.conftest import running_server
from tests.relay_client import relay, runner_for
from tests.world import World

pytestmark = pytest.mark.timeout(120)


async def test_thirty_lanes_catching_up_through_one_read_at_a_time_all_arrive(
    database_url: str, tmp_path: pathlib.Path, world: World
) -> None:
    pairs = [await world.add_pair() for _ in range(30)]
    # A log long enough that each lane reads pages of it, most not its own.
    for i, pair in enumerate(pairs):
        for j in range(8):
            await world.store.append_message(
                pair.human, pair.channel.channel_id, [TextBlock(f"{i}-{j}")]
            )
    async with running_server(database_url, tmp_path, replay_reads=1, pool_size=3) as srv:
        tokens = [await runner_for(pair, pair.agent) for pair in pairs]

        async def lane(i: int) -> list[str]:
            async with relay(srv.grpc_port, tokens[i]) as r:
                await r.bound("s", pairs[i].agent)
                heard = [await r.delivery("s", 60) for _ in range(8)]
                # A write while every other lane reads: it gets a connection.
                posted = await r.ok(
                    "s",
                    "post_message",
                    pb.PostMessageRequest(
                        channel_id=str(pairs[i].channel.channel_id),
                        blocks=[pb.MessageBlock(text=pb.TextBlock(text="still writing"))],
                    ),
                )
                assert posted.message.message_id
                return [e.message_posted.message.blocks[0].text.text for e in heard]

        heard = await asyncio.gather(*(lane(i) for i in range(30)))
    assert heard == [[f"{i}-{j}" for j in range(8)] for i in range(30)]


async def test_binds_held_up_in_the_database_leave_the_other_calls_their_connections(
    database_url: str, tmp_path: pathlib.Path, world: World
) -> None:
    """Runners reconnecting together whose binds the database holds up (here
    a lock on their agents' rows) take at most `relay_binds_at_once` of the
    pool: a write from a session already bound still gets a connection, and
    every held-up bind completes once the database lets it."""
    writer = await world.add_pair()
    pairs = [await world.add_pair() for _ in range(8)]
    async with running_server(database_url, tmp_path, relay_binds_at_once=2, pool_size=6) as srv:
        tokens = [await runner_for(pair, pair.agent) for pair in pairs]
        async with relay(srv.grpc_port, await runner_for(writer, writer.agent)) as w:
            await w.bound("s", writer.agent)
            async with await psycopg.AsyncConnection.connect(database_url) as held:
                await held.execute(
                    "SELECT 1 FROM accounts WHERE id = ANY(%s) FOR UPDATE",
                    ([p.agent.account_id for p in pairs],),
                )

                async def bind(i: int) -> str:
                    async with relay(srv.grpc_port, tokens[i]) as r:
                        return (await r.bound("s", pairs[i].agent)).agent_account_id

                binding = [asyncio.ensure_future(bind(i)) for i in range(len(pairs))]
                await asyncio.sleep(1.0)
                assert not any(b.done() for b in binding)
                posted = await asyncio.wait_for(
                    w.ok(
                        "s",
                        "post_message",
                        pb.PostMessageRequest(
                            channel_id=str(writer.channel.channel_id),
                            blocks=[pb.MessageBlock(text=pb.TextBlock(text="still writing"))],
                        ),
                    ),
                    10,
                )
                assert posted.message.message_id
                assert not any(b.done() for b in binding)
                await held.rollback()
            bound = await asyncio.wait_for(asyncio.gather(*binding), 60)
    assert bound == [str(p.agent.account_id) for p in pairs]
