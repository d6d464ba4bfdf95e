"""Every people-facing HTTP route (not Connect: tests/test_fuzz_connect.py)
as a careless or hostile client calls it: odd methods, paths of any bytes,
query strings, cookies, headers and bodies, Slack requests signed and not.
No answer is a 5xx, and nothing is logged as a server fault.

Each test below runs its own share of examples; together they are at least
`TOTAL_EXAMPLES` inputs per run (one profile, no environment needed).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from typing import Any

import h11
import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass_server.store import Store
from compass_server.store.types import Ask
from tests.http_site import (
    MAIL_DOMAIN,
    MAIL_SECRET,
    Site,
    site_server,
    slack_body,
    slack_headers,
)
from tests.oidc import Provider, provider
from tests.slack_standin import SlackStandIn
from tests.world import two_question_ask

pytestmark = pytest.mark.timeout(600)

TOTAL_EXAMPLES = 10_000
# The routes' shares of the examples.
SHARES = {
    "files": 1_250,
    "pictures": 500,
    "auth": 1_250,
    "callback": 1_000,
    "logout": 1_000,
    "link": 1_500,
    "mail": 500,
    "slack_commands": 500,
    "slack": 1_500,
    "slack_link": 1_000,
    "address": 500,
    "hooks": 1_500,
}
assert sum(SHARES.values()) >= TOTAL_EXAMPLES


def fuzzing(share: str) -> Any:
    return settings(
        max_examples=SHARES[share],
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


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
    idp.person("sub-fuzz", "fuzz@acme.test")
    async with site_server(database_url, tmp_path_factory.mktemp("fuzz"), store, idp, standin) as s:
        yield s


@pytest.fixture(scope="module")
async def http(site: Site) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=site.base, timeout=10) as client:
        yield client


@pytest.fixture
def faults(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """What was logged at ERROR or with a traceback, as the fuzzer goes."""
    caplog.set_level(logging.INFO)
    found: list[str] = []
    yield found
    found += _faults(caplog.records)
    assert not found, found[:5]


def _faults(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.name}: {r.getMessage()}"
        for r in records
        if r.levelno >= logging.ERROR or r.exc_info is not None
    ]


async def _sent(
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
) -> httpx.Response | None:
    """The answer, checked: no 5xx, nothing logged as a fault. None when the
    client library itself won't send such a request."""
    start = len(caplog.records)
    clean = [(k, v) for k, v in headers or [] if not set(v) & {0, 10, 13}]
    try:
        res = await http.request(method, path, headers=clean, content=body)
    except (
        httpx.LocalProtocolError,
        httpx.UnsupportedProtocol,
        httpx.InvalidURL,
        h11.LocalProtocolError,
    ):
        return None
    what = (method, path, clean, body[:200])
    assert res.status_code < 500, (what, res.status_code, res.text[:300])
    assert "Traceback" not in res.text, what
    assert not _faults(caplog.records[start:]), (what, _faults(caplog.records[start:]))
    return res


# --- what a client may send -------------------------------------------------------------

METHODS = st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "FOO"])
ODD = "\x00\x01\x1b\x7f\x85\u2028\ufeff\n\t%/\\.é😀\"'<>&;=?#"
# A segment of a path or a value of a query, as the bytes on the wire: any
# bytes percent-encoded (invalid UTF-8, NUL), odd text, or very long.
raw_bytes = st.binary(max_size=24).map(lambda b: urllib.parse.quote_from_bytes(b, safe=""))
odd_text = st.text(alphabet=st.sampled_from(ODD + "abc"), max_size=12).map(
    lambda t: urllib.parse.quote(t, safe="")
)
long_text = st.integers(200, 400).map(lambda n: "a" * n)
segment = raw_bytes | odd_text | long_text | st.sampled_from(["", ".", "..", "%2e%2e", "%2F"])
query = st.lists(st.tuples(segment, segment), max_size=4).map(
    lambda pairs: "&".join(f"{k}={v}" for k, v in pairs)
)
header_value = st.binary(max_size=40) | st.sampled_from(
    [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"", b"1", b"a" * 300]
)
cookie_value = (
    st.binary(max_size=60).map(lambda b: b.replace(b";", b""))
    | st.sampled_from([b"", b'""', b"\xe9", b"a" * 300])
    | st.text(alphabet=st.sampled_from(ODD + "abc"), max_size=20).map(
        lambda t: t.encode("utf-8", "surrogatepass")
    )
)
COOKIE_NAMES = [b"compass_session", b"compass_signin", b"__Host-compass_session", b"x"]


