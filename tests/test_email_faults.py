"""Mail across a crash: a `compass-server serve` killed with -9 while mails
are going out loses none, and one sent again carries the Message-ID it had,
so a reader's mail client shows it once."""

from __future__ import annotations

import asyncio
import collections
import uuid

import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass_server.store import Store
from compass_server.store.types import Ask, AskOption, AskQuestion
from compass_server.store.vault import new_key
from tests.mailbox import Mailbox
from tests.procs import ServerProcess
from tests.servers import GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(240)

KEY = new_key()


def env(port: int) -> dict[str, str]:
    return {
        "COMPASS_WEBHOOK_KEY": KEY,
        "COMPASS_WEBHOOK_RETRY_SCHEDULE": "0.3s,0.3s,0.3s,0.3s,0.3s,1s,1s,1s,1s,1s",
        "COMPASS_WEBHOOK_TIMEOUT_SECONDS": "2",
        "COMPASS_WEBHOOK_POLL_SECONDS": "0.1",
        "COMPASS_WEBHOOK_CONCURRENCY_PER_ENDPOINT": "2",
        "COMPASS_SMTP_HOST": "127.0.0.1",
        "COMPASS_SMTP_PORT": str(port),
        "COMPASS_SMTP_SECURITY": "none",
    }


async def delivered(database_url: str, workspace_id: uuid.UUID) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM webhook_deliveries"
            " WHERE workspace_id = %s AND state = 'delivered'",
            (workspace_id,),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_a_server_killed_while_mailing_loses_no_mail(database_url: str, store: Store) -> None:
    box = Mailbox().start()
    box.delay = 0.4
    a = ServerProcess(database_url, env=env(box.port)).start()
    b: ServerProcess | None = None
    client = GrpcClient(a.grpc_port)
    try:
        w = await World.create(store)
        to = f"ada.{w.workspace_id.hex[:8]}@example.test"
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute(
                "UPDATE accounts SET email = %s WHERE id = %s", (to, w.human.account_id)
            )
        await client.call(
            "CreateWebhook",
            ad.CreateWebhookRequest(url="mailto:compass@example.test", kind=ad.WEBHOOK_KIND_EMAIL),
            w.tokens[w.human.account_id],
        )
        ask = Ask(
            questions=(AskQuestion("go", "Ship it?", options=(AskOption("y", "Yes"),)),),
            answerer_ids=(w.human.account_id,),
        )
        asks = []
        for _ in range(8):
            m = await w.post_ask(w.agent, ask)
            asks.append(m.blocks[0].ask_id)  # type: ignore[union-attr]
        await box.wait_for(to, 2)
        # The next mail is held mid-DATA: the kill lands while one is under way.
        box.holding = True
        for _ in range(600):
            if box.held:
                break
            await asyncio.sleep(0.05)
        assert box.held, "no mail went out after the first two"
        a.kill9()
        box.holding = False
        box.delay = 0.0
        b = ServerProcess(database_url, env=env(box.port)).start()
        for _ in range(300):
            if await delivered(database_url, w.workspace_id) >= len(asks):
                break
            await asyncio.sleep(0.2)
        assert await delivered(database_url, w.workspace_id) == len(asks)
        ids = collections.Counter(m["Message-ID"] for m in box.to(to))
        expected = {f"<ask.{a_id}.{w.human.account_id}@127.0.0.1>" for a_id in asks}
        # Every ask's mail arrived; one the kill cut short came again as itself.
        assert set(ids) == expected
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT error FROM webhook_attempts WHERE workspace_id = %s AND error <> ''",
                (w.workspace_id,),
            )
            errors = {r[0] for r in await cur.fetchall()}
        assert "the server sending it stopped before it finished" in errors, (
            "no mail was under way when the server died"
        )
    finally:
        await client.close()
        box.stop()
        if b is not None:
            assert b.stop() == 0


async def test_a_server_without_a_relay_leaves_mail_to_one_with_it(
    database_url: str, store: Store
) -> None:
    box = Mailbox().start()
    plain = {k: v for k, v in env(box.port).items() if not k.startswith("COMPASS_SMTP")}
    a = ServerProcess(database_url, env=plain).start()
    b: ServerProcess | None = None
    client = GrpcClient(a.grpc_port)
    try:
        w = await World.create(store)
        to = f"ada.{w.workspace_id.hex[:8]}@example.test"
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute(
                "UPDATE accounts SET email = %s WHERE id = %s", (to, w.human.account_id)
            )
        await client.call(
            "CreateWebhook",
            ad.CreateWebhookRequest(url="mailto:compass@example.test", kind=ad.WEBHOOK_KIND_EMAIL),
            w.tokens[w.human.account_id],
        )
        ask = Ask(
            questions=(AskQuestion("go", "Ship it?", options=(AskOption("y", "Yes"),)),),
            answerer_ids=(w.human.account_id,),
        )
        await w.post_ask(w.agent, ask)
        # The delivery is made, and waits untouched: no attempt spent.
        for _ in range(100):
            async with await psycopg.AsyncConnection.connect(database_url) as conn:
                cur = await conn.execute(
                    "SELECT attempts FROM webhook_deliveries WHERE workspace_id = %s",
                    (w.workspace_id,),
                )
                rows = await cur.fetchall()
            if rows:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT attempts, state FROM webhook_deliveries WHERE workspace_id = %s",
                (w.workspace_id,),
            )
            assert await cur.fetchall() == [(0, "pending")]
        b = ServerProcess(database_url, env=env(box.port)).start()
        await box.wait_for(to)
        for _ in range(100):
            if await delivered(database_url, w.workspace_id) == 1:
                break
            await asyncio.sleep(0.1)
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT attempts, state FROM webhook_deliveries WHERE workspace_id = %s",
                (w.workspace_id,),
            )
            assert await cur.fetchall() == [(1, "delivered")]
    finally:
        await client.close()
        box.stop()
        if b is not None:
            assert b.stop() == 0
        assert a.stop() == 0
