"""What a push endpoint sends: one Web Push message per subscription of each
person an ask is for, when it is posted.

The deliveries are made from the event log like every webhook's; a body
names the subscription and carries the notification's text, never a link:
the link that opens the ask for that person is minted as the push is sent.
The payload is encrypted for the subscription (RFC 8291, aes128gcm) and the
request signed with the deployment's VAPID key (RFC 8292), by pywebpush;
the POST itself is the webhook sender's, with its address checks.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from py_vapid import Vapid02

from compass_server.notify.mailer import Links
from compass_server.notify.preferences import Preferences, held
from compass_server.receipts import Receipts
from compass_server.store.errors import StoreError
from compass_server.store.types import (
    ClaimedDelivery,
    DeliveryDraft,
    Directory,
    Event,
    WebhookEventType,
    takes_one_tap,
)
from compass_server.webhooks.payloads import Notice, notices
from compass_server.webhooks.sender import Outcome, Sender

T = WebhookEventType
# A push goes when an ask is posted, and with each reminder or escalation.
_PUSHED = (T.ASK_POSTED, T.ASK_REMINDED, T.ASK_ESCALATED)
_TITLES = {"reminded": "Reminder: ", "escalated": "Urgent: "}
# The most of the question a notification's text carries.
TEXT_CHARS = 200
# How long a push service keeps a message for a device that is off (seconds).
PUSH_TTL = 24 * 3600
# How long a VAPID signature is good for (at most 24 h, RFC 8292).
VAPID_SECONDS = 12 * 3600
# The most of an option's label a notification's action button carries.
ACTION_CHARS = 40


def actions(ask: dict[str, Any]) -> list[dict[str, str]]:
    """The choices of an ask one tap answers, as a notification's actions
    ({action: option id, title: label}); none for an ask that needs more."""
    questions: list[dict[str, Any]] = ask["questions"]
    first: dict[str, Any] = questions[0] if questions else {"allow_multiple": False, "options": []}
    required = (ask.get("quorum") or {}).get("required", 0)
    if not takes_one_tap(len(questions), first["allow_multiple"], len(first["options"]), required):
        return []
    return [
        {"action": o["id"], "title": _clip(o["label"] or o["id"], ACTION_CHARS)}
        for o in first["options"]
    ]


def recipients(notice: Notice, d: Directory, default: bool) -> list[uuid.UUID]:
    """The named answerers, or for an ask that names nobody its channel's
    people but the asker; for a follow-up step, the people it reached; of
    them, those who have push on."""
    ask = notice.data["ask"]
    step = notice.data.get("follow_up")
    named = [uuid.UUID(a["account_id"]) for a in (step["people"] if step else ask["answerers"])]
    if not named:
        channel = uuid.UUID(notice.data["channel"]["channel_id"])
        asker = (notice.data.get("asker") or {}).get("account_id")
        named = [a for a in d.members.get(channel, ()) if str(a) != asker]
    out = []
    for a in named:
        if a not in d.push:
            continue
        chosen = d.push[a]
        if (default if chosen is None else chosen) and d.subscriptions.get(a):
            out.append(a)
    return out


def _clip(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"


class PushDrafts:
    """Makes a push endpoint's deliveries from a page of its log."""

    def __init__(self, receipts: Receipts | None = None, *, default: bool = True) -> None:
        self.receipts = receipts
        self.default = default

    def __call__(
        self, types: frozenset[WebhookEventType], events: Sequence[Event], d: Directory
    ) -> list[DeliveryDraft]:
        out = []
        for event in events:
            if event.inbox is not None:
                continue
            for notice in notices(event, d, "", self.receipts):
                if notice.type not in _PUSHED or (types and notice.type not in types):
                    continue
                data = notice.data
                step = data.get("follow_up")
                tag = f"{step['kind']}.{step['number']}" if step is not None else "posted"
                ask_id = data["ask"]["ask_id"]
                asker = (data.get("asker") or {}).get("handle") or "An agent"
                questions = data["ask"]["questions"]
                first = questions[0] if questions else {"header": "", "question": ""}
                for account in recipients(notice, d, self.default):
                    for sub in d.subscriptions[account]:
                        body = {
                            "subscription_id": str(sub),
                            "account_id": str(account),
                            "ask_id": ask_id,
                            "title": _clip(f"{_TITLES.get(tag.split('.')[0], '')}{asker} asks", 80),
                            "text": _clip(first["header"] or first["question"], TEXT_CHARS),
                            "channel": _clip(data["channel"]["name"], 80),
                            "urgent": bool(step is not None and step.get("urgent")),
                            "question_id": first.get("question_id", ""),
                            "actions": actions(data["ask"]),
                        }
                        out.append(
                            DeliveryDraft(
                                notice.event_id,
                                notice.type,
                                ask_id,
                                f"push.{tag}:{ask_id}:{sub}",
                                json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                            )
                        )
        return out


