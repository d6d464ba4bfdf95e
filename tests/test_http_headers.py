"""What every HTTP answer tells the browser: pages may not be framed (a
Content-Security-Policy with frame-ancestors 'none', no inline script, no
other origins; X-Frame-Options), Connect answers are never sniffed nor
cached; and under https the sign-in and session cookies are this host's
alone (`__Host-`), so a sibling origin can't toss one in."""

from __future__ import annotations

import contextlib
import http.server
import pathlib
import ssl
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import trustme

from compass_server.store import Store
from compass_server.store.types import Ask
from tests.browser import new_tab
from tests.oidc import Provider, free_port, provider
from tests.signin_flow import signin_server
from tests.test_people_sessions import session_for
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)


def policy(res: httpx.Response) -> dict[str, list[str]]:
    csp = res.headers.get("content-security-policy", "")
    out = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def assert_unframeable(res: httpx.Response, what: object) -> None:
    found = policy(res)
    assert found.get("frame-ancestors") == ["'none'"], (what, found)
    scripts = found.get("script-src", found.get("default-src"))
    assert scripts is not None and "'unsafe-inline'" not in scripts, (what, found)
    assert set(scripts) <= {"'self'", "'none'"}, (what, found)
    # No other origin anywhere in it.
    assert not any("://" in s or s == "*" for v in found.values() for s in v), (what, found)
    assert res.headers.get("x-frame-options") == "DENY", what
    assert res.headers.get("x-content-type-options") == "nosniff", what


