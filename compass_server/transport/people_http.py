"""What people reach on the HTTP port besides Connect: signing in through an
OpenID provider (/auth/…) and the page a one-ask link opens (/a/<link>).

Failures are a readable HTML page with the status that fits, never a
traceback. A link's GET shows and changes nothing; its form answers with a
POST.
"""

from __future__ import annotations

import asyncio
import datetime
import html
import json
import logging
import re
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from compass_server.api.auth import Authenticator
from compass_server.api.errors import ApiError, to_api_error
from compass_server.api.text import check_line, check_text, without_refused
from compass_server.signin.flow import AttemptRefused, Refused, SignInFailed, SignInFlow
from compass_server.store.errors import StoreError, Unavailable
from compass_server.store.links import LinkClosed, LinkPass
from compass_server.store.store import Store
from compass_server.store.types import Actor, Answer, Ask, AskEnding, EndingKind, Surface
from compass_server.transport.cookies import SessionCookies, header_getter
from compass_server.transport.headers import page_policy

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

_STYLE = """
body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}
h1{font-size:1.4rem}
fieldset{border:1px solid #ccd;border-radius:6px;margin:0 0 1rem;padding:.5rem 1rem}
legend{font-weight:600}label{display:block;margin:.25rem 0}textarea{width:100%;min-height:3rem}
.aside{color:#555555}.refused{color:#8a1f11}
button{font:inherit;padding:.4rem 1rem;margin-right:.5rem}
"""


_POLICY = page_policy(_STYLE).encode()


def page(title: str, *body: str) -> bytes:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} · Compass</title><style>{_STYLE}</style></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{''.join(body)}</main></body></html>"
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
                (b"content-security-policy", _POLICY),
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
                send, 405, page("Not allowed", para("Open the link, or answer its form."))
            )
            return
        if not SECRET_SHAPE.fullmatch(secret):
            await respond(send, 404, _closed_page("unknown"))
            return
        try:
            opened = await self.store.open_ask_link(secret)
        except LinkClosed as exc:
            await respond(send, 410 if exc.why != "unknown" else 404, _closed_page(exc.why))
            return
        here = await self._signed_in_here(scope)
        if here is not None and here.account_id != opened.actor.account_id:
            # Another person's browser: the link never answers as its person here.
            await self._not_theirs(
                send, opened, here, posted=method == "POST", head=method == "HEAD"
            )
            return
        if method == "POST":
            try:
                body = await read_body(receive, MAX_FORM_BYTES)
            except BodyRefused as exc:
                await respond(send, exc.status, page("Not taken", para(exc.why)))
                return
            await self._answer(
                send,
                opened,
                secret,
                urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True),
            )
            return
        # A mail's one-click choice opens the ask with it chosen; only a submit answers.
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        chosen = (query.get("choose") or [""])[0]
        await self._show(
            send, opened, secret, notice="", status=200, head=method == "HEAD", chosen=chosen
        )

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

    async def _not_theirs(
        self, send: Send, opened: LinkPass, here: Actor, *, posted: bool, head: bool
    ) -> None:
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
            para(
                ("Nothing was recorded. " if posted else "")
                + f"This link answers as {theirs}. This browser is signed in to Compass as "
                f"{mine}, so the link doesn't answer here.",
                "refused",
            ),
            f'<p><a href="/#/ask/{e(ask.ask_id)}">Open the ask as {e(mine)}</a>: '
            "you can answer it there if it is yours to answer.</p>",
            para(
                f"To answer as {theirs}, sign out of Compass in this browser first, "
                "or open the link in a private window.",
                "aside",
            ),
        )
        await respond(send, 403 if posted else 200, b"" if head else body)

    async def _show(
        self,
        send: Send,
        opened: LinkPass,
        secret: str,
        *,
        notice: str,
        status: int,
        head: bool = False,
        chosen: str = "",
        sent: Form | None = None,
    ) -> None:
        try:
            message, ask = await self.store.get_ask(opened.actor, opened.ask_id)
        except StoreError:
            await respond(send, 404, _closed_page("gone"))
            return
        answerer = await self._handle(opened.actor)
        body = _ask_page(message.author_handle, answerer, ask, secret, notice, chosen, sent or {})
        await respond(send, status, b"" if head else body)

    async def _answer(self, send: Send, opened: LinkPass, secret: str, form: Form) -> None:
        if (form.get("ask_id") or [""])[0] != opened.ask_id:
            await respond(
                send,
                403,
                page("Not this ask", para("This link answers only the ask it was sent for.")),
            )
            return
        action = (form.get("action") or [""])[0]
        try:
            if action == "decline":
                reason = (form.get("reason") or [""])[0]
                # A person's words take the one rule every surface keeps.
                check_text(reason, "Your reason")
                await self.store.decline_ask(
                    opened.actor, opened.ask_id, reason, surface=Surface.WEB
                )
                notice = "You declined this ask."
            elif action == "answer":
                _, ask = await self.store.get_ask(opened.actor, opened.ask_id)
                answers = []
                for q in ask.questions:
                    chosen = tuple(form.get(f"q.{q.question_id}", []))
                    words = (form.get(f"t.{q.question_id}") or [""])[0]
                    for option in chosen:
                        check_line(option, "A choice")
                    check_text(words, f"Your words for “{_cut(q.header or q.question)}”")
                    answers.append(Answer(q.question_id, chosen, words))
                await self.store.answer_ask(
                    opened.actor, opened.ask_id, answers, surface=Surface.WEB
                )
                notice = "Your answer was recorded."
            else:
                await respond(send, 400, page("Nothing to do", para("Answer or decline the ask.")))
                return
        except StoreError as exc:
            error = to_api_error(exc)
            status = 409 if error.status.token == "already_exists" else error.status.http
            # What was sent stays in the form, to be put right and sent again.
            await self._show(send, opened, secret, notice=error.message, status=status, sent=form)
            return
        await self._show(send, opened, secret, notice=notice, status=200)


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


