"""What a webhook says about an event of the log.

An ask posted in a channel, a vote in a quorum ask that did not end it, its
ending (answered, declined, withdrawn by its agent or the agent's owner,
expired), and an inbox item opened, answered or closed each make one notice:
a type, the event's time and sequence number, and the data a receiver needs
without calling back (the ask's questions and options, channel, asker,
state, a quorum's votes, the page's link). A notice is sent as a Standard
Webhooks JSON body, or as a Slack message (slack.py).
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compass_server.receipts import Receipts
from compass_server.store.types import (
    Ask,
    AskAnswerBlock,
    AskEnding,
    AskQuestion,
    ChannelKind,
    DeliveryDraft,
    Directory,
    EndingKind,
    Event,
    EventKind,
    FollowUpStep,
    InboxChange,
    InboxStatus,
    Message,
    QuorumVote,
    WebhookEventType,
    WebhookKind,
)
from compass_server.webhooks import slack

T = WebhookEventType
MailDerive = Callable[
    [frozenset[WebhookEventType], Sequence[Event], Directory], list[DeliveryDraft]
]

_ENDED = {
    EndingKind.ANSWERED: T.ASK_ANSWERED,
    EndingKind.DECLINED: T.ASK_DECLINED,
    EndingKind.WITHDRAWN_BY_AGENT: T.ASK_WITHDRAWN,
    EndingKind.WITHDRAWN_BY_OWNER: T.ASK_WITHDRAWN,
    EndingKind.EXPIRED: T.ASK_EXPIRED,
}


@dataclass(frozen=True, slots=True)
class Notice:
    type: WebhookEventType
    event_id: int
    at: datetime.datetime
    # The ask or inbox item it is about.
    subject: str
    # One delivery per endpoint per key.
    dedupe_key: str
    data: dict[str, Any]


def time(value: datetime.datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def ask_link(public_url: str, ask_id: str) -> str:
    return f"{public_url.rstrip('/')}/#/ask/{ask_id}"


def item_link(public_url: str, item_id: uuid.UUID) -> str:
    return f"{public_url.rstrip('/')}/#/inbox/{item_id}"


def _who(account_id: uuid.UUID | None, handle: str) -> dict[str, Any] | None:
    return None if account_id is None else {"account_id": str(account_id), "handle": handle}


def _labels(q: AskQuestion, chosen: tuple[str, ...]) -> list[str]:
    labels = {o.id: o.label for o in q.options}
    return [labels.get(i, i) for i in chosen]


def _question(q: AskQuestion, answered: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "question_id": q.question_id,
        "question": q.question,
        "header": q.header,
        "allow_multiple": q.allow_multiple,
        "recommended": q.recommended
        if q.recommended is not None and 0 <= q.recommended < len(q.options)
        else None,
        "options": [
            {"id": o.id, "label": o.label, "description": o.description} for o in q.options
        ],
    }
    if answered:
        out["answer"] = {
            "chosen_option_ids": list(q.chosen_option_ids),
            "chosen_labels": _labels(q, q.chosen_option_ids),
            "custom_text": q.custom_text,
            "timed_out": q.timed_out,
        }
    return out


def _vote(v: QuorumVote, ask: Ask) -> dict[str, Any]:
    questions = {q.question_id: q for q in ask.questions}
    return {
        "by": _who(v.account_id, v.handle),
        "kind": v.kind.value,
        "at": time(v.at),
        "surface": v.surface.value if v.surface else None,
        "reason": v.reason,
        "standing_answer_id": str(v.standing_answer_id) if v.standing_answer_id else None,
        "answers": [
            {
                "question_id": a.question_id,
                "chosen_option_ids": list(a.chosen_option_ids),
                "chosen_labels": _labels(
                    questions.get(a.question_id, AskQuestion(a.question_id, "")),
                    a.chosen_option_ids,
                ),
                "custom_text": a.custom_text,
            }
            for a in v.answers
        ],
    }


def _quorum(ask: Ask) -> dict[str, Any] | None:
    if not ask.quorum:
        return None
    return {
        "required": ask.quorum,
        "declines_count_against": ask.declines_count_against_quorum,
        "answered": ask.quorum_answers,
        "votes": [_vote(v, ask) for v in ask.quorum_votes],
    }


def _ending(e: AskEnding | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "kind": e.kind.value,
        "at": time(e.at),
        "by": _who(e.actor_id, e.actor_handle),
        "surface": e.surface.value if e.surface else None,
        "reason": e.reason,
        "standing_answer_id": str(e.standing_answer_id) if e.standing_answer_id else None,
    }


def _state(ask: Ask) -> str:
    if ask.ending is not None:
        return ask.ending.kind.value
    if ask.answered:
        return EndingKind.ANSWERED.value
    if ask.cancelled:
        return EndingKind.WITHDRAWN_BY_AGENT.value
    return "open"


def ask_data(
    ask: Ask, state: str, url: str, ending: dict[str, Any] | None = None
) -> dict[str, Any]:
    answered = state in (EndingKind.ANSWERED.value, EndingKind.EXPIRED.value)
    return {
        "ask_id": ask.ask_id,
        "state": state,
        "url": url,
        "questions": [_question(q, answered) for q in ask.questions],
        "deadline": time(ask.deadline),
        "answerers": [
            {"account_id": str(a), "handle": h}
            for a, h in zip(ask.answerer_ids, ask.answerer_handles, strict=False)
        ],
        "ending": ending if ending is not None else _ending(ask.ending),
        "quorum": _quorum(ask),
    }


def _ended_now(message: Message, at: datetime.datetime | None) -> list[Ask]:
    """The asks of an updated message that this event ended: an ending is
    written in the transaction of its event, so at the event's time; when no
    time matches (an ask that ended before endings were timed), every ended
    ask of the message, which a delivery's key makes once each."""
    ended = [b for b in message.blocks if isinstance(b, Ask) and not b.is_open]
    now = [a for a in ended if a.ending is not None and a.ending.at == at]
    return now or ended


