"""Coalesced writes (group commit).

A write whose kind has nothing at the database goes straight through, as
its own statement. Writes that arrive while one of their kind is at the
database wait for it, then go together as one statement and one commit
(migration 0020): under load one round trip and one commit carry many
writes, and a lone caller pays nothing. Each write keeps its own outcome.
If the statement fails as a whole, each of its writes is retried alone, so
one write's error never becomes its neighbours'.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import weakref
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from compass_server.store.db import Database

log = logging.getLogger(__name__)

# Writes of one kind sent as one statement, at most; and their content's
# bytes, past which the rest wait for the next (a larger write goes alone),
# so a batch never holds much more memory than one large write does.
WRITE_BATCH = 64
WRITE_BATCH_BYTES = 256 << 10

Row = dict[str, Any]


@dataclasses.dataclass
class _Lane:
    busy: bool = False
    waiting: list[tuple[Row, int, asyncio.Future[Row | None]]] = dataclasses.field(
        default_factory=list
    )
    drain: asyncio.Task[None] | None = None


class Coalescer:
    """Writes of one kind: `single(params)` is the statement that runs one, `batch`
    runs many (its one parameter `items`: a JSON array of `encode(params)`)
    and returns one JSON array of results, read from column `column`."""

    def __init__(
        self,
        db: Database,
        *,
        single: Callable[[Row], str],
        batch: str,
        column: str,
        encode: Callable[[Row], Row],
        max_items: int = WRITE_BATCH,
        observe: Callable[[int], None] | None = None,
    ) -> None:
        self._db = db
        self._single = single
        self._batch = batch
        self._column = column
        self._encode = encode
        self.max_items = max_items
        # Called with the number of writes of each statement sent.
        self._observe = observe
        # Per event loop (tests run several), forgotten with the loop.
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = (
            weakref.WeakKeyDictionary()
        )

    async def write(self, params: Row, size: int = 0) -> Row | None:
        """The row the single statement returns for these parameters; `size`
        is about how many bytes of content they carry."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(loop)
        if lane is None:
            lane = self._lanes[loop] = _Lane()
        if lane.busy and self.max_items > 1:
            done: asyncio.Future[Row | None] = loop.create_future()
            lane.waiting.append((params, size, done))
            return await done
        lane.busy = True
        try:
            return await self._alone(params)
        finally:
            self._next(loop, lane)

    def waiting(self) -> int:
        """Writes of this event loop waiting for the statement at the database."""
        lane = self._lanes.get(asyncio.get_running_loop())
        return len(lane.waiting) if lane else 0

    def _next(self, loop: asyncio.AbstractEventLoop, lane: _Lane) -> None:
        if lane.waiting:
            # Its own task: the caller that finished must not wait for it.
            lane.drain = loop.create_task(self._drain(loop, lane))
        else:
            lane.busy = False
            lane.drain = None

    async def _drain(self, loop: asyncio.AbstractEventLoop, lane: _Lane) -> None:
        try:
            while lane.waiting:
                n, total = 0, 0
                for _, size, _ in lane.waiting[: self.max_items]:
                    if n and total + size > WRITE_BATCH_BYTES:
                        break
                    n, total = n + 1, total + size
                # A caller that gave up before its write was sent sends nothing.
                taken = [(p, f) for p, _, f in lane.waiting[:n] if not f.done()]
                del lane.waiting[:n]
                if len(taken) == 1:
                    params, done = taken[0]
                    await self._settle(done, self._alone(params))
                elif taken:
                    await self._together(taken)
        finally:
            self._next(loop, lane)

    async def _alone(self, params: Row) -> Row | None:
        if self._observe is not None:
            self._observe(1)
        async with self._db.connection() as conn:
            cur = await conn.execute(self._single(params), params)
            return await cur.fetchone()

    async def _together(self, taken: list[tuple[Row, asyncio.Future[Row | None]]]) -> None:
        if self._observe is not None:
            self._observe(len(taken))
        items = Jsonb([self._encode(p) for p, _ in taken])
        results: list[Any] | None = None
        try:
            async with self._db.connection() as conn:
                try:
                    cur = await conn.execute(self._batch, {"items": items})
                    row = await cur.fetchone()
                    results = row[self._column] if row else None
                except psycopg.Error as exc:
                    if conn.closed or _lost(exc):
                        raise
                    log.info("coalesced writes failed together, retrying alone: %s", exc)
        except BaseException as exc:
            for _, done in taken:
                if not done.done():
                    if isinstance(exc, Exception):
                        done.set_exception(exc)
                    else:
                        done.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        if results is None or len(results) != len(taken):
            for params, done in taken:
                await self._settle(done, self._alone(params))
            return
        for (_, done), result in zip(taken, results, strict=True):
            if not done.done():
                done.set_result({self._column: result})

    @staticmethod
    async def _settle(done: asyncio.Future[Row | None], write: Any) -> None:
        try:
            row = await write
        except Exception as exc:
            if not done.done():
                done.set_exception(exc)
            return
        if not done.done():
            done.set_result(row)


def _lost(exc: psycopg.Error) -> bool:
    """Whether the error is the connection's or the server's, not the
    statement's: retrying each write alone would only fail each the same way.
    A deadlock or a serialization failure (class 40) is the statement's."""
    state = exc.sqlstate or ""
    return not state or state[:2] in ("08", "53", "57", "58")
