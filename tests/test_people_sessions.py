"""Browser sessions as an admin sees them (list, revoke), deactivation, and
a session ended on one server process closing a stream opened through
another."""

from __future__ import annotations

import asyncio
import datetime
import json
import struct
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from compass_server.store import Store
from compass_server.store.people import StartedSession
from compass_server.store.types import Operator
from tests.procs import ServerProcess
from tests.servers import CallError, ConnectClient
from tests.test_admin_api import ended
from tests.world import World

pytestmark = pytest.mark.timeout(120)


async def session_for(store: Store, world: World, who: Any, sub: str | None = None) -> str:
    """A browser session of `who`, as a sign-in through a provider makes it."""
    sub = sub or f"sub-{uuid.uuid4().hex[:8]}"
    await link_identity(store, world, who, sub)
    started: StartedSession = await store.sign_in_person(
        world.workspace_id,
        issuer="https://id.example",
        subject=sub,
        email=None,
        may_create=False,
        handle="unused",  # the identity is linked already
        provider="example",
        user_agent="a test browser",
        idle=datetime.timedelta(hours=1),
        lifetime=datetime.timedelta(days=1),
    )
    return started.secret


async def link_identity(store: Store, world: World, who: Any, sub: str) -> None:
    async with store.db.tx(Operator(world.workspace_id)) as conn:
        await conn.execute(
            "INSERT INTO identities (workspace_id, issuer, subject, account_id) "
            "VALUES (%s, 'https://id.example', %s, %s) ON CONFLICT DO NOTHING",
            (world.workspace_id, sub, who.account_id),
        )


def page_headers(port: int, secret: str) -> dict[str, str]:
    """What the page sends: its cookie, its header, its own Origin."""
    return {
        "cookie": f"compass_session={secret}",
        "x-compass-csrf": "1",
        "origin": f"http://127.0.0.1:{port}",
    }


async def who(port: int, secret: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"http://127.0.0.1:{port}/compass.v1.IdentityService/WhoAmI",
            content="{}",
            headers={"content-type": "application/json", **page_headers(port, secret)},
        )


async def subscribe(port: int, secret: str) -> AsyncIterator[dict[str, Any]]:
    """The page's Subscribe stream over Connect JSON: each message, then the
    end message's error (if any) as a dict with "error"."""
    body = json.dumps({"afterEventId": "0"}).encode()
    async with (
        httpx.AsyncClient(timeout=None) as http,
        http.stream(
            "POST",
            f"http://127.0.0.1:{port}/compass.v1.CommsService/Subscribe",
            content=b"\0" + struct.pack(">I", len(body)) + body,
            headers={"content-type": "application/connect+json", **page_headers(port, secret)},
        ) as response,
    ):
        assert response.status_code == 200, await response.aread()
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            while len(buffer) >= 5:
                flags, size = buffer[0], struct.unpack(">I", buffer[1:5])[0]
                if len(buffer) < 5 + size:
                    break
                message = json.loads(buffer[5 : 5 + size])
                buffer = buffer[5 + size :]
                yield message
                if flags & 0x02:
                    return


async def end_of(stream: AsyncIterator[dict[str, Any]], wait: float) -> dict[str, Any]:
    async def last() -> dict[str, Any]:
        async for message in stream:
            if "error" in message or message == {}:
                return message
        raise AssertionError("the stream ended without its end message")

    return await asyncio.wait_for(last(), wait)


# --- an admin and a person's sessions ------------------------------------------------------


async def test_an_admin_lists_a_persons_sessions_and_ends_them(
    server: Any, api_world: World
) -> None:
    w, store = api_world, server.store
    port = server.http_port
    one = await session_for(store, w, w.other_human)
    two = await session_for(store, w, w.other_human)
    assert (await who(port, one)).json()["account"]["handle"] == "grace"
    client = ConnectClient(port, "json")
    ada, grace = w.tokens[w.human.account_id], w.tokens[w.other_human.account_id]
    try:
        listed = await client.call(
            "ListSessions", ad.ListSessionsRequest(account_id=str(w.other_human.account_id)), ada
        )
        assert len(listed.sessions) == 2
        assert {s.provider for s in listed.sessions} == {"example"}
        assert all(s.active and s.user_agent == "a test browser" for s in listed.sessions)
        # Sessions are not tokens: ListTokens doesn't show them.
        tokens = await client.call(
            "ListTokens", ad.ListTokensRequest(account_id=str(w.other_human.account_id)), ada
        )
        assert len(tokens.tokens) == 1

        # A member may not.
        with pytest.raises(CallError) as refused:
            await client.call(
                "ListSessions", ad.ListSessionsRequest(account_id=str(w.human.account_id)), grace
            )
        assert refused.value.code == "permission_denied"

        newest = listed.sessions[0].session_id
        revoked = await client.call(
            "RevokeSession", ad.RevokeSessionRequest(session_id=newest), ada
        )
        assert not revoked.session.active and revoked.session.HasField("revoked_at")
        answers = {
            await_status for await_status in [(await who(port, s)).status_code for s in (one, two)]
        }
        assert answers == {200, 401}

        out = await client.call(
            "RevokeSessions",
            ad.RevokeSessionsRequest(account_id=str(w.other_human.account_id)),
            ada,
        )
        assert out.sessions_revoked == 1
        assert (await who(port, one)).status_code == 401
        assert (await who(port, two)).status_code == 401
        # The person's token is untouched.
        await client.call("WhoAmI", ad.WhoAmIRequest(), grace)
    finally:
        await client.close()


