"""Slack's side of the HTTP port: /slack/interactivity, where Slack sends
the clicks and modal submissions of a connected app; /slack/commands, its
slash command (`/compass link CODE` links the Slack user to the person whose
one-time code it is); and /slack/link/<code>, where a Slack user connects to
their Compass account from a browser signed in to it.

Every interaction is verified with the app's signing secret and Slack's
timestamp window by slack_sdk's verifier before anything is read from it.
A click is acknowledged at once and handled after (Slack wants an answer in
3 seconds); a modal's submission is answered inline, so a refusal shows in
the modal. Nothing is answered for a Slack user who is not linked to an
account, and the answer runs as that account through a one-ask link minted
for it, under the same rules as every surface.
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.signature import SignatureVerifier

from compass_server.api.auth import Authenticator
from compass_server.api.errors import ApiError
from compass_server.api.text import check_line, check_text
from compass_server.signin.flow import SignInFlow
from compass_server.slack import blocks
from compass_server.slack.web import SlackFailed, SlackWeb
from compass_server.store.errors import (
    Conflict,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    StoreError,
    Unavailable,
)
from compass_server.store.slack import AppKeys, SlackStore
from compass_server.store.store import Store
from compass_server.store.types import Actor, Answer, Surface
from compass_server.transport.cookies import SessionCookies, header_getter
from compass_server.transport.people_http import (
    SECRET_SHAPE,
    BodyRefused,
    Send,
    page,
    para,
    read_body,
    read_body_or_refuse,
    respond,
)
from compass_server.webhooks.payloads import ask_data, ask_link

log = logging.getLogger(__name__)

# Slack's ids (teams, users, channels) are letters and digits.
SLACK_ID = re.compile(r"[A-Za-z0-9]{1,64}")
# What Slack's signature headers look like; anything else is no signature.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Person:
    account_id: uuid.UUID
    handle: str


def ending_text(kind: str, reason: str, handle: str) -> str:
    by = handle or "someone"
    if kind == "answered":
        return f"Answered by {by}"
    if kind == "declined":
        return f"Declined by {by}: {reason}" if reason else f"Declined by {by}"
    if kind in ("withdrawn_by_agent", "withdrawn_by_owner"):
        return f"Withdrawn by {by}: {reason}" if reason else f"Withdrawn by {by}"
    return "Expired"


class SlackRoutes:
    """/slack/…, as one ASGI app the router hands those paths."""

    def __init__(
        self,
        slack: SlackStore,
        store: Store,
        web: SlackWeb,
        auth: Authenticator,
        cookies: SessionCookies,
        flow: SignInFlow | None,
        *,
        public_url: str,
        link_lifetime: datetime.timedelta,
        request_bytes: int,
    ) -> None:
        self.slack = slack
        self.store = store
        self.web = web
        self.auth = auth
        self.cookies = cookies
        self.flow = flow
        self.public_url = public_url.rstrip("/")
        self.link_lifetime = link_lifetime
        self.request_bytes = request_bytes
        self._tasks: set[asyncio.Task[None]] = set()

    async def stop(self, grace: float = 2.0) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        path: str = scope["path"]
        try:
            if path == "/slack/interactivity":
                await self._interaction(scope, receive, send)
            elif path == "/slack/commands":
                await self._command(scope, receive, send)
            elif path.startswith("/slack/link/"):
                await self._link(scope, receive, send, path[len("/slack/link/") :])
            else:
                await respond(send, 404, b"no such page\n", "text/plain")
        except Unavailable:
            # Slack shows the person that it failed; they try again.
            await respond(
                send,
                503,
                b"the database is unavailable; try again shortly\n",
                "text/plain",
                headers=[(b"retry-after", b"5")],
            )
        except Exception:
            incident = uuid.uuid4().hex[:12]
            log.exception("Slack request failed (incident %s)", incident)
            await respond(send, 500, f"incident {incident}\n".encode(), "text/plain")

    # --- interactions -------------------------------------------------------------------

    async def _interaction(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["method"] != "POST":
            await respond(send, 405, b"Slack posts here\n", "text/plain")
            return
        body = await read_body_or_refuse(receive, send, self.request_bytes)
        if body is None:
            return
        get = header_getter(scope.get("headers", ()))
        payload = _payload(body)
        team = _team(payload) if payload is not None else None
        app = await self.slack.app_for_team(team) if team else None
        stamp, signature = get("x-slack-request-timestamp"), get("x-slack-signature")
        # Unknown team, no signature, a bad one or a stale one: all one refusal.
        if (
            payload is None
            or app is None
            or not _TIMESTAMP.fullmatch(stamp or "")
            or not _SIGNATURE.fullmatch(signature or "")
            or not SignatureVerifier(app.signing_secret).is_valid(body, stamp, signature)
        ):
            await respond(send, 401, b"not signed by a connected Slack app\n", "text/plain")
            return
        if not app.enabled:
            await respond(send, 200, b"")
            return
        try:
            kind = _text(payload, "type")
            read: Click | Submission | None = (
                _submission_of(payload)
                if kind == "view_submission"
                else _click_of(payload)
                if kind == "block_actions"
                else None
            )
        except Unreadable as exc:
            log.info("Slack app of team %s sent an interaction of another shape: %s", team, exc)
            await respond(send, 400, b"not an interaction Compass can read\n", "text/plain")
            return
        if isinstance(read, Submission):
            said = await self._submitted(app, read)
            await respond(send, 200, json.dumps(said).encode() if said else b"", "application/json")
            return
        await respond(send, 200, b"")
        if isinstance(read, Click):
            task = asyncio.get_running_loop().create_task(self._clicked(app, read))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # --- the slash command ------------------------------------------------------------------

    async def _command(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        """`/compass link CODE`: the Slack user who types a person's one-time
        code (shown on Compass's page) is linked to that person. Answered at
        once, to the user alone."""
        if scope["method"] != "POST":
            await respond(send, 405, b"Slack posts here\n", "text/plain")
            return
        body = await read_body_or_refuse(receive, send, self.request_bytes)
        if body is None:
            return
        get = header_getter(scope.get("headers", ()))
        try:
            form = urllib.parse.parse_qs(body.decode("utf-8"), strict_parsing=False)
        except (UnicodeDecodeError, ValueError):
            form = {}
        team = (form.get("team_id") or [""])[0]
        app = await self.slack.app_for_team(team) if SLACK_ID.fullmatch(team) else None
        stamp, signature = get("x-slack-request-timestamp"), get("x-slack-signature")
        if (
            app is None
            or not _TIMESTAMP.fullmatch(stamp or "")
            or not _SIGNATURE.fullmatch(signature or "")
            or not SignatureVerifier(app.signing_secret).is_valid(body, stamp, signature)
        ):
            await respond(send, 401, b"not signed by a connected Slack app\n", "text/plain")
            return
        user = (form.get("user_id") or [""])[0]
        text = (form.get("text") or [""])[0]
        if not SLACK_ID.fullmatch(user):
            await respond(send, 400, b"not a command Compass can read\n", "text/plain")
            return
        words = text.split()
        if not app.enabled:
            said = "Compass's Slack app is turned off for this workspace."
        elif len(words) == 2 and words[0].lower() == "link":
            linked = await self.slack.redeem_person_code(
                app.workspace_id, app.team_id, user, words[1]
            )
            said = (
                f"Your Slack account is now linked to {linked[1]} in Compass: your answers "
                "here are theirs."
                if linked is not None
                else "That code links nothing: it may be mistyped, used or expired. "
                "Get a new one on Compass's page (Settings, Slack)."
            )
        else:
            said = (
                "To link your Slack account to Compass, open Compass's page, choose Settings, "
                "then Slack, and type here the code it shows: /compass link CODE"
            )
        answer = {"response_type": "ephemeral", "text": blocks.said(said)}
        await respond(send, 200, json.dumps(answer).encode(), "application/json")

    async def _clicked(self, app: AppKeys, click: Click) -> None:
        try:
            await self._click(app, click)
        except SlackFailed as exc:
            log.warning("Slack app of team %s: %s", app.team_id, exc.error)
        except Exception:
            log.exception("a Slack click failed")

    async def _click(self, app: AppKeys, click: Click) -> None:
        user, channel, action_id = click.user, click.channel, click.action_id
        if not user or not action_id or action_id == blocks.OPEN:
            return
        try:
            ask_id, option = blocks.read_value(click.value)
            check_line(ask_id, "the ask")
            check_line(option, "the option")
        except (ValueError, InvalidArgument):
            return
        # A retried request, or the same click delivered twice, is handled once.
        key = f"act:{app.team_id}:{user}:{click.action_ts}:{action_id}"
        fresh, linked = await self.slack.first_time(app.workspace_id, key, app.team_id, user)
        if not fresh:
            return
        person = Person(*linked) if linked else await self._person(app, user, channel)
        if person is None:
            return
        actor, refusal = await self._as(app, person, ask_id)
        if actor is None:
            await self._tell(app, channel, user, refusal)
            return
        where = {"c": channel}
        if action_id.startswith(blocks.CHOOSE):
            _, ask = await self.store.get_ask(actor, ask_id)
            if len(ask.questions) != 1:
                return
            answer = [Answer(ask.questions[0].question_id, (option,), "")]
            try:
                await self.store.answer_ask(actor, ask_id, answer, surface=Surface.SLACK)
            except StoreError as exc:
                await self._tell(app, channel, user, await self._refused(app, ask_id, exc))
            return
        _, ask = await self.store.get_ask(actor, ask_id)
        if action_id in (blocks.ANSWER, blocks.OTHER):
            data = ask_data(ask, "open", ask_link(self.public_url, ask_id))
            view = blocks.answer_view(data, where)
        elif action_id == blocks.DECLINE:
            first = ask.questions[0].question if ask.questions else ""
            view = blocks.decline_view(ask_id, first, where)
        else:
            return
        await self.web.call("views.open", app.token, {"trigger_id": click.trigger, "view": view})

    async def _submitted(self, app: AppKeys, sent: Submission) -> dict[str, Any] | None:
        """None closes the modal; else Slack's `errors` answer, shown in it."""
        user, values = sent.user, sent.values

        def refuse(text: str, where: str = sent.first_input) -> dict[str, Any]:
            return {"response_action": "errors", "errors": {where: text[:300]}}

        try:
            meta = json.loads(sent.metadata or "{}")
            ask_id = meta["a"]
            channel = meta.get("c", "")
            if not isinstance(ask_id, str) or not isinstance(channel, str):
                raise TypeError
            check_line(ask_id, "the ask")
            check_line(channel, "the channel")
        except (ValueError, KeyError, TypeError, RecursionError, AttributeError, InvalidArgument):
            return refuse("This form is not one of Compass's.")
        person = await self._person(app, user, channel)
        if person is None:
            return refuse("Connect your Compass account first (see the message from Compass).")
        actor, refusal = await self._as(app, person, ask_id)
        if actor is None:
            return None if await self._theirs(app, ask_id, person) else refuse(refusal)
        try:
            if sent.callback_id == blocks.DECLINE_VIEW:
                reason = blocks.typed(values, "reason")
                try:
                    check_text(reason, "Your reason")
                except InvalidArgument as exc:
                    return refuse(exc.message, "reason")
                await self.store.decline_ask(actor, ask_id, reason, surface=Surface.SLACK)
            else:
                _, ask = await self.store.get_ask(actor, ask_id)
                answers = blocks.answers_of(ask.questions, values)
                for i, answer in enumerate(answers):
                    try:
                        check_text(answer.custom_text, "Your answer")
                    except InvalidArgument as exc:
                        return refuse(exc.message, f"t{i}")
                await self.store.answer_ask(actor, ask_id, answers, surface=Surface.SLACK)
        except Conflict as exc:
            if await self._theirs(app, ask_id, person):
                return None
            return refuse(await self._refused(app, ask_id, exc))
        except StoreError as exc:
            return refuse(await self._refused(app, ask_id, exc))
        return None

    async def _theirs(self, app: AppKeys, ask_id: str, person: Person) -> bool:
        """The ask was ended by this person: their submission, sent again."""
        ended = await self.slack.ending_of(app.workspace_id, ask_id)
        return (
            ended is not None and ended[0] in ("answered", "declined") and ended[2] == person.handle
        )

    async def _person(self, app: AppKeys, user: str, channel: str) -> Person | None:
        """The account the Slack user is linked to; else None, and the user is
        told how to connect (or linked now by a verified email, where allowed)."""
        found = await self.slack.linked(app.workspace_id, app.team_id, user)
        if found is not None:
            return Person(*found)
        if app.email_match:
            try:
                info = await self.web.call("users.info", app.token, {"user": user})
            except SlackFailed as exc:
                log.warning("users.info for a Slack user of team %s: %s", app.team_id, exc.error)
                info = {}
            profile = info.get("user") or {}
            email = (profile.get("profile") or {}).get("email") or ""
            if email and profile.get("is_email_confirmed") and not profile.get("is_bot"):
                linked = await self.slack.link_by_email(app.workspace_id, app.team_id, user, email)
                if linked is not None:
                    return Person(*linked)
        code = await self.slack.link_code(app.workspace_id, app.team_id, user, self.link_lifetime)
        url = f"{self.public_url}/slack/link/{code}"
        await self._tell(
            app,
            channel,
            user,
            f"Connect your Compass account to answer here: <{url}|sign in to Compass> "
            "(the link works once), or type `/compass link CODE` with the code Compass's "
            "page shows under Settings, Slack. Nothing was answered.",
            escape=False,
        )
        return None

    async def _as(self, app: AppKeys, person: Person, ask_id: str) -> tuple[Actor | None, str]:
        """The person, acting on this one ask; else why they may not."""
        try:
            actor = await self.store.act_on_ask(app.workspace_id, ask_id, person.account_id)
        except FailedPrecondition:
            ended = await self.slack.ending_of(app.workspace_id, ask_id)
            return None, f"This ask has ended: {ending_text(*ended) if ended else 'closed'}."
        except PermissionDenied:
            named = await self.slack.answerers_of(app.workspace_id, ask_id)
            if named:
                return None, "This ask is for " + ", ".join(f"@{h}" for h in named) + "."
            return None, "You aren't in this ask's channel in Compass, so you can't answer it."
        except NotFound:
            return None, "You can't answer this ask from Compass's side."
        return actor, ""

    async def _refused(self, app: AppKeys, ask_id: str, exc: StoreError) -> str:
        if isinstance(exc, Conflict):
            ended = await self.slack.ending_of(app.workspace_id, ask_id)
            if ended is not None:
                return f"This ask has ended: {ending_text(*ended)}."
        return exc.message

    async def _tell(
        self, app: AppKeys, channel: str, user: str, text: str, *, escape: bool = True
    ) -> None:
        """An ephemeral message only the user sees."""
        if not channel:
            return
        try:
            await self.web.call(
                "chat.postEphemeral",
                app.token,
                {"channel": channel, "user": user, "text": blocks.said(text) if escape else text},
            )
        except SlackFailed as exc:
            log.warning("Slack app of team %s: %s", app.team_id, exc.error)

    # --- connecting a Slack user ----------------------------------------------------------

    async def _link(self, scope: dict[str, Any], receive: Any, send: Send, code: str) -> None:
        method = scope["method"]
        if method not in ("GET", "POST") or not SECRET_SHAPE.fullmatch(code):
            await respond(send, 404, page("Not found", para("There is no such page.")))
            return
        get = header_getter(scope.get("headers", ()))
        secret = self.cookies.session(get("cookie"))
        signed = None
        if secret is not None:
            try:
                signed = await self.auth.sign_in(f"Session {secret}", "account")
            except ApiError:
                signed = None
        if signed is None or not isinstance(signed.principal, Actor):
            here = f"/slack/link/{code}"
            logins = [
                f'<p><a href="/auth/login/{html.escape(p.name)}?return_to='
                f'{urllib.parse.quote(here, safe="")}">Sign in with {html.escape(p.label)}</a></p>'
                for p in (self.flow.configured() if self.flow else [])
            ]
            await respond(
                send,
                401,
                page(
                    "Sign in to connect Slack",
                    para("Sign in to Compass, then this link connects your Slack account."),
                    *logins,
                    para(
                        "Signed in to Compass with a token? Take a one-time code in Compass "
                        "(Notification settings, Slack) and type /compass link CODE in Slack."
                    ),
                ),
            )
            return
        actor = signed.principal
        if method == "GET":
            # A page and a button: a link someone else sends can't link you unseen.
            await respond(
                send,
                200,
                page(
                    "Connect Slack",
                    para(
                        "Answer Compass's asks from Slack as this account. Only continue "
                        "if you asked for this link in Slack yourself."
                    ),
                    '<form method="post"><button type="submit">Connect</button></form>',
                ),
            )
            return
        if not self.cookies.same_origin(get("origin"), get("host")):
            await respond(send, 403, page("Not here", para("Connect from Compass's own page.")))
            return
        try:
            await read_body(receive, 4096)
        except BodyRefused as exc:
            await respond(send, exc.status, page("Not taken", para(exc.why)))
            return
        linked = await self.slack.redeem_code(actor, actor.account_id, code)
        if linked is None:
            await respond(
                send,
                410,
                page("This link has been used or expired", para("Ask again from Slack.")),
            )
            return
        await respond(
            send,
            200,
            page("Slack connected", para("Your answers from Slack are now yours. Back to Slack!")),
        )


def _payload(body: bytes) -> dict[str, Any] | None:
    try:
        form = urllib.parse.parse_qs(body.decode("utf-8"), strict_parsing=False)
        data = json.loads(form["payload"][0])
    except (UnicodeDecodeError, KeyError, IndexError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _team(payload: Mapping[str, Any]) -> str | None:
    """The Slack team that says it sent this, when it names one the way Slack does."""
    team = payload.get("team")
    found = team.get("id") if isinstance(team, dict) else None
    if not found:
        user = payload.get("user")
        found = user.get("team_id") if isinstance(user, dict) else None
    return found if isinstance(found, str) and SLACK_ID.fullmatch(found) else None


class Unreadable(Exception):
    """A signed interaction of a shape Slack doesn't send."""


@dataclass(frozen=True, slots=True)
class Click:
    user: str
    channel: str
    action_id: str
    value: str
    action_ts: str
    trigger: str


@dataclass(frozen=True, slots=True)
class Submission:
    user: str
    callback_id: str
    metadata: str
    # Where a refusal shows: the modal's first input.
    first_input: str
    values: Mapping[str, Any]


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Unreadable(f"{key} is no object")
    return value


def _text(data: Mapping[str, Any], key: str) -> str:
    """A string of Slack's own (an id, a key): no control characters."""
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Unreadable(f"{key} is no string")
    try:
        check_line(value, key)
    except InvalidArgument as exc:
        raise Unreadable(exc.message) from None
    return value


def _id(data: Mapping[str, Any], key: str) -> str:
    value = _text(data, key)
    if value and not SLACK_ID.fullmatch(value):
        raise Unreadable(f"{key} is no Slack id")
    return value


def _click_of(payload: Mapping[str, Any]) -> Click | None:
    actions = payload.get("actions")
    if actions is not None and not isinstance(actions, list):
        raise Unreadable("actions is no list")
    if not actions:
        return None
    action = actions[0]
    if not isinstance(action, dict):
        raise Unreadable("an action is no object")
    return Click(
        user=_id(_table(payload, "user"), "id"),
        channel=_id(_table(payload, "channel"), "id"),
        action_id=_text(action, "action_id"),
        value=_text(action, "value"),
        action_ts=_text(action, "action_ts"),
        trigger=_text(payload, "trigger_id"),
    )


def _submission_of(payload: Mapping[str, Any]) -> Submission:
    view = _table(payload, "view")
    shown = view.get("blocks")
    if shown is not None and not (
        isinstance(shown, list) and all(isinstance(b, dict) for b in shown)
    ):
        raise Unreadable("blocks is no list of objects")
    first = next((_text(b, "block_id") for b in shown or [] if b.get("type") == "input"), "reason")
    return Submission(
        user=_id(_table(payload, "user"), "id"),
        callback_id=_text(view, "callback_id"),
        metadata=_text(view, "private_metadata"),
        first_input=first or "reason",
        values=_values(_table(view, "state")),
    )


def _values(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """A modal's inputs, checked to be what Slack sends: block → action → an
    input's value, or its selected option(s), each with a string value."""
    values = _table(state, "values")
    for block in values.values():
        if not isinstance(block, dict):
            raise Unreadable("an input's block is no object")
        for action in block.values():
            if not isinstance(action, dict):
                raise Unreadable("an input is no object")
            if action.get("value") is not None and not isinstance(action["value"], str):
                raise Unreadable("an input's value is no string")
            picked = action.get("selected_options") or []
            one = action.get("selected_option")
            if not isinstance(picked, list):
                raise Unreadable("selected_options is no list")
            for option in [*picked, *([one] if one is not None else [])]:
                if not isinstance(option, dict):
                    raise Unreadable("a selected option is no object")
                _text(option, "value")
    return values