@st.composite
def cookies(draw: st.DrawFn, site_cookies: list[bytes]) -> list[tuple[bytes, bytes]]:
    """A Cookie header: odd values, or the site's real ones (a live session,
    a signed-out one)."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(COOKIE_NAMES))
        value = draw(cookie_value | st.sampled_from(site_cookies))
        parts.append(name + b"=" + value)
    return [(b"cookie", b"; ".join(parts))] if parts else []


HEADER_NAMES = st.sampled_from(
    [
        b"origin",
        b"x-compass-csrf",
        b"content-type",
        b"authorization",
        b"host",
        b"x-slack-request-timestamp",
        b"x-slack-signature",
        b"user-agent",
        b"referer",
    ]
)


def extra_headers() -> st.SearchStrategy[list[tuple[bytes, bytes]]]:
    return st.lists(st.tuples(HEADER_NAMES, header_value), max_size=3)


def site_cookies(site: Site) -> list[bytes]:
    return [site.session.encode(), site.revoked.encode(), site.link.encode()]


def deep_json(n: int) -> str:
    return "[" * n + "]" * n


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(["id", "type", "user"]), inner)
    ),
    max_leaves=10,
)

# --- the page's files and the server's own pages ----------------------------------------


@fuzzing("files")
@given(
    method=METHODS,
    segments=st.lists(segment, max_size=5),
    known=st.sampled_from(
        ["", "app.js", "index.html", "healthz", "readyz", "metrics", ".well-known/jwks.json"]
    ),
    q=query,
    extra=extra_headers(),
)
async def test_fuzzed_paths_on_the_page_s_files(
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    segments: list[str],
    known: str,
    q: str,
    extra: list[tuple[bytes, bytes]],
) -> None:
    path = "/" + "/".join([known, *segments] if segments else [known])
    await _sent(http, caplog, method, path + ("?" + q if q else ""), headers=extra)


@fuzzing("pictures")
@given(
    method=METHODS,
    item=segment,
    attachment=segment,
    authorization=header_value,
)
async def test_fuzzed_picture_addresses(
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    item: str,
    attachment: str,
    authorization: bytes,
) -> None:
    await _sent(
        http,
        caplog,
        method,
        f"/inbox/{item}/files/{attachment}",
        headers=[(b"authorization", authorization)],
    )


# --- signing in and out -------------------------------------------------------------------


@fuzzing("auth")
@given(
    method=METHODS,
    where=st.sampled_from(["/auth/login/", "/auth/providers", "/auth/", "/auth/login/test"]),
    name=segment | st.just("test"),
    q=query
    | st.tuples(segment).map(lambda t: f"return_to={t[0]}")
    | st.sampled_from(
        ["return_to=//evil.example", "return_to=/%0d%0a", "return_to=" + "/a" * 1500]
    ),
    data=st.data(),
)
async def test_fuzzed_sign_in_starts(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    where: str,
    name: str,
    q: str,
    data: st.DataObject,
) -> None:
    path = where + (name if where.endswith("/login/") else "")
    headers = data.draw(cookies(site_cookies(site))) + data.draw(extra_headers())
    res = await _sent(http, caplog, method, f"{path}?{q}", headers=headers)
    if res is not None and res.status_code == 302:
        location = res.headers["location"]
        assert location.startswith(site.server.settings.signin_providers[0].issuer), location


@fuzzing("callback")
@given(
    method=METHODS,
    q=query
    | st.tuples(segment, segment).map(lambda t: f"state={t[0]}&code={t[1]}")
    | st.tuples(segment).map(lambda t: f"error={t[0]}&error_description={t[0]}"),
    data=st.data(),
)
async def test_fuzzed_callbacks(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    q: str,
    data: st.DataObject,
) -> None:
    headers = data.draw(cookies(site_cookies(site))) + data.draw(extra_headers())
    res = await _sent(http, caplog, method, f"/auth/callback?{q}", headers=headers)
    if res is not None:
        # Nobody is signed in by a callback nobody started.
        assert "compass_session=" not in res.headers.get("set-cookie", "").replace(
            "compass_session=;", ""
        ), res.headers


@fuzzing("logout")
@given(method=METHODS, body=st.binary(max_size=64), data=st.data())
async def test_fuzzed_sign_outs(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    body: bytes,
    data: st.DataObject,
) -> None:
    # Never the live session: signing it out would leave the rest nothing to attack.
    jar = [c for c in site_cookies(site) if c != site.session.encode()]
    headers = data.draw(cookies(jar)) + data.draw(extra_headers())
    if data.draw(st.booleans()):
        headers += [(b"origin", site.base.encode()), (b"x-compass-csrf", b"1")]
    await _sent(http, caplog, method, "/auth/logout", headers=headers, body=body)


@fuzzing("address")
@given(method=METHODS, secret=segment, body=st.binary(max_size=64), data=st.data())
async def test_fuzzed_sign_in_addresses(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    secret: str,
    body: bytes,
    data: st.DataObject,
) -> None:
    headers = data.draw(cookies(site_cookies(site))) + data.draw(extra_headers())
    if data.draw(st.booleans()):
        headers.append((b"origin", site.base.encode()))
    await _sent(http, caplog, method, f"/auth/address/{secret}", headers=headers, body=body)


# --- a one-ask link's page and form ----------------------------------------------------------


class Links:
    """The site's link to an open ask; a new ask and link once it has ended."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.ask_id = site.ask_id
        self.secret = site.link

    async def renew(self) -> None:
        w = self.site.world
        message = await w.post_ask(
            w.agent, Ask(questions=two_question_ask().questions, answerer_ids=(w.human.account_id,))
        )
        self.ask_id = next(b.ask_id for b in message.blocks if isinstance(b, Ask))
        link = await w.store.mint_ask_link(w.workspace_id, self.ask_id, w.human.account_id)
        self.secret = link.secret


