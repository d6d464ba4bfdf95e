"""Numbering committed events, after their writes commit.

Writes append their events unnumbered and hold no shared lock (migration
0007); this process then numbers them with one short transaction per
workspace at a time. Writes that commit while a run is under way are numbered
by the next run, so under load one run numbers many writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable

from compass_server.store.errors import StoreError

log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Lane:
    loop: asyncio.AbstractEventLoop
    committed: int = 0  # writes seen committing
    numbered: int = 0  # of those, how many a finished run covered
    run: asyncio.Task[None] | None = None  # held so it can't be collected mid-run
    waiters: list[tuple[int, asyncio.Future[None]]] = dataclasses.field(default_factory=list)


class Sequencer:
    def __init__(self, number: Callable[[uuid.UUID], Awaitable[None]]) -> None:
        self._number = number
        self._lanes: dict[uuid.UUID, _Lane] = {}

    def committed(self, workspace_id: uuid.UUID) -> None:
        """A write that appended events to the workspace's log has committed."""
        loop = asyncio.get_running_loop()
        lane = self._lanes.get(workspace_id)
        if lane is None or lane.loop is not loop:
            lane = self._lanes[workspace_id] = _Lane(loop)
        lane.committed += 1
        if lane.run is None:
            lane.run = loop.create_task(self._run(workspace_id, lane))

    async def flush(self, workspace_id: uuid.UUID) -> None:
        """Returns once every write this process saw commit in the workspace is
        numbered, so a read after a write sees that write's events."""
        lane = self._lanes.get(workspace_id)
        if lane is None or lane.numbered >= lane.committed:
            return
        if lane.loop is not asyncio.get_running_loop():
            return
        done: asyncio.Future[None] = lane.loop.create_future()
        lane.waiters.append((lane.committed, done))
        await done

    async def idle(self) -> None:
        """Waits for the runs under way, so a pool isn't closed under them."""
        loop = asyncio.get_running_loop()
        runs = [
            lane.run for lane in self._lanes.values() if lane.run is not None and lane.loop is loop
        ]
        if runs:
            await asyncio.wait(runs)

    async def _run(self, workspace_id: uuid.UUID, lane: _Lane) -> None:
        try:
            while lane.numbered < lane.committed:
                target = lane.committed
                error: Exception | None = None
                try:
                    await self._number(workspace_id)
                except Exception as exc:
                    # They stay unnumbered until the next write here or the
                    # leftover sweep; readers waiting on them see the failure.
                    if isinstance(exc, StoreError):
                        log.warning("numbering events failed: %s", exc)
                    else:
                        log.exception("numbering events failed")
                    error = exc
                lane.numbered = target
                waiting, lane.waiters = lane.waiters, []
                for want, done in waiting:
                    if want > target:
                        lane.waiters.append((want, done))
                    elif not done.done():
                        if error is None:
                            done.set_result(None)
                        else:
                            done.set_exception(error)
        except BaseException:
            for _, done in lane.waiters:
                if not done.done():
                    done.cancel()
            lane.waiters = []
            raise
        finally:
            lane.run = None
            if lane.numbered >= lane.committed and self._lanes.get(workspace_id) is lane:
                del self._lanes[workspace_id]