def _voted_now(message: Message, at: datetime.datetime | None) -> list[tuple[Ask, QuorumVote]]:
    """The votes of open quorum asks of an updated message that this event
    recorded: a vote is written in the transaction of its event, so at the
    event's time."""
    return [
        (b, v)
        for b in message.blocks
        if isinstance(b, Ask) and b.is_open
        for v in b.quorum_votes
        if v.at is not None and v.at == at
    ]


def _stepped_now(
    message: Message, at: datetime.datetime | None
) -> list[tuple[Ask, int, FollowUpStep]]:
    """The follow-up steps (with their number, from 1) of open asks of an
    updated message that this event recorded: a step is written in the
    transaction of its event, so at the event's time."""
    return [
        (b, n, step)
        for b in message.blocks
        if isinstance(b, Ask) and b.is_open
        for n, step in enumerate(b.follow_up_steps, 1)
        if step.at == at
    ]


def follow_up_data(ask: Ask, n: int, step: FollowUpStep, d: Directory) -> dict[str, Any]:
    return {
        "kind": step.kind,
        "number": n,
        "at": time(step.at),
        "urgent": step.urgent,
        "people": [
            {
                "account_id": str(a),
                "handle": d.people[a][0] if a in d.people else d.handles.get(a, ""),
            }
            for a in step.account_ids
        ],
    }


def _channel_notices(
    event: Event, message: Message, d: Directory, public_url: str, receipts: Receipts
) -> list[Notice]:
    name, kind = d.channels.get(message.channel_id, ("", ChannelKind.CHANNEL))
    base = {
        "sequence": event.event_id,
        "workspace_id": str(d.workspace_id),
        "message_id": str(message.message_id),
        "channel": {"channel_id": str(message.channel_id), "name": name, "kind": kind.value},
        "asker": _who(message.author_id, message.author_handle),
    }
    at = event.created_at or message.created_at
    if event.kind is EventKind.MESSAGE_POSTED:
        asks = [b for b in message.blocks if isinstance(b, Ask)]
        return [
            Notice(
                T.ASK_POSTED,
                event.event_id,
                at,
                a.ask_id,
                f"ask.posted:{a.ask_id}",
                {**base, "ask": ask_data(a, _state(a), ask_link(public_url, a.ask_id))},
            )
            for a in asks
        ]
    out = []
    for a, vote in _voted_now(message, event.created_at):
        out.append(
            Notice(
                T.ASK_VOTED,
                event.event_id,
                at,
                a.ask_id,
                f"ask.voted:{a.ask_id}:{vote.account_id}",
                {
                    **base,
                    "ask": ask_data(a, "open", ask_link(public_url, a.ask_id)),
                    "vote": _vote(vote, a),
                },
            )
        )
    for a, n, step in _stepped_now(message, event.created_at):
        out.append(
            Notice(
                T.ASK_ESCALATED if step.kind == "escalated" else T.ASK_REMINDED,
                event.event_id,
                at,
                a.ask_id,
                f"ask.{step.kind}:{a.ask_id}:{n}",
                {
                    **base,
                    "ask": ask_data(a, "open", ask_link(public_url, a.ask_id)),
                    "follow_up": follow_up_data(a, n, step, d),
                },
            )
        )
    for a in _ended_now(message, event.created_at):
        kind_of_end = a.ending.kind if a.ending else EndingKind(_state(a))
        data = ask_data(a, _state(a), ask_link(public_url, a.ask_id))
        if data["ending"] is not None:
            data["ending"]["receipt"] = receipts.sign(d.workspace_id, message.author_id, a)
        out.append(
            Notice(
                _ENDED[kind_of_end],
                event.event_id,
                at,
                a.ask_id,
                f"ask.ended:{a.ask_id}",
                {**base, "ask": data},
            )
        )
    return out


def _answered(block: AskAnswerBlock) -> Ask:
    return Ask(questions=block.questions, ask_id=block.ask_id, answered=True)


