"""A sign-in under way, kept by the browser that started it: a short-lived
cookie, a JWT signed (HS256, by joserfc) with the deployment's sign-in key,
naming the provider, the state and where to go after.

Nothing of it is kept on the server, so no client can use up what others
need. The nonce and the PKCE verifier are not in the cookie: each is
derived from the state with the key, so only a server can know them, and
any server may take the callback.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from joserfc import errors as jose
from joserfc import jwt
from joserfc.jwk import OctKey

# The most a browser is sure to keep of one cookie (RFC 6265 asks for at
# least 4096 bytes with its name); past it the attempt goes home afterwards.
MAX_COOKIE_CHARS = 3_800


@dataclass(frozen=True, slots=True)
class Attempt:
    provider: str
    state: str
    return_to: str


class AttemptRefused(Exception):
    """The browser holds no attempt of this state: none, another, a forged
    one, or one past its time (`expired`)."""

    def __init__(self, expired: bool = False) -> None:
        super().__init__("expired" if expired else "not this browser's")
        self.expired = expired


class AttemptSeal:
    def __init__(self, key: bytes, lifetime: float) -> None:
        self._raw = key
        self._key = OctKey.import_key(key)
        self.lifetime = lifetime

    def seal(self, attempt: Attempt, home: str) -> str:
        """The cookie's value; one going `home` afterwards when the return
        address would make it too long to be kept."""
        now = int(time.time())
        claims = {
            "provider": attempt.provider,
            "state": attempt.state,
            "return_to": attempt.return_to,
            "iat": now,
            "exp": now + max(1, int(self.lifetime)),
        }
        sealed = jwt.encode({"alg": "HS256"}, claims, self._key)
        if len(sealed) > MAX_COOKIE_CHARS:
            sealed = jwt.encode({"alg": "HS256"}, {**claims, "return_to": home}, self._key)
        return sealed

    def open(self, sealed: str | None, state: str) -> Attempt:
        """The attempt the browser holds for this state; AttemptRefused else."""
        if not sealed or not state or len(sealed) > MAX_COOKIE_CHARS:
            raise AttemptRefused()
        try:
            claims = jwt.decode(sealed, self._key, algorithms=["HS256"]).claims
        except (jose.JoseError, ValueError, TypeError, KeyError, RecursionError):
            raise AttemptRefused() from None
        provider, held, return_to = (claims.get(k) for k in ("provider", "state", "return_to"))
        if not all(isinstance(v, str) for v in (provider, held, return_to)):
            raise AttemptRefused()
        assert isinstance(provider, str) and isinstance(held, str) and isinstance(return_to, str)
        if not hmac.compare_digest(held.encode(), state.encode()):
            raise AttemptRefused()
        try:
            jwt.JWTClaimsRegistry(exp={"essential": True}).validate(claims)
        except jose.JoseError:
            raise AttemptRefused(expired=True) from None
        return Attempt(provider, held, return_to)

    def nonce(self, state: str) -> str:
        return self._derived(b"nonce", state)

    def code_verifier(self, state: str) -> str:
        # 43 characters of [A-Za-z0-9_-]: a verifier as RFC 7636 asks.
        return self._derived(b"pkce", state)

    def _derived(self, what: bytes, state: str) -> str:
        digest = hmac.new(self._raw, what + b":" + state.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def new_state() -> str:
    return secrets.token_urlsafe(32)
