"""Sends a Slack app's deliveries: an ask posted becomes `chat.postMessage`
with its buttons, an ending `chat.update` of that message.

The courier claims, retries and records these like any webhook delivery, so
an ending's update survives Slack's rate limits, its outages and a server's
restart, and the write that ended the ask never waits on Slack. An update
that finds its ask's message not yet in Slack (its post is still being
tried) fails and is tried again; one whose ask was never posted there (its
channel not mapped then, or the app connected after) has nothing to edit.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from compass_server.notify.preferences import Preferences, held
from compass_server.slack import blocks
from compass_server.slack.web import SlackFailed, SlackWeb, took_ms
from compass_server.store.errors import StoreError
from compass_server.store.slack import Posted, SlackStore
from compass_server.store.types import ClaimedDelivery, WebhookEventType
from compass_server.webhooks.sender import Outcome

PreferencesOf = Callable[[uuid.UUID, uuid.UUID], Awaitable[Preferences]]

# An update waiting for its message is tried again no sooner than this.
WAIT_FOR_POST_SECONDS = 0.5
NOT_POSTED = "the ask's message isn't in Slack yet: its update waits for it"


class SlackOutbox:
    def __init__(
        self, store: SlackStore, web: SlackWeb, preferences: PreferencesOf | None = None
    ) -> None:
        self.store = store
        self.web = web
        # A person's choices, read as a direct message is sent.
        self.preferences = preferences

    async def send(self, delivery: ClaimedDelivery) -> Outcome:
        start = time.monotonic()
        body = json.loads(delivery.body)
        if "dm" in body:
            return await self._direct(delivery, body, start)
        try:
            said = await self._send(delivery)
        except SlackFailed as exc:
            return Outcome(
                False,
                exc.status_code,
                took_ms(start),
                exc.error,
                retry_after=_seconds(exc.retry_after),
            )
        return Outcome(True, 200, took_ms(start), "", said)

    async def _send(self, delivery: ClaimedDelivery) -> str:
        data = json.loads(delivery.body)["data"]
        ask = data.get("ask")
        channel = data.get("channel")
        if ask is None or channel is None:
            return "not a channel's ask"
        ws, app_id, token, ask_id = (
            delivery.workspace_id,
            delivery.webhook_id,
            delivery.url,
            ask["ask_id"],
        )
        posted, target, waiting = await self.store.posted(
            ws, app_id, ask_id, uuid.UUID(channel["channel_id"])
        )
        if delivery.event_type is WebhookEventType.ASK_POSTED:
            if posted is not None:
                return "already posted"
            if target is None:
                return "its channel is not mapped to Slack"
            message = blocks.open_message(data)
            answer = await self.web.call("chat.postMessage", token, {"channel": target, **message})
            ts = answer.get("ts")
            if not isinstance(ts, str) or not ts:
                raise SlackFailed("chat.postMessage: Slack's answer has no ts")
            where = str(answer.get("channel") or target)
            await self.store.record_post(ws, app_id, ask_id, Posted(where, ts, False))
            return "posted"
        directs = await self._end_directs(delivery, data, ask_id)
        if posted is None:
            if not waiting:
                return directs or "the ask was never shown in Slack"
            raise SlackFailed(NOT_POSTED, retry_after=WAIT_FOR_POST_SECONDS)
        if posted.ended:
            return directs or "already updated"
        update = {"channel": posted.slack_channel, "ts": posted.ts, **blocks.ended_message(data)}
        await self.web.call("chat.update", token, update)
        await self.store.record_ended(ws, app_id, ask_id)
        return "updated" + (f"; {directs}" if directs else "")

    async def _end_directs(
        self, delivery: ClaimedDelivery, data: dict[str, Any], ask_id: str
    ) -> str:
        """Edits the ask's direct messages to show its ending; each once."""
        ws, app_id = delivery.workspace_id, delivery.webhook_id
        directs = await self.store.open_directs(ws, app_id, ask_id)
        if not directs:
            return ""
        ended = blocks.ended_message(data)
        for d in directs:
            await self.web.call(
                "chat.update", delivery.url, {"channel": d.slack_channel, "ts": d.ts, **ended}
            )
            await self.store.record_direct_ended(ws, app_id, ask_id, d)
        return f"updated {len(directs)} direct message{'s' if len(directs) != 1 else ''}"

    async def _direct(
        self, delivery: ClaimedDelivery, body: dict[str, Any], start: float
    ) -> Outcome:
        """A direct message to the person's linked Slack user: not while their
        quiet hours hold it (an urgent one goes), not once they turned it off
        or the ask ended."""
        dm, data = body["dm"], body["data"]
        ws = delivery.workspace_id

        def not_sent(why: str) -> Outcome:
            return Outcome(False, None, took_ms(start), why, final=True)

        try:
            if self.preferences is not None:
                prefs = await self.preferences(ws, uuid.UUID(dm["account_id"]))
                if not prefs.slack_dm:
                    return not_sent("not sent: the person turned Slack direct messages off")
                wait = None if dm.get("urgent") else held(prefs)
                if wait is not None:
                    why, after = wait
                    return Outcome(False, None, took_ms(start), why, retry_after=after)
            if await self.store.ending_of(ws, data["ask"]["ask_id"]) is not None:
                return not_sent("not sent: the ask has ended")
        except StoreError as exc:
            return Outcome(False, None, took_ms(start), exc.message)
        message = blocks.direct_message(data, dm.get("step", ""))
        try:
            answer = await self.web.call(
                "chat.postMessage", delivery.url, {"channel": dm["slack_user"], **message}
            )
            ts = answer.get("ts")
            if isinstance(ts, str) and ts:
                where = str(answer.get("channel") or dm["slack_user"])
                await self.store.record_direct(
                    ws, delivery.webhook_id, data["ask"]["ask_id"], Posted(where, ts, False)
                )
        except StoreError as exc:
            return Outcome(False, None, took_ms(start), exc.message)
        except SlackFailed as exc:
            return Outcome(
                False,
                exc.status_code,
                took_ms(start),
                exc.error,
                retry_after=_seconds(exc.retry_after),
            )
        return Outcome(True, 200, took_ms(start), "", "sent a direct message")


def _seconds(value: float | None) -> datetime.timedelta | None:
    return None if value is None else datetime.timedelta(seconds=value)