@pytest.fixture(scope="module")
def links(site: Site) -> Links:
    return Links(site)


form_text = st.text(max_size=20) | st.text(alphabet=st.sampled_from(ODD + "ab"), max_size=10)
FIELDS = ["ask_id", "action", "q.db", "q.langs", "t.db", "t.langs", "reason", "x"]


@st.composite
def forms(draw: st.DrawFn, ask_id: str) -> bytes:
    pairs = []
    for _ in range(draw(st.integers(0, 6))):
        key = draw(st.sampled_from(FIELDS) | form_text)
        value = draw(
            form_text | st.sampled_from(["answer", "decline", "pg", "my", "py", "go", ask_id])
        )
        pairs.append((key, value))
    encoded = urllib.parse.urlencode(pairs, encoding="utf-8", errors="surrogatepass")
    return encoded.encode() if draw(st.booleans()) else draw(st.binary(max_size=80))


@st.composite
def link_answers(draw: st.DrawFn, ask_id: str) -> bytes:
    """What the link's page or a notification's tap sends, whole or mangled."""
    answer = st.fixed_dictionaries(
        {},
        optional={
            "questionId": st.sampled_from(["db", "langs", "x", ""]) | json_values,
            "chosenOptionIds": st.lists(st.sampled_from(["pg", "my", "py", "go"]) | form_text)
            | json_values,
            "customText": form_text | json_values,
        },
    )
    body = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "askId": st.just(ask_id) | form_text | json_values,
                "action": st.sampled_from(["answer", "decline", "x"]) | json_values,
                "answers": st.lists(answer, max_size=3) | json_values,
                "reason": form_text | json_values,
                "tap": st.booleans() | json_values,
            },
        )
        | json_values
    )
    return json.dumps(body).encode() if draw(st.integers(0, 9)) else draw(st.binary(max_size=80))


