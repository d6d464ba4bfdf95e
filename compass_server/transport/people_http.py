"""What people reach on the HTTP port besides Connect: signing in through an
OpenID provider (/auth/…) and the page a one-ask link opens (/a/<link>).

Failures are a readable HTML page with the status that fits, never a
traceback. A link's GET shows and changes nothing: a page whose script
(web/static/link.js) draws the ask with the app's own component. The page,
and a notification's tap, answer with a POST of JSON to the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import html
import json
import logging
import re
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf import json_format

from compass_server.api.auth import Authenticator
from compass_server.api.errors import ApiError, to_api_error
from compass_server.api.mapping import message_to_wire
from compass_server.api.text import check_line, check_text
from compass_server.signin.flow import AttemptRefused, Refused, SignInFailed, SignInFlow
from compass_server.store.errors import StoreError, Unavailable
from compass_server.store.links import LinkClosed, LinkPass
from compass_server.store.store import Store
from compass_server.store.types import Actor, Answer, Ask, Message, Surface, TextBlock
from compass_server.transport.cookies import SessionCookies, header_getter
from compass_server.transport.headers import LINK_POLICY, PAGE_POLICY

log = logging.getLogger(__name__)

# A link's secret or a one-use code as the server makes them (new_token);
# anything else opens nothing and never reaches the database.
SECRET_SHAPE = re.compile(r"[A-Za-z0-9_-]{1,100}")
# A link page's form is small; more is refused before it is read.
MAX_FORM_BYTES = 256 * 1024
# How long a form's (or Slack's) body may take to arrive whole.
BODY_SECONDS = 30.0
Send = Callable[[dict[str, Any]], Awaitable[None]]
# A posted form: each field's values.
Form = dict[str, list[str]]

# The modules the link page runs, named up front so a slow phone fetches them
# at once instead of one import after another.
LINK_MODULES = (
    "link.js",
    "ask.js",
    "dom.js",
    "ended.js",
    "model.js",
    "question.js",
    "quorum.js",
    "rpc.js",
    "standing.js",
)


def _head(title: str, extra: str = "") -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<meta name=color-scheme content="light dark">'
        f"<title>{html.escape(title)} · Compass</title>"
        '<link rel=icon href="/favicon.svg" type="image/svg+xml">'
        f'<link rel=stylesheet href="/app.css">{extra}</head>'
    )


def page(title: str, *body: str) -> bytes:
    """A server-made page in the app's look: a bar with the product's name,
    then the title and the body in one card."""
    return (
        f"{_head(title)}<body class=page>"
        '<header class="topbar"><p class="brand">Compass</p></header>'
        f'<main class="page-main"><div class="card"><h1>{html.escape(title)}</h1>'
        f"{''.join(body)}</div></main></body></html>"
    ).encode()


def para(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<p{attr}>{html.escape(text)}</p>"


UNAVAILABLE_TEXT = "The server can't reach its database right now; try again in a few seconds."


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: str = "text/html; charset=utf-8",
    headers: list[tuple[bytes, bytes]] | None = None,
    referrer: bytes = b"no-referrer",
    policy: str = PAGE_POLICY,
) -> None:
    """`referrer`: the page's Referrer-Policy; a form that checks where it was
    posted from needs same-origin (no-referrer makes the browser send Origin: null)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
                (b"referrer-policy", referrer),
                (b"x-frame-options", b"DENY"),
                (b"content-security-policy", policy.encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyRefused(Exception):
    """A request body this route won't take: too large (413), or not all
    sent within BODY_SECONDS (408)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


async def read_body(receive: Any, most: int) -> bytes:
    """The request's body; BodyRefused when it is over `most` bytes or has not
    all come within BODY_SECONDS (a client that stalls holds nothing for ever)."""
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return b"".join(parts)
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > most:
                    raise BodyRefused(413, "That request is too large.")
                parts.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(parts)
    except TimeoutError:
        raise BodyRefused(408, "The request's body didn't come in time.") from None


async def read_body_or_refuse(receive: Any, send: Send, most: int) -> bytes | None:
    """`read_body` for a machine's POST (Slack's, a mail provider's): None once
    refused in plain text."""
    try:
        return await read_body(receive, most)
    except BodyRefused as exc:
        await respond(send, exc.status, f"{exc.why}\n".encode(), "text/plain")
        return None


class PeopleRoutes:
    """/auth/… and /a/<link>, as one ASGI app the router hands those paths."""

    def __init__(
        self,
        store: Store,
        auth: Authenticator,
        cookies: SessionCookies,
        flow: SignInFlow | None,
        *,
        attempt_seconds: float,
        session_idle: datetime.timedelta,
        session_lifetime: datetime.timedelta,
    ) -> None:
        self.store = store
        self.auth = auth
        self.cookies = cookies
        self.flow = flow
        self.attempt_seconds = attempt_seconds
        self.session_idle = session_idle
        self.session_lifetime = session_lifetime

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        path: str = scope["path"]
        try:
            if path.startswith("/a/"):
                await self._link(scope, receive, send, path[len("/a/") :])
            elif path == "/auth/providers":
                await self._providers(scope, send)
            elif path.startswith("/auth/login/"):
                await self._login(scope, send, path[len("/auth/login/") :])
            elif path == "/auth/callback":
                await self._callback(scope, send)
            elif path == "/auth/logout":
                await self._logout(scope, send)
            elif path.startswith("/auth/address/"):
                await self._address(scope, send, path[len("/auth/address/") :])
            else:
                await respond(send, 404, page("Not found", para("There is no such page.")))
        except Unavailable:
            # An outage, not a fault: the operator's signal is /readyz and
            # compass_database_up, not a traceback per page asked for.
            await respond(
                send,
                503,
                page("Try again shortly", para(UNAVAILABLE_TEXT)),
                headers=[(b"retry-after", b"5")],
            )
        except Exception:
            # Nothing of the exception reaches the person.
            incident = uuid.uuid4().hex[:12]
            log.exception("sign-in page failed (incident %s)", incident)
            await respond(
                send,
                500,
                page(
                    "Something went wrong",
                    para(f"The server couldn't finish this. Incident {incident}; try again."),
                ),
            )

    # --- signing in ----------------------------------------------------------------------

    async def _providers(self, scope: dict[str, Any], send: Send) -> None:
        listed = [
            {"name": p.name, "label": p.label, "login": f"/auth/login/{p.name}"}
            for p in (self.flow.configured() if self.flow else [])
        ]
        await respond(send, 200, json.dumps({"providers": listed}).encode(), "application/json")

    async def _refuse(self, send: Send, status: int, title: str, why: str) -> None:
        await respond(
            send,
            status,
            page(title, para(why, "refused"), '<p><a href="/">Back to Compass</a></p>'),
            headers=[(b"set-cookie", self.cookies.clear_attempt().encode())],
        )

    async def _login(self, scope: dict[str, Any], send: Send, name: str) -> None:
        if scope["method"] != "GET":
            await respond(send, 405, page("Not allowed", para("Open this address with GET.")))
            return
        if self.flow is None:
            await self._refuse(send, 404, "Can't sign in", "This server has no sign-in provider.")
            return
        if not self.flow.has(name):
            await self._refuse(
                send, 404, "Can't sign in", f"This server has no sign-in provider {name[:40]!r}."
            )
            return
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            attempt, url = await self.flow.start(name, (query.get("return_to") or [None])[0])
        except SignInFailed as exc:
            await self._refuse(send, 502, "Can't sign in", exc.message)
            return
        except StoreError as exc:
            error = to_api_error(exc)
            await self._refuse(send, error.status.http, "Can't sign in", error.message)
            return
        kept = self.cookies.set_attempt(attempt, int(self.attempt_seconds))
        await respond(
            send,
            302,
            headers=[(b"location", url.encode()), (b"set-cookie", kept.encode())],
        )

    async def _callback(self, scope: dict[str, Any], send: Send) -> None:
        get = header_getter(scope.get("headers", ()))
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        state = (query.get("state") or [""])[0]
        if self.flow is None:
            await self._refuse(send, 404, "Can't sign in", "This server has no sign-in provider.")
            return
        if "error" in query:
            why = (query.get("error_description") or query["error"])[0][:200]
            await self._refuse(send, 403, "Sign-in refused", f"The provider said: {why}")
            return
        code = (query.get("code") or [""])[0]
        if not code:
            await self._refuse(
                send, 400, "Can't sign in", "The provider sent no code; start again."
            )
            return
        # The attempt must be this browser's: it started it and holds it.
        held = self.cookies.attempt(get("cookie"))
        try:
            started, return_to = await self.flow.finish(held, state, code, get("user-agent") or "")
        except AttemptRefused as exc:
            why = (
                "This sign-in took too long; start again."
                if exc.expired
                else "This sign-in wasn't started in this browser; start again."
            )
            await self._refuse(send, 400, "Can't sign in", why)
            return
        except SignInFailed as exc:
            await self._refuse(send, 401, "Can't sign in", exc.message)
            return
        except Refused as exc:
            await self._refuse(send, 403, "You can't sign in here", exc.message)
            return
        except StoreError as exc:
            error = to_api_error(exc)
            await self._refuse(send, error.status.http, "Can't sign in", error.message)
            return
        max_age = max(
            0, int((started.session.ends_at - started.session.created_at).total_seconds())
        )
        await respond(
            send,
            303,
            headers=[
                (b"location", return_to.encode()),
                (b"set-cookie", self.cookies.set(started.secret, max_age).encode()),
                (b"set-cookie", self.cookies.clear_attempt().encode()),
            ],
        )

    async def _logout(self, scope: dict[str, Any], send: Send) -> None:
        if scope["method"] != "POST":
            await respond(send, 405, b"sign out with POST\n", "text/plain")
            return
        get = header_getter(scope.get("headers", ()))
        clear = [(b"set-cookie", self.cookies.clear().encode())]
        try:
            authorization = self.cookies.authorization(
                lambda n: None if n == "authorization" else get(n)
            )
            if authorization is None:
                await respond(send, 204, headers=clear)
                return
            signed = await self.auth.sign_in(authorization, "account")
        except ApiError as exc:
            if exc.status.token == "permission_denied":
                await respond(send, 403, f"{exc.message}\n".encode(), "text/plain")
                return
            # Already ended: the cookie goes all the same.
            await respond(send, 204, headers=clear)
            return
        actor = signed.principal
        assert signed.via == "session" and isinstance(actor, Actor)
        await self.store.sign_out(actor, signed.token_id)
        self.auth.forget(signed.token_id)
        await respond(send, 204, headers=clear)

    # --- a one-time sign-in address -------------------------------------------------------

    async def _address(self, scope: dict[str, Any], send: Send, secret: str) -> None:
        """GET shows whose address it is and uses nothing (a link preview may
        fetch it); its button POSTs, from this server's own page only."""
        method = scope["method"]
        if method not in ("GET", "HEAD", "POST"):
            await respond(send, 405, page("Not allowed", para("Open the address.")))
            return
        if not SECRET_SHAPE.fullmatch(secret):
            await respond(send, 404, _ADDRESS_CLOSED["unknown"])
            return
        get = header_getter(scope.get("headers", ()))
        if method != "POST":
            status, handle = await self.store.signin_address_holder(secret)
            if status != "open":
                await respond(send, _ADDRESS_STATUS[status], _ADDRESS_CLOSED[status])
                return
            body = page(
                f"Sign in as {handle}",
                para(
                    f"This address signs this browser in to Compass as {handle}, once. "
                    "Anyone holding it can, so it was meant for you alone."
                ),
                '<form method="post"><button type="submit">'
                f"Sign in as {html.escape(handle)}</button></form>",
            )
            await respond(send, 200, b"" if method == "HEAD" else body, referrer=b"same-origin")
            return
        if not self.cookies.same_origin(get("origin"), get("host")):
            await respond(
                send,
                403,
                page("Not from here", para("Sign in from the address's own page.")),
            )
            return
        used = await self.store.use_signin_address(
            secret,
            idle=self.session_idle,
            lifetime=self.session_lifetime,
            user_agent=get("user-agent") or "",
        )
        if used.status != "signed_in" or used.session is None:
            await respond(send, _ADDRESS_STATUS[used.status], _ADDRESS_CLOSED[used.status])
            return
        max_age = int((used.session.ends_at - used.session.created_at).total_seconds())
        await respond(
            send,
            303,
            headers=[
                (b"location", used.next.encode()),
                (b"set-cookie", self.cookies.set(used.secret, max_age).encode()),
            ],
        )

    # --- a one-ask link ----------------------------------------------------------------------

    async def _link(self, scope: dict[str, Any], receive: Any, send: Send, secret: str) -> None:
        method = scope["method"]
        if method not in ("GET", "HEAD", "POST"):
            await respond(
                send, 405, page("Not allowed", para("Open the link, or answer on its page."))
            )
            return
        if not SECRET_SHAPE.fullmatch(secret):
            await self._closed(send, "unknown", posted=method == "POST" or _wants_json(scope))
            return
        try:
            opened = await self.store.open_ask_link(secret)
        except LinkClosed as exc:
            await self._closed(send, exc.why, posted=method == "POST" or _wants_json(scope))
            return
        here = await self._signed_in_here(scope)
        theirs = here is None or here.account_id == opened.actor.account_id
        if method == "POST":
            await self._answer(scope, receive, send, opened, None if theirs else here)
            return
        wants_json = _wants_json(scope)
        if not theirs:
            # Another person's browser: the link never answers as its person here.
            assert here is not None
            if wants_json:
                await _json(send, 403, _error("permission_denied", "This link isn't yours here."))
                return
            await self._not_theirs(send, opened, here, head=method == "HEAD")
            return
        if wants_json:
            # The open page reads the ask again, to show an ending that came another way.
            try:
                message, _ = await self.store.get_ask(opened.actor, opened.ask_id)
            except StoreError:
                await _json(send, 404, _error("not_found", _CLOSED["gone"][0] + "."))
                return
            await _json(send, 200, {"askMessage": _ask_message(message, opened.ask_id)})
            return
        # A mail's one-click choice opens the ask with it chosen; only a submit answers.
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        chosen = (query.get("choose") or [""])[0][:100]
        await self._show(send, opened, head=method == "HEAD", chosen=chosen)

    async def _closed(self, send: Send, why: str, *, posted: bool) -> None:
        status = 404 if why == "unknown" else 410
        if posted:
            title, text = _CLOSED.get(why, _CLOSED["unknown"])
            await _json(send, status, {"code": "not_found", "message": f"{title}. {text}"})
            return
        await respond(send, status, _closed_page(why))

    async def _signed_in_here(self, scope: dict[str, Any]) -> Actor | None:
        """The person this browser's session signs in, if it holds a live one."""
        secret = self.cookies.session(header_getter(scope.get("headers", ()))("cookie"))
        if secret is None:
            return None
        try:
            signed = await self.auth.sign_in(f"Session {secret}", "account")
        except ApiError:
            return None
        return signed.principal if isinstance(signed.principal, Actor) else None

    async def _handle(self, actor: Actor) -> str:
        found = await self.store.get_accounts(actor, [actor.account_id])
        return found[0].handle if found else "someone"

    async def _not_theirs(self, send: Send, opened: LinkPass, here: Actor, *, head: bool) -> None:
        try:
            message, ask = await self.store.get_ask(opened.actor, opened.ask_id)
            theirs, mine = await self._handle(opened.actor), await self._handle(here)
        except StoreError:
            await respond(send, 404, _closed_page("gone"))
            return
        e = html.escape
        asked = "".join(f"<li>{e(q.question)}</li>" for q in ask.questions)
        body = page(
            f"This link is {theirs}'s",
            para(f"{message.author_handle} asks:", "aside"),
            f"<ul>{asked}</ul>",
            para(_not_theirs_words(theirs, mine), "refused"),
            f'<p><a class="button primary" href="/#/ask/{e(ask.ask_id)}">'
            f"Open the ask as {e(mine)}</a></p>",
            para("You can answer it there if it is yours to answer.", "aside"),
            para(
                f"To answer as {theirs}, sign out of Compass in this browser first, "
                "or open the link in a private window.",
                "aside",
            ),
        )
        await respond(send, 200, b"" if head else body)

    async def _show(self, send: Send, opened: LinkPass, *, head: bool, chosen: str) -> None:
        """The page: who asks and why, and whose answer it records, drawn here;
        the ask itself drawn by the app's own component (link.js) from the
        data the page carries, so the first paint needs no second request."""
        try:
            message, ask = await self.store.get_ask(opened.actor, opened.ask_id)
            answerer = await self._handle(opened.actor)
        except StoreError:
            await respond(send, 404, _closed_page("gone"))
            return
        e = html.escape
        intro = "".join(
            f'<p class="block-text">{e(b.text)}</p>'
            for b in message.blocks
            if isinstance(b, TextBlock)
        )
        data = {
            "askId": ask.ask_id,
            "askMessage": _ask_message(message, ask.ask_id),
            "answerer": {"accountId": str(opened.actor.account_id), "handle": answerer},
            "choose": chosen,
        }
        # Inert data, never run: "<" is escaped so no text in it can end the element.
        blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
        preload = "".join(f'<link rel=modulepreload href="/{m}">' for m in LINK_MODULES)
        body = (
            f'{_head("An ask for you", preload)}<body class="page link-page">'
            '<header class="topbar"><p class="brand">Compass</p>'
            f'<p class="signed-in" id="answerer">Your answer is recorded as {e(answerer)}.</p>'
            "</header>"
            '<main class="page-main"><article class="card link-ask" aria-labelledby="asker">'
            f'<h1 id="asker">{e(message.author_handle)} asks</h1>{intro}'
            '<div id="ask" class="link-ask-body"><p class="aside">Loading the ask…</p></div>'
            '<p id="link-status" class="link-status" role="status"></p>'
            '<noscript><p class="refused">This page needs JavaScript to answer. '
            f'<a href="/#/ask/{e(ask.ask_id)}">Open the ask in Compass</a>.</p></noscript>'
            "</article></main>"
            f'<script type="application/json" id="link-data">{blob}</script>'
            '<script type=module src="/link.js"></script>'
            "</body></html>"
        ).encode()
        await respond(send, 200, b"" if head else body, policy=LINK_POLICY)

    async def _answer(
        self, scope: dict[str, Any], receive: Any, send: Send, opened: LinkPass, other: Actor | None
    ) -> None:
        """The page's answer or decline, and a notification's tap, as JSON:
        {askId, action: "answer" | "decline", answers, reason, tap}. A tap
        answers only an ask one tap can answer."""
        try:
            raw = await read_body(receive, MAX_FORM_BYTES)
        except BodyRefused as exc:
            code = "resource_exhausted" if exc.status == 413 else "unavailable"
            await _json(send, exc.status, _error(code, exc.why))
            return
        get = header_getter(scope.get("headers", ()))
        kind = (get("content-type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            await _json(
                send, 415, _error("invalid_argument", "Send the answer as JSON from the page.")
            )
            return
        if other is not None:
            try:
                theirs, mine = await self._handle(opened.actor), await self._handle(other)
            except StoreError:
                theirs, mine = "someone else", "someone"
            why = "Nothing was recorded. " + _not_theirs_words(theirs, mine)
            await _json(send, 403, _error("permission_denied", why))
            return
        try:
            sent = _sent(raw, opened.ask_id)
            _, ask = await self.store.get_ask(opened.actor, opened.ask_id)
            if sent.tap and not ask.one_tap:
                raise _Refused(
                    400, "failed_precondition", "This ask needs more than one tap: open it."
                )
            surface = Surface.PUSH if sent.tap else Surface.WEB
            if sent.action == "decline":
                await self.store.decline_ask(
                    opened.actor, opened.ask_id, sent.reason, surface=surface
                )
                said = "You declined this ask."
            else:
                await self.store.answer_ask(
                    opened.actor, opened.ask_id, sent.answers, surface=surface
                )
                said = "Your answer was recorded."
        except _Refused as exc:
            await _json(send, exc.status, _error(exc.code, exc.message))
            return
        except (StoreError, ApiError) as exc:
            error = exc if isinstance(exc, ApiError) else to_api_error(exc)
            out = _error(error.status.token, error.message)
            # How the ask stands now, so the page and the notification can say how it ended.
            with contextlib.suppress(StoreError):
                message, _ = await self.store.get_ask(opened.actor, opened.ask_id)
                out["askMessage"] = _ask_message(message, opened.ask_id)
            await _json(send, error.status.http, out)
            return
        message, ask = await self.store.get_ask(opened.actor, opened.ask_id)
        await _json(
            send,
            200,
            {
                "outcome": sent.action,
                "message": said,
                "ended": not ask.is_open,
                "askMessage": _ask_message(message, opened.ask_id),
            },
        )


def _wants_json(scope: dict[str, Any]) -> bool:
    """A GET from the link's own page (its script reads the ask again)."""
    accept = header_getter(scope.get("headers", ()))("accept") or ""
    return scope["method"] != "POST" and "application/json" in accept


def _not_theirs_words(theirs: str, mine: str) -> str:
    return (
        f"This link answers as {theirs}. This browser is signed in to Compass as "
        f"{mine}, so the link doesn't answer here."
    )


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclasses.dataclass(frozen=True)
class _Sent:
    action: str
    answers: list[Answer]
    reason: str
    tap: bool


def _bad(message: str) -> _Refused:
    return _Refused(400, "invalid_argument", message)


def _sent(raw: bytes, ask_id: str) -> _Sent:
    """The page's JSON, checked field by field; _Refused names what is wrong."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _bad("The answer isn't JSON.") from None
    if not isinstance(body, dict):
        raise _bad("The answer must be a JSON object.")
    if body.get("askId") != ask_id:
        raise _Refused(403, "permission_denied", "This link answers only the ask it was sent for.")
    action = body.get("action")
    if action not in ("answer", "decline"):
        raise _bad("Answer or decline the ask.")
    reason = body.get("reason", "")
    if not isinstance(reason, str):
        raise _bad("reason must be text.")
    tap = body.get("tap", False)
    if not isinstance(tap, bool):
        raise _bad("tap must be true or false.")
    answers: list[Answer] = []
    if action == "decline":
        # A person's words take the one rule every surface keeps.
        check_text(reason, "Your reason")
    else:
        given = body.get("answers")
        if not isinstance(given, list):
            raise _bad("answers must be a list.")
        for a in given:
            if not isinstance(a, dict):
                raise _bad("Each answer must be an object.")
            qid, chosen, words = (
                a.get("questionId"),
                a.get("chosenOptionIds", []),
                a.get("customText", ""),
            )
            if not isinstance(qid, str) or not isinstance(words, str):
                raise _bad("An answer's questionId and customText must be text.")
            if not isinstance(chosen, list) or not all(isinstance(c, str) for c in chosen):
                raise _bad("An answer's chosenOptionIds must be a list of ids.")
            check_line(qid, "A question id")
            for option in chosen:
                check_line(option, "A choice")
            check_text(words, "Your words")
            answers.append(Answer(qid, tuple(chosen), words))
    return _Sent(action, answers, reason, tap)


def _error(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


async def _json(send: Send, status: int, body: dict[str, Any]) -> None:
    await respond(send, status, json.dumps(body, ensure_ascii=False).encode(), "application/json")


def _ask_message(message: Message, ask_id: str) -> dict[str, Any]:
    """The message as the app reads it (proto3 JSON), holding its words and
    this ask only: a link shows nothing else."""
    kept = [
        b
        for b in message.blocks
        if isinstance(b, TextBlock) or (isinstance(b, Ask) and b.ask_id == ask_id)
    ]
    wire = message_to_wire(dataclasses.replace(message, blocks=tuple(kept)))
    return json_format.MessageToDict(wire)


_CLOSED = {
    "unknown": ("This link opens nothing", "It may be mistyped; open Compass instead."),
    "revoked": ("This link was revoked", "Open Compass to see the ask."),
    "expired": ("This link has expired", "Open Compass to see the ask."),
    "deactivated": ("This link no longer works", "Your account is deactivated."),
    "gone": ("This ask can't be shown", "You no longer take part in its channel."),
}


_ADDRESS_STATUS = {"unknown": 404, "used": 410, "expired": 410, "deactivated": 403}
_ADDRESS_CLOSED = {
    "unknown": page("This address opens nothing", para("It may be mistyped; ask for another.")),
    "used": page(
        "This address was already used",
        para("A sign-in address works once. Ask the operator for another."),
    ),
    "expired": page(
        "This address has expired", para("Ask the operator for another; they last minutes.")
    ),
    "deactivated": page("This account can't sign in", para("It is deactivated.")),
}


def _closed_page(why: str) -> bytes:
    title, text = _CLOSED.get(why, _CLOSED["unknown"])
    return page(title, para(text), '<p><a href="/">Open Compass</a></p>')
