"""POST /mail/inbound: an inbound-parse webhook, in the shape the common
providers post (SendGrid's fields from, to, subject, text, html, envelope,
SPF, dkim, headers; Mailgun's names of the same are read too), as
multipart/form-data or a urlencoded form. It carries the operator's secret
(?key=, or authorization: Bearer it, or Basic with it as the password)."""

from __future__ import annotations

import base64
import binascii
import email
import email.errors
import email.message
import email.parser
import email.policy
import email.utils
import hmac
import json
import logging
import urllib.parse
import uuid
from typing import Any

from compass_server.mail.inbound import Inbound, Replies, automatic, results_of
from compass_server.mail.reading import address_of, text_of_html
from compass_server.transport.cookies import header_getter
from compass_server.transport.people_http import Send, read_body_or_refuse, respond

log = logging.getLogger(__name__)

Form = dict[str, str]


class Unreadable(Exception):
    """A body that is no form of the kind providers post."""


def _form(content_type: str, body: bytes) -> Form:
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        except (UnicodeDecodeError, ValueError):
            raise Unreadable("the form isn't UTF-8") from None
        return dict(pairs)
    if kind != "multipart/form-data" or "boundary=" not in content_type:
        raise Unreadable("the body is a multipart/form-data or urlencoded form")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not parsed.is_multipart():
        raise Unreadable("the form has no parts")
    out: Form = {}
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or part.get_filename():
            continue  # attachments are not read
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        out[name] = payload.decode(part.get_content_charset() or "utf-8", "replace")
    return out


def _first(form: Form, *names: str) -> str | None:
    for name in names:
        if name in form:
            return form[name]
    return None


def inbound_of_form(form: Form) -> Inbound:
    """The mail a provider's form describes; Unreadable without its sender
    and recipients."""
    headers = email.parser.HeaderParser(policy=email.policy.default).parsestr(
        form.get("headers", "")
    )
    sender = address_of(_first(form, "from", "From", "sender") or "")
    to = _first(form, "to", "To", "recipient") or ""
    recipients = [a for _, a in email.utils.getaddresses([to]) if a]
    envelope_from: str | None = None
    raw = form.get("envelope")
    if raw:
        try:
            envelope = json.loads(raw)
        except (ValueError, RecursionError):
            raise Unreadable("envelope isn't JSON") from None
        if not isinstance(envelope, dict):
            raise Unreadable("envelope isn't an object")
        given_to, given_from = envelope.get("to"), envelope.get("from")
        if isinstance(given_to, list) and all(isinstance(a, str) for a in given_to):
            recipients = given_to
        if isinstance(given_from, str):
            envelope_from = given_from
    elif "sender" in form:
        envelope_from = form["sender"]
    if not sender or not recipients:
        raise Unreadable("the form names no sender (from) or no recipient (to)")
    spf = _first(form, "SPF", "spf", "X-Mailgun-Spf")
    dkim = _first(form, "dkim", "DKIM", "X-Mailgun-Dkim-Check-Result")
    if spf is None and dkim is None:
        spf, dkim = results_of([str(v) for v in headers.get_all("Authentication-Results") or []])
    text = _first(form, "text", "body-plain")
    if text is None:
        text = text_of_html(_first(form, "html", "body-html") or "")
    return Inbound(
        sender=sender,
        envelope_from=envelope_from,
        recipients=tuple(recipients[:10]),
        subject=" ".join((_first(form, "subject", "Subject") or "").split()),
        message_id=str(headers.get("Message-ID") or form.get("Message-Id") or "").strip(),
        text=text,
        automatic=automatic(headers),
        spf=None if spf is None else _verdict(spf, sender),
        dkim=None if dkim is None else _verdict(dkim, sender),
    )


def _verdict(reported: str, sender: str) -> str:
    """One word of a provider's result: SendGrid's dkim is `{@domain : pass}`
    per signature; the sender's domain's counts."""
    text = reported.strip().lower()
    if text.startswith("{"):
        domain = sender.rpartition("@")[2].lower()
        for entry in text.strip("{}").split(","):
            signer, _, result = entry.partition(":")
            if signer.strip().lstrip("@") == domain:
                return result.strip()
        return "none"
    return text.split()[0] if text else "none"


class MailRoutes:
    """/mail/…, as one ASGI app the router hands those paths."""

    def __init__(self, replies: Replies | None, secret: str | None, *, most_bytes: int) -> None:
        self.replies = replies
        self.secret = secret
        self.most_bytes = most_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        try:
            await self._route(scope, receive, send)
        except Exception:
            incident = uuid.uuid4().hex[:12]
            log.exception("inbound mail failed (incident %s)", incident)
            await respond(send, 500, f"incident {incident}\n".encode(), "text/plain")

    async def _route(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["path"] != "/mail/inbound" or self.replies is None or not self.secret:
            await respond(send, 404, b"no such page\n", "text/plain")
            return
        if scope["method"] != "POST":
            await respond(send, 405, b"a mail provider posts here\n", "text/plain")
            return
        get = header_getter(scope.get("headers", ()))
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if not self._carries_secret((query.get("key") or [""])[0], get("authorization") or ""):
            await respond(send, 401, b"this webhook needs its secret\n", "text/plain")
            return
        body = await read_body_or_refuse(receive, send, self.most_bytes)
        if body is None:
            return
        try:
            mail = inbound_of_form(_form(get("content-type") or "", body))
        except Unreadable as exc:
            await respond(send, 400, f"not a mail Compass can read: {exc}\n".encode(), "text/plain")
            return
        except (ValueError, LookupError, TypeError, email.errors.MessageError) as exc:
            log.info("an inbound mail that can't be read (%s)", type(exc).__name__)
            await respond(send, 400, b"not a mail Compass can read\n", "text/plain")
            return
        outcome = await self.replies.take(mail)
        log.info("a reply by mail (webhook): %s", outcome.value)
        said = json.dumps({"outcome": outcome.value}).encode()
        await respond(send, 200, said, "application/json")

    def _carries_secret(self, key: str, authorization: str) -> bool:
        assert self.secret
        given = key
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            given = given or value.strip()
        elif scheme.lower() == "basic":
            try:
                given = given or base64.b64decode(value.strip()).decode().partition(":")[2]
            except (binascii.Error, UnicodeDecodeError, ValueError):
                return False
        return bool(given) and hmac.compare_digest(given.encode(), self.secret.encode())
