"""The courier's pace on its own server (no other courier shares the
database meanwhile): what wakes it besides the poll."""

from __future__ import annotations

import pathlib

import pytest

from compass.v1 import admin_pb2 as ad
from compass_server.store.vault import new_key
from tests.conftest import running_server
from tests.receiver import Receiver, Reply
from tests.servers import GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(60)

KEY = new_key()


async def test_a_backlog_held_back_by_the_per_endpoint_limit_goes_on_without_the_poll(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    """One attempt at a time to an endpoint, and no poll for a minute: each
    attempt's end alone must bring the next delivery."""
    slow = await Receiver(lambda _: Reply(delay=0.2)).start()
    try:
        async with running_server(
            database_url,
            tmp_path,
            webhook_key=KEY,
            webhook_allowed_networks="127.0.0.0/8",
            webhook_poll_seconds=60.0,
            webhook_concurrency_per_endpoint=1,
        ) as srv:
            world = await World.create(srv.store)
            client = GrpcClient(srv.grpc_port)
            try:
                await client.call(
                    "CreateWebhook",
                    ad.CreateWebhookRequest(url=slow.url(), event_types=["ask.posted"]),
                    world.tokens[world.human.account_id],
                )
                for _ in range(5):
                    await world.post_ask()
                got = await slow.wait_for(5, wait=30.0)
                assert len({r.webhook_id for r in got}) == 5
                assert slow.max_in_flight == 1
            finally:
                await client.close()
    finally:
        await slow.close()
