"""What an email endpoint sends: one mail per person per ask posted, and a
follow-up in the same thread when it ends.

The deliveries are made from the event log like every webhook's (the
store's `Derive`); a body holds the notice and its recipient, never a link:
the link that opens the ask for that person is minted as the mail is sent,
so no secret rests in the database and a mail sent late to an ended ask is
not sent at all.
"""

from __future__ import annotations

import email.message
import email.utils
import html
import json
import urllib.parse
import uuid
from collections.abc import Sequence
from typing import Any

from compass_server.receipts import Receipts
from compass_server.store.errors import InvalidArgument
from compass_server.store.types import (
    DeliveryDraft,
    Directory,
    Event,
    WebhookEventType,
)
from compass_server.webhooks.payloads import Notice, notices

T = WebhookEventType
_ENDINGS = {T.ASK_ANSWERED, T.ASK_DECLINED, T.ASK_WITHDRAWN, T.ASK_EXPIRED}
# Mails that open the ask for their person, with a link of their own.
LINKED = ("posted", "reminded", "escalated")
_SAID = {
    "answered": "was answered",
    "declined": "was declined",
    "withdrawn_by_agent": "was withdrawn by its agent",
    "withdrawn_by_owner": "was withdrawn by its agent's owner",
    "expired": "expired",
}


# The longest sender address an email endpoint takes (RFC 5321's path).
MAX_ADDRESS = 254


def sender_address(url: str) -> str:
    """An email endpoint's URL, mailto:name@host (no query, one address);
    INVALID_ARGUMENT else."""
    text = url.strip()
    address = text.removeprefix("mailto:")
    _, parsed = email.utils.parseaddr(address)
    local, _, host = address.rpartition("@")
    if (
        not text.startswith("mailto:")
        or parsed != address
        or not local
        or "." not in host
        or len(address) > MAX_ADDRESS
        or any(c in address for c in "?,;<> \t\r\n")
    ):
        raise InvalidArgument(
            "an email webhook's url is the address its mail comes from, like "
            "mailto:compass@example.com"
        )
    return f"mailto:{address}"


def _domain(public_url: str) -> str:
    return urllib.parse.urlsplit(public_url).hostname or "compass.invalid"


def message_id(public_url: str, ask_id: str, account_id: str, stage: str) -> str:
    """The same on every attempt: a mail sent twice is one mail to a reader."""
    tail = "" if stage == "posted" else f".{stage}"
    return f"<ask.{ask_id}.{account_id}{tail}@{_domain(public_url)}>"


def recipients(notice: Notice, d: Directory) -> list[uuid.UUID]:
    """The named answerers who haven't turned mail off; for an ask that
    names nobody, its channel's people who asked for mail about every ask.
    A follow-up step: the people it reached who haven't turned mail off (a
    reminder of an ask that names nobody also the channel's 'all' people)."""
    ask = notice.data["ask"]
    step = notice.data.get("follow_up")
    if step is not None:
        reached = [uuid.UUID(p["account_id"]) for p in step["people"]]
        out = [a for a in reached if a in d.people and d.people[a][2] != "off"]
        if step["kind"] == "reminded" and not ask["answerers"]:
            channel = uuid.UUID(notice.data["channel"]["channel_id"])
            out += [
                a
                for a in d.members.get(channel, ())
                if a not in out and a in d.people and d.people[a][2] == "all"
            ]
        return out
    named = [uuid.UUID(a["account_id"]) for a in ask["answerers"]]
    if named:
        return [a for a in named if a in d.people and d.people[a][2] != "off"]
    channel = uuid.UUID(notice.data["channel"]["channel_id"])
    return [a for a in d.members.get(channel, ()) if a in d.people and d.people[a][2] == "all"]


