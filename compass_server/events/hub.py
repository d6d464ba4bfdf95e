"""One LISTEN connection per process wakes a feed per workspace; every
subscriber of that workspace pulls from the feed's shared window of recent
events, or from the log itself when it is further behind.

Subscribers pull, nothing is pushed into per-subscriber queues, so a stream
that stops reading holds a cursor and no memory.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable

import psycopg

from compass_server.store import Store
from compass_server.store.types import Event

log = logging.getLogger(__name__)

CHANNEL = "compass_events"
# The shared window of recent events per workspace, bounded by count and size.
WINDOW = 4096
WINDOW_BYTES = 16 << 20
BATCH = 500
# A missed NOTIFY (a dropped listener) is caught up by this re-check.
RECHECK_SECONDS = 5.0


class Closed(Exception):
    """The hub is shutting down; streams end."""


class Feed:
    """The recent events of one workspace, loaded once for all its subscribers."""

    def __init__(self, store: Store, workspace_id: uuid.UUID, head: int) -> None:
        self.store = store
        self.workspace_id = workspace_id
        self.head = head
        self.window: collections.deque[Event] = collections.deque()
        self.window_bytes = 0
        self.users = 0
        self._changed = asyncio.Event()
        self._loading: asyncio.Task[None] | None = None
        self._wanted = head
        self.closed = False

    def poke(self, last_id: int) -> None:
        self._wanted = max(self._wanted, last_id)
        if self._wanted > self.head and (self._loading is None or self._loading.done()):
            self._loading = asyncio.get_running_loop().create_task(self._load())

    async def _load(self) -> None:
        try:
            while self._wanted > self.head:
                batch = await self.store.read_events(self.workspace_id, self.head, BATCH)
                if not batch:
                    break
                for event in batch:
                    self.window.append(event)
                    self.window_bytes += event.size
                while len(self.window) > WINDOW or (
                    self.window_bytes > WINDOW_BYTES and len(self.window) > 1
                ):
                    self.window_bytes -= self.window.popleft().size
                self.head = batch[-1].event_id
                self._wake()
        except Exception:
            log.exception("loading events of workspace %s", self.workspace_id)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def close(self) -> None:
        self.closed = True
        self._wake()

    async def after(self, cursor: int) -> list[Event]:
        """Events after cursor, up to one batch, oldest first."""
        window = self.window
        if window and window[0].event_id <= cursor + 1 and cursor < self.head:
            start = cursor + 1 - window[0].event_id
            return list(itertools.islice(window, start, start + BATCH))
        if cursor >= self.head:
            return []
        # Further behind than the window: read the log itself.
        return await self.store.read_events(self.workspace_id, cursor, BATCH)

    async def wait_beyond(self, cursor: int) -> None:
        while self.head <= cursor and not self.closed:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), RECHECK_SECONDS)
            except TimeoutError:
                self.poke(await self.store.last_event_id(self.workspace_id))
        if self.closed:
            raise Closed


class EventHub:
    def __init__(self, store: Store, database_url: str) -> None:
        self.store = store
        self.url = database_url
        self.feeds: dict[uuid.UUID, Feed] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._closed = False
        self._watchers: dict[str, list[Callable[[str | None], None]]] = {}

    def watch(self, channel: str, handler: Callable[[str | None], None]) -> None:
        """Also listens on `channel` (register before start): the handler gets
        each payload, and None after the listener reconnected, since what was
        sent meanwhile is lost."""
        self._watchers.setdefault(channel, []).append(handler)

    def _tell(self, channel: str, payload: str | None) -> None:
        for handler in self._watchers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("handling a notification on %s", channel)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._listen())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listening.wait(), 10)

    async def close(self) -> None:
        self._closed = True
        for feed in self.feeds.values():
            feed.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        backoff = 0.1
        listened = False
        while not self._closed:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    for channel in self._watchers:
                        await conn.execute(f"LISTEN {channel}".encode())
                    self._listening.set()
                    backoff = 0.1
                    if listened:
                        for channel in self._watchers:
                            self._tell(channel, None)
                    listened = True
                    # Anything committed while we were not listening.
                    for feed in list(self.feeds.values()):
                        feed.poke(await self.store.last_event_id(feed.workspace_id))
                    async for note in conn.notifies():
                        if note.channel == CHANNEL:
                            self._on_notify(note.payload)
                        else:
                            self._tell(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event listener lost its connection (%s); reconnecting", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _on_notify(self, payload: str) -> None:
        ws, _, last = payload.partition(":")
        try:
            feed = self.feeds.get(uuid.UUID(ws))
            if feed is not None:
                feed.poke(int(last))
        except ValueError:
            log.warning("ignoring a malformed notification %r", payload)

    async def _feed(self, workspace_id: uuid.UUID) -> Feed:
        feed = self.feeds.get(workspace_id)
        if feed is None:
            head = await self.store.last_event_id(workspace_id)
            feed = self.feeds.setdefault(workspace_id, Feed(self.store, workspace_id, head))
        feed.users += 1
        return feed

    def _release(self, feed: Feed) -> None:
        feed.users -= 1
        if feed.users == 0 and self.feeds.get(feed.workspace_id) is feed:
            del self.feeds[feed.workspace_id]

    async def current(self, workspace_id: uuid.UUID) -> int:
        return await self.store.last_event_id(workspace_id)

    async def stream(
        self,
        workspace_id: uuid.UUID,
        after: int,
        visible: Callable[[Event], bool],
    ) -> AsyncIterator[Event]:
        """Every event after `after` that `visible` admits, in order, then live
        ones as they commit; ends with Closed when the hub shuts down."""
        if self._closed:
            raise Closed
        feed = await self._feed(workspace_id)
        try:
            cursor = after
            while True:
                batch = await feed.after(cursor)
                if not batch:
                    await feed.wait_beyond(cursor)
                    continue
                for event in batch:
                    cursor = event.event_id
                    if visible(event):
                        yield event
        finally:
            self._release(feed)
