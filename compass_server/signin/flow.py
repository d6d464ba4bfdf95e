"""Signing a person in through a configured provider: the attempt kept by
the browser that started it, signed (any server may take the callback), the
provider's answer checked, and the rules of who gets in.

Who gets in: the account linked to the ID token's (issuer, subject); else,
with an email the provider verified, the person an admin created with that
email (linked now); else, with a verified email of a domain the provider
admits, a new member. Anyone else is refused and nothing is written.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from compass_server.signin.attempts import Attempt, AttemptRefused, AttemptSeal, new_state
from compass_server.signin.oidc import OpenIdProvider, SignInFailed
from compass_server.signin.providers import Provider
from compass_server.store.people import People, Refused, StartedSession, handle_from

# Where the browser goes after signing in unless it asked for a page of ours.
HOME = "/"
MAX_RETURN_CHARS = 2000


def local_path(value: str | None) -> str:
    """`value` when it is a path on this server, else the home page (never
    another site: an open redirect would lend it our name)."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or len(value) > MAX_RETURN_CHARS
        or any(ord(c) < 0x20 for c in value)
    ):
        return HOME
    return value


def _verified(claims: Mapping[str, Any]) -> str | None:
    email = claims.get("email")
    verified = claims.get("email_verified")
    if not isinstance(email, str) or "@" not in email:
        return None
    if verified is True or (isinstance(verified, str) and verified.lower() == "true"):
        return email.strip()
    return None


class SignInFlow:
    def __init__(
        self,
        people: People,
        providers: Mapping[str, OpenIdProvider],
        *,
        idle: datetime.timedelta,
        lifetime: datetime.timedelta,
        attempt_lifetime: datetime.timedelta,
    ) -> None:
        self.people = people
        self.providers = dict(providers)
        self.idle = idle
        self.lifetime = lifetime
        self.attempt_lifetime = attempt_lifetime
        self._seal: AttemptSeal | None = None

    def has(self, name: str) -> bool:
        return name in self.providers

    def configured(self) -> list[Provider]:
        return [p.provider for p in self.providers.values()]

    async def _sealed(self) -> AttemptSeal:
        if self._seal is None:
            key = await self.people.signin_key()
            self._seal = AttemptSeal(key, self.attempt_lifetime.total_seconds())
        return self._seal

    async def start(self, name: str, return_to: str | None) -> tuple[str, str]:
        """(the attempt, for the browser's cookie; the provider's
        authorization URL) of a new sign-in."""
        oidc = self.providers.get(name)
        if oidc is None:
            raise SignInFailed(f"this server has no sign-in provider {name[:40]!r}")
        seal = await self._sealed()
        state = new_state()
        url = await oidc.authorization_url(state, seal.nonce(state), seal.code_verifier(state))
        return seal.seal(Attempt(name, state, local_path(return_to)), HOME), url

    async def finish(
        self, held: str | None, state: str, code: str, user_agent: str
    ) -> tuple[StartedSession, str]:
        """The session of the person the provider vouched for, and where to go.
        AttemptRefused when the browser holds no attempt of this state (`held`
        is its cookie), SignInFailed when the answer doesn't check out,
        Refused when the person may not sign in."""
        seal = await self._sealed()
        attempt = seal.open(held, state)
        oidc = self.providers.get(attempt.provider)
        if oidc is None:
            raise SignInFailed("the provider of this sign-in is no longer configured")
        claims = await oidc.exchange(code, seal.code_verifier(state), seal.nonce(state))
        provider = oidc.provider
        email = _verified(claims)
        handle_claim = claims.get(provider.handle_claim)
        handle = handle_from(
            handle_claim if isinstance(handle_claim, str) and handle_claim else (email or "")
        )
        started = await self.people.sign_in_person(
            provider.workspace_id,
            issuer=provider.issuer,
            subject=str(claims["sub"]),
            email=email,
            may_create=email is not None and provider.admits(email),
            handle=handle,
            provider=provider.name,
            user_agent=user_agent,
            idle=self.idle,
            lifetime=self.lifetime,
        )
        return started, local_path(attempt.return_to)

    async def close(self) -> None:
        for oidc in self.providers.values():
            await oidc.close()


__all__ = ["AttemptRefused", "Refused", "SignInFailed", "SignInFlow", "local_path"]
