"""Webhooks across processes and faults, with real `compass-server serve`
processes: two servers share the deliveries and never send one at the same
time; a server killed with -9 mid-send and a PostgreSQL restart lose none,
and a delivery sent again keeps its webhook-id. Bounded in count and time."""

from __future__ import annotations

import asyncio
import collections
import uuid
from typing import Any

import psycopg
import pytest
from standardwebhooks.webhooks import Webhook as Verifier

from compass_server.store import Database, Store
from compass_server.store.vault import new_key
from tests.procs import ServerProcess
from tests.receiver import Received, Receiver, Reply
from tests.servers import GrpcClient
from tests.test_faults import own_postgres  # noqa: F401  (the fixture, by name)
from tests.world import World

pytestmark = pytest.mark.timeout(240)

KEY = new_key()


def env(timeout: float = 1.0) -> dict[str, str]:
    return {
        "COMPASS_WEBHOOK_KEY": KEY,
        "COMPASS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "COMPASS_WEBHOOK_RETRY_SCHEDULE": "0.3s,0.3s,0.3s,0.3s,0.3s,1s,1s,1s,1s,1s,1s,1s",
        "COMPASS_WEBHOOK_TIMEOUT_SECONDS": str(timeout),
        "COMPASS_WEBHOOK_POLL_SECONDS": "0.1",
        "COMPASS_WEBHOOK_CONCURRENCY_PER_ENDPOINT": "4",
    }


async def endpoint(client: GrpcClient, w: World, url: str) -> str:
    from compass.v1 import admin_pb2 as ad

    made = await client.call(
        "CreateWebhook", ad.CreateWebhookRequest(url=url), w.tokens[w.human.account_id]
    )
    return made.secret  # type: ignore[no-any-return]


def asks_heard(secret: str, received: list[Received]) -> dict[str, set[str]]:
    """ask id → the webhook-ids its ask.posted deliveries came with."""
    heard: dict[str, set[str]] = collections.defaultdict(set)
    for r in received:
        payload = Verifier(secret).verify(r.body, r.headers)
        if payload["type"] == "ask.posted":
            heard[payload["data"]["ask"]["ask_id"]].add(r.webhook_id)
    return heard


async def states(database_url: str, workspace_id: uuid.UUID) -> collections.Counter[str]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT state, count(*) FROM webhook_deliveries WHERE workspace_id = %s GROUP BY 1",
            (workspace_id,),
        )
        return collections.Counter({s: n for s, n in await cur.fetchall()})


async def until_delivered(database_url: str, w: World, n: int, wait: float = 60.0) -> None:
    for _ in range(int(wait / 0.2)):
        if (await states(database_url, w.workspace_id))["delivered"] >= n:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(
        f"not all {n} deliveries arrived: {await states(database_url, w.workspace_id)}"
    )


async def post_asks(w: World, n: int) -> list[str]:
    out = []
    for _ in range(n):
        m = await w.post_ask()
        out.append(m.blocks[0].ask_id)  # type: ignore[union-attr]
    return out


async def test_two_servers_share_the_deliveries_and_never_send_one_at_once(
    database_url: str, store: Store
) -> None:
    receiver = await Receiver(lambda _: Reply(delay=0.1)).start()
    a = ServerProcess(database_url, env=env()).start()
    b = ServerProcess(database_url, env=env()).start()
    client = GrpcClient(a.grpc_port)
    try:
        w = await World.create(store)
        secret = await endpoint(client, w, receiver.url())
        asks = await post_asks(w, 40)
        await until_delivered(database_url, w, 40)
        heard = asks_heard(secret, receiver.received)
        assert set(heard) == set(asks)
        assert all(len(ids) == 1 for ids in heard.values())
        # One delivery is never in two servers' hands at once.
        assert receiver.max_same_id == 1
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT count(DISTINCT server_id) FROM webhook_attempts WHERE workspace_id = %s",
                (w.workspace_id,),
            )
            row = await cur.fetchone()
        assert row == (2,), "both servers sent deliveries"
    finally:
        await client.close()
        await receiver.close()
        assert a.stop() == 0 and b.stop() == 0


