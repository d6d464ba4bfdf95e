"""A Slack app's direct messages: for each ask posted for a person (and
each reminder or escalation that reaches them) who linked their Slack
account and turned Slack direct messages on, one delivery of the app's
endpoint that the app sends as a direct message with the ask's buttons.

The deliveries are made from the event log with the app's others, so they
are retried, recorded and held through quiet hours like push (the person's
choice and hours are read again when sent: slack/outbox.py)."""

from __future__ import annotations

import json
import uuid

from compass_server.store.types import DeliveryDraft, Directory, WebhookEventType
from compass_server.webhooks.payloads import Notice

T = WebhookEventType
# A direct message goes when an ask is posted, and with each reminder or escalation.
SENT = (T.ASK_POSTED, T.ASK_REMINDED, T.ASK_ESCALATED)


def recipients(notice: Notice, d: Directory, default: bool) -> list[tuple[uuid.UUID, str]]:
    """(person, Slack user) of the named answerers, or for an ask that names
    nobody its channel's people but the asker; for a follow-up step, the
    people it reached; of them, those linked who have Slack DMs on."""
    data = notice.data
    if data.get("channel") is None:
        return []
    step = data.get("follow_up")
    named = [
        uuid.UUID(a["account_id"]) for a in (step["people"] if step else data["ask"]["answerers"])
    ]
    if not named:
        channel = uuid.UUID(data["channel"]["channel_id"])
        asker = (data.get("asker") or {}).get("account_id")
        named = [a for a in d.members.get(channel, ()) if str(a) != asker]
    out = []
    for a in named:
        if a not in d.slack_dm:
            continue
        user, chosen = d.slack_dm[a]
        if default if chosen is None else chosen:
            out.append((a, user))
    return out


class SlackDmDrafts:
    """A notice's direct messages, for a Slack app's endpoint."""

    def __init__(self, *, default: bool = False) -> None:
        self.default = default

    def __call__(self, notice: Notice, d: Directory) -> list[DeliveryDraft]:
        if notice.type not in SENT:
            return []
        data = notice.data
        step = data.get("follow_up")
        tag = f"{step['kind']}.{step['number']}" if step is not None else "posted"
        ask_id = data["ask"]["ask_id"]
        out = []
        for account, user in recipients(notice, d, self.default):
            body = {
                "type": notice.type.value,
                "dm": {
                    "account_id": str(account),
                    "slack_user": user,
                    "step": step["kind"] if step is not None else "",
                    "urgent": bool(step is not None and step.get("urgent")),
                },
                "data": data,
            }
            out.append(
                DeliveryDraft(
                    notice.event_id,
                    notice.type,
                    ask_id,
                    f"slack.dm.{tag}:{ask_id}:{account}",
                    json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                )
            )
        return out
