"""Bad input on the people-facing HTTP routes (sign-in, sign-out, one-ask
links, Slack, the page's files), as a hostile or broken client sends it:
every answer is a clear 4xx page or text, and nothing is logged as a
server fault."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from compass_server.store import Store
from tests.http_site import Site, no_tracebacks, site_server, slack_body, slack_headers
from tests.oidc import Provider, provider
from tests.slack_standin import SlackStandIn

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def idp() -> Iterator[Provider]:
    with provider() as p:
        yield p


@pytest.fixture(scope="module")
async def standin() -> AsyncIterator[SlackStandIn]:
    s = await SlackStandIn().start()
    yield s
    await s.close()


@pytest.fixture(scope="module")
async def site(
    database_url: str,
    tmp_path_factory: pytest.TempPathFactory,
    store: Store,
    idp: Provider,
    standin: SlackStandIn,
) -> AsyncIterator[Site]:
    async with site_server(database_url, tmp_path_factory.mktemp("site"), store, idp, standin) as s:
        yield s


@pytest.fixture
async def http(site: Site) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=site.base, timeout=10) as client:
        yield client


def page_of(site: Site, cookie: str) -> dict[str, str]:
    """What the page sends with a call: its cookie, its header, its Origin."""
    return {"cookie": f"compass_session={cookie}", "x-compass-csrf": "1", "origin": site.base}


@pytest.mark.parametrize("which", ["garbage", "signed out", "non-ASCII", "empty"])
async def test_signing_out_a_session_that_is_gone_clears_the_cookie(
    site: Site, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, which: str
) -> None:
    cookie = {
        "garbage": "not-a-session",
        "signed out": site.revoked,
        "non-ASCII": "%C3%A9\u00e9",
        "empty": '""',
    }[which]
    with no_tracebacks(caplog):
        headers = {**page_of(site, cookie), "cookie": f"compass_session={cookie}".encode()}
        out = await http.post("/auth/logout", headers=headers)
    assert out.status_code == 204, out.text
    assert "Max-Age=0" in out.headers["set-cookie"]


@pytest.mark.parametrize("which", ["garbage", "signed out"])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_connecting_slack_with_a_session_that_is_gone_asks_to_sign_in(
    site: Site, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, which: str, method: str
) -> None:
    cookie = {"garbage": "not-a-session", "signed out": site.revoked}[which]
    with no_tracebacks(caplog):
        page = await http.request(
            method, "/slack/link/abc", headers={**page_of(site, cookie), "origin": site.base}
        )
    assert page.status_code == 401, page.text
    assert "Sign in to connect Slack" in page.text


@pytest.mark.parametrize("state", ["%C3%A9", "%00", "%FF%FE", "a" * 300])
async def test_a_callback_with_a_strange_state_is_refused(
    site: Site, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, state: str
) -> None:
    with no_tracebacks(caplog):
        page = await http.get(
            f"/auth/callback?state={state}&code=x",
            headers={"cookie": "compass_signin=abc"},
        )
    assert page.status_code == 400, page.text
    assert "start again" in page.text


async def test_an_unknown_provider_is_not_found(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with no_tracebacks(caplog):
        for name in ("nope", "%00", "\u00e9", "a" * 300):
            page = await http.get(f"/auth/login/{name}")
            assert page.status_code == 404, (name, page.text)
            assert "no sign-in provider" in page.text


@pytest.mark.parametrize(
    "path",
    ["/%00", "/a%00b.js", "/" + "a" * 300, "/" + "a/" * 2000, "/%FF", "/..%2F..%2Fetc%2Fpasswd"],
)
async def test_a_strange_path_on_the_page_s_files_is_not_found(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    with no_tracebacks(caplog):
        for method in ("GET", "HEAD"):
            res = await http.request(method, path)
            assert res.status_code == 404, (path, method, res.status_code)


@pytest.mark.parametrize("code", ["%FF", "%00", "%C3%A9", "a" * 300, "%ED%A0%80"])
@pytest.mark.parametrize("where", ["/a/", "/slack/link/"])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_strange_link_is_not_found(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    where: str,
    code: str,
    method: str,
) -> None:
    with no_tracebacks(caplog):
        res = await http.request(
            method, where + code, headers={"cookie": f"compass_session={site.session}"}
        )
    assert res.status_code == 404, (where, code, res.status_code, res.text)


def deep(team: str, n: int) -> str:
    return '{"team": {"id": "' + team + '"}, "x": ' + "[" * n + "]" * n + "}"


@pytest.mark.parametrize(
    ("what", "body", "stamp"),
    [
        ("a timestamp that is no number", None, "soon"),
        ("a timestamp of other digits", None, "\u00b2\u0663"),
        ("a timestamp past any clock", None, "9" * 400),
        ("a NUL in the team", slack_body({"team": {"id": "T\x00"}}), None),
        ("a non-ASCII team", slack_body({"team": {"id": "T\u00e9\ud800"}}), None),
        ("a team that is a number", slack_body({"team": {"id": 7}, "user": "U1"}), None),
        ("a team that is a list", slack_body({"team": ["T1"], "user": {"team_id": []}}), None),
        ("5,000-deep nesting", "deep", None),
        ("no UTF-8", b"payload=%FF%FE", None),
        ("a payload that is no object", slack_body("[1, 2]"), None),
    ],
)
async def test_slack_requests_that_are_not_slack_s_are_refused_before_anything_is_read(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    what: str,
    body: bytes | str | None,
    stamp: str | None,
) -> None:
    if body is None:
        body = slack_body({"type": "block_actions", "team": {"id": site.team}})
    elif body == "deep":
        body = slack_body(deep(site.team, 5000))
    assert isinstance(body, bytes)
    headers = slack_headers(body)
    if stamp is not None:
        headers["x-slack-request-timestamp"] = stamp
    with no_tracebacks(caplog):
        res = await http.post(
            "/slack/interactivity",
            content=body,
            headers={k: v.encode("utf-8", "surrogateescape") for k, v in headers.items()},  # type: ignore[misc]
        )
    assert res.status_code in (400, 401), (what, res.status_code, res.text)
    assert "incident" not in res.text


@pytest.mark.parametrize(
    ("what", "payload"),
    [
        ("a user that is text", {"type": "block_actions", "user": "U1", "actions": [{}]}),
        ("a user that is a list", {"type": "view_submission", "user": ["U1"], "view": {}}),
        ("a view that is a list", {"type": "view_submission", "user": {"id": "U1"}, "view": []}),
        (
            "a view with blocks that are text",
            {"type": "view_submission", "user": {"id": "U1"}, "view": {"blocks": "x"}},
        ),
        (
            "a state that is text",
            {
                "type": "view_submission",
                "user": {"id": "U1"},
                "view": {"private_metadata": '{"a": "ask"}', "state": "x"},
            },
        ),
        (
            "values that are a list",
            {
                "type": "view_submission",
                "user": {"id": "U1"},
                "view": {"private_metadata": '{"a": "ask"}', "state": {"values": [1]}},
            },
        ),
        (
            "metadata that is a list",
            {"type": "view_submission", "user": {"id": "U1"}, "view": {"private_metadata": "[]"}},
        ),
        ("actions that are text", {"type": "block_actions", "user": {"id": "U1"}, "actions": "x"}),
        ("a channel that is text", {"type": "block_actions", "user": {"id": "U1"}, "channel": 5}),
    ],
)
async def test_signed_slack_payloads_of_the_wrong_shape_are_refused(
    site: Site, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, what: str, payload: Any
) -> None:
    body = slack_body({"team": {"id": site.team}, **payload})
    with no_tracebacks(caplog):
        res = await http.post("/slack/interactivity", content=body, headers=slack_headers(body))
        # A click is handled after the answer: give it the time to fail.
        await asyncio.sleep(0.2)
    assert res.status_code in (200, 400), (what, res.status_code, res.text)
    assert "incident" not in res.text
    if res.status_code == 200 and res.content:
        said = json.loads(res.content)
        assert said.get("response_action") == "errors", said


async def test_the_routes_still_serve_after_all_that(site: Site, http: httpx.AsyncClient) -> None:
    assert (await http.get(f"/a/{site.link}")).status_code == 200
    assert (await http.get("/")).status_code == 200


@pytest.mark.parametrize("where", ["link", "slack"])
async def test_a_body_that_stalls_is_timed_out(
    site: Site, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A client that promises a body and never sends it all gets 408, not a
    connection held open for ever."""
    from compass_server.transport import people_http

    monkeypatch.setattr(people_http, "BODY_SECONDS", 0.5)
    path = f"/a/{site.link}" if where == "link" else "/slack/interactivity"
    reader, writer = await asyncio.open_connection("127.0.0.1", site.server.http_port)
    with no_tracebacks(caplog):
        writer.write(
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100000\r\n"
            "content-type: application/x-www-form-urlencoded\r\n\r\nask_id=".encode()
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status.startswith(b"HTTP/1.1 408"), status
