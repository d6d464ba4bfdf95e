"""One attempt at an email delivery: mint the person's link, write the mail,
hand it to the SMTP relay (aiosmtplib), all by the attempt's deadline.

A mail that isn't urgent waits out the person's quiet hours. A refusal
the relay means for good (a 5xx) or an ask that ended before the
mail went ends the delivery with no retry; anything else is retried on the
webhook schedule, with the same Message-ID.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

import aiosmtplib

from compass_server.notify.email import LINKED, render
from compass_server.notify.preferences import Preferences, held
from compass_server.store.errors import StoreError
from compass_server.store.links import MintedLink
from compass_server.store.types import ClaimedDelivery
from compass_server.webhooks.sender import Outcome

PreferencesOf = Callable[[uuid.UUID, uuid.UUID], Awaitable[Preferences]]


class Links(Protocol):
    async def mint_ask_link(
        self, workspace_id: uuid.UUID, ask_id: str, account_id: uuid.UUID
    ) -> MintedLink: ...

    async def mail_reply_token(
        self, workspace_id: uuid.UUID, ask_id: str, account_id: uuid.UUID
    ) -> str: ...


@dataclass(frozen=True, slots=True)
class Relay:
    """Where mail goes, from the server's settings."""

    host: str
    port: int
    # "none", "starttls" or "tls" (implicit TLS from the first byte).
    security: str = "starttls"
    username: str | None = None
    password: str | None = None
    # A CA bundle to verify the relay by instead of the system's.
    ca_file: str | None = None


class Outgoing:
    """Mail sent through the relay, its TLS context made once: a
    notification, and the answer to a reply."""

    def __init__(self, relay: Relay, timeout: float) -> None:
        self.relay = relay
        self.timeout = timeout
        self._tls: ssl.SSLContext | None = None
        if relay.security != "none":
            self._tls = ssl.create_default_context(cafile=relay.ca_file)

    async def send(
        self, msg: EmailMessage, *, sender: str | None = None, recipients: list[str] | None = None
    ) -> None:
        """Sends `msg` (to and from its headers' addresses unless given)."""
        await aiosmtplib.send(
            msg,
            sender=sender,
            recipients=recipients,
            hostname=self.relay.host,
            port=self.relay.port,
            username=self.relay.username,
            password=self.relay.password,
            use_tls=self.relay.security == "tls",
            start_tls=self.relay.security == "starttls",
            tls_context=self._tls,
            timeout=self.timeout,
        )


def _why(exc: BaseException, where: str, timeout: float) -> tuple[str, bool]:
    """What went wrong, in our words, and whether it is for good."""
    if isinstance(exc, TimeoutError | aiosmtplib.SMTPTimeoutError):
        return f"no answer from the mail relay {where} within {timeout:g} s", False
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        codes = sorted({r.code for r in exc.recipients})
        return f"the mail relay {where} refused the recipient ({codes})", all(
            c >= 500 for c in codes
        )
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        return f"the mail relay {where} refused the credentials ({exc.code})", False
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return f"the mail relay {where} answered {exc.code}", exc.code >= 500
    if isinstance(exc, aiosmtplib.SMTPConnectError | ConnectionError):
        return f"couldn't connect to the mail relay {where}", False
    if isinstance(exc, ssl.SSLError):
        return f"the TLS handshake with the mail relay {where} failed", False
    return f"sending to the mail relay {where} failed ({type(exc).__name__})", False


class Mailer:
    def __init__(
        self,
        relay: Relay,
        links: Links,
        public_url: str,
        *,
        timeout: float,
        preferences: PreferencesOf | None = None,
        reply_domain: str | None = None,
    ) -> None:
        self.relay = relay
        # Mails about asks carry a reply address of this domain, when set.
        self.reply_domain = reply_domain
        self.preferences = preferences
        self.links = links
        self.public_url = public_url.rstrip("/")
        self.timeout = timeout
        self.where = f"{relay.host}:{relay.port}"
        self.outgoing = Outgoing(relay, timeout)

    async def send(self, delivery: ClaimedDelivery, deadline: float) -> Outcome:
        started = time.monotonic()

        def took() -> float:
            return (time.monotonic() - started) * 1000

        body = json.loads(delivery.body)
        link = ""
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                if self.preferences is not None and not body.get("urgent"):
                    prefs = await self.preferences(
                        delivery.workspace_id, uuid.UUID(body["account_id"])
                    )
                    wait = held(prefs)
                    if wait is not None:
                        why, after = wait
                        return Outcome(False, None, took(), why, retry_after=after)
                if body["stage"] in LINKED:
                    try:
                        minted = await self.links.mint_ask_link(
                            delivery.workspace_id, body["ask_id"], uuid.UUID(body["account_id"])
                        )
                    except StoreError as exc:
                        # Ended, or no longer theirs to answer: a mail would open nothing.
                        return Outcome(False, None, took(), f"not sent: {exc.message}", final=True)
                    link = f"{self.public_url}/a/{minted.secret}"
                reply_to = ""
                if link and self.reply_domain:
                    token = await self.links.mail_reply_token(
                        delivery.workspace_id, body["ask_id"], uuid.UUID(body["account_id"])
                    )
                    reply_to = f"ask+{token}@{self.reply_domain}"
                msg = render(body, delivery.url.removeprefix("mailto:"), link, reply_to)
                await self.outgoing.send(msg)
        except Exception as exc:
            why, final = _why(exc, self.where, self.timeout)
            return Outcome(False, None, took(), why, final=final)
        return Outcome(True, None, took(), "")
