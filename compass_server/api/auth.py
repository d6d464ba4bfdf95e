"""Sign-in: `authorization: Bearer <token>` → the account or runner it names."""

from __future__ import annotations

import time

from compass_server.api.errors import ApiError, Status
from compass_server.store import Store
from compass_server.store.types import Actor, RunnerPrincipal

Principal = Actor | RunnerPrincipal

# Tokens are never re-pointed, so a short cache saves a query per call.
CACHE_SECONDS = 30.0
CACHE_SIZE = 10_000


class Authenticator:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[str, tuple[float, Principal]] = {}

    async def principal(self, authorization: str | None) -> Principal:
        if not authorization:
            raise ApiError(Status.UNAUTHENTICATED, "missing authorization: Bearer <token>")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(Status.UNAUTHENTICATED, "authorization must be: Bearer <token>")
        token = token.strip()
        now = time.monotonic()
        hit = self._cache.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        found = await self.store.authenticate(token)
        if found is None:
            raise ApiError(Status.UNAUTHENTICATED, "the token is not valid")
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[token] = (now + CACHE_SECONDS, found)
        return found

    async def account(self, authorization: str | None) -> Actor:
        found = await self.principal(authorization)
        if not isinstance(found, Actor):
            raise ApiError(
                Status.PERMISSION_DENIED,
                "a runner token only opens the relay; use an account token",
            )
        return found

    async def runner(self, authorization: str | None) -> RunnerPrincipal:
        found = await self.principal(authorization)
        if not isinstance(found, RunnerPrincipal):
            raise ApiError(Status.PERMISSION_DENIED, "the relay takes a runner token")
        return found
