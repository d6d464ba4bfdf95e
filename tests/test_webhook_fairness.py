"""One workspace's receivers never delay another's deliveries: the courier's
attempts are shared fairly across workspaces, and endpoints that keep
failing go after the rest of their workspace's."""

from __future__ import annotations

import asyncio
import time

import pytest

from compass_server.store import Store
from tests.procs import ServerProcess
from tests.receiver import Receiver, Reply
from tests.servers import GrpcClient
from tests.test_webhook_faults import endpoint, env, post_asks, states
from tests.world import World

pytestmark = pytest.mark.timeout(240)


async def test_hanging_endpoints_of_one_workspace_never_delay_another(
    database_url: str, store: Store
) -> None:
    hanging = await Receiver(lambda _: Reply(hang=True)).start()
    healthy = await Receiver(lambda _: Reply()).start()
    server = ServerProcess(
        database_url,
        env={
            **env(timeout=10.0),
            "COMPASS_WEBHOOK_CONCURRENCY": "8",
            "COMPASS_WEBHOOK_CONCURRENCY_PER_WORKSPACE": "3",
        },
    ).start()
    client = GrpcClient(server.grpc_port)
    try:
        noisy, quiet = await World.create(store), await World.create(store)
        for i in range(12):
            await endpoint(client, noisy, hanging.url(f"/h{i}"))
        await endpoint(client, quiet, healthy.url())
        await post_asks(noisy, 10)  # 120 deliveries that hang for 10 s each
        for _ in range(50):
            if hanging.in_flight:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        # The noisy workspace takes its share of the attempts, not all of them.
        assert 0 < hanging.in_flight <= 3, hanging.in_flight

        began = time.monotonic()
        await post_asks(quiet, 3)
        while (await states(database_url, quiet.workspace_id))["delivered"] < 3:
            assert time.monotonic() - began < 4.0, "the quiet workspace's deliveries waited"
            await asyncio.sleep(0.1)
        print(f"the quiet workspace's 3 deliveries took {time.monotonic() - began:.2f}s")
    finally:
        await client.close()
        await hanging.close()
        await healthy.close()
        assert server.stop() == 0