class MailDrafts:
    """Makes an email endpoint's deliveries from a page of its log."""

    def __init__(self, public_url: str, receipts: Receipts | None = None) -> None:
        self.public_url = public_url
        self.receipts = receipts

    def __call__(
        self,
        types: frozenset[WebhookEventType],
        events: Sequence[Event],
        d: Directory,
    ) -> list[DeliveryDraft]:
        out = []
        for event in events:
            if event.inbox is not None:
                continue  # inbox items are the agent's page, not a person's mail
            for notice in notices(event, d, self.public_url, self.receipts):
                if notice.type is T.ASK_POSTED:
                    stage = "posted"
                elif notice.type is T.ASK_REMINDED:
                    stage = "reminded"
                elif notice.type is T.ASK_ESCALATED:
                    stage = "escalated"
                elif notice.type in _ENDINGS:
                    stage = "ended"
                else:
                    continue
                if types and notice.type not in types:
                    continue
                ask_id = notice.data["ask"]["ask_id"]
                for account in recipients(notice, d):
                    handle, address, _ = d.people[account]
                    first = message_id(self.public_url, ask_id, str(account), "posted")
                    # Each step mails once: its number is part of its ids.
                    step = notice.data.get("follow_up")
                    tag = f"{stage}.{step['number']}" if step is not None else stage
                    body = {
                        "to": address,
                        "account_id": str(account),
                        "handle": handle,
                        "ask_id": ask_id,
                        "stage": stage,
                        "message_id": message_id(self.public_url, ask_id, str(account), tag),
                        "in_reply_to": first if stage in ("ended", "reminded") else None,
                        # An escalation is urgent: quiet hours let it through.
                        "urgent": bool(step is not None and step.get("urgent")),
                        "notice": {"type": notice.type.value, **notice.data},
                    }
                    out.append(
                        DeliveryDraft(
                            notice.event_id,
                            notice.type,
                            ask_id,
                            f"email.{tag}:{ask_id}:{account}",
                            json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                        )
                    )
        return out


# The most of a question a subject line carries.
SUBJECT_CHARS = 80


def _title(data: dict[str, Any]) -> str:
    """The first question's header (or text) on one line: an agent's line
    breaks never reach a header."""
    questions = data["ask"]["questions"]
    first = questions[0] if questions else {"header": "", "question": ""}
    text = " ".join((first["header"] or first["question"]).split())
    return text if len(text) <= SUBJECT_CHARS else text[: SUBJECT_CHARS - 1] + "…"


