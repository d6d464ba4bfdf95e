"""What a process knows of its database answering.

Every transaction waits on the database for at most `wait_seconds` in all:
for a connection, a lock or an answer. A connection that fails, or a wait
that passes `slow_seconds`, starts a probe: a fresh connection that must
answer `SELECT 1` within `probe_seconds`. While probes fail the database is
down: the waits in flight end now, and a call is refused with UNAVAILABLE
as soon as a probe made after it arrived fails (at most ADMIT_SECONDS
later; at once while probes go unanswered), so the first call after a
stopped database is back is served. Probes run
when calls want them, at most one per PACE_SECONDS, and every
`probe_seconds` without calls, until one answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from compass_server.store.errors import Unavailable

log = logging.getLogger(__name__)

# The longest one transaction waits on the database, from asking for a
# connection to its commit.
WAIT_SECONDS = 10.0
# How long a probe waits for the database to answer, and how often it asks
# again while it doesn't.
PROBE_SECONDS = 3.0
# Probes that time out in a row before the database is taken for down: a
# database that refuses is down at once, but a slow answer may be a busy
# machine's.
TIMEOUTS_FOR_DOWN = 2
# A transaction still waiting after this long has the database probed.
SLOW_SECONDS = 1.0
# While the database is down, the longest a call waits for a probe's answer
# before UNAVAILABLE (a stopped database answers a probe in a millisecond).
ADMIT_SECONDS = 0.5
# Probes wanted by calls go at most this often.
PACE_SECONDS = 0.05

DOWN = "the database is unavailable; retry shortly"


def connect_options(wait_seconds: float) -> dict[str, Any]:
    """libpq options for every connection: connecting takes at most the bound
    (libpq counts whole seconds, at least 2), and TCP keepalives find a peer
    that vanished from the network."""
    return {
        "connect_timeout": max(2, math.ceil(wait_seconds)),
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
    }


class Connection(psycopg.AsyncConnection[Any]):
    """A pooled connection that can be given up on: a query interrupted
    because the database stopped answering is not cancelled on the server
    (psycopg would wait up to 10 s more for a server that may be frozen);
    the connection is closed and the pool opens another."""

    abandon = False

    async def _try_cancel(self, *, timeout: float = 5.0) -> None:  # noqa: ASYNC109 (psycopg's signature)
        if self.abandon:
            self.pgconn.finish()
            return
        await super()._try_cancel(timeout=timeout)


class Wait:
    """One transaction's wait on the database."""

    __slots__ = ("_cancelling", "_handles", "conn", "ended", "task")

    def __init__(self, outage: Outage, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.conn: psycopg.AsyncConnection[Any] | None = None
        # Why the wait was ended, once it was.
        self.ended: str | None = None
        self._cancelling = task.cancelling()
        loop = asyncio.get_running_loop()
        self._handles = (
            loop.call_later(outage.slow_seconds, outage.suspect),
            loop.call_later(
                outage.wait_seconds,
                self.end,
                f"the database did not answer within {outage.wait_seconds:g} s; retry shortly",
            ),
        )

    def hold(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """The connection the wait is on now."""
        self.conn = conn

    def end(self, why: str) -> None:
        if self.ended is not None:
            return
        self.ended = why
        if isinstance(self.conn, Connection):
            self.conn.abandon = True
        self.task.cancel()

    def close(self) -> None:
        for handle in self._handles:
            handle.cancel()

    def taken_back(self) -> bool:
        """Whether the task's cancellation was this wait's own (now taken back)."""
        return self.ended is not None and self.task.uncancel() <= self._cancelling


class Outage:
    def __init__(
        self,
        url: str,
        *,
        wait_seconds: float = WAIT_SECONDS,
        probe_seconds: float = PROBE_SECONDS,
        slow_seconds: float = SLOW_SECONDS,
    ) -> None:
        self.url = url
        self.wait_seconds = wait_seconds
        self.probe_seconds = probe_seconds
        self.slow_seconds = min(slow_seconds, wait_seconds)
        self.down = False
        # Told True when the database answers again, False when it stops.
        self.listeners: list[Callable[[bool], None]] = []
        # Run before calls are let through again (dropping dead connections).
        self.before_up: list[Callable[[], Awaitable[None]]] = []
        self._waits: set[Wait] = set()
        self._probe: asyncio.Task[None] | None = None
        # Resolved when the next probe to start has its answer.
        self._next: asyncio.Future[None] | None = None
        self._wanted = asyncio.Event()
        self._timed_out = False
        # How long the last probe took to fail; 0 after one answered.
        self._failing_for = 0.0
        self._timeouts = 0
        self._closed = False

    async def admit(self) -> None:
        """Returns at once while the database answers; while it is down,
        waits for a probe made after now and raises UNAVAILABLE unless it
        answered."""
        if not self.down:
            return
        self.suspect()
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        self._wanted.set()
        if self._failing_for >= ADMIT_SECONDS:
            # Probes go unanswered (a frozen server): not worth waiting for.
            raise Unavailable(DOWN)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ADMIT_SECONDS):
                await asyncio.shield(self._next)
        if self.down:
            raise Unavailable(DOWN)

    @contextlib.asynccontextmanager
    async def wait(self) -> AsyncIterator[Wait]:
        """Bounds one transaction's wait: past the bound, or when the database
        is found down meanwhile, the wait ends with UNAVAILABLE."""
        await self.admit()
        task = asyncio.current_task()
        assert task is not None
        wait = Wait(self, task)
        self._waits.add(wait)
        try:
            yield wait
            # Its cancellation swallowed along the way: the work finished anyway.
            wait.taken_back()
        except BaseException as exc:
            if wait.taken_back():
                self.suspect()
                assert wait.ended is not None
                raise Unavailable(wait.ended) from exc
            raise
        finally:
            wait.close()
            self._waits.discard(wait)

    def suspect(self) -> None:
        """Something failed or is slow: probe the database, once at a time."""
        if self._probe is None and not self._closed:
            self._probe = asyncio.get_running_loop().create_task(self._probing())

    async def _probing(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                started = loop.time()
                answered, self._next = self._next, None
                self._wanted.clear()
                answers = await self._answers()
                self._failing_for = 0.0 if answers else loop.time() - started
                again = False
                if answers:
                    self._timeouts = 0
                    if self.down:
                        for step in self.before_up:
                            await step()
                        self._set(down=False)
                elif self._timed_out and self._timeouts < TIMEOUTS_FOR_DOWN and not self.down:
                    # Once more before calling it down, at once.
                    again = True
                else:
                    self._set(down=True)
                if answered is not None and not answered.done():
                    answered.set_result(None)
                if again:
                    continue
                if not self.down:
                    self._timeouts = 0
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.probe_seconds):
                        await self._wanted.wait()
                await asyncio.sleep(max(0.0, started + PACE_SECONDS - loop.time()))
        finally:
            self._probe = None
            if self._next is not None and not self._next.done():
                self._next.set_result(None)
            self._next = None

    async def _answers(self) -> bool:
        self._timed_out = False
        try:
            async with asyncio.timeout(self.probe_seconds):
                conn = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, **connect_options(self.probe_seconds)
                )
                try:
                    await conn.execute("SELECT 1")
                finally:
                    await conn.close()
        except pg_errors.TooManyConnections:
            # It answers; the pool's connections still serve.
            return True
        except (psycopg.Error, OSError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError | psycopg.errors.ConnectionTimeout):
                self._timed_out = True
                self._timeouts += 1
            if not self.down:
                log.warning("the database does not answer: %s", str(exc).strip() or "timed out")
            return False
        return True

    def _set(self, *, down: bool) -> None:
        if down == self.down:
            return
        self.down = down
        if down:
            log.warning("the database is down: calls fail at once until it answers")
            for wait in list(self._waits):
                wait.end(DOWN)
        else:
            log.warning("the database answers again")
        for listener in self.listeners:
            listener(not down)

    async def close(self) -> None:
        self._closed = True
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
