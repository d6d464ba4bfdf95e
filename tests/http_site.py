"""One server with every people-facing HTTP route live: a sign-in provider, a
connected Slack app talking to a stand-in, a workspace with people, an open
ask and a link to it. What the bad-input tests and the HTTP fuzzer attack."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import pathlib
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from compass.v1 import admin_pb2 as ad
from compass_server.store import Store
from compass_server.store.types import Ask
from compass_server.store.vault import new_key
from tests.oidc import Provider
from tests.servers import GrpcClient
from tests.signin_flow import signin_server
from tests.slack_standin import SECRET, TOKEN, SlackStandIn
from tests.test_people_sessions import session_for
from tests.world import World, two_question_ask

# Replies by mail: the site's reply domain and its inbound webhook's secret.
MAIL_DOMAIN = "reply.site.test"
MAIL_SECRET = "site-inbound-secret"


@dataclass
class Site:
    server: Any
    world: World
    base: str
    ask_id: str
    link: str
    # A live session of the world's person, and one signed out.
    session: str
    revoked: str
    # Its Slack app's team, its own: one app per team in the whole database.
    team: str


def slack_headers(body: bytes, at: str | None = None) -> dict[str, str]:
    """Headers of a request Slack signed now (or names this timestamp)."""
    stamp = at if at is not None else str(int(time.time()))
    # Slack's scheme over the bytes, so a body of any bytes can be signed.
    digest = hmac.new(SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
    signature = "v0=" + digest.hexdigest()
    return {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature,
    }


def slack_body(payload: Any) -> bytes:
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    return urllib.parse.urlencode({"payload": raw}).encode()


@contextlib.asynccontextmanager
async def site_server(
    database_url: str,
    data_dir: pathlib.Path,
    store: Store,
    idp: Provider,
    standin: SlackStandIn,
) -> AsyncIterator[Site]:
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    async with signin_server(
        database_url,
        data_dir,
        [settings],
        webhook_key=new_key(),
        slack_api_url=standin.api_url,
        mail_reply_domain=MAIL_DOMAIN,
        mail_inbound_secret=MAIL_SECRET,
        mail_inbound_bytes=64 * 1024,
    ) as srv:
        team = "T" + uuid.uuid4().hex[:10].upper()
        rpc = GrpcClient(srv.grpc_port)
        try:
            await rpc.call(
                "ConnectSlackApp",
                ad.ConnectSlackAppRequest(team_id=team, bot_token=TOKEN, signing_secret=SECRET),
                world.tokens[world.human.account_id],
            )
        finally:
            await rpc.close()
        message = await world.post_ask(
            world.agent,
            Ask(questions=two_question_ask().questions, answerer_ids=(world.human.account_id,)),
        )
        ask_id = next(b.ask_id for b in message.blocks if isinstance(b, Ask))
        link = await store.mint_ask_link(world.workspace_id, ask_id, world.human.account_id)
        session = await session_for(store, world, world.human)
        revoked = await session_for(store, world, world.human)
        signed = await srv.auth.sign_in(f"Session {revoked}", "account")
        await store.sign_out(signed.principal, signed.token_id)
        srv.auth.forget(signed.token_id)
        yield Site(
            srv,
            world,
            f"http://127.0.0.1:{srv.http_port}",
            ask_id,
            link.secret,
            session,
            revoked,
            team,
        )


@contextlib.contextmanager
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails when anything was logged at ERROR, or with a traceback, meanwhile."""
    caplog.set_level(logging.INFO)
    start = len(caplog.records)
    yield
    bad = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records[start:]
        if r.levelno >= logging.ERROR or r.exc_info is not None
    ]
    assert not bad, bad