@pytest.fixture
async def web(server: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as client:
        yield client


async def test_every_page_and_file_may_not_be_framed(
    web: httpx.AsyncClient, api_world: World
) -> None:
    w = api_world
    message = await w.post_ask(
        w.agent, Ask(questions=two_question_ask().questions, answerer_ids=(w.human.account_id,))
    )
    ask_id = next(b.ask_id for b in message.blocks if isinstance(b, Ask))
    link = await w.store.mint_ask_link(w.workspace_id, ask_id, w.human.account_id)
    for method, path in [
        ("GET", "/"),
        ("GET", "/index.html"),
        ("GET", "/app.js"),
        ("GET", "/app.css"),
        ("GET", "/sw.js"),
        ("GET", "/manifest.json"),
        ("GET", "/favicon.svg"),
        ("HEAD", "/"),
        ("GET", "/no-such-file"),
        ("POST", "/"),
        ("GET", f"/a/{link.secret}"),
        ("GET", "/a/cpl_unknown"),
        ("GET", "/auth/providers"),
        ("GET", "/auth/login/nope"),
        ("GET", "/auth/callback?state=x&code=y"),
        ("GET", "/slack/link/csl_x"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/inbox/x/files/y"),
    ]:
        res = await web.request(method, path)
        assert_unframeable(res, (method, path, res.status_code))


async def test_connect_answers_are_never_sniffed_nor_cached(
    web: httpx.AsyncClient, api_world: World
) -> None:
    token = api_world.tokens[api_world.human.account_id]
    calls = [
        ("/compass.v1.IdentityService/WhoAmI", {"authorization": f"Bearer {token}"}, b"{}"),
        ("/compass.v1.IdentityService/WhoAmI", {}, b"{}"),
        ("/compass.v1.IdentityService/WhoAmY", {}, b"{}"),
        ("/compass.v1.CommsService/ListChannels", {"authorization": f"Bearer {token}"}, b"{"),
    ]
    for path, headers, body in calls:
        res = await web.post(
            path, content=body, headers={"content-type": "application/json", **headers}
        )
        assert res.headers.get("x-content-type-options") == "nosniff", (path, res.status_code)
        assert res.headers.get("cache-control") == "no-store", (path, res.status_code)
    async with web.stream(
        "POST",
        "/compass.v1.CommsService/Subscribe",
        content=b"\x00\x00\x00\x00\x02{}",
        headers={"content-type": "application/connect+json", "authorization": f"Bearer {token}"},
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers.get("x-content-type-options") == "nosniff"
        assert stream.headers.get("cache-control") == "no-store"


@contextlib.contextmanager
def hostile_page(html: str) -> Iterator[int]:
    """A page on another port of the same host: what an attacker serves."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


async def test_a_page_on_another_port_cannot_frame_the_signed_in_app(
    browser: Any, server: Any, api_world: World
) -> None:
    w = api_world
    message = await w.post_ask(
        w.agent, Ask(questions=two_question_ask().questions, answerer_ids=(w.human.account_id,))
    )
    ask_id = next(b.ask_id for b in message.blocks if isinstance(b, Ask))
    link = await w.store.mint_ask_link(w.workspace_id, ask_id, w.human.account_id)
    secret = await session_for(w.store, w, w.human)
    app = f"http://127.0.0.1:{server.http_port}"
    html = (
        f'<iframe id="app" src="{app}/#/ask/{ask_id}" width="800" height="600"></iframe>'
        f'<iframe id="link" src="{app}/a/{link.secret}" width="800" height="600"></iframe>'
    )
    with hostile_page(html) as port:
        async with new_tab(browser, server) as tab:
            await tab.context.add_cookies(
                [{"name": "compass_session", "value": secret, "url": app, "httpOnly": True}]
            )
            # The app itself works under its policy, signed in by the cookie.
            refused: list[str] = []
            tab.on(
                "console",
                lambda m: refused.append(m.text) if "Content Security" in m.text else None,
            )
            await tab.goto(f"{app}/#/ask/{ask_id}")
            await tab.locator(f'.block-ask[data-ask-id="{ask_id}"]').wait_for()
            assert not refused, refused

            await tab.goto(f"http://127.0.0.1:{port}/")
            await tab.wait_for_timeout(1500)
            for frame in tab.frames[1:]:
                assert frame.url.startswith("chrome-error://") or frame.url == "about:blank", (
                    frame.url
                )
                assert await frame.locator("form, button").count() == 0, frame.url
    ask = (await w.store.get_ask(w.human, ask_id))[1]
    assert ask.is_open


# --- under https -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def idp() -> Iterator[Provider]:
    with provider() as p:
        yield p


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, pathlib.Path]:
    folder = tmp_path_factory.mktemp("pki")
    authority = trustme.CA()
    leaf = authority.issue_cert("127.0.0.1")
    (folder / "server.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    (folder / "key.pem").write_bytes(leaf.private_key_pem.bytes())
    return authority, folder


async def test_under_https_the_cookies_are_this_host_s_alone(
    database_url: str,
    tmp_path: pathlib.Path,
    idp: Provider,
    store: Store,
    ca: tuple[trustme.CA, pathlib.Path],
) -> None:
    authority, folder = ca
    world = await World.create(store)
    settings = idp.provider_settings(str(world.workspace_id), ["acme.test"])
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context()
    authority.configure_trust(context)
    async with signin_server(
        database_url,
        tmp_path,
        [settings],
        http_listen=f"127.0.0.1:{port}",
        public_url=base,
        tls_cert=folder / "server.pem",
        tls_key=folder / "key.pem",
    ) as srv:
        assert srv.http_port == port
        idp.person("sub-ann", "ann@acme.test", preferred_username="ann")
        async with httpx.AsyncClient(base_url=base, verify=context) as b:
            start = await b.get("/auth/login/test")
            assert start.status_code == 302, start.text
            kept = start.headers["set-cookie"]
            assert kept.startswith("__Host-compass_signin="), kept
            assert "Secure" in kept and "Path=/;" in kept + ";" and "Domain" not in kept
            back = await b.get(start.headers["location"])
            done = await b.get(back.headers["location"])
            assert done.status_code == 303, done.text
            session = next(
                v for k, v in done.headers.multi_items() if k == "set-cookie" and "session" in v
            )
            assert session.startswith("__Host-compass_session="), session
            assert "Secure" in session and "Path=/;" in session and "Domain" not in session
            secret = session.split(";")[0].split("=", 1)[1]

        page = {"x-compass-csrf": "1", "origin": base, "content-type": "application/json"}
        async with httpx.AsyncClient(base_url=base, verify=context) as other:
            ours = await other.post(
                "/compass.v1.IdentityService/WhoAmI",
                content=b"{}",
                headers={**page, "cookie": f"__Host-compass_session={secret}"},
            )
            assert ours.status_code == 200 and ours.json()["account"]["handle"] == "ann"
            # What a sibling origin can set (no prefix, any Domain) signs nobody in.
            tossed = await other.post(
                "/compass.v1.IdentityService/WhoAmI",
                content=b"{}",
                headers={**page, "cookie": f"compass_session={secret}"},
            )
            assert tossed.status_code == 401, tossed.text
            # Nor does a tossed attempt cookie start someone else's sign-in here.
            start = await other.get(
                "/auth/callback?state=x&code=y", headers={"cookie": "compass_signin=x"}
            )
            assert start.status_code == 400
