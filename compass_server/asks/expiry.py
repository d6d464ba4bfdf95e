"""The expiry loop: each server process ends the asks whose deadline passed,
and takes the follow-up steps (reminders, escalations) that came due.

Every process runs one; the sweep (migration 0009) skips asks another process
holds, so they never fight, and a sweep that dies mid-way leaves nothing half
done. A loop sweeps at start (deadlines that passed while every server was
down expire then), wakes at the nearest deadline any server posted (each post
announces its deadline on DEADLINES, migration 0021), and at least every
`interval` seconds. The sweep is what tells agents promptly: an ending
attempted after the deadline expires the ask by itself, and readers see it
expired at once, swept or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging

from compass_server.store import Store, StoreError
from compass_server.store.asks import EXPIRY_BATCH

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 30.0
# Where every post of a deadline is announced (its epoch seconds).
DEADLINES = "compass_deadlines"
# A sweep runs this long after a deadline, so the database's clock has passed it.
_LATE = 0.01
# A due ask the last sweep skipped is held by a change in flight: look again soon.
_RETRY = 0.5


class Expiry:
    def __init__(
        self, store: Store, *, interval: float = INTERVAL_SECONDS, batch: int = EXPIRY_BATCH
    ) -> None:
        self.store = store
        self.interval = interval
        self.batch = batch
        self._wake = asyncio.Event()
        self._next: datetime.datetime | None = None
        # The soonest deadline heard while a sweep reads the next one.
        self._heard: datetime.datetime | None = None
        self._task: asyncio.Task[None] | None = None
        # A time that came due just after the last sweep read it is swept
        # again at once, before backing off by _RETRY.
        self._again = True

    async def start(self) -> None:
        self.store.deadline_listeners.append(self.posted)
        await self.sweep()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def posted(self, deadline: datetime.datetime) -> None:
        """A deadline posted: wake for it if it comes first."""
        if self._heard is None or deadline < self._heard:
            self._heard = deadline
        if self._next is None or deadline < self._next:
            self._next = deadline
            self._wake.set()

    def heard(self, payload: str | None) -> None:
        """A deadline announced on DEADLINES by any server; None after the
        listener reconnected (what was announced meanwhile is lost): sweep,
        which reads the nearest deadline again."""
        if payload is None:
            self.posted(_now())
            return
        try:
            self.posted(datetime.datetime.fromtimestamp(float(payload), datetime.UTC))
        except ValueError:
            log.warning("ignoring a malformed deadline %r", payload)

    async def sweep(self) -> int:
        """Expires every due ask, a batch at a time; returns how many."""
        total = 0
        self._heard = None
        while True:
            n = await self.store.expire_due_asks(self.batch)
            total += n
            if n < self.batch:
                break
        if total:
            log.info("expired %d ask(s) whose deadline passed", total)
        steps = 0
        while True:
            n = await self.store.take_follow_ups(self.batch)
            steps += n
            if n < self.batch:
                break
        if steps:
            log.info("took %d follow-up step(s) of open asks", steps)
        found = _soonest(await self.store.next_ask_deadline(), await self.store.next_follow_up())
        heard = self._heard
        self._next = found if heard is None or (found is not None and found < heard) else heard
        return total

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            delay = self.interval
            if self._next is not None:
                until = (self._next - _now()).total_seconds()
                if until > 0:
                    delay = min(delay, until + _LATE)
                    self._again = True
                else:
                    delay = 0.0 if self._again else _RETRY
                    self._again = False
            # Not wait_for: on Python 3.11 it swallows a cancellation that
            # lands as the event fires, and stopping would wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            if self._wake.is_set() and self._next is not None and self._next > _now():
                continue  # woken to sleep until an earlier deadline
            try:
                await self.sweep()
            except StoreError as exc:
                log.warning("expiring asks failed: %s", exc)
            except Exception:
                # The loop outlives any one sweep; the next one tries again.
                log.exception("expiring asks failed")

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.deadline_listeners.remove(self.posted)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _soonest(*times: datetime.datetime | None) -> datetime.datetime | None:
    return min((t for t in times if t is not None), default=None)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
