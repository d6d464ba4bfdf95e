"""Server liveness: each process keeps its row in `servers` fresh; sessions of
a process that died without unbinding (kill -9, power loss) are removed once
its heartbeat is older than STALE_AFTER, so their agents go OFFLINE."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import uuid
from collections.abc import Callable

from compass_server.store import Store, StoreError

log = logging.getLogger(__name__)

BEAT_SECONDS = 5.0
STALE_AFTER = datetime.timedelta(seconds=15)


class Heartbeat:
    def __init__(
        self,
        store: Store,
        server_id: uuid.UUID,
        on_lost: Callable[[], None],
        *,
        every: float = BEAT_SECONDS,
        stale_after: datetime.timedelta = STALE_AFTER,
        on_health: Callable[[bool], None] | None = None,
    ) -> None:
        self.store = store
        self.server_id = server_id
        # Called when another server reaped this one (it was silent too long):
        # its sessions are gone from the database, so its streams must end.
        self.on_lost = on_lost
        self.every = every
        self.stale_after = stale_after
        # Told after each beat whether the database answered it.
        self.on_health = on_health
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.store.heartbeat(self.server_id)
        await self.reap()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def reap(self) -> None:
        reaped = await self.store.reap_stale_servers(self.stale_after)
        if reaped:
            log.info("removed %d session(s) of servers that stopped heartbeating", len(reaped))

    async def beat(self) -> None:
        if not await self.store.heartbeat(self.server_id):
            log.warning("this server was reaped as silent; ending its relay streams")
            self.on_lost()
        await self.reap()
        # Calls are served from the request pool: its idle connections that
        # died (a database restart) go before a call is handed one.
        await self.store.db.check()

    def _health(self, answered: bool) -> None:
        if self.on_health is not None:
            self.on_health(answered)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.every)
            # A beat the database keeps waiting past the next one counts as a miss.
            late = loop.call_later(self.every, self._health, False)
            try:
                await self.beat()
            except StoreError as exc:
                log.warning("heartbeat failed: %s", exc)
                self._health(False)
            else:
                self._health(True)
            finally:
                late.cancel()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        # A row left behind is reaped by the next server after STALE_AFTER.
        with contextlib.suppress(StoreError):
            await self.store.remove_server(self.server_id)
