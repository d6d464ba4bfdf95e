"""The browser session's cookie, and the checks a request signed in by it
must pass (CSRF): a header a cross-site form or `<img>` can't send, and an
Origin of this server itself."""

from __future__ import annotations

import http.cookies
import urllib.parse
from collections.abc import Callable, Iterable

from compass_server.api.errors import ApiError, Status

SESSION_COOKIE = "compass_session"
# The page sends it with every call; a cross-site form can't, and a cross-site
# fetch can't without a CORS preflight this server never grants.
CSRF_HEADER = "x-compass-csrf"

CROSS_SITE = ApiError(
    Status.PERMISSION_DENIED,
    "a call signed in by the browser session must come from this server's own page "
    f"(with its Origin and the {CSRF_HEADER} header)",
)


def cookie(header: str | None, name: str) -> str | None:
    """A cookie's value from a Cookie header; None when absent."""
    if not header:
        return None
    jar = http.cookies.SimpleCookie()
    try:
        jar.load(header)
    except http.cookies.CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None and morsel.value else None


def _netloc(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return ""
    return parts.netloc.lower() if parts.scheme in ("http", "https") else ""


class SessionCookies:
    """How the transports turn a session cookie into a sign-in."""

    def __init__(self, public_url: str, secure: bool) -> None:
        # The page's own origin as configured; the request's Host counts too.
        self.public = _netloc(public_url)
        self.secure = secure

    def same_origin(self, origin: str | None, host: str | None) -> bool:
        if not origin:
            return False
        where = _netloc(origin)
        return bool(where) and where in {self.public, (host or "").lower()}

    def authorization(self, get: Callable[[str], str | None]) -> str | None:
        """The request's authorization: its own header when it has one, else
        its session cookie (as `Session <secret>`) once the request is shown
        to come from this server's page; None when it carries neither."""
        given = get("authorization")
        if given:
            return given
        secret = cookie(get("cookie"), SESSION_COOKIE)
        if secret is None:
            return None
        if not get(CSRF_HEADER) or not self.same_origin(get("origin"), get("host")):
            raise CROSS_SITE
        return f"Session {secret}"

    def set(self, secret: str, max_age: int) -> str:
        """The Set-Cookie value of a new session."""
        return self.header(SESSION_COOKIE, secret, "/", max_age)

    def clear(self, name: str = SESSION_COOKIE, path: str = "/") -> str:
        return self.header(name, "", path, 0)

    def header(self, name: str, value: str, path: str, max_age: int) -> str:
        parts = [
            f"{name}={value}",
            f"Path={path}",
            f"Max-Age={max_age}",
            "HttpOnly",
            "SameSite=Lax",
        ]
        if self.secure:
            parts.append("Secure")
        return "; ".join(parts)


def header_getter(headers: Iterable[tuple[bytes, bytes]]) -> Callable[[str], str | None]:
    """Looks headers of an ASGI scope up by lower-case name."""
    found: dict[str, str] = {}
    for key, value in headers:
        found.setdefault(bytes(key).decode("latin-1").lower(), bytes(value).decode("latin-1"))
    return found.get
