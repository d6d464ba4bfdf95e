"""What every answer on the HTTP port tells the browser, in one place.

Pages and files may be framed by no one (a page on another port of the
same host could otherwise frame the signed-in app and lead clicks), run no
inline script and load nothing from another origin. Connect answers are
never sniffed as another type nor kept by a cache.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Header = tuple[bytes, bytes]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# The app: its own scripts, styles and data; pictures as blob: URLs it makes.
APP_POLICY = (
    "default-src 'self'; img-src 'self' blob:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


# A server-made page (sign-in, its errors, Slack's link page): no script at
# all, the app's one stylesheet, forms only to this server.
PAGE_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# A one-ask link's page: the app's own modules and stylesheet, calls to this
# server only; still no inline script.
LINK_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


PAGE_HEADERS: tuple[Header, ...] = (
    (b"content-security-policy", APP_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
)
CONNECT_HEADERS: tuple[Header, ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
)


def with_headers(send: Send, headers: Sequence[Header], *, replace: bool = False) -> Send:
    """Sends each answer with these headers: added where it has none of the
    name (or, with `replace`, instead of its own)."""
    names = {name for name, _ in headers}

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            own = list(message.get("headers", ()))
            present = {bytes(k).lower() for k, _ in own}
            if replace:
                own = [(k, v) for k, v in own if bytes(k).lower() not in names]
                present -= names
            own += [(k, v) for k, v in headers if k not in present]
            message = {**message, "headers": own}
        await send(message)

    return sending