@fuzzing("link")
@given(
    method=METHODS,
    which=st.sampled_from(["real", "real", "real", "odd"]),
    odd=segment,
    q=query | st.tuples(segment).map(lambda t: f"choose={t[0]}"),
    as_json=st.booleans(),
    data=st.data(),
)
async def test_fuzzed_link_pages_and_answers(
    site: Site,
    links: Links,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    which: str,
    odd: str,
    q: str,
    as_json: bool,
    data: st.DataObject,
) -> None:
    secret = links.secret if which == "real" else odd
    body = b""
    if method == "POST":
        body = data.draw(link_answers(links.ask_id) if as_json else forms(links.ask_id))
    headers = data.draw(cookies(site_cookies(site))) + data.draw(extra_headers())
    kind = b"application/json" if as_json else b"application/x-www-form-urlencoded"
    headers.append((b"content-type", kind))
    res = await _sent(http, caplog, method, f"/a/{secret}?{q}", headers=headers, body=body)
    if res is not None and which == "real" and method == "POST" and res.status_code == 200:
        # Answered or declined: the next examples need an open ask.
        await links.renew()


# --- Slack ------------------------------------------------------------------------------


@st.composite
def slack_payloads(draw: st.DrawFn, team: str) -> Any:
    kind = draw(st.sampled_from(["block_actions", "view_submission", "other", None]))
    payload: dict[str, Any] = {"team": {"id": team}}
    if kind is not None:
        payload["type"] = kind
    for key in draw(st.lists(st.sampled_from(["user", "view", "actions", "channel"]), max_size=4)):
        payload[key] = draw(
            json_values
            | st.fixed_dictionaries(
                {"id": json_values, "blocks": json_values, "state": json_values}
            )
            | st.just({"id": "U1"})
        )
    return payload


@fuzzing("slack")
@given(
    how=st.sampled_from(["signed", "signed", "unsigned", "raw", "deep"]),
    raw=st.binary(max_size=80),
    stamp=st.none() | st.sampled_from(["", "x", "-1", "1e9", "9" * 40]),
    extra=extra_headers(),
    data=st.data(),
)
async def test_fuzzed_slack_interactions(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    how: str,
    raw: bytes,
    stamp: str | None,
    extra: list[tuple[bytes, bytes]],
    data: st.DataObject,
) -> None:
    if how == "raw":
        body = raw
    elif how == "deep":
        body = slack_body('{"team": {"id": "' + site.team + '"}, "x": ' + deep_json(3000) + "}")
    else:
        body = slack_body(data.draw(slack_payloads(site.team) | json_values))
    headers = [(k.encode(), v.encode()) for k, v in slack_headers(body).items()]
    if how == "unsigned":
        headers = headers[:1]
    if stamp is not None:
        headers = [
            (k, stamp.encode() if k == b"x-slack-request-timestamp" else v) for k, v in headers
        ]
    await _sent(http, caplog, "POST", "/slack/interactivity", headers=headers + extra, body=body)
    # A click is handled after the answer: give a failing one the time to be logged.
    await asyncio.sleep(0)


@fuzzing("slack_link")
@given(method=METHODS, code=segment, body=st.binary(max_size=40), data=st.data())
async def test_fuzzed_slack_link_pages(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    code: str,
    body: bytes,
    data: st.DataObject,
) -> None:
    headers = data.draw(cookies(site_cookies(site))) + data.draw(extra_headers())
    if data.draw(st.booleans()):
        headers.append((b"origin", site.base.encode()))
    await _sent(http, caplog, method, f"/slack/link/{code}", headers=headers, body=body)


# --- replies by mail, and Slack's slash command -----------------------------------------