async def test_a_server_without_the_courier_sends_nothing_and_one_with_it_sends_all(
    database_url: str, store: Store
) -> None:
    receiver = await Receiver(lambda _: Reply()).start()
    quiet = ServerProcess(database_url, env={**env(), "COMPASS_WEBHOOK_COURIER": "false"}).start()
    client = GrpcClient(quiet.grpc_port)
    sender: ServerProcess | None = None
    try:
        w = await World.create(store)
        secret = await endpoint(client, w, receiver.url())
        asks = await post_asks(w, 10)
        # Ten of its polls: the server serves the endpoint but sends nothing.
        await asyncio.sleep(1.0)
        assert receiver.received == []
        assert await states(database_url, w.workspace_id) == collections.Counter()
        sender = ServerProcess(database_url, env=env()).start()
        asks += await post_asks(w, 5)
        await until_delivered(database_url, w, 15)
        assert set(asks_heard(secret, receiver.received)) == set(asks)
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT count(DISTINCT server_id) FROM webhook_attempts WHERE workspace_id = %s",
                (w.workspace_id,),
            )
            row = await cur.fetchone()
        assert row == (1,), "only the server with the courier sent"
        assert quiet.proc is not None and quiet.proc.poll() is None, "it still serves"
    finally:
        await client.close()
        await receiver.close()
        assert quiet.stop() == 0
        if sender is not None:
            assert sender.stop() == 0


async def test_a_server_killed_mid_send_loses_no_delivery(database_url: str, store: Store) -> None:
    slow = True
    receiver = await Receiver(lambda _: Reply(delay=0.8) if slow else Reply()).start()
    a = ServerProcess(database_url, env=env(timeout=1.0)).start()
    client = GrpcClient(a.grpc_port)
    b: ServerProcess | None = None
    try:
        w = await World.create(store)
        secret = await endpoint(client, w, receiver.url())
        asks = await post_asks(w, 10)
        await receiver.wait_for(3)
        assert receiver.in_flight > 0, "nothing was being sent when the server died"
        a.kill9()
        # Changes made while no server runs are delivered once one is back.
        asks += await post_asks(w, 5)
        slow = False
        b = ServerProcess(database_url, env=env(timeout=1.0)).start()
        await until_delivered(database_url, w, 15)
        heard = asks_heard(secret, receiver.received)
        assert set(heard) == set(asks)
        # Sent again after the crash, a delivery keeps its webhook-id.
        assert all(len(ids) == 1 for ids in heard.values()), heard
        assert len(receiver.received) > 15, "no attempt was cut short by the kill"
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT error FROM webhook_attempts WHERE workspace_id = %s AND error <> ''",
                (w.workspace_id,),
            )
            errors = {r[0] for r in await cur.fetchall()}
        assert "the server sending it stopped before it finished" in errors
    finally:
        await client.close()
        await receiver.close()
        if b is not None:
            assert b.stop() == 0


async def test_a_postgres_restart_loses_no_delivery(own_postgres: Any) -> None:  # noqa: F811
    pg, url = own_postgres
    db = Database(url, min_size=1, max_size=2)
    await db.open()
    try:
        w = await World.create(Store(db))
    finally:
        await db.close()
    receiver = await Receiver(lambda _: Reply(delay=0.5)).start()
    server = ServerProcess(url, env=env()).start()
    client = GrpcClient(server.grpc_port)
    db = Database(url, min_size=1, max_size=4)
    try:
        secret = await endpoint(client, w, receiver.url())
        await db.open()
        w.store = Store(db)
        asks = await post_asks(w, 10)
        await receiver.wait_for(2)
        assert (await states(url, w.workspace_id))["pending"] > 0
        # Mid-send: attempts under way lose their database, the rest wait.
        await asyncio.to_thread(pg.stop)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(pg.start)
        for _ in range(100):
            try:
                asks += await post_asks(w, 1)
                break
            except Exception:
                await asyncio.sleep(0.2)
        asks += await post_asks(w, 9)
        await until_delivered(url, w, len(asks), wait=90)
        heard = asks_heard(secret, receiver.received)
        assert set(heard) == set(asks)
        assert all(len(ids) == 1 for ids in heard.values())
    finally:
        await db.close()
        await client.close()
        await receiver.close()
        assert server.stop() == 0
