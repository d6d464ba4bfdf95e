"""Signing in through an OpenID provider: who gets in, what is refused, the
session cookie, and what a call carrying it must show."""

from __future__ import annotations

import asyncio
import pathlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from compass_server.store import Store
from compass_server.store.types import Operator
from tests.oidc import Provider, provider
from tests.signin_flow import browser, signin_server
from tests.world import World

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def idp() -> Iterator[Provider]:
    with provider() as p:
        yield p


@pytest.fixture
async def site(
    database_url: str, tmp_path: pathlib.Path, idp: Provider, store: Store
) -> AsyncIterator[tuple[Any, World]]:
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    async with signin_server(database_url, tmp_path, [settings]) as srv:
        yield srv, world


async def accounts(store: Store, workspace_id: uuid.UUID) -> dict[str, Any]:
    async with store.db.tx(Operator(workspace_id)) as conn:
        cur = await conn.execute("SELECT handle, kind, role, email FROM accounts ORDER BY handle")
        return {r["handle"]: r for r in await cur.fetchall()}


async def identities(store: Store, workspace_id: uuid.UUID) -> list[tuple[str, str]]:
    async with store.db.tx(Operator(workspace_id)) as conn:
        cur = await conn.execute(
            "SELECT i.subject, a.handle FROM identities i JOIN accounts a ON a.id = i.account_id"
        )
        return sorted((r["subject"], r["handle"]) for r in await cur.fetchall())


async def test_a_first_sign_in_creates_a_member_and_a_second_signs_into_it(
    site: tuple[Any, World], idp: Provider, store: Store
) -> None:
    srv, world = site
    idp.person("sub-lin", "lin@acme.test", preferred_username="Lin Wu")
    async with browser(srv) as b:
        done = await b.sign_in()
        assert done.status_code == 303 and done.headers["location"] == "/", done.text
        cookie = next(
            v
            for k, v in done.headers.multi_items()
            if k == "set-cookie" and v.startswith("compass_session=")
        )
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain http on loopback
        me = (await b.call("WhoAmI")).json()
        assert me["account"]["handle"] == "lin-wu"
        assert me["account"]["role"] == "WORKSPACE_ROLE_MEMBER"
        first = me["account"]["accountId"]
    found = await accounts(store, world.workspace_id)
    assert found["lin-wu"]["email"] == "lin@acme.test" and found["lin-wu"]["kind"] == "human"
    assert await identities(store, world.workspace_id) == [("sub-lin", "lin-wu")]

    # Again, in another browser: the same account, nothing new.
    async with browser(srv) as b:
        assert (await b.sign_in()).status_code == 303
        assert (await b.call("WhoAmI")).json()["account"]["accountId"] == first
    assert len(await accounts(store, world.workspace_id)) == len(found)


async def test_a_taken_handle_is_made_unique(
    site: tuple[Any, World], idp: Provider, store: Store
) -> None:
    srv, _world = site
    idp.person("sub-ada-2", "ada@acme.test")  # "ada" is the world's first person
    async with browser(srv) as b:
        assert (await b.sign_in()).status_code == 303
        assert (await b.call("WhoAmI")).json()["account"]["handle"] == "ada-2"


async def test_an_account_an_admin_made_links_by_verified_email(
    site: tuple[Any, World], idp: Provider, store: Store
) -> None:
    srv, world = site
    await store.set_email(
        Operator(world.workspace_id), world.other_human.account_id, "Grace@Elsewhere.test"
    )
    idp.person("sub-grace", "grace@elsewhere.test")
    async with browser(srv) as b:
        assert (await b.sign_in()).status_code == 303
        me = (await b.call("WhoAmI")).json()
    assert me["account"]["accountId"] == str(world.other_human.account_id)
    assert await identities(store, world.workspace_id) == [("sub-grace", "grace")]


@pytest.mark.parametrize(
    ("who", "why"),
    [
        (("sub-x", "x@other.test", True), "no account for you"),
        (("sub-y", "y@acme.test", False), "no account for you"),
    ],
    ids=["refused domain", "unverified email"],
)
async def test_anyone_else_is_refused_and_nothing_is_created(
    site: tuple[Any, World], idp: Provider, store: Store, who: tuple[str, str, bool], why: str
) -> None:
    srv, world = site
    before = await accounts(store, world.workspace_id)
    idp.person(*who)
    async with browser(srv) as b:
        page = await b.sign_in()
        assert page.status_code == 403, page.text
        assert "You can&#x27;t sign in here" in page.text and why in page.text
        assert b.session is None
        assert (await b.call("WhoAmI")).status_code == 401
    assert await accounts(store, world.workspace_id) == before
    assert await identities(store, world.workspace_id) == []


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        ("tampered", "signature doesn&#x27;t verify"),
        ("expired", "has expired"),
        ("audience", "for another application"),
        ("nonce", "belongs to another sign-in"),
        ("issuer", "from another issuer"),
        ("unknown key", "a key the provider doesn&#x27;t publish"),
    ],
)
async def test_an_id_token_that_does_not_check_out_is_refused(
    site: tuple[Any, World], idp: Provider, store: Store, spoil: str, said: str
) -> None:
    from tests.oidc import _new_key

    srv, world = site
    idp.person("sub-eve", "eve@acme.test")
    if spoil == "tampered":
        idp.tamper = True
    elif spoil == "expired":
        idp.override = {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}
    elif spoil == "audience":
        idp.override = {"aud": "someone-else"}
    elif spoil == "nonce":
        idp.override = {"nonce": "another sign-in's"}
    elif spoil == "issuer":
        idp.override = {"iss": "http://127.0.0.1:1"}
    else:
        idp.sign_with = _new_key()
    async with browser(srv) as b:
        page = await b.sign_in()
        assert page.status_code == 401, page.text
        assert said in page.text
        assert "Traceback" not in page.text
        assert b.session is None
    assert "eve" not in await accounts(store, world.workspace_id)


