"""Sign-in: `authorization: Bearer <token>` → the account or runner it names.

A sign-in is cached for a few seconds per process. Revoking or rotating a
token notifies every process through the database (`compass_access`): each
drops the token from its cache, records that it did (the revocation waits for
every live server's record before it returns), and ends the streams the token
opened. A process
whose listener dropped may have missed a notification, so it forgets its
whole cache when the listener is back, and no cached sign-in outlives
`cache_seconds`; streams are re-checked on the same beat. A stream also ends
when its token's expiry comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Iterator
from typing import Literal, TypeVar

from compass_server.api.errors import ApiError, Status, to_api_error
from compass_server.store.admin import AdminStore
from compass_server.store.errors import StoreError
from compass_server.store.types import Actor, RunnerPrincipal, SignIn

log = logging.getLogger(__name__)

Principal = Actor | RunnerPrincipal
PrincipalKind = Literal["account", "runner", "any"]
T = TypeVar("T")

# How long a process trusts a sign-in it looked up; also the beat on which
# open streams' tokens are re-checked, should a notification be lost.
CACHE_SECONDS = 5.0
CACHE_SIZE = 10_000

REVOKED = ApiError(Status.UNAUTHENTICATED, "the token was revoked; sign in with a valid token")
EXPIRED = ApiError(Status.UNAUTHENTICATED, "the token has expired; sign in with a valid token")
HOOK_ONLY = ApiError(
    Status.PERMISSION_DENIED,
    "a hook token only posts a harness's hook requests (POST /hooks/claude-code, /hooks/codex)",
)
SIGNED_OUT = ApiError(Status.UNAUTHENTICATED, "this browser session has ended; sign in again")


class StreamGuard:
    """Ends one stream when the token that opened it stops signing in: the
    stream's task is cancelled while it waits for its next item (or the
    error is raised before the next one), and the stream fails with the
    guard's error."""

    def __init__(self, auth: Authenticator, sign_in: SignIn) -> None:
        self.auth = auth
        self.sign_in = sign_in
        self.error: ApiError | None = None
        self._waiting: asyncio.Task[object] | None = None
        self._cancelled = False
        self._expiry: asyncio.TimerHandle | None = None
        self.expire_in(sign_in.expires_in)

    def expire_in(self, seconds: float | None) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if seconds is not None:
            self._expiry = asyncio.get_running_loop().call_later(
                max(seconds, 0.0), self.trip, EXPIRED
            )

    def trip(self, error: ApiError) -> None:
        if self.error is not None:
            return
        self.error = error
        if self._waiting is not None and not self._cancelled:
            self._cancelled = True
            self._waiting.cancel()

    def release(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self.auth._forget_guard(self)

    async def watch(self, items: AsyncIterator[T]) -> AsyncGenerator[T]:
        """The stream's items until the token stops signing in; `items` is
        closed with it."""
        task = asyncio.current_task()
        try:
            while True:
                if self.error is not None:
                    raise self.error
                self._waiting = task
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if not self._cancelled or task is None:
                        raise
                    task.uncancel()
                    assert self.error is not None
                    raise self.error from None
                finally:
                    self._waiting = None
                yield item
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()


class Authenticator:
    def __init__(
        self,
        admin: AdminStore,
        *,
        server_id: uuid.UUID | None = None,
        cache_seconds: float = CACHE_SECONDS,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        self.admin = admin
        # Where this process records the revocations it applied; None: nowhere.
        self.server_id = server_id
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        # token → (trusted until, on the monotonic clock; expires at, or inf; the sign-in)
        self._cache: dict[str, tuple[float, float, SignIn]] = {}
        self._guards: dict[uuid.UUID, set[StreamGuard]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    # --- sign-in ----------------------------------------------------------------

    async def sign_in(
        self, authorization: str | None, kind: PrincipalKind = "any", *, hook: bool = False
    ) -> SignIn:
        """Who the authorization names. A hook token signs in only where `hook`
        says so (the harnesses' hook endpoints), and nothing else does there."""
        if not authorization:
            raise ApiError(Status.UNAUTHENTICATED, "missing authorization: Bearer <token>")
        scheme, _, token = authorization.partition(" ")
        # "Session" is what the transports make of a browser's session cookie.
        via = {"bearer": "token", "session": "session"}.get(scheme.lower())
        if via is None or not token.strip():
            raise ApiError(Status.UNAUTHENTICATED, "authorization must be: Bearer <token>")
        token = token.strip()
        now = time.monotonic()
        hit = self._cache.get(token)
        if hit is not None and hit[0] > now:
            if hit[1] <= now:
                del self._cache[token]
                raise EXPIRED
            found = hit[2]
        else:
            try:
                found = await self.admin.sign_in(token)
            except StoreError as exc:
                # Every caller, the plain HTTP routes too, gets the one error type.
                raise to_api_error(exc) from None
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            expires = now + found.expires_in if found.expires_in is not None else float("inf")
            self._cache[token] = (now + self.cache_seconds, expires, found)
        if found.via == "hook" and via == "token":
            if not hook:
                raise HOOK_ONLY
            return found
        if hook:
            raise ApiError(
                Status.PERMISSION_DENIED,
                "this endpoint takes a hook token (cph_…), made by admin create-hook-token",
            )
        if found.via != via:
            # A session's secret is no token, nor the reverse.
            raise ApiError(Status.UNAUTHENTICATED, "the token is not valid")
        if kind == "account" and not isinstance(found.principal, Actor):
            raise ApiError(
                Status.PERMISSION_DENIED,
                "a runner token only opens the relay; use an account token",
            )
        if kind == "runner" and not isinstance(found.principal, RunnerPrincipal):
            raise ApiError(Status.PERMISSION_DENIED, "the relay takes a runner token")
        return found

    async def principal(self, authorization: str | None) -> Principal:
        return (await self.sign_in(authorization)).principal

    def forget(self, token_id: uuid.UUID) -> None:
        """Drops the token from this process's cache and re-checks the streams
        it opened: called when it was revoked or got a new expiry."""
        for token, (_, _, found) in list(self._cache.items()):
            if found.token_id == token_id:
                del self._cache[token]
        if token_id in self._guards:
            self._check({token_id})

    # --- streams ------------------------------------------------------------------

    @contextlib.contextmanager
    def guard(self, sign_in: SignIn) -> Iterator[StreamGuard]:
        """Watches a stream opened with this sign-in for as long as it runs."""
        guard = StreamGuard(self, sign_in)
        self._guards.setdefault(sign_in.token_id, set()).add(guard)
        try:
            yield guard
        finally:
            guard.release()

    def _forget_guard(self, guard: StreamGuard) -> None:
        guards = self._guards.get(guard.sign_in.token_id)
        if guards is not None:
            guards.discard(guard)
            if not guards:
                del self._guards[guard.sign_in.token_id]

    def on_access(self, payload: str | None) -> None:
        """A `compass_access` notification; None when the listener came back
        and anything may have been missed."""
        if payload is None:
            self._cache.clear()
            self._check(set(self._guards))
            self._applied(None)
            return
        kind, _, value = payload.partition(":")
        if kind != "token":
            return
        try:
            token_id, _, seq = value.partition(":")
            self.forget(uuid.UUID(token_id))
            self._applied(int(seq))
        except ValueError:
            log.warning("ignoring a malformed access notification %r", payload)

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _check(self, token_ids: set[uuid.UUID]) -> None:
        self._spawn(self._recheck(token_ids))

    def _applied(self, seq: int | None) -> None:
        if self.server_id is not None:
            self._spawn(self._record(self.server_id, seq))

    async def _record(self, server_id: uuid.UUID, seq: int | None) -> None:
        try:
            await self.admin.applied(server_id, seq)
        except Exception as exc:
            # The revocation stops waiting after a while; nothing else depends on it.
            log.warning("recording an applied revocation failed: %s", exc)

    async def _recheck(self, token_ids: set[uuid.UUID]) -> None:
        """Ends the streams of tokens that no longer sign in and moves the
        expiry of those whose expiry changed."""
        ids = [t for t in token_ids if self._guards.get(t)]
        if not ids:
            return
        try:
            states = await self.admin.token_states(ids)
        except Exception as exc:
            # The next beat tries again.
            log.warning("re-checking open streams' tokens failed: %s", exc)
            return
        for token_id in ids:
            for guard in list(self._guards.get(token_id, ())):
                if token_id in states:
                    guard.expire_in(states[token_id])
                else:
                    guard.trip(REVOKED if guard.sign_in.via == "token" else SIGNED_OUT)

    # --- the beat ------------------------------------------------------------------

    async def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.cache_seconds)
            if self._guards:
                await self._recheck(set(self._guards))

    async def close(self) -> None:
        tasks = [t for t in (self._sweeper, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