async def test_deactivating_an_account_ends_its_tokens_sessions_and_streams(
    server: Any, api_world: World
) -> None:
    w, store = api_world, server.store
    port = server.http_port
    secret = await session_for(store, w, w.other_human, "sub-grace-deact")
    grace, ada = w.tokens[w.other_human.account_id], w.tokens[w.human.account_id]
    client = ConnectClient(port, "json")
    try:
        token_stream = client.stream("Subscribe", pb.SubscribeRequest(), grace)
        assert (await asyncio.wait_for(anext(token_stream), 10)).WhichOneof("kind") == "ready"
        page_stream = subscribe(port, secret)
        assert "ready" in await asyncio.wait_for(anext(page_stream), 10)

        # An admin can't deactivate themselves, nor the last admin.
        with pytest.raises(CallError) as own:
            await client.call(
                "DeactivateAccount",
                ad.DeactivateAccountRequest(account_id=str(w.human.account_id)),
                ada,
            )
        assert own.value.code == "failed_precondition"

        done = await client.call(
            "DeactivateAccount",
            ad.DeactivateAccountRequest(account_id=str(w.other_human.account_id)),
            ada,
        )
        assert done.credentials_revoked == 2
        err = await ended(token_stream, 5)
        assert err.code == "unauthenticated"
        end = await end_of(page_stream, 5)
        await page_stream.aclose()
        assert end["error"]["code"] == "unauthenticated", end
        with pytest.raises(CallError) as refused:
            await client.call("WhoAmI", ad.WhoAmIRequest(), grace)
        assert refused.value.code == "unauthenticated"
        assert (await who(port, secret)).status_code == 401
        # A token made afterwards signs nothing in either.
        later = await client.call(
            "CreateToken", ad.CreateTokenRequest(account_id=str(w.other_human.account_id)), ada
        )
        with pytest.raises(CallError) as refused:
            await client.call("WhoAmI", ad.WhoAmIRequest(), later.token)
        assert "deactivated" in refused.value.message
        # Signing in through the provider is refused, and nothing is written.
        from compass_server.store.people import Refused

        with pytest.raises(Refused, match="deactivated"):
            await session_for(store, w, w.other_human, "sub-grace-deact")

        await client.call(
            "ReactivateAccount",
            ad.ReactivateAccountRequest(account_id=str(w.other_human.account_id)),
            ada,
        )
        again = await session_for(store, w, w.other_human, "sub-grace-deact")
        assert (await who(port, again)).status_code == 200
        await client.call("WhoAmI", ad.WhoAmIRequest(), later.token)
    finally:
        await client.close()


# --- two server processes ------------------------------------------------------------------


async def test_a_session_signed_out_on_one_server_closes_a_stream_opened_through_another(
    two_servers: tuple[ServerProcess, ServerProcess], store: Store, world: World
) -> None:
    a, b = two_servers
    secret = await session_for(store, world, world.other_human)
    # B serves the page's stream with the cookie.
    stream = subscribe(b.http_port, secret)
    assert "ready" in await asyncio.wait_for(anext(stream), 10)
    assert (await who(b.http_port, secret)).status_code == 200

    async with httpx.AsyncClient() as http:
        out = await http.post(
            f"http://127.0.0.1:{a.http_port}/auth/logout",
            headers=page_headers(a.http_port, secret),
        )
    assert out.status_code == 204
    assert "compass_session=;" in out.headers["set-cookie"]
    end = await end_of(stream, 5)
    await stream.aclose()
    assert end["error"]["code"] == "unauthenticated", end
    assert "session has ended" in end["error"]["message"]
    # The sign-out returned once every server applied it: B refuses at once.
    assert (await who(b.http_port, secret)).status_code == 401
