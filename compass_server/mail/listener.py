"""The server's own SMTP listener for replies (aiosmtpd, in the server's
event loop): a recipient that isn't one of its reply addresses is refused
at RCPT (550, so nothing bounces later), a mail past the size limit at DATA
(552), and a reply is handled before DATA is answered, so a relay that gets
250 knows it was taken (a failure answers 451: the relay tries again). With
the server's certificate it offers STARTTLS."""

from __future__ import annotations

import asyncio
import email
import email.message
import email.policy
import logging
import ssl
from typing import Any

from aiosmtpd.smtp import SMTP, TLSSetupException

from compass_server.mail.inbound import Replies, inbound_of

log = logging.getLogger(__name__)

# Recipients one mail may name: a reply goes to one address.
MAX_RECIPIENTS = 10
# A client that says nothing this long is let go.
IDLE_SECONDS = 60.0


class _Handler:
    def __init__(self, replies: Replies) -> None:
        self.replies = replies

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 too many recipients"
        try:
            known = await self.replies.known(address)
        except Exception:
            log.exception("checking a reply address failed")
            return "451 4.3.0 try again later"
        if not known:
            return "550 5.1.1 no such reply address here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        content = envelope.content
        if isinstance(content, str):
            content = content.encode("utf-8", "surrogateescape")
        try:
            message = email.message_from_bytes(content, policy=email.policy.default)
            assert isinstance(message, email.message.EmailMessage)
            mail = inbound_of(message, envelope.mail_from, list(envelope.rcpt_tos))
        except Exception:
            # A mail the parser can't read is refused for good: sent again, it reads no better.
            log.info("a reply by mail that can't be read was refused")
            return "554 5.6.0 this mail can't be read"
        try:
            outcome = await self.replies.take(mail)
        except Exception:
            log.exception("a reply by mail failed")
            return "451 4.3.0 try again later"
        log.info("a reply by mail: %s", outcome.value)
        return "250 OK"

    async def handle_exception(self, error: Exception) -> str:
        """What aiosmtpd would log with a traceback and answer with the
        error's own text: a client's failed handshake is the client's (its
        connection is closed); anything else is ours, logged, and the client
        is told only to try again."""
        if isinstance(error, TLSSetupException):
            log.info("a client's STARTTLS handshake failed; its connection was closed")
        else:
            log.error("an SMTP command failed", exc_info=error)
        return "451 4.3.0 try again later"


class MailListener:
    def __init__(
        self,
        replies: Replies,
        *,
        most_bytes: int,
        hostname: str,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        self.handler = _Handler(replies)
        self.most_bytes = most_bytes
        self.hostname = hostname
        self.tls_context = tls_context
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: SMTP(
                self.handler,
                data_size_limit=self.most_bytes,
                hostname=self.hostname,
                ident="Compass",
                timeout=IDLE_SECONDS,
                loop=loop,
                # Offered, not required: the relay in front decides.
                tls_context=self.tls_context,
                require_starttls=False,
            ),
            host,
            port,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
