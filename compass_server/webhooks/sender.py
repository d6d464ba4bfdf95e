"""One attempt at a delivery: a POST to the checked address, cut off at its
deadline, the response read no further than a few kilobytes.

httpx does the HTTP; redirects are not followed (a 3xx is a failure) and no
proxy from the environment is used, since either would send the request
somewhere the address check never saw. Connections are pooled per address,
at most one per delivery in flight.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import time
from dataclasses import dataclass

import httpx

from compass_server.store.errors import InvalidArgument
from compass_server.webhooks.destination import Reach, Refused, parse

log = logging.getLogger(__name__)

USER_AGENT = "Compass-Webhooks/1"
# The start of a receiver's response kept with the attempt, in characters.
RESPONSE_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class Outcome:
    delivered: bool
    status_code: int | None
    latency_ms: float
    # Why it failed, in the server's own words; empty when delivered.
    error: str
    response: str = ""
    # No attempt after this one: the failure is for good.
    final: bool = False
    # The 410 was about one recipient (a push subscription), not the endpoint.
    recipient_gone: bool = False
    # Try again after this long, whatever the retry schedule says.
    retry_after: datetime.timedelta | None = None

    @property
    def gone(self) -> bool:
        """The receiver said 410 Gone: it wants no more."""
        return self.status_code == 410 and not self.recipient_gone


def _readable(raw: bytes | bytearray) -> str:
    text = raw.decode("utf-8", errors="replace")
    kept = "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)
    return kept[:RESPONSE_CHARS]


def _why(exc: BaseException, where: str, timeout: float) -> str:
    """What went wrong, said by us: never the exception's own text."""
    if isinstance(exc, Refused):
        return f"refused: {exc.message}"
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return f"no response from {where} within {timeout:g} s"
    if isinstance(exc, httpx.ConnectError):
        cause = exc.__cause__ or exc.__context__
        while cause is not None and not isinstance(cause, OSError):
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"the TLS certificate of {where} didn't verify"
        if isinstance(cause, ssl.SSLError):
            return f"the TLS handshake with {where} failed"
        if isinstance(cause, ConnectionRefusedError):
            return f"{where} refused the connection"
        return f"couldn't connect to {where}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{where} closed the connection or answered with something that isn't HTTP"
    if not isinstance(exc, httpx.HTTPError | OSError):
        log.exception("a webhook attempt to %s failed unexpectedly", where, exc_info=exc)
    return f"the request to {where} failed ({type(exc).__name__})"


class Sender:
    def __init__(
        self, reach: Reach, *, timeout: float, response_bytes: int, connections: int
    ) -> None:
        self.reach = reach
        self.timeout = timeout
        self.response_bytes = response_bytes
        # httpx logs every request's full URL at INFO, and an endpoint's URL
        # (a Slack one above all) is a secret, stored sealed: never logged.
        logging.getLogger("httpx").setLevel(logging.WARNING)
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(
                max_connections=connections,
                max_keepalive_connections=connections,
                keepalive_expiry=30.0,
            ),
            follow_redirects=False,
            trust_env=False,
        )

    async def close(self) -> None:
        await self.client.aclose()

    async def post(
        self, url: str, headers: dict[str, str], body: bytes, deadline: float
    ) -> Outcome:
        """POSTs `body` to `url`, done by `deadline` (time.monotonic())."""
        started = time.monotonic()
        try:
            dest = parse(url)
        except InvalidArgument as exc:
            return Outcome(False, None, 0.0, f"refused: {exc.message}")
        where = dest.authority
        status: int | None = None
        got = bytearray()
        try:
            async with asyncio.timeout_at(_loop_time(deadline)):
                address = await self.reach.resolve(dest)
                where = f"{dest.authority} ({address})" if str(address) != dest.host else where
                async with self.client.stream(
                    "POST",
                    dest.at(address),
                    content=body,
                    headers={
                        "host": dest.authority,
                        "content-type": "application/json",
                        "user-agent": USER_AGENT,
                        "accept-encoding": "identity",
                        **headers,
                    },
                    extensions={"sni_hostname": dest.host} if dest.scheme == "https" else {},
                ) as response:
                    status = response.status_code
                    # Read a little: closing early drops the connection rather
                    # than reading whatever a receiver sends.
                    async for chunk in response.aiter_raw():
                        got += chunk[: self.response_bytes - len(got)]
                        if len(got) >= self.response_bytes:
                            break
        except Exception as exc:
            took = (time.monotonic() - started) * 1000
            return Outcome(False, status, took, _why(exc, where, self.timeout), _readable(got))
        took = (time.monotonic() - started) * 1000
        ok = 200 <= status < 300
        error = "" if ok else f"{where} answered HTTP {status}"
        return Outcome(ok, status, took, error, _readable(got))


def _loop_time(deadline: float) -> float:
    """A time.monotonic() deadline on the running loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline - time.monotonic())
