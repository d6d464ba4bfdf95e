"""The OpenID Connect Authorization Code flow with PKCE, state and nonce,
against a provider found by discovery.

authlib builds the authorization request (PKCE S256) and exchanges the code;
joserfc checks the ID token: its signature against the provider's keys
(fetched again when a token names a key not seen before, so a rotation
works), its issuer, audience, expiry and nonce. No token is checked by hand
here; a failure is a SignInFailed whose message a person can read.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import Any

import httpx
from joserfc import errors as jose
from joserfc import jwt
from joserfc.jwk import KeySet

from compass_server.signin.providers import Provider

log = logging.getLogger(__name__)

SESSION_IDLE = datetime.timedelta(hours=12)
SESSION_MAX = datetime.timedelta(days=7)
ATTEMPT_SECONDS = 600.0
HTTP_TIMEOUT_SECONDS = 10.0
CLOCK_SKEW_SECONDS = 60.0
JWKS_REFETCH_SECONDS = 10.0
# Discovery is read again after this long (a provider may move its endpoints).
DISCOVERY_SECONDS = 3600.0
# Signatures an ID token may carry: asymmetric only (a client secret is no key).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")


class SignInFailed(Exception):
    """Why a sign-in failed, for the person (never a library's text)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OpenIdProvider:
    """One configured provider: its discovery document and keys, cached."""

    def __init__(
        self,
        provider: Provider,
        client_secret: str | None,
        redirect_uri: str,
        *,
        timeout: float = HTTP_TIMEOUT_SECONDS,
        clock_skew: float = CLOCK_SKEW_SECONDS,
        jwks_refetch: float = JWKS_REFETCH_SECONDS,
    ) -> None:
        self.provider = provider
        self.redirect_uri = redirect_uri
        self.clock_skew = clock_skew
        self.jwks_refetch = jwks_refetch
        # Imported when sign-in is configured, not by every command-line start.
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        self._client = AsyncOAuth2Client(
            client_id=provider.client_id,
            client_secret=client_secret,
            token_endpoint_auth_method="client_secret_basic" if client_secret else "none",
            scope=provider.scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=timeout,
            follow_redirects=False,
        )
        # Discovery and keys: plain GETs with no token (authlib's client wants one).
        self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None
        self._keys_at = float("-inf")
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        await self._client.aclose()
        await self._http.aclose()

    # --- what the provider publishes -------------------------------------------------

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            response = await self._http.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            log.warning("signin provider %s: %s failed: %s", self.provider.name, what, exc)
            raise SignInFailed(f"{self.provider.label} can't be reached right now") from None
        if response.status_code != 200:
            log.warning(
                "signin provider %s: %s answered %d", self.provider.name, what, response.status_code
            )
            raise SignInFailed(f"{self.provider.label} answered {what} with an error")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise SignInFailed(f"{self.provider.label} answered {what} with something else")
        return body

    async def metadata(self) -> dict[str, Any]:
        """The discovery document, checked to be the configured issuer's."""
        async with self._lock:
            if (
                self._metadata is not None
                and time.monotonic() - self._metadata_at < DISCOVERY_SECONDS
            ):
                return self._metadata
            url = self.provider.issuer + "/.well-known/openid-configuration"
            found = await self._get_json(url, "discovery")
            if str(found.get("issuer", "")).rstrip("/") != self.provider.issuer:
                log.warning(
                    "signin provider %s: discovery names issuer %r, not %r",
                    self.provider.name,
                    found.get("issuer"),
                    self.provider.issuer,
                )
                raise SignInFailed(
                    f"{self.provider.label}'s discovery names another issuer; "
                    "check the configured issuer"
                )
            for key in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
                if not isinstance(found.get(key), str):
                    raise SignInFailed(f"{self.provider.label}'s discovery has no {key}")
            self._metadata, self._metadata_at = found, time.monotonic()
            return found

    async def _key_set(self, refetch: bool) -> KeySet:
        async with self._lock:
            fresh = time.monotonic() - self._keys_at < self.jwks_refetch
            if self._keys is not None and (not refetch or fresh):
                return self._keys
        meta = await self.metadata()
        found = await self._get_json(meta["jwks_uri"], "the key set")
        try:
            keys = KeySet.import_key_set(found)  # type: ignore[arg-type]
        except (jose.JoseError, ValueError, TypeError, KeyError):
            raise SignInFailed(f"{self.provider.label}'s key set can't be read") from None
        async with self._lock:
            self._keys, self._keys_at = keys, time.monotonic()
        return keys

    # --- the flow --------------------------------------------------------------------------

    async def authorization_url(self, state: str, nonce: str, code_verifier: str) -> str:
        meta = await self.metadata()
        url, _ = self._client.create_authorization_url(
            meta["authorization_endpoint"],
            state=state,
            nonce=nonce,
            code_verifier=code_verifier,
        )
        return str(url)

    async def exchange(self, code: str, code_verifier: str, nonce: str) -> dict[str, Any]:
        """The code for tokens; the ID token's claims once checked."""
        meta = await self.metadata()
        try:
            token = await self._client.fetch_token(
                meta["token_endpoint"],
                grant_type="authorization_code",
                code=code,
                code_verifier=code_verifier,
                redirect_uri=self.redirect_uri,
            )
        except Exception as exc:
            if any(c.__name__ == "TransportError" for c in type(exc).__mro__):
                log.warning(
                    "signin provider %s: the token request failed: %s", self.provider.name, exc
                )
                raise SignInFailed(f"{self.provider.label} can't be reached right now") from None
            # authlib raises its OAuth error for an error answer (a used or wrong code).
            log.info("signin provider %s refused the code: %s", self.provider.name, exc)
            raise SignInFailed(
                f"{self.provider.label} refused the sign-in's code; start again"
            ) from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed(f"{self.provider.label} sent no ID token")
        return await self.verify(id_token, nonce)

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims: signed by one of the provider's keys, by
        its issuer, for this client, not expired, with this sign-in's nonce."""
        meta = await self.metadata()
        offered = meta.get("id_token_signing_alg_values_supported") or ["RS256"]
        algorithms = [a for a in offered if a in ALGORITHMS] or ["RS256"]
        try:
            try:
                decoded = jwt.decode(id_token, await self._key_set(False), algorithms=algorithms)
            except jose.InvalidKeyIdError:
                # A key not seen before: the provider may have rotated its keys.
                decoded = jwt.decode(id_token, await self._key_set(True), algorithms=algorithms)
        except jose.InvalidKeyIdError:
            raise SignInFailed(
                "the ID token is signed with a key the provider doesn't publish"
            ) from None
        except jose.BadSignatureError:
            raise SignInFailed("the ID token's signature doesn't verify") from None
        except (jose.JoseError, ValueError, TypeError):
            raise SignInFailed("the ID token can't be read") from None
        claims = dict(decoded.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=int(self.clock_skew),
            iss={"essential": True, "value": self.provider.issuer},
            aud={"essential": True, "value": self.provider.client_id},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except jose.ExpiredTokenError:
            raise SignInFailed("the ID token has expired; sign in again") from None
        except (jose.InvalidClaimError, jose.MissingClaimError) as exc:
            claim = getattr(exc, "claim", "")
            raise SignInFailed(_CLAIM_PROBLEMS.get(claim, "the ID token is not valid")) from None
        except (jose.JoseError, ValueError, TypeError):
            raise SignInFailed("the ID token is not valid") from None
        audience = claims["aud"]
        if (
            isinstance(audience, list)
            and len(audience) > 1
            and claims.get("azp") != (self.provider.client_id)
        ):
            raise SignInFailed(_CLAIM_PROBLEMS["aud"])
        return claims


_CLAIM_PROBLEMS = {
    "iss": "the ID token comes from another issuer",
    "aud": "the ID token was issued for another application (its audience)",
    "nonce": "the ID token belongs to another sign-in (its nonce doesn't match); start again",
    "exp": "the ID token has expired; sign in again",
    "iat": "the ID token has no issue time",
    "sub": "the ID token names no subject",
    "nbf": "the ID token is not valid yet",
}


__all__ = [
    "ATTEMPT_SECONDS",
    "CLOCK_SKEW_SECONDS",
    "HTTP_TIMEOUT_SECONDS",
    "JWKS_REFETCH_SECONDS",
    "SESSION_IDLE",
    "SESSION_MAX",
    "OpenIdProvider",
    "SignInFailed",
]