_ENDED = {
    EndingKind.ANSWERED: "Answered",
    EndingKind.DECLINED: "Declined",
    EndingKind.WITHDRAWN_BY_AGENT: "Withdrawn by the agent",
    EndingKind.WITHDRAWN_BY_OWNER: "Withdrawn",
    EndingKind.EXPIRED: "Expired: nobody answered in time",
}


def _ending_text(ending: AskEnding) -> str:
    text = _ENDED.get(ending.kind, "Ended")
    if ending.actor_handle and ending.kind is not EndingKind.EXPIRED:
        text += f" by {ending.actor_handle}"
    if ending.reason:
        text += f": {ending.reason}"
    if ending.at is not None:
        text += f" ({ending.at.strftime('%Y-%m-%d %H:%M UTC')})"
    return text + "."


def _cut(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _ask_page(
    author: str,
    answerer: str,
    ask: Ask,
    secret: str,
    notice: str,
    choose: str = "",
    sent: Form | None = None,
) -> bytes:
    e = html.escape
    sent = sent or {}
    parts = [para(f"{author} asks:", "aside")]
    if notice:
        parts.append(f'<p role="status" class="aside"><strong>{e(notice)}</strong></p>')
    if ask.ending is not None or not ask.is_open:
        said = _ending_text(ask.ending) if ask.ending else "This ask has ended."
        parts.append(f'<p id="ending"><strong>{e(said)}</strong></p>')
        for q in ask.questions:
            chosen = [o.label for o in q.options if o.id in q.chosen_option_ids]
            answer = ", ".join(chosen + ([q.custom_text] if q.custom_text else [])) or "—"
            parts.append(f"<p><strong>{e(q.question)}</strong><br>{e(answer)}</p>")
        return page("An ask for you", *parts)
    form = [
        f'<form method="post" action="/a/{e(secret)}">',
        f'<input type="hidden" name="ask_id" value="{e(ask.ask_id)}">',
    ]
    for q in ask.questions:
        kind = "checkbox" if q.allow_multiple else "radio"
        picked = set(sent.get(f"q.{q.question_id}", [])) or ({choose} if choose else set())
        form.append(f"<fieldset><legend>{e(q.header or q.question)}</legend>")
        if q.header:
            form.append(para(q.question))
        for o in q.options:
            form.append(
                f'<label><input type="{kind}" name="q.{e(q.question_id)}" value="{e(o.id)}"'
                f"{' checked' if o.id in picked else ''}> "
                f"{e(o.label)}{(' — ' + e(o.description)) if o.description else ''}</label>"
            )
        words = without_refused((sent.get(f"t.{q.question_id}") or [""])[0])
        form.append(
            f'<label>Your own words<textarea name="t.{e(q.question_id)}">{e(words)}</textarea>'
            "</label>"
        )
        form.append("</fieldset>")
    form.append(f'<p id="answerer">Your answer is recorded as {e(answerer)}.</p>')
    form.append('<button type="submit" name="action" value="answer">Submit</button>')
    reason = without_refused((sent.get("reason") or [""])[0])
    form.append(
        "<details><summary>Decline instead</summary>"
        f'<label>Why (optional)<textarea name="reason">{e(reason)}</textarea></label>'
        '<button type="submit" name="action" value="decline">Decline</button></details>'
    )
    form.append("</form>")
    return page("An ask for you", *parts, *form)