@pytest.fixture(scope="module")
async def reply_address(site: Site) -> str:
    """A reply address of the site's person for its ask (a two-question ask:
    a reply from them is told to open the page, and answers nothing)."""
    w = site.world
    async with await psycopg.AsyncConnection.connect(site.server.database_url) as conn:
        await conn.execute(
            "UPDATE accounts SET email = 'ada@site.test' WHERE id = %s", (w.human.account_id,)
        )
    token = await site.server.store.mail_reply_token(
        w.workspace_id, site.ask_id, w.human.account_id
    )
    return f"ask+{token}@{MAIL_DOMAIN}"


MAIL_FIELDS = ["from", "to", "subject", "text", "html", "envelope", "SPF", "dkim", "headers"]


@st.composite
def mail_form(draw: st.DrawFn, address: str) -> dict[str, str]:
    odd = st.text(max_size=30) | st.sampled_from(
        [
            address,
            "ada@site.test",
            "Ada <ada@site.test>",
            "1",
            "decline: x",
            '{"to": ["' + address + '"], "from": "ada@site.test"}',
            '{"to": 1}',
            "[",
            "{@site.test : pass}",
            "pass",
            "Auto-Submitted: auto-replied\nAuthentication-Results: x; dkim=fail",
            "<p>1</p>",
        ]
    )
    keys = draw(st.lists(st.sampled_from(MAIL_FIELDS), max_size=9, unique=True))
    return {k: draw(odd) for k in keys}


def multipart(form: dict[str, str]) -> tuple[bytes, bytes]:
    boundary = "compass-fuzz-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode()
        + v.encode("utf-8", "surrogatepass")
        + b"\r\n"
        for k, v in form.items()
    ]
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}".encode()


@fuzzing("mail")
@given(
    method=METHODS,
    how=st.sampled_from(["multipart", "multipart", "urlencoded", "raw", "json"]),
    keyed=st.sampled_from(["query", "bearer", "basic", "wrong", "none"]),
    raw=st.binary(max_size=80),
    extra=extra_headers(),
    data=st.data(),
)
async def test_fuzzed_inbound_mail(
    site: Site,
    http: httpx.AsyncClient,
    reply_address: str,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    how: str,
    keyed: str,
    raw: bytes,
    extra: list[tuple[bytes, bytes]],
    data: st.DataObject,
) -> None:
    form = data.draw(mail_form(reply_address))
    if how == "multipart":
        body, kind = multipart(form)
    elif how == "urlencoded":
        body, kind = urllib.parse.urlencode(form).encode(), b"application/x-www-form-urlencoded"
    elif how == "json":
        body, kind = json.dumps(form).encode(), b"application/json"
    else:
        body, kind = raw, data.draw(header_value)
    headers = [(b"content-type", kind)]
    path = "/mail/inbound"
    if keyed == "query":
        path += f"?key={MAIL_SECRET}"
    elif keyed == "bearer":
        headers.append((b"authorization", f"Bearer {MAIL_SECRET}".encode()))
    elif keyed == "basic":
        headers.append(
            (b"authorization", b"Basic " + base64.b64encode(f"x:{MAIL_SECRET}".encode()))
        )
    elif keyed == "wrong":
        path += "?" + data.draw(query)
    extra = [(k, v) for k, v in extra if k not in (b"content-type", b"authorization")]
    res = await _sent(http, caplog, method, path, headers=headers + extra, body=body)
    if res is not None and method == "POST" and keyed in ("query", "bearer", "basic"):
        assert res.status_code in (200, 400, 413), (form, res.status_code, res.text[:200])


@fuzzing("slack_commands")
@given(
    how=st.sampled_from(["signed", "signed", "unsigned", "raw"]),
    raw=st.binary(max_size=80),
    fields=st.dictionaries(
        st.sampled_from(["team_id", "user_id", "text", "command", "channel_id"]),
        st.text(max_size=20)
        | st.sampled_from(["U1", "link", "link ABCD-2345", "link " + "A" * 300, "T", "x y z"]),
    ),
    team=st.booleans(),
    extra=extra_headers(),
)
async def test_fuzzed_slack_commands(
    site: Site,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    how: str,
    raw: bytes,
    fields: dict[str, str],
    team: bool,
    extra: list[tuple[bytes, bytes]],
) -> None:
    if team:
        fields = {**fields, "team_id": site.team}
    body = raw if how == "raw" else urllib.parse.urlencode(fields).encode()
    headers = [(k.encode(), v.encode()) for k, v in slack_headers(body).items()]
    if how == "unsigned":
        headers = headers[:1]
    await _sent(http, caplog, "POST", "/slack/commands", headers=headers + extra, body=body)


