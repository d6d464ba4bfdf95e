"""Where a webhook may go: an http(s) URL whose host is a public address,
unless the operator allows a network explicitly.

The check is made on every attempt, on the addresses the host resolves to
then, and the request goes to the address that was checked (the URL's host
rides along as Host and TLS server name), so a name that resolves to a public
address at one moment and a private one the next never reaches the latter.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from compass_server.store.errors import InvalidArgument

MAX_URL_CHARS = 2_000

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(Exception):
    """The destination may not be reached; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Destination:
    scheme: str
    host: str  # as in the URL, without brackets
    port: int
    # Path and query, never empty.
    target: str

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def shown(self) -> str:
        """The URL as lists show it: a Slack webhook's path is its secret, so
        no more of the path than its first segment."""
        first, _, rest = self.target.lstrip("/").partition("/")
        first = first.partition("?")[0]
        path = f"/{first}" + ("/…" if rest or "?" in self.target else "")
        return f"{self.scheme}://{self.authority}{path if first else ''}"

    def at(self, address: Address) -> str:
        """The URL with its host replaced by an address that was checked."""
        host = f"[{address}]" if address.version == 6 else str(address)
        return f"{self.scheme}://{host}:{self.port}{self.target}"


def parse(url: str) -> Destination:
    """The URL's parts; INVALID_ARGUMENT naming what is wrong."""
    if len(url) > MAX_URL_CHARS:
        raise InvalidArgument(f"a webhook URL is at most {MAX_URL_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise InvalidArgument("the webhook URL is not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidArgument("a webhook URL starts with https:// or http://")
    if not parts.hostname:
        raise InvalidArgument("the webhook URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument("a webhook URL carries no user or password; the signature proves it")
    if parts.fragment:
        raise InvalidArgument("a webhook URL has no #fragment")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url.strip()):
        raise InvalidArgument("the webhook URL has a space or a control character")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(
        parts.scheme,
        parts.hostname,
        port or (443 if parts.scheme == "https" else 80),
        target,
    )


def networks(text: str) -> tuple[Network, ...]:
    """Comma-separated networks (CIDR or single addresses)."""
    out = []
    for part in text.split(","):
        if part.strip():
            try:
                out.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ValueError(f"{part.strip()!r} is not a network like 10.0.0.0/8") from None
    return tuple(out)


def _plain(address: Address) -> Address:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class Reach:
    """Which addresses webhooks may go to: public ones, and those of the
    networks the operator allows (COMPASS_WEBHOOK_ALLOWED_NETWORKS)."""

    def __init__(self, allowed: Sequence[Network] = ()) -> None:
        self.allowed = tuple(allowed)

    def permits(self, address: Address) -> bool:
        address = _plain(address)
        if any(address in net for net in self.allowed if net.version == address.version):
            return True
        return address.is_global and not address.is_multicast

    async def resolve(self, dest: Destination) -> Address:
        """The first permitted address the host resolves to now; Refused
        saying why when there is none."""
        try:
            found: list[Address] = [ipaddress.ip_address(dest.host)]
        except ValueError:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    dest.host, dest.port, type=socket.SOCK_STREAM
                )
            except (socket.gaierror, UnicodeError):
                raise Refused(f"the host {dest.host} doesn't resolve") from None
            found = list(dict.fromkeys(ipaddress.ip_address(i[4][0]) for i in infos))
        for address in found:
            if self.permits(address):
                return address
        if _host_address(dest) is not None:
            where = f"{dest.host} is not a public address"
        else:
            shown = ", ".join(str(a) for a in found[:3])
            where = f"{dest.host} resolves to {shown}, not a public address"
        raise Refused(
            f"{where}; an operator may allow its network with COMPASS_WEBHOOK_ALLOWED_NETWORKS"
        )

    async def check(self, url: str) -> Destination:
        """A URL an endpoint may be created with: INVALID_ARGUMENT when it is
        malformed or its host is no permitted address now."""
        dest = parse(url)
        try:
            await self.resolve(dest)
        except Refused as exc:
            raise InvalidArgument(f"the webhook URL is refused: {exc.message}") from None
        return dest


def _host_address(dest: Destination) -> Address | None:
    try:
        return ipaddress.ip_address(dest.host)
    except ValueError:
        return None
