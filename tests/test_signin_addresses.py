"""A one-time sign-in address: the operator prints one for a person; opening
it shows whose it is and changes nothing; its button signs the browser in as
that person (an ordinary session) and takes it where the address says. It
works once, only before it expires, only for an active person."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from typing import Any

import httpx
import psycopg
import pytest

from compass_server.store.types import AccountKind
from tests.world import World

pytestmark = pytest.mark.timeout(120)

SERVER = os.path.join(os.path.dirname(sys.executable), "compass-server")


def admin(database_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPASS_")}
    return subprocess.run(
        [SERVER, "admin", *argv, "--database-url", database_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "COMPASS_PUBLIC_URL": "http://127.0.0.1:8080"},
    )


def address(database_url: str, account: Any, *more: str) -> str:
    done = admin(database_url, "sign-in-address", "--account", str(account), *more)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["account_id"] == str(account)
    return str(printed["url"])


def on(server: Any, url: str) -> str:
    """The printed address, on the test server's port."""
    return f"http://127.0.0.1:{server.http_port}{urllib.parse.urlsplit(url).path}"


async def who(server: Any, client: httpx.AsyncClient) -> str:
    r = await client.post(
        f"http://127.0.0.1:{server.http_port}/compass.v1.IdentityService/WhoAmI",
        json={},
        headers={
            "x-compass-csrf": "1",
            "origin": f"http://127.0.0.1:{server.http_port}",
        },
    )
    assert r.status_code == 200, r.text
    return str(r.json()["account"]["handle"])


async def test_an_address_signs_its_person_in_once_and_goes_where_it_says(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    ada = w.human.account_id
    url = address(database_url, ada, "--next", "/#/ask/ask_123")
    assert url.startswith("http://127.0.0.1:8080/auth/address/")
    origin = {"origin": f"http://127.0.0.1:{server.http_port}"}
    async with httpx.AsyncClient(timeout=30) as client:
        shown = await client.get(on(server, url))
        assert shown.status_code == 200
        handle = (await w.store.get_accounts(w.human, [ada]))[0].handle
        assert f"Sign in as {handle}" in shown.text
        # Looking changes nothing: a link preview can't use it up.
        assert (await client.get(on(server, url))).status_code == 200
        used = await client.post(on(server, url), headers=origin)
        assert used.status_code == 303
        assert used.headers["location"] == "/#/ask/ask_123"
        assert await who(server, client) == handle
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        kinds = await (
            await conn.execute(
                "SELECT kind, label FROM credentials WHERE account_id = %s AND kind = 'session'",
                (ada,),
            )
        ).fetchall()
    assert kinds == [("session", "sign-in address")]
    async with httpx.AsyncClient(timeout=30) as other:
        again = await other.post(on(server, url), headers=origin)
        assert again.status_code == 410
        assert "already used" in again.text
        assert "set-cookie" not in again.headers or "compass_session=;" in again.headers.get(
            "set-cookie", ""
        )


async def test_an_expired_unknown_or_foreign_posted_address_signs_nobody_in(
    server: Any, api_world: World, database_url: str
) -> None:
    w = api_world
    url = address(database_url, w.human.account_id, "--expires-in", "1")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE signin_addresses SET expires_at = now() - interval '1 s' WHERE account_id = %s",
            (w.human.account_id,),
        )
    origin = {"origin": f"http://127.0.0.1:{server.http_port}"}
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.post(on(server, url), headers=origin)
        assert r.status_code == 410 and "expired" in r.text
        unknown = url.rsplit("/", 1)[0] + "/csa_" + "x" * 43
        r = await client.post(on(server, unknown), headers=origin)
        assert r.status_code == 404
        fresh = address(database_url, w.human.account_id)
        # Another site's form can't sign this browser in as someone.
        r = await client.post(on(server, fresh), headers={"origin": "http://evil.test"})
        assert r.status_code == 403
        assert "set-cookie" not in r.headers
        r = await client.post(on(server, fresh), headers=origin)
        assert r.status_code == 303


async def test_only_an_active_person_gets_an_address(api_world: World, database_url: str) -> None:
    w = api_world
    done = admin(database_url, "sign-in-address", "--account", str(w.agent.account_id))
    assert done.returncode == 1
    assert "person" in json.loads(done.stderr)["error"]
    lin = await w.add_account("lin", AccountKind.HUMAN)
    off = admin(database_url, "deactivate-account", str(lin.account_id))
    assert off.returncode == 0, off.stderr
    done = admin(database_url, "sign-in-address", "--account", str(lin.account_id))
    assert done.returncode == 1 and "deactivated" in json.loads(done.stderr)["error"]
    bad = admin(
        database_url,
        "sign-in-address",
        "--account",
        str(w.human.account_id),
        "--next",
        "https://evil.test/",
    )
    assert bad.returncode == 1
    assert "--next" in json.loads(bad.stderr)["error"]


async def test_a_deactivated_persons_address_signs_nobody_in(
    server: Any, api_world: World, database_url: str
) -> None:
    lin = await api_world.add_account("lin", AccountKind.HUMAN)
    url = address(database_url, lin.account_id)
    assert admin(database_url, "deactivate-account", str(lin.account_id)).returncode == 0
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.post(
            on(server, url), headers={"origin": f"http://127.0.0.1:{server.http_port}"}
        )
    assert r.status_code == 403 and "deactivated" in r.text
    assert "set-cookie" not in r.headers
