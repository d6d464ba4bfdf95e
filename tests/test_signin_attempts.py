"""A sign-in under way lives in the browser that started it (a signed,
short-lived cookie), not in a table every client shares: a flood of
sign-in starts, from the very address a person signs in from, takes
nothing that person needs. The retired cap `signin.attempts_max` is
accepted with a warning."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from compass_server import config
from compass_server.store import Store
from tests.oidc import Provider, provider
from tests.signin_flow import browser, signin_server
from tests.test_config import cli
from tests.world import World

pytestmark = pytest.mark.timeout(180)

FLOOD = 500


@pytest.fixture(scope="module")
def idp() -> Iterator[Provider]:
    with provider() as p:
        yield p


def from_file(tmp_path: pathlib.Path, text: str) -> dict[str, Any]:
    """The settings an operator's file sets (what a server started with it gets)."""
    file = tmp_path / "compass.toml"
    file.write_text(text)
    loaded = config.load(path=file, env={})
    return {
        name: getattr(loaded.settings, name)
        for name, source in loaded.sources.items()
        if source != "default"
    }


async def test_a_flood_from_the_person_s_own_address_blocks_nobody(
    database_url: str, tmp_path: pathlib.Path, idp: Provider, store: Store
) -> None:
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    # An operator who had set the old cap low keeps a server that works.
    old = from_file(tmp_path, "[signin]\nattempts_max = 5\n")
    async with signin_server(database_url, tmp_path, [settings], **old) as srv:
        base = f"http://127.0.0.1:{srv.http_port}"
        limits = httpx.Limits(max_connections=16)
        timeout = httpx.Timeout(30, pool=None)
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=timeout) as flood:

            async def start() -> int:
                return (await flood.get("/auth/login/test")).status_code

            flooding = [asyncio.ensure_future(start()) for _ in range(FLOOD)]
            try:
                await asyncio.gather(*flooding[: FLOOD // 5])
                # The person signs in while the flood goes on, from the same address.
                idp.person("sub-lin", "lin@acme.test", preferred_username="lin")
                async with browser(srv) as person:
                    done = await person.sign_in()
                    assert done.status_code == 303, done.text
                    me = await person.call("WhoAmI")
                    assert me.status_code == 200 and me.json()["account"]["handle"] == "lin"
                codes = await asyncio.gather(*flooding)
            finally:
                for f in flooding:
                    f.cancel()
        assert set(codes) == {302}, sorted(set(codes))
        # And after it.
        idp.person("sub-lin", "lin@acme.test", preferred_username="lin")
        async with browser(srv) as person:
            assert (await person.sign_in()).status_code == 303


def _segments(token: str) -> list[bytes]:
    return [base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)) for p in token.split(".")]


async def test_the_attempt_is_the_browser_s_own_signed_and_short_lived(
    database_url: str, tmp_path: pathlib.Path, idp: Provider, store: Store
) -> None:
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    async with signin_server(database_url, tmp_path, [settings], signin_attempt_seconds=2.0) as srv:
        idp.person("sub-kim", "kim@acme.test", preferred_username="kim")
        async with browser(srv) as b:
            start = await b.http.get("/auth/login/test?return_to=/%23/inbox")
            assert start.status_code == 302
            attempt = b.http.cookies.get("compass_signin")
            assert attempt is not None
            set_cookie = start.headers["set-cookie"]
            assert "HttpOnly" in set_cookie and "Max-Age=2" in set_cookie
            # The cookie names the attempt but carries none of its secrets.
            head, claims, _ = _segments(attempt)
            said = json.loads(claims)
            assert json.loads(head)["alg"] == "HS256"
            query = httpx.URL(start.headers["location"]).params
            assert said["state"] == query["state"]
            assert query["nonce"] not in claims.decode()

            # Tampered (another return address): refused, nobody signed in.
            said["return_to"] = "/elsewhere"
            forged = ".".join(
                [
                    attempt.split(".")[0],
                    base64.urlsafe_b64encode(json.dumps(said).encode()).rstrip(b"=").decode(),
                    attempt.split(".")[2],
                ]
            )
            back = await b.http.get(start.headers["location"])
            b.http.cookies.set("compass_signin", forged, domain="127.0.0.1")
            refused = await b.http.get(back.headers["location"])
            assert refused.status_code == 400, refused.text
            assert "start again" in refused.text and b.session is None

        # Taken past its time: refused.
        async with browser(srv) as b:
            start = await b.http.get("/auth/login/test")
            back = await b.http.get(start.headers["location"])
            kept = b.http.cookies.get("compass_signin")
            await asyncio.sleep(2.5)
            b.http.cookies.set("compass_signin", kept or "", domain="127.0.0.1")
            late = await b.http.get(back.headers["location"])
            assert late.status_code == 400 and "took too long" in late.text
            assert b.session is None

        # In time, untouched: signed in, and sent where it asked.
        async with browser(srv) as b:
            start = await b.http.get("/auth/login/test?return_to=/%23/inbox")
            back = await b.http.get(start.headers["location"])
            done = await b.http.get(back.headers["location"])
            assert done.status_code == 303 and done.headers["location"] == "/#/inbox"
            assert (await b.call("WhoAmI")).json()["account"]["handle"] == "kim"
            # The callback used it up.
            assert b.http.cookies.get("compass_signin") is None


def test_the_retired_cap_is_accepted_with_a_warning(tmp_path: pathlib.Path) -> None:
    file = tmp_path / "compass.toml"
    file.write_text("[signin]\nattempts_max = 5\n")
    loaded = config.load(path=file, env={"COMPASS_SIGNIN_ATTEMPTS_MAX": "7"})
    first, second = loaded.warnings
    assert first.startswith(f"{file}: signin.attempts_max is no longer a setting: ")
    assert second.startswith("COMPASS_SIGNIN_ATTEMPTS_MAX is no longer a setting: ")
    assert "it is ignored" in first

    run = cli("config", "check", "--config", str(file), "--signin-attempts-max", "9")
    assert run.returncode == 0, run.stderr
    assert "attempts_max" not in run.stdout
    warned = [line for line in run.stderr.splitlines() if "no longer a setting" in line]
    assert len(warned) == 2, run.stderr
    assert "--signin-attempts-max is no longer a setting" in run.stderr
    # Nothing else about it: not an unknown variable, not an error.
    run = cli("config", "check", COMPASS_SIGNIN_ATTEMPTS_MAX="3")
    assert run.returncode == 0, run.stderr
    assert "is not a variable Compass reads" not in run.stderr
    assert "COMPASS_SIGNIN_ATTEMPTS_MAX is no longer a setting" in run.stderr


async def test_a_return_address_too_long_for_a_cookie_goes_home(
    database_url: str, tmp_path: pathlib.Path, idp: Provider, store: Store
) -> None:
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    async with signin_server(database_url, tmp_path, [settings]) as srv:
        idp.person("sub-max", "max@acme.test", preferred_username="max")
        async with browser(srv) as b:
            start = await b.http.get("/auth/login/test", params={"return_to": "/é" * 999})
            assert start.status_code == 302
            assert len(start.headers["set-cookie"]) < 4000
            back = await b.http.get(start.headers["location"])
            done = await b.http.get(back.headers["location"])
            assert done.status_code == 303 and done.headers["location"] == "/"
