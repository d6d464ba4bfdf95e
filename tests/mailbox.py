"""A real SMTP server on loopback (aiosmtpd) that keeps what it is sent."""

from __future__ import annotations

import asyncio
import email
import email.message
import email.policy
import socket
import threading
from typing import Any

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Mailbox:
    """Mail received, parsed; `refuse` (an SMTP code) answers DATA with it
    instead; `delay` holds each DATA that long before answering, `holding`
    until it is set False again (`held` counts the DATAs waiting so)."""

    def __init__(self, port: int | None = None, **smtp: Any) -> None:
        """`smtp`: aiosmtpd's SMTP options (tls_context, require_starttls,
        auth_required, authenticator, …)."""
        self.port = port or free_port()
        self.smtp = smtp
        self.mail: list[email.message.EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.refuse: int | None = None
        self.delay = 0.0
        self.held = 0
        self._released = threading.Event()
        self._released.set()
        self._lock = threading.Lock()
        self._controller: Controller | None = None

    @property
    def holding(self) -> bool:
        return not self._released.is_set()

    @holding.setter
    def holding(self, hold: bool) -> None:
        if hold:
            self._released.clear()
        else:
            self._released.set()

    @property
    def running(self) -> bool:
        return self._controller is not None

    def start(self) -> Mailbox:
        # A controller runs once: each start is a new one on the same port.
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port, **self.smtp)
        self._controller.start()
        return self

    def stop(self) -> None:
        """Stops listening (it may start again on the same port)."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.holding:
            self.held += 1
            await asyncio.to_thread(self._released.wait)
        if self.refuse is not None:
            return f"{self.refuse} not now"
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(parsed, email.message.EmailMessage)
        with self._lock:
            self.mail.append(parsed)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"

    def to(self, address: str) -> list[email.message.EmailMessage]:
        with self._lock:
            return [m for m in self.mail if m["To"] == address]

    async def wait_for(self, address: str, n: int = 1, wait: float = 20.0) -> list[Any]:
        for _ in range(int(wait / 0.05)):
            got = self.to(address)
            if len(got) >= n:
                return got
            await asyncio.sleep(0.05)
        raise AssertionError(f"{address} got {len(self.to(address))} mail(s), not {n}")


def parts(msg: email.message.EmailMessage) -> tuple[str, str]:
    """The text and HTML parts."""
    text = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert text is not None and html is not None
    return text.get_content(), html.get_content()