# --- the harnesses' hook endpoints --------------------------------------------------

HOOK_KEYS = [
    "hook_event_name",
    "tool_name",
    "tool_input",
    "session_id",
    "cwd",
    "command",
    "questions",
    "question",
    "options",
    "label",
    "multiSelect",
    "type",
    "thread-id",
    "last-assistant-message",
]
odd_string = st.text(alphabet=st.sampled_from(ODD + "abc"), max_size=20) | st.sampled_from(
    ["PermissionRequest", "PreToolUse", "AskUserQuestion", "Bash", "agent-turn-complete", "\ud800"]
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | odd_string,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(HOOK_KEYS) | odd_string, inner, max_size=5)
    ),
    max_leaves=20,
)


@st.composite
def hook_bodies(draw: st.DrawFn) -> bytes:
    """A hook input near the real one, any JSON, or any bytes."""
    import json as _json

    near = {
        "session_id": "s",
        "cwd": "/r",
        "hook_event_name": draw(st.sampled_from(["PermissionRequest", "PreToolUse"]) | odd_string),
        "tool_name": draw(st.sampled_from(["Bash", "Read", "AskUserQuestion"]) | odd_string),
        "tool_input": draw(
            st.fixed_dictionaries({"command": odd_string})
            | st.fixed_dictionaries({"questions": json_value})
            | json_value
        ),
    }
    for key in draw(st.lists(st.sampled_from(list(near)), max_size=2)):
        near[key] = draw(json_value)
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    value = near if choice < 3 else draw(json_value)
    return _json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
async def quiet_hook(site: Site) -> str:
    """A hook token whose policy never asks: every well-formed request is
    answered at once, so the fuzzer never waits on a person."""
    from compass_server.hooks import policy
    from compass_server.store.hooks import HookStore
    from compass_server.store.types import Operator

    w = site.world
    issued, _ = await HookStore(w.store.db, w.store.admin).create_hook_token(
        Operator(w.workspace_id),
        w.agent.account_id,
        w.channel.channel_id,
        policy.parse('[[rules]]\nname = "all"\nask = false\n'),
    )
    return issued.secret


@fuzzing("hooks")
@given(
    method=METHODS,
    harness=st.sampled_from(["claude-code", "codex"]) | segment,
    q=query
    | st.sampled_from(["timeout=1e309", "timeout=-1", "fallback=", "timeout=600&fallback=deny"]),
    body=hook_bodies(),
    token=st.sampled_from(["quiet", "account", "none"]) | header_value,
)
async def test_fuzzed_hook_requests(
    site: Site,
    quiet_hook: str,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    faults: list[str],
    method: str,
    harness: str,
    q: str,
    body: bytes,
    token: str | bytes,
) -> None:
    if token == "quiet":
        auth = f"Bearer {quiet_hook}".encode()
    elif token == "account":
        auth = f"Bearer {site.world.tokens[site.world.agent.account_id]}".encode()
    elif token == "none":
        auth = b""
    else:
        assert isinstance(token, bytes)
        auth = b"Bearer " + token
    res = await _sent(
        http,
        caplog,
        method,
        f"/hooks/{harness}" + ("?" + q if q else ""),
        headers=[(b"authorization", auth)] if auth else [],
        body=body,
    )
    # A refusal of the hook endpoints says what is wrong, as JSON (a path
    # that normalizes away from /hooks/… is the page's).
    reached = res is not None and res.headers.get("content-type") == "application/json"
    if reached and res is not None and res.status_code != 200 and method != "HEAD":
        assert set(res.json()) == {"code", "message"}, res.text