def _inbox_notice(
    event: Event, change: InboxChange, d: Directory, public_url: str, receipts: Receipts
) -> Notice | None:
    message = change.message
    item = d.items.get(change.item_id)
    handle = d.handles.get
    by = _who(change.actor_id, handle(change.actor_id, ""))
    at = event.created_at or datetime.datetime.now(datetime.UTC)
    ask: Ask | None = None
    state = "open"
    ending: dict[str, Any] | None = None
    if change.status is InboxStatus.OPEN:
        if message is not None and message.ask is not None:
            ask = message.ask  # the agent asked
        elif message is None and item is not None and item.ask is not None:
            ask = item.ask  # taken back or reopened: the same ask waits again
        else:
            return None  # a message that asks nothing
        kind = T.INBOX_ITEM_OPENED
    elif change.status is InboxStatus.ANSWERED:
        if message is None or message.answer is None:
            return None
        ask, state = _answered(message.answer), "answered"
        ending = {"kind": "answered", "at": time(at), "by": by, "surface": None, "reason": ""}
        kind = T.INBOX_ITEM_ANSWERED
    elif change.status is InboxStatus.CLOSED:
        if message is not None and message.ask is not None and message.ask.ending is not None:
            # Declined, or withdrawn by the agent or a person: the ask's own
            # ending says which, who and why, with its receipt.
            ask = message.ask
            assert ask.ending is not None
            state = ask.ending.kind.value
            ending = _ending(ask.ending)
            assert ending is not None
            ending["receipt"] = receipts.sign(d.workspace_id, message.author_id, ask)
        elif message is None:
            # An event from before closes carried the ask.
            ask = item.ask if item is not None else None
            by_agent = change.actor_id == change.agent_id
            state = "withdrawn_by_agent" if by_agent else "withdrawn_by_person"
            reason = item.close_reason if item is not None and by_agent else ""
            ending = {"kind": state, "at": time(at), "by": by, "surface": None, "reason": reason}
        else:
            return None  # a reply on a closed item
        kind = T.INBOX_ITEM_CLOSED
    else:
        return None  # a note waits on nobody
    url = item_link(public_url, change.item_id)
    data = {
        "sequence": event.event_id,
        "workspace_id": str(d.workspace_id),
        "item": {
            "item_id": str(change.item_id),
            "key": change.key,
            "title": item.title if item is not None else change.key,
            "revision": change.revision,
            "status": change.status.value,
            "url": url,
        },
        "agent": _who(change.agent_id, handle(change.agent_id, "")),
        "actor": by,
        "ask": ask_data(ask, state, url, ending) if ask is not None else None,
    }
    key = f"{kind.value}:{change.item_id}:{event.event_id}"
    return Notice(kind, event.event_id, at, str(change.item_id), key, data)


def notices(
    event: Event, d: Directory, public_url: str, receipts: Receipts | None = None
) -> list[Notice]:
    """The notices one event of the log makes: none for most. An ask's ending
    carries its receipt (empty without `receipts`)."""
    if event.message is not None and event.kind in (
        EventKind.MESSAGE_POSTED,
        EventKind.MESSAGE_UPDATED,
    ):
        return _channel_notices(event, event.message, d, public_url, receipts or Receipts(None, ""))
    if event.inbox is not None:
        notice = _inbox_notice(event, event.inbox, d, public_url, receipts or Receipts(None, ""))
        return [notice] if notice is not None else []
    return []


def standard_body(notice: Notice) -> str:
    """The Standard Webhooks payload: type, timestamp, data."""
    return json.dumps(
        {"type": notice.type.value, "timestamp": time(notice.at), "data": notice.data},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def body(kind: WebhookKind, notice: Notice) -> str:
    # A Slack app's deliveries keep the notice: its message is made when sent.
    if kind is WebhookKind.SLACK:
        return json.dumps(slack.message(notice.type, notice.data), ensure_ascii=False)
    return standard_body(notice)


class Drafts:
    """Makes an endpoint's deliveries from a page of its log (the store's
    `Derive`); an email endpoint's are `mail`'s, a push endpoint's `push`'s."""

    def __init__(
        self,
        public_url: str,
        receipts: Receipts | None = None,
        mail: MailDerive | None = None,
        push: MailDerive | None = None,
        slack_dm: Callable[[Notice, Directory], list[DeliveryDraft]] | None = None,
    ) -> None:
        self.public_url = public_url
        self.receipts = receipts
        self.mail = mail
        self.push = push
        self.slack_dm = slack_dm

    def __call__(
        self,
        kind: WebhookKind,
        types: frozenset[WebhookEventType],
        events: Sequence[Event],
        directory: Directory,
    ) -> list[DeliveryDraft]:
        if kind is WebhookKind.EMAIL:
            return self.mail(types, events, directory) if self.mail is not None else []
        if kind is WebhookKind.PUSH:
            return self.push(types, events, directory) if self.push is not None else []
        out = []
        for event in events:
            for notice in notices(event, directory, self.public_url, self.receipts):
                # A Slack app's direct messages go with reminders and
                # escalations too, which its channel message doesn't take.
                if kind is WebhookKind.SLACK_APP and self.slack_dm is not None:
                    out.extend(self.slack_dm(notice, directory))
                if types and notice.type not in types:
                    continue
                out.append(
                    DeliveryDraft(
                        notice.event_id,
                        notice.type,
                        notice.subject,
                        notice.dedupe_key,
                        body(kind, notice),
                    )
                )
        return out