def choices(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(option id, label) offered as one-click links: only for an ask of one
    single-select question with options."""
    questions = data["ask"]["questions"]
    if len(questions) != 1 or questions[0]["allow_multiple"]:
        return []
    return [(o["id"], o["label"]) for o in questions[0]["options"]]


def choose_url(link: str, option_id: str) -> str:
    return f"{link}?{urllib.parse.urlencode({'choose': option_id})}"


def replyable(data: dict[str, Any]) -> bool:
    """Whether a reply's first line can answer the ask: one question, with options."""
    questions = data["ask"]["questions"]
    return len(questions) == 1 and bool(questions[0]["options"])


def render(
    body: dict[str, Any], sender: str, link: str, reply_to: str = ""
) -> email.message.EmailMessage:
    """The mail of a delivery's body, with the person's link (empty for a
    follow-up, which opens nothing new) and reply address (empty: none)."""
    data = body["notice"]
    asker = (data.get("asker") or {}).get("handle") or "An agent"
    channel = " ".join(data["channel"]["name"].split())
    title = _title(data)
    msg = email.message.EmailMessage()
    msg["From"] = sender
    msg["To"] = body["to"]
    msg["Message-ID"] = body["message_id"]
    msg["Date"] = email.utils.formatdate(usegmt=True)
    # Replies and out-of-office answers have nowhere useful to go.
    msg["Auto-Submitted"] = "auto-generated"
    if reply_to:
        msg["Reply-To"] = reply_to
    e = html.escape
    if body["stage"] == "ended":
        msg["Subject"] = f"Re: {asker} asks: {title}"
        msg["In-Reply-To"] = body["in_reply_to"]
        msg["References"] = body["in_reply_to"]
        state = data["ask"]["state"]
        ending = data["ask"].get("ending") or {}
        by = (ending.get("by") or {}).get("handle")
        said = f"This ask {_SAID.get(state, 'ended')}" + (f" by {by}" if by else "") + "."
        lines = [said, ""]
        parts = [f"<p>{e(said)}</p>"]
        for q in data["ask"]["questions"]:
            answer = q.get("answer") or {}
            own = answer.get("custom_text") or ""
            given = ", ".join([*answer.get("chosen_labels", []), *([own] if own else [])]) or "—"
            lines.append(f"{q['question']}\n  {given}")
            parts.append(f"<p><strong>{e(q['question'])}</strong><br>{e(given)}</p>")
        msg.set_content("\n".join(lines) + "\n")
        msg.add_alternative(_html(parts), subtype="html")
        return msg
    one_click = choices(data)
    if body["stage"] == "reminded":
        msg["Subject"] = f"Re: {asker} asks: {title}"
        msg["In-Reply-To"] = body["in_reply_to"]
        msg["References"] = body["in_reply_to"]
        opening = f"Reminder: {asker} is still waiting for your answer in #{channel}:"
    elif body["stage"] == "escalated":
        msg["Subject"] = f"Urgent: {asker} asks: {title}"
        # Marked for mail clients too: an escalation is urgent.
        msg["Importance"] = "high"
        msg["X-Priority"] = "1"
        opening = f"Nobody has answered yet, so {asker} asks you too in #{channel}:"
    else:
        msg["Subject"] = f"{asker} asks: {title}"
        opening = f"{asker} asks you in #{channel}:"
    lines = [opening, ""]
    parts = [f"<p>{e(opening)}</p>"]
    by_reply = bool(reply_to) and replyable(data)
    for q in data["ask"]["questions"]:
        lines.append(q["question"])
        parts.append(f"<p><strong>{e(q['question'])}</strong></p>")
        if by_reply:
            # Numbered: a reply names an option by its number or its label.
            urls = dict(one_click)
            for i, o in enumerate(q["options"], 1):
                url = f": {choose_url(link, o['id'])}" if o["id"] in urls else ""
                lines.append(f"  {i}. {o['label']}{url}")
            parts.append(
                "<ol>"
                + "".join(
                    f'<li><a href="{e(choose_url(link, o["id"]))}">{e(o["label"])}</a></li>'
                    if o["id"] in urls
                    else f"<li>{e(o['label'])}</li>"
                    for o in q["options"]
                )
                + "</ol>"
            )
        elif one_click:
            lines += [f"  - {label}: {choose_url(link, oid)}" for oid, label in one_click]
            parts.append(
                "<ul>"
                + "".join(
                    f'<li><a href="{e(choose_url(link, oid))}">{e(label)}</a></li>'
                    for oid, label in one_click
                )
                + "</ul>"
            )
        elif q["options"]:
            lines += [f"  - {o['label']}" for o in q["options"]]
            parts.append(
                "<ul>" + "".join(f"<li>{e(o['label'])}</li>" for o in q["options"]) + "</ul>"
            )
    deadline = data["ask"].get("deadline")
    if deadline:
        lines += ["", f"Answer by {deadline}."]
        parts.append(f"<p>Answer by {e(deadline)}.</p>")
    lines += ["", f"Answer it here: {link}"]
    parts.append(f'<p><a href="{e(link)}">Open the ask to answer it</a></p>')
    if one_click:
        lines.append("A choice opens the ask with it chosen; nothing is sent until you submit.")
        parts.append(
            "<p>A choice opens the ask with it chosen; nothing is sent until you submit.</p>"
        )
    if by_reply:
        how = (
            "Or reply to this mail with the number or label of your choice on the first "
            'line (or "decline: your reason"); your reply is answered as you.'
        )
        lines.append(how)
        parts.append(f"<p>{e(how)}</p>")
    msg.set_content("\n".join(lines) + "\n")
    msg.add_alternative(_html(parts), subtype="html")
    return msg


def _html(parts: list[str]) -> str:
    return (
        '<!doctype html><html><body style="font-family:sans-serif">'
        + "".join(parts)
        + ("</body></html>")
    )
