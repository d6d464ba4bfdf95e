"""One token can hold only its share of the database pool at once: a flood
of its calls waits its turn while everyone else's calls find a connection."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_memory_bounds import post_big
from tests.world import World

pytestmark = pytest.mark.timeout(300)

BUSY = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state IN ('active', 'idle in transaction')
"""


async def test_a_flood_from_one_token_holds_only_its_share_of_the_pool(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    await post_big(w, 20)
    flooder, innocent = w.tokens[w.human.account_id], w.tokens[w.other_human.account_id]
    await store.create_channel(w.other_human, "quiet", "", [])
    server = ServerProcess(
        database_url,
        env={"COMPASS_POOL_SIZE": "10", "COMPASS_DATABASE_CONNECTIONS_PER_TOKEN": "2"},
    ).start()
    try:
        client = GrpcClient(server.grpc_port)
        page = pb.ListMessagesRequest(channel_id=str(w.channel.channel_id), page_size=200)
        busy: list[int] = []
        latencies: list[float] = []
        flooding = True

        async def watch() -> None:
            # Autocommit: a transaction sees one snapshot of the activity.
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                while flooding:
                    row = await (await conn.execute(BUSY)).fetchone()
                    busy.append(int(row[0]) if row else 0)
                    await asyncio.sleep(0.01)

        async def meanwhile() -> None:
            await asyncio.sleep(0.3)
            while flooding:
                began = time.monotonic()
                got = await client.call("ListChannels", pb.ListChannelsRequest(), innocent)
                latencies.append(time.monotonic() - began)
                assert [c.name for c in got.channels] == ["quiet"]
                await asyncio.sleep(0.05)

        watcher = asyncio.ensure_future(watch())
        other = asyncio.ensure_future(meanwhile())
        try:
            pages = await asyncio.gather(
                *(client.call("ListMessages", page, flooder) for _ in range(120)),
                return_exceptions=True,
            )
            # The flood waits its turn; what waits too long is told so.
            refused = [p for p in pages if isinstance(p, CallError)]
            assert all(p.code == "resource_exhausted" for p in refused), refused[:3]
            assert len(refused) < len(pages)
        finally:
            flooding = False
            await asyncio.gather(watcher, other)
            await client.close()
        print(
            f"busy connections at most {max(busy)}; the other's calls {max(latencies):.2f}s; "
            f"{len(refused)} of the flood refused"
        )
        # The flood's 2, the other member's call, and the server's own numbering.
        assert max(busy) <= 4, busy
        # Never near the pool's wait (10 s), which is what a starved member would see;
        # the margin is for a machine busy with other tests.
        assert latencies and max(latencies) < 5.0, latencies
    finally:
        assert server.stop() == 0
