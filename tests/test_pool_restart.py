"""After PostgreSQL restarts, no call fails once it is back: the pooled
connections that died with it are never handed to a call, and /readyz says
ready only when calls are served."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Database, Store
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_faults import own_postgres  # noqa: F401  (the fixture, by name)
from tests.world import World

pytestmark = pytest.mark.timeout(240)


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_no_call_fails_once_a_restarted_postgres_is_back(
    own_postgres: Any,  # noqa: F811
) -> None:
    pg, url = own_postgres
    db = Database(url, min_size=1, max_size=2)
    await db.open()
    w = await World.create(Store(db))
    await db.close()
    token = w.tokens[w.human.account_id]
    server = ServerProcess(url, env={"COMPASS_POOL_SIZE": "8"}).start()
    client = GrpcClient(server.grpc_port)

    async def calls(n: int) -> list[Any]:
        return await asyncio.gather(
            *(client.call("ListChannels", pb.ListChannelsRequest(), token) for _ in range(n)),
            return_exceptions=True,
        )

    try:
        # Idle connections in the pool, as on any server that served a while.
        assert not [r for r in await calls(24) if isinstance(r, Exception)]
        await asyncio.to_thread(pg.stop)
        await asyncio.to_thread(pg.start)
        # Back: every call is served, the first ones included.
        for _ in range(3):
            failed = [r for r in await calls(12) if isinstance(r, CallError)]
            assert not failed, failed[:3]
        # And /readyz is 200 whenever calls are served.
        for _ in range(60):
            if await asyncio.to_thread(_readyz, server.http_port) == 200:
                break
            await asyncio.sleep(0.5)
        else:
            pytest.fail("/readyz never said ready again")
        assert not [r for r in await calls(12) if isinstance(r, Exception)]
    finally:
        await client.close()
        assert server.stop() == 0
