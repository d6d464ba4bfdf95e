"""The browser session's cookie (and a sign-in's under way), and the checks
a request signed in by it must pass (CSRF): a header a cross-site form or
`<img>` can't send, and an Origin of this server itself.

Under https each cookie's name has the `__Host-` prefix: the browser then
keeps it only as this host set it (Secure, Path=/, no Domain), so a sibling
origin (another subdomain) can't set one for Compass. Cookies never tell
ports apart: anything else served on the same host name can still read and
set them, so Compass wants a host name of its own."""

from __future__ import annotations

import http.cookies
import urllib.parse
from collections.abc import Callable, Iterable

from compass_server.api.errors import ApiError, Status

SESSION_COOKIE = "compass_session"
ATTEMPT_COOKIE = "compass_signin"
HOST_ONLY = "__Host-"
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
        prefix = HOST_ONLY if secure else ""
        self.session_name = prefix + SESSION_COOKIE
        self.attempt_name = prefix + ATTEMPT_COOKIE

    def same_origin(self, origin: str | None, host: str | None) -> bool:
        if not origin:
            return False
        where = _netloc(origin)
        return bool(where) and where in {self.public, (host or "").lower()}

    def session(self, header: str | None) -> str | None:
        """The session's secret from a Cookie header, under this server's name
        for it only (a cookie a sibling origin set counts for nothing)."""
        return cookie(header, self.session_name)

    def attempt(self, header: str | None) -> str | None:
        return cookie(header, self.attempt_name)

    def authorization(self, get: Callable[[str], str | None]) -> str | None:
        """The request's authorization: its own header when it has one, else
        its session cookie (as `Session <secret>`) once the request is shown
        to come from this server's page; None when it carries neither."""
        given = get("authorization")
        if given:
            return given
        secret = self.session(get("cookie"))
        if secret is None:
            return None
        if not get(CSRF_HEADER) or not self.same_origin(get("origin"), get("host")):
            raise CROSS_SITE
        return f"Session {secret}"

    def set(self, secret: str, max_age: int) -> str:
        """The Set-Cookie value of a new session."""
        return self.header(self.session_name, secret, max_age)

    def set_attempt(self, sealed: str, max_age: int) -> str:
        return self.header(self.attempt_name, sealed, max_age)

    def clear(self) -> str:
        return self.header(self.session_name, "", 0)

    def clear_attempt(self) -> str:
        return self.header(self.attempt_name, "", 0)

    def header(self, name: str, value: str, max_age: int) -> str:
        # Path=/ always: a __Host- cookie must have it.
        parts = [f"{name}={value}", "Path=/", f"Max-Age={max_age}", "HttpOnly", "SameSite=Lax"]
        if self.secure:
            parts.append("Secure")
        return "; ".join(parts)


def header_getter(headers: Iterable[tuple[bytes, bytes]]) -> Callable[[str], str | None]:
    """Looks headers of an ASGI scope up by lower-case name."""
    found: dict[str, str] = {}
    for key, value in headers:
        found.setdefault(bytes(key).decode("latin-1").lower(), bytes(value).decode("latin-1"))
    return found.get