async def test_sign_in_holds_when_the_provider_rotates_its_keys(
    site: tuple[Any, World], idp: Provider
) -> None:
    srv, _ = site
    idp.person("sub-rot", "rot@acme.test")
    async with browser(srv) as b:
        assert (await b.sign_in()).status_code == 303
    fetched = idp.jwks_fetches
    idp.rotate()
    idp.person("sub-rot", "rot@acme.test")
    async with browser(srv) as b:
        assert (await b.sign_in()).status_code == 303, "the new key was not fetched"
        assert (await b.call("WhoAmI")).json()["account"]["handle"] == "rot"
    assert idp.jwks_fetches == fetched + 1


async def test_a_callback_this_browser_did_not_start_is_refused(
    site: tuple[Any, World], idp: Provider
) -> None:
    srv, _ = site
    idp.person("sub-z", "z@acme.test")
    async with browser(srv) as victim, browser(srv) as attacker:
        # The attacker starts a sign-in and hands its callback to the victim.
        first = await attacker.http.get("/auth/login/test")
        back = await attacker.http.get(first.headers["location"])
        page = await victim.http.get(back.headers["location"])
        assert page.status_code == 400 and "wasn&#x27;t started in this browser" in page.text
        assert victim.session is None


async def test_a_cross_origin_call_carrying_the_cookie_is_refused(
    site: tuple[Any, World], idp: Provider
) -> None:
    srv, _world = site
    idp.person("sub-c", "c@acme.test")
    async with browser(srv) as b:
        await b.sign_in()
        assert (await b.call("WhoAmI")).status_code == 200
        for kind, call in [
            ("another origin", b.call("WhoAmI", origin="https://evil.example")),
            ("no origin", b.call("WhoAmI", origin=None)),
            ("no page header", b.call("WhoAmI", csrf=False)),
            (
                "a cross-site write",
                b.call(
                    "CreateChannel",
                    {"name": "pwned"},
                    service="compass.v1.CommsService",
                    origin="https://evil.example",
                ),
            ),
        ]:
            refused = await call
            assert refused.status_code == 403, kind
            assert refused.json()["code"] == "permission_denied", kind
        # The session's secret is no bearer token.
        async with httpx.AsyncClient(base_url=b.base) as other:
            bearer = await other.post(
                "/compass.v1.IdentityService/WhoAmI",
                content="{}",
                headers={
                    "content-type": "application/json",
                    "authorization": f"Bearer {b.session}",
                },
            )
        assert bearer.status_code == 401


async def test_sign_out_ends_the_session(site: tuple[Any, World], idp: Provider) -> None:
    srv, _ = site
    idp.person("sub-o", "o@acme.test")
    async with browser(srv) as b:
        await b.sign_in()
        secret = b.session
        assert (await b.call("WhoAmI")).status_code == 200
        cross = await b.http.post("/auth/logout", headers={"origin": "https://evil.example"})
        assert cross.status_code == 403
        out = await b.http.post("/auth/logout", headers={"origin": b.base, "x-compass-csrf": "1"})
        assert out.status_code == 204 and b.session is None
        # The old cookie, kept by someone, signs nothing in.
        b.http.cookies.set("compass_session", secret or "", domain="127.0.0.1")
        gone = await b.call("WhoAmI")
        assert gone.status_code == 401, gone.text


async def test_the_page_lists_the_providers(site: tuple[Any, World]) -> None:
    srv, _ = site
    async with browser(srv) as b:
        listed = (await b.http.get("/auth/providers")).json()
    assert listed == {
        "providers": [{"name": "test", "label": "Test ID", "login": "/auth/login/test"}]
    }


async def test_an_unknown_provider_is_a_readable_page(site: tuple[Any, World]) -> None:
    srv, _ = site
    async with browser(srv) as b:
        page = await b.http.get("/auth/login/nope")
    assert page.status_code == 404 and "no sign-in provider" in page.text


async def test_past_the_idle_time_a_session_signs_nothing_in(
    database_url: str, tmp_path: pathlib.Path, idp: Provider, store: Store
) -> None:
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    async with signin_server(
        database_url, tmp_path, [settings], signin_session_idle_seconds=1.0
    ) as srv:
        idp.person("sub-idle", "idle@acme.test")
        async with browser(srv) as b:
            assert (await b.sign_in()).status_code == 303
            assert (await b.call("WhoAmI")).status_code == 200
            await asyncio.sleep(1.5)
            gone = await b.call("WhoAmI")
            assert gone.status_code == 401 and "expired" in gone.json()["message"]
