"""Wire messages ⇄ store structs. Data crosses this boundary once.

Inbound asks keep only client-owned fields: every field of Ask, AskQuestion
and AskOption is classified in OWNERSHIP, and a guard test fails when a new
field is not.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable

from google.protobuf import timestamp_pb2

from compass.v1 import comms_pb2 as pb
from compass_server.store import types as st
from compass_server.store.errors import InvalidArgument
from compass_server.store.store import parse_id

# Who owns each field of an ask on the way in: the client's are read, the
# server's are dropped.
OWNERSHIP: dict[str, dict[str, frozenset[str]]] = {
    "compass.v1.Ask": {
        "client": frozenset({"questions"}),
        "server": frozenset({"ask_id", "answered", "cancelled"}),
    },
    "compass.v1.AskQuestion": {
        "client": frozenset(
            {"question_id", "question", "header", "options", "allow_multiple", "recommended"}
        ),
        "server": frozenset({"chosen_option_ids", "custom_text", "timed_out"}),
    },
    "compass.v1.AskOption": {
        "client": frozenset({"id", "label", "description", "preview"}),
        "server": frozenset(),
    },
}

_PRESENCE_TO_WIRE = {
    st.PresenceState.OFFLINE: pb.PRESENCE_STATE_OFFLINE,
    st.PresenceState.IDLE: pb.PRESENCE_STATE_IDLE,
    st.PresenceState.WORKING: pb.PRESENCE_STATE_WORKING,
    st.PresenceState.WAITING: pb.PRESENCE_STATE_WAITING,
}
PRESENCE_FROM_WIRE = {v: k for k, v in _PRESENCE_TO_WIRE.items()}


def optional_id(value: str, what: str) -> uuid.UUID | None:
    return parse_id(value, what) if value else None


# --- inbound ---------------------------------------------------------------


def ask_from_wire(a: pb.Ask) -> st.Ask:
    """Only the client-owned fields; ask_id and every answer field are dropped."""
    return st.Ask(
        questions=tuple(
            st.AskQuestion(
                question_id=q.question_id,
                question=q.question,
                header=q.header,
                options=tuple(
                    st.AskOption(
                        id=o.id, label=o.label, description=o.description, preview=o.preview
                    )
                    for o in q.options
                ),
                allow_multiple=q.allow_multiple,
                recommended=q.recommended if q.HasField("recommended") else None,
            )
            for q in a.questions
        )
    )


def blocks_from_wire(blocks: Iterable[pb.MessageBlock]) -> list[st.Block]:
    out: list[st.Block] = []
    for i, b in enumerate(blocks):
        which = b.WhichOneof("block")
        if which == "text":
            out.append(st.TextBlock(b.text.text))
        elif which == "ask":
            out.append(ask_from_wire(b.ask))
        elif which == "ask_answer":
            raise InvalidArgument(
                f"block {i} is an ask_answer; only the server writes those, through RespondToAsk"
            )
        else:
            raise InvalidArgument(f"block {i} is empty: set text or ask")
    return out


def answers_from_wire(answers: Iterable[pb.AskQuestionAnswer]) -> list[st.Answer]:
    return [st.Answer(a.question_id, tuple(a.chosen_option_ids), a.custom_text) for a in answers]


# --- outbound --------------------------------------------------------------


def timestamp(value: datetime.datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def questions_to_wire(questions: Iterable[st.AskQuestion]) -> list[pb.AskQuestion]:
    out = []
    for q in questions:
        wire = pb.AskQuestion(
            question_id=q.question_id,
            question=q.question,
            header=q.header,
            options=[
                pb.AskOption(id=o.id, label=o.label, description=o.description, preview=o.preview)
                for o in q.options
            ],
            allow_multiple=q.allow_multiple,
            chosen_option_ids=list(q.chosen_option_ids),
            custom_text=q.custom_text,
            timed_out=q.timed_out,
        )
        if q.recommended is not None:
            wire.recommended = q.recommended
        out.append(wire)
    return out


def ask_to_wire(a: st.Ask) -> pb.Ask:
    return pb.Ask(
        ask_id=a.ask_id,
        questions=questions_to_wire(a.questions),
        answered=a.answered,
        cancelled=a.cancelled,
    )


def block_to_wire(b: st.Block) -> pb.MessageBlock:
    if isinstance(b, st.TextBlock):
        return pb.MessageBlock(text=pb.TextBlock(text=b.text))
    if isinstance(b, st.Ask):
        return pb.MessageBlock(ask=ask_to_wire(b))
    return pb.MessageBlock(
        ask_answer=pb.AskAnswerBlock(
            ask_id=b.ask_id,
            ask_message_id=str(b.ask_message_id),
            questions=questions_to_wire(b.questions),
        )
    )


def message_to_wire(m: st.Message) -> pb.Message:
    return pb.Message(
        message_id=str(m.message_id),
        channel_id=str(m.channel_id),
        author_account_id=str(m.author_id),
        author_handle=m.author_handle,
        blocks=[block_to_wire(b) for b in m.blocks],
        created_at=timestamp(m.created_at),
    )


def inbox_message_to_message(m: st.InboxMessage) -> pb.Message:
    """A thread message as a compass.v1.Message; it belongs to no channel."""
    return pb.Message(
        message_id=str(m.message_id),
        author_account_id=str(m.author_id),
        author_handle=m.author_handle,
        blocks=[block_to_wire(b) for b in m.blocks],
        created_at=timestamp(m.created_at),
    )


INBOX_STATUS_TO_WIRE = {
    st.InboxStatus.OPEN: pb.INBOX_ITEM_STATUS_OPEN,
    st.InboxStatus.ANSWERED: pb.INBOX_ITEM_STATUS_ANSWERED,
    st.InboxStatus.CLOSED: pb.INBOX_ITEM_STATUS_CLOSED,
    st.InboxStatus.NOTE: pb.INBOX_ITEM_STATUS_NOTE,
}


def inbox_change_to_wire(c: st.InboxChange) -> pb.InboxItemChanged:
    out = pb.InboxItemChanged(
        item_id=str(c.item_id),
        agent_account_id=str(c.agent_id),
        key=c.key,
        revision=c.revision,
        status=INBOX_STATUS_TO_WIRE[c.status],
        actor_account_id=str(c.actor_id),
    )
    if c.message is not None:
        out.message.CopyFrom(inbox_message_to_message(c.message))
    return out


def channel_to_wire(c: st.Channel) -> pb.Channel:
    return pb.Channel(
        channel_id=str(c.channel_id),
        name=c.name,
        topic=c.topic,
        kind=pb.CHANNEL_KIND_DM if c.kind is st.ChannelKind.DM else pb.CHANNEL_KIND_CHANNEL,
        member_account_ids=[str(m) for m in c.member_ids],
        created_at=timestamp(c.created_at),
    )


def presence_to_wire(p: st.Presence) -> pb.Presence:
    return pb.Presence(
        account_id=str(p.account_id), state=_PRESENCE_TO_WIRE[p.state], status_text=p.status_text
    )


_ACCOUNT_KIND_TO_WIRE = {
    st.AccountKind.HUMAN: pb.ACCOUNT_KIND_HUMAN,
    st.AccountKind.AGENT: pb.ACCOUNT_KIND_AGENT,
}


def account_to_wire(a: st.Account) -> pb.Account:
    return pb.Account(
        account_id=str(a.account_id), handle=a.handle, kind=_ACCOUNT_KIND_TO_WIRE[a.kind]
    )


def event_to_wire(e: st.Event) -> pb.Event:
    if e.message is not None:
        msg = message_to_wire(e.message)
        if e.kind is st.EventKind.MESSAGE_POSTED:
            return pb.Event(event_id=e.event_id, message_posted=pb.MessagePosted(message=msg))
        return pb.Event(event_id=e.event_id, message_updated=pb.MessageUpdated(message=msg))
    if e.inbox is not None:
        return pb.Event(event_id=e.event_id, inbox_item_changed=inbox_change_to_wire(e.inbox))
    if e.presence is not None:
        return pb.Event(
            event_id=e.event_id,
            presence_changed=pb.PresenceChanged(presence=presence_to_wire(e.presence)),
        )
    assert e.channel is not None
    return pb.Event(
        event_id=e.event_id, channel_changed=pb.ChannelChanged(channel=channel_to_wire(e.channel))
    )