class Subscriptions(Protocol):
    async def preferences_of(
        self, workspace_id: uuid.UUID, account_id: uuid.UUID
    ) -> Preferences: ...

    async def subscription(
        self, workspace_id: uuid.UUID, subscription_id: uuid.UUID
    ) -> dict[str, Any] | None: ...

    async def drop_subscription(
        self, workspace_id: uuid.UUID, subscription_id: uuid.UUID
    ) -> None: ...

    async def vapid_key(self) -> tuple[str, str]: ...


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Pusher:
    def __init__(
        self,
        subscriptions: Subscriptions,
        links: Links,
        sender: Sender,
        public_url: str,
        *,
        ttl: int = PUSH_TTL,
    ) -> None:
        self.subscriptions = subscriptions
        self.links = links
        self.sender = sender
        self.public_url = public_url.rstrip("/")
        self.ttl = ttl
        self._vapid: Vapid02 | None = None

    async def _signer(self) -> Vapid02:
        if self._vapid is None:
            pem, _ = await self.subscriptions.vapid_key()
            self._vapid = Vapid02.from_pem(pem.encode())
        return self._vapid

    async def send(self, delivery: ClaimedDelivery, deadline: float) -> Outcome:
        started = time.monotonic()

        def not_sent(why: str) -> Outcome:
            return Outcome(False, None, (time.monotonic() - started) * 1000, why, final=True)

        body = json.loads(delivery.body)
        ws = delivery.workspace_id
        account = uuid.UUID(body["account_id"])
        sub_id = uuid.UUID(body["subscription_id"])
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                prefs = await self.subscriptions.preferences_of(ws, account)
                if not prefs.push:
                    return not_sent("not sent: the person turned push off")
                wait = None if body.get("urgent") else held(prefs)
                if wait is not None:
                    why, after = wait
                    took = (time.monotonic() - started) * 1000
                    return Outcome(False, None, took, why, retry_after=after)
                sub = await self.subscriptions.subscription(ws, sub_id)
                if sub is None:
                    return not_sent("not sent: the subscription was removed")
                try:
                    minted = await self.links.mint_ask_link(ws, body["ask_id"], account)
                except StoreError as exc:
                    return not_sent(f"not sent: {exc.message}")
                vapid = await self._signer()
        except StoreError as exc:
            return Outcome(False, None, (time.monotonic() - started) * 1000, exc.message)
        except TimeoutError:
            took = (time.monotonic() - started) * 1000
            return Outcome(False, None, took, "no answer from the database within the attempt")
        payload = {
            "title": body["title"],
            "body": body["text"],
            "url": f"{self.public_url}/a/{minted.secret}",
            "tag": f"ask-{body['ask_id']}",
            "urgent": bool(body.get("urgent")),
            # A tap on one of these answers through the link, from the service worker.
            "ask_id": body["ask_id"],
            "question_id": body.get("question_id", ""),
            "actions": body.get("actions", []),
        }
        info = {"endpoint": sub["endpoint"], "keys": {"p256dh": sub["p256dh"], "auth": sub["auth"]}}
        # Imported when first needed: it brings requests and aiohttp, which
        # every command-line start would otherwise pay for.
        from pywebpush import WebPusher

        try:
            encoded = WebPusher(info).encode(
                json.dumps(payload, ensure_ascii=False).encode(), content_encoding="aes128gcm"
            )
        except Exception:
            # Keys checked when kept can't fail here unless the row was altered.
            return not_sent("not sent: the subscription's keys can't encrypt a push")
        claims = {
            "sub": delivery.url,
            "aud": _origin(sub["endpoint"]),
            "exp": int(time.time()) + VAPID_SECONDS,
        }
        signed = vapid.sign(claims)
        headers = {
            "content-type": "application/octet-stream",
            "content-encoding": "aes128gcm",
            "ttl": str(self.ttl),
            "urgency": "high" if payload["urgent"] else "normal",
            "authorization": signed["Authorization"],
        }
        outcome = await self.sender.post(sub["endpoint"], headers, encoded["body"], deadline)
        if outcome.status_code in (404, 410):
            # The push service forgot the subscription: so do we.
            await self.subscriptions.drop_subscription(ws, sub_id)
            return Outcome(
                False,
                outcome.status_code,
                outcome.latency_ms,
                f"the push service answered {outcome.status_code}: the subscription is gone "
                "and was removed",
                outcome.response,
                final=True,
                recipient_gone=True,
            )
        return outcome
