"""The courier every server process runs: it makes deliveries from the event
log, claims the due ones and sends them.

It wakes when an event commits anywhere (the hub's notification), when an
attempt ends, and at least every `poll` seconds for retries coming due. A
delivery is claimed with a lease longer than the attempt's deadline, so no
other process sends it meanwhile; an attempt cut short by a crash is sent
again, with the same `webhook-id`, once its lease ends. Failures are retried
on the schedule, each wait stretched or shrunk by up to a fifth at random so
a receiver coming back isn't met by every retry at once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import logging
import random
import re
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from compass_server.store.errors import StoreError
from compass_server.store.types import AttemptResult, ClaimedDelivery, WebhookKind
from compass_server.store.webhooks import Derive, WebhookStore
from compass_server.webhooks.sender import Outcome, Sender
from compass_server.webhooks.signing import signed_headers

if TYPE_CHECKING:
    # The SMTP client loads only in a server that mails, not in every command.
    from compass_server.notify.mailer import Mailer
    from compass_server.notify.push import Pusher

log = logging.getLogger(__name__)


class SlackSender(Protocol):
    """Sends a Slack app's delivery through Slack's Web API (slack/outbox.py)."""

    async def send(self, delivery: ClaimedDelivery) -> Outcome: ...


# Waits after the 1st, 2nd, … failure; past the last, the delivery has failed.
RETRY_SCHEDULE = "5s,5m,30m,2h,5h,10h,10h"
JITTER = 0.2
POLL_SECONDS = 1.0
# A lease outlasts its attempt's deadline by this much.
LEASE_MARGIN_SECONDS = 5.0
# Endpoints one look at the backlog takes; rounds of making deliveries per wake.
BACKLOG_BATCH = 100
FAN_OUT_ROUNDS = 10
# Attempts that end within this long of one another make one claim.
CLAIM_GATHER_SECONDS = 0.003
PRUNE_EVERY_SECONDS = 60.0
PRUNE_BATCH = 1_000
GONE = "the receiver answered 410 Gone"

_STEP = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def schedule(text: str) -> tuple[float, ...]:
    """Seconds from a schedule like "5s,5m,30m,2h"."""
    steps = []
    for part in text.split(","):
        m = _STEP.match(part)
        if m is None:
            raise ValueError(f"{part.strip()!r} is not a wait like 30s, 5m or 2h")
        steps.append(float(m.group(1)) * _UNIT[m.group(2)])
    return tuple(steps)


class Courier:
    def __init__(
        self,
        store: WebhookStore,
        sender: Sender,
        drafts: Derive,
        server_id: uuid.UUID,
        *,
        mailer: Mailer | None = None,
        pusher: Pusher | None = None,
        retry_schedule: Sequence[float],
        concurrency: int,
        per_endpoint: int,
        retention: datetime.timedelta,
        per_workspace: int | None = None,
        poll: float = POLL_SECONDS,
        slack: SlackSender | None = None,
    ) -> None:
        self.slack = slack
        self.store = store
        self.sender = sender
        self.drafts = drafts
        self.mailer = mailer
        self.pusher = pusher
        # Without a relay, email deliveries are left to the servers with one.
        self.kinds = tuple(
            k
            for k in WebhookKind
            if (k is not WebhookKind.EMAIL or mailer is not None)
            and (k is not WebhookKind.PUSH or pusher is not None)
        )
        self.server_id = server_id
        self.retry_schedule = tuple(retry_schedule)
        self.concurrency = concurrency
        self.per_endpoint = per_endpoint
        # One workspace's share of the attempts: its hanging receivers never
        # hold them all.
        self.per_workspace = concurrency if per_workspace is None else per_workspace
        self.retention = retention
        self.poll = poll
        self.lease = datetime.timedelta(seconds=sender.timeout + LEASE_MARGIN_SECONDS)
        self._wake = asyncio.Event()
        # Why to look: the log moved (make deliveries), or deliveries may be due.
        self._log_moved = True
        self._maybe_due = True
        self._in_flight: collections.Counter[uuid.UUID] = collections.Counter()
        self._in_flight_ws: collections.Counter[uuid.UUID] = collections.Counter()
        self._attempts: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._pruned = 0.0
        # Results waiting to be recorded, one statement for all of them.
        self._results: list[tuple[AttemptResult, float]] = []
        self._recording: asyncio.Task[None] | None = None
        self._soon: asyncio.TimerHandle | None = None

    def poke(self, _payload: str | None = None) -> None:
        """An event committed somewhere (or the listener reconnected): look."""
        self._log_moved = True
        self._wake.set()

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, grace: float = 2.0) -> None:
        """Stops looking; attempts under way get `grace` to finish, then are
        cut (their leases end and another process sends them again)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._attempts:
            _, late = await asyncio.wait(set(self._attempts), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._soon is not None:
            self._soon.cancel()
        if self._recording is not None:
            await asyncio.wait([self._recording], timeout=grace)
        await self.sender.close()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async with asyncio.timeout(self.poll):
                    await self._wake.wait()
            except TimeoutError:
                # Retries come due, and other processes make deliveries.
                self._log_moved = self._maybe_due = True
            self._wake.clear()
            try:
                await self.round()
                failures = 0
            except StoreError as exc:
                failures += 1
                log.warning("webhook deliveries: %s", exc.message)
                await asyncio.sleep(min(0.1 * 2**failures, 5.0))
            except Exception:
                failures += 1
                log.exception("webhook deliveries failed")
                await asyncio.sleep(min(0.1 * 2**failures, 5.0))

    async def round(self) -> None:
        """Makes the deliveries the log calls for, and sends what is due."""
        if self._log_moved:
            self._log_moved = False
            if await self._fan_out():
                self._maybe_due = True
        if self._maybe_due and len(self._attempts) < self.concurrency:
            await self._send_due()
        if time.monotonic() - self._pruned > PRUNE_EVERY_SECONDS:
            self._pruned = time.monotonic()
            gone = await self.store.prune(self.retention, PRUNE_BATCH)
            if gone:
                log.info("deleted %d webhook deliveries older than %s", gone, self.retention)

    async def _fan_out(self) -> int:
        """Events read into deliveries in this round."""
        total = 0
        for _ in range(FAN_OUT_ROUNDS):
            backlog = await self.store.backlog(BACKLOG_BATCH)
            made = 0
            for workspace_id, webhook_id in backlog:
                made += await self.store.fan_out(workspace_id, webhook_id, self.drafts) or 0
            total += made
            if not made:
                return total  # none behind, or others are at them
        self.poke()  # more than a round's share: go on after sending
        return total

    async def _send_due(self) -> None:
        room = self.concurrency - len(self._attempts)
        deadline = time.monotonic() + self.sender.timeout
        claimed = await self.store.claim(
            self.server_id,
            self.lease,
            room,
            self.per_endpoint,
            dict(self._in_flight),
            self.per_workspace,
            dict(self._in_flight_ws),
            self.kinds,
        )
        # None: nothing more is due (or nothing this process may take) until
        # the log moves, an attempt ends or the poll comes round.
        self._maybe_due = bool(claimed)
        for delivery in claimed:
            self._in_flight[delivery.webhook_id] += 1
            self._in_flight_ws[delivery.workspace_id] += 1
            task = asyncio.get_running_loop().create_task(self._attempt(delivery, deadline))
            self._attempts.add(task)
            task.add_done_callback(self._attempts.discard)

    async def _attempt(self, delivery: ClaimedDelivery, deadline: float) -> None:
        try:
            if delivery.problem:
                outcome = Outcome(False, None, 0.0, delivery.problem)
            elif delivery.kind is WebhookKind.EMAIL:
                assert self.mailer is not None, "claimed only with a relay"
                outcome = await self.mailer.send(delivery, deadline)
            elif delivery.kind is WebhookKind.SLACK_APP:
                if self.slack is None:
                    return  # its lease ends and a process with the Slack app sends it
                outcome = await self.slack.send(delivery)
            elif delivery.kind is WebhookKind.PUSH:
                assert self.pusher is not None, "claimed only with a pusher"
                outcome = await self.pusher.send(delivery, deadline)
            else:
                body = delivery.body.encode()
                headers = signed_headers(
                    str(delivery.delivery_id), int(time.time()), body, delivery.secrets
                )
                outcome = await self.sender.post(delivery.url, headers, body, deadline)
            self._record(delivery, outcome)
        except Exception:
            log.exception("webhook delivery %s", delivery.delivery_id)
        finally:
            self._in_flight[delivery.webhook_id] -= 1
            if self._in_flight[delivery.webhook_id] <= 0:
                del self._in_flight[delivery.webhook_id]
            self._in_flight_ws[delivery.workspace_id] -= 1
            if self._in_flight_ws[delivery.workspace_id] <= 0:
                del self._in_flight_ws[delivery.workspace_id]
            # Its room is free again, for its endpoint too: look, a moment
            # later, so the attempts that end together make one claim.
            self._maybe_due = True
            if self._soon is None:
                self._soon = asyncio.get_running_loop().call_later(CLAIM_GATHER_SECONDS, self._due)

    def _due(self) -> None:
        self._soon = None
        self._wake.set()

    def retry_in(self, failures: int) -> datetime.timedelta | None:
        """The wait after a delivery's failure number `failures + 1`; None when
        the schedule is spent."""
        if failures >= len(self.retry_schedule):
            return None
        wait = self.retry_schedule[failures] * random.uniform(1 - JITTER, 1 + JITTER)
        return datetime.timedelta(seconds=wait)

    def _record(self, delivery: ClaimedDelivery, outcome: Outcome) -> None:
        gone = outcome.gone
        final = outcome.delivered or gone or outcome.final
        retry = None if final else self.retry_in(delivery.failures)
        if retry is not None and outcome.retry_after is not None:
            # The receiver (or a person's quiet hours) named when: then, not
            # the schedule's wait, while the schedule has retries left.
            retry = outcome.retry_after
        result = AttemptResult(
            delivery.delivery_id,
            delivery.attempt,
            outcome.delivered,
            retry,
            outcome.status_code,
            outcome.latency_ms,
            outcome.error,
            outcome.response,
            GONE if gone else None,
        )
        # Until its lease ends a result is ours to record; after it, the
        # delivery is another attempt's.
        self._results.append((result, time.monotonic() + self.lease.total_seconds()))
        if self._recording is None:
            self._recording = asyncio.get_running_loop().create_task(self._record_all())

    async def _record_all(self) -> None:
        """Records every result waiting, in one statement; those that arrive
        meanwhile go with the next."""
        wait = 0.1
        try:
            while self._results:
                batch, self._results = self._results, []
                try:
                    await self.store.finish([r for r, _ in batch])
                    wait = 0.1
                except StoreError as exc:
                    now = time.monotonic()
                    kept = [(r, until) for r, until in batch if until > now + wait]
                    if len(kept) < len(batch):
                        log.warning(
                            "couldn't record %d webhook attempt(s) (%s); they will be sent again",
                            len(batch) - len(kept),
                            exc.message,
                        )
                    self._results = kept + self._results
                    await asyncio.sleep(wait)
                    wait = min(wait * 2, 2.0)
        finally:
            self._recording = None
