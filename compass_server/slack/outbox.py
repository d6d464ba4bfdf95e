"""Sends a Slack app's deliveries: an ask posted becomes `chat.postMessage`
with its buttons, an ending `chat.update` of that message (or, when the ask
ended before its post went out, the ended message posted in its place).

The courier claims, retries and records these like any webhook delivery, so
an ending's update survives Slack's rate limits, its outages and a server's
restart, and the write that ended the ask never waits on Slack. An ask's
post and its update hold the ask's lock while they call Slack, so they never
cross: the update always finds the message it edits.
"""

from __future__ import annotations

import json
import time
import uuid

from compass_server.slack import blocks
from compass_server.slack.web import SlackFailed, SlackWeb, took_ms
from compass_server.store.slack import Posted, SlackStore
from compass_server.store.types import ClaimedDelivery, WebhookEventType
from compass_server.webhooks.sender import Outcome


class SlackOutbox:
    def __init__(self, store: SlackStore, web: SlackWeb) -> None:
        self.store = store
        self.web = web

    async def send(self, delivery: ClaimedDelivery) -> Outcome:
        start = time.monotonic()
        try:
            said = await self._send(delivery)
        except SlackFailed as exc:
            return Outcome(False, exc.status_code, took_ms(start), exc.error, "", exc.retry_after)
        return Outcome(True, 200, took_ms(start), "", said)

    async def _send(self, delivery: ClaimedDelivery) -> str:
        notice = json.loads(delivery.body)
        data = notice["data"]
        ask = data["ask"]
        channel = data.get("channel")
        if ask is None or channel is None:
            return "not a channel's ask"
        app_id, token = delivery.webhook_id, delivery.url
        posting = delivery.event_type is WebhookEventType.ASK_POSTED
        async with self.store.db.delivery_tx(delivery.workspace_id) as conn:
            posted = await self.store.posted(conn, app_id, ask["ask_id"])
            if posted is not None and (posting or posted.ended):
                return "already shown"
            if posted is not None:
                await self.web.call(
                    "chat.update",
                    token,
                    {
                        "channel": posted.slack_channel,
                        "ts": posted.ts,
                        **blocks.ended_message(data),
                    },
                )
                await self.store.put_posted(
                    conn, app_id, ask["ask_id"], Posted(posted.slack_channel, posted.ts, True)
                )
                return "updated"
            target = await self.store.target(conn, app_id, uuid.UUID(channel["channel_id"]))
            if target is None:
                return "its channel is not mapped to Slack"
            message = blocks.open_message(data) if posting else blocks.ended_message(data)
            answer = await self.web.call("chat.postMessage", token, {"channel": target, **message})
            ts = answer.get("ts")
            if not isinstance(ts, str) or not ts:
                raise SlackFailed("chat.postMessage: Slack's answer has no ts")
            await self.store.put_posted(
                conn,
                app_id,
                ask["ask_id"],
                Posted(str(answer.get("channel") or target), ts, not posting),
            )
            return "posted"
