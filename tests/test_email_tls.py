"""Mail through a relay that takes it only over STARTTLS and only from a
user it knows: the server verifies the relay's certificate by the CA file it
is given, signs in with the credentials from its settings, and says in its
own words when the relay refuses them."""

from __future__ import annotations

import asyncio
import pathlib
import ssl
from typing import Any

import psycopg
import pytest
import trustme
from aiosmtpd.smtp import AuthResult, LoginPassword

from compass.v1 import admin_pb2 as ad
from compass_server.store.types import Ask, AskOption, AskQuestion
from compass_server.store.vault import new_key
from tests.conftest import running_server
from tests.mailbox import Mailbox
from tests.servers import GrpcClient
from tests.world import World

pytestmark = pytest.mark.timeout(120)


def authenticator(
    server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
        b"compass",
        b"relay-s3cret",
    )
    return AuthResult(success=ok, handled=False)


@pytest.mark.parametrize(("password", "sent"), [("relay-s3cret", True), ("wrong", False)])
async def test_starttls_and_auth_with_the_settings_credentials(
    database_url: str, tmp_path: pathlib.Path, password: str, sent: bool
) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(tls)
    ca_file = tmp_path / "relay-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    box = Mailbox(
        tls_context=tls,
        require_starttls=True,
        auth_required=True,
        authenticator=authenticator,
    ).start()
    try:
        async with running_server(
            database_url,
            tmp_path,
            webhook_key=new_key(),
            webhook_retry_schedule="0.3s,0.3s,0.3s,0.3s,0.3s,0.3s",
            webhook_timeout_seconds=10.0,
            webhook_poll_seconds=0.1,
            smtp_host="127.0.0.1",
            smtp_port=box.port,
            smtp_security="starttls",
            smtp_username="compass",
            smtp_password=password,
            smtp_ca_file=ca_file,
        ) as srv:
            w = await World.create(srv.store)
            to = f"ada.{w.workspace_id.hex[:8]}@example.test"
            async with await psycopg.AsyncConnection.connect(database_url) as conn:
                await conn.execute(
                    "UPDATE accounts SET email = %s WHERE id = %s", (to, w.human.account_id)
                )
            rpc = GrpcClient(srv.grpc_port)
            try:
                made = await rpc.call(
                    "CreateWebhook",
                    ad.CreateWebhookRequest(
                        url="mailto:compass@example.test", kind=ad.WEBHOOK_KIND_EMAIL
                    ),
                    w.tokens[w.human.account_id],
                )
                ask = Ask(
                    questions=(AskQuestion("go", "Ship it?", options=(AskOption("y", "Yes"),)),),
                    answerer_ids=(w.human.account_id,),
                )
                await w.post_ask(w.agent, ask)
                if sent:
                    [got] = await box.wait_for(to)
                    assert got["Subject"] == "scout asks: Ship it?"
                    return
                for _ in range(300):
                    page = await rpc.call(
                        "ListWebhookDeliveries",
                        ad.ListWebhookDeliveriesRequest(webhook_id=made.webhook.webhook_id),
                        w.tokens[w.human.account_id],
                    )
                    if page.deliveries and page.deliveries[0].last_error:
                        break
                    await asyncio.sleep(0.1)
                [d] = page.deliveries
                assert d.last_error.startswith(
                    f"the mail relay 127.0.0.1:{box.port} refused the credentials"
                ), d.last_error
                assert "wrong" not in d.last_error
                assert box.to(to) == []
            finally:
                await rpc.close()
    finally:
        box.stop()
