"""Wire messages ⇄ store structs. Data crosses this boundary once.

Inbound asks keep only client-owned fields: every field of Ask, AskQuestion
and AskOption is classified in OWNERSHIP, and a guard test fails when a new
field is not.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf import timestamp_pb2

from compass.v1 import comms_pb2 as pb
from compass_server.store import types as st
from compass_server.store.errors import InvalidArgument
from compass_server.store.ids import parse_id
from compass_server.store.posts import PostOutcome

# Who owns each field of an ask on the way in: the client's are read, the
# server's are dropped.
OWNERSHIP: dict[str, dict[str, frozenset[str]]] = {
    "compass.v1.Ask": {
        "client": frozenset(
            {
                "questions",
                "deadline",
                "timeout",
                "answerer_account_ids",
                "quorum",
                "declines_count_against_quorum",
                "follow_up",
            }
        ),
        "server": frozenset(
            {
                "ask_id",
                "answered",
                "cancelled",
                "answerer_handles",
                "ending",
                "quorum_votes",
                "follow_up_steps",
            }
        ),
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
POST_OUTCOME_TO_WIRE = {
    PostOutcome.POSTED: pb.POST_OUTCOME_POSTED,
    PostOutcome.REPEATED: pb.POST_OUTCOME_REPEATED,
    PostOutcome.ALREADY_OPEN: pb.POST_OUTCOME_ALREADY_OPEN,
}
# The receipt of an ended ask of a message, a channel's or an inbox thread's
# ("" for none): how the surfaces that carry receipts stamp what they send.
Stamp = Callable[[st.Message | st.InboxMessage, st.Ask], str]


def optional_id(value: str, what: str) -> uuid.UUID | None:
    return parse_id(value, what) if value else None


# --- inbound ---------------------------------------------------------------


def _deadline_from_wire(a: pb.Ask) -> tuple[datetime.datetime | None, datetime.timedelta | None]:
    try:
        deadline = a.deadline.ToDatetime(datetime.UTC) if a.HasField("deadline") else None
    except (ValueError, OverflowError):
        raise InvalidArgument("the ask's deadline is not a time this server can hold") from None
    try:
        timeout = a.timeout.ToTimedelta() if a.HasField("timeout") else None
    except (ValueError, OverflowError):
        raise InvalidArgument("the ask's timeout is not a duration this server can hold") from None
    return deadline, timeout


def _answerer_from_wire(value: str, field: str = "answerer_account_ids") -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidArgument(f"{field} has {value[:64]!r}, which is no account id") from None


def follow_up_from_wire(f: pb.AskFollowUp) -> st.FollowUp:
    try:
        remind = f.remind_after.ToTimedelta() if f.HasField("remind_after") else None
        escalate = f.escalate_after.ToTimedelta() if f.HasField("escalate_after") else None
    except (ValueError, OverflowError):
        raise InvalidArgument(
            "the ask's follow_up holds a duration this server can't hold"
        ) from None
    return st.FollowUp(
        remind_after=remind,
        remind_times=f.remind_times,
        escalate_after=escalate,
        escalate_to=tuple(
            _answerer_from_wire(i, "follow_up.escalate_to_account_ids")
            for i in f.escalate_to_account_ids
        ),
        escalate_to_owner=f.escalate_to_owner,
        escalate_to_channel=(
            _answerer_from_wire(f.escalate_to_channel_id, "follow_up.escalate_to_channel_id")
            if f.escalate_to_channel_id
            else None
        ),
    )


def follow_up_to_wire(f: st.FollowUp) -> pb.AskFollowUp:
    out = pb.AskFollowUp(
        remind_times=f.remind_times,
        escalate_to_account_ids=[str(i) for i in f.escalate_to],
        escalate_to_owner=f.escalate_to_owner,
        escalate_to_channel_id=str(f.escalate_to_channel) if f.escalate_to_channel else "",
    )
    if f.remind_after is not None:
        out.remind_after.FromTimedelta(f.remind_after)
    if f.escalate_after is not None:
        out.escalate_after.FromTimedelta(f.escalate_after)
    return out


_STEP_TO_WIRE = {
    "reminded": pb.ASK_FOLLOW_UP_STEP_KIND_REMINDED,
    "escalated": pb.ASK_FOLLOW_UP_STEP_KIND_ESCALATED,
}


def follow_up_step_to_wire(x: st.FollowUpStep) -> pb.AskFollowUpStep:
    out = pb.AskFollowUpStep(
        kind=_STEP_TO_WIRE.get(x.kind, pb.ASK_FOLLOW_UP_STEP_KIND_UNSPECIFIED),
        account_ids=[str(i) for i in x.account_ids],
        urgent=x.urgent,
        reposted_channel_id=str(x.reposted_channel) if x.reposted_channel else "",
        repost_message_id=str(x.repost_message) if x.repost_message else "",
    )
    out.at.CopyFrom(timestamp(x.at))
    return out


def ask_from_wire(a: pb.Ask) -> st.Ask:
    """Only the client-owned fields; ask_id, the answer state and the ending
    are dropped."""
    deadline, timeout = _deadline_from_wire(a)
    return st.Ask(
        deadline=deadline,
        timeout=timeout,
        answerer_ids=tuple(_answerer_from_wire(i) for i in a.answerer_account_ids),
        quorum=a.quorum,
        declines_count_against_quorum=a.declines_count_against_quorum,
        follow_up=follow_up_from_wire(a.follow_up) if a.HasField("follow_up") else None,
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
        ),
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


def standing_terms_from_wire(r: pb.RespondToAskRequest) -> st.StandingTerms | None:
    if not r.HasField("standing"):
        return None
    try:
        duration = r.standing.duration.ToTimedelta()
    except (ValueError, OverflowError):
        raise InvalidArgument("standing.duration is not a duration this server can hold") from None
    return st.StandingTerms(duration, r.standing.include_subagents)


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


SURFACE_TO_WIRE = {
    st.Surface.GRPC: pb.ASK_SURFACE_GRPC,
    st.Surface.CONNECT: pb.ASK_SURFACE_CONNECT,
    st.Surface.RELAY: pb.ASK_SURFACE_RELAY,
    st.Surface.WEB: pb.ASK_SURFACE_WEB,
    st.Surface.INBOX: pb.ASK_SURFACE_INBOX,
    st.Surface.SERVER: pb.ASK_SURFACE_SERVER,
    st.Surface.STANDING_ANSWER: pb.ASK_SURFACE_STANDING_ANSWER,
    st.Surface.SLACK: pb.ASK_SURFACE_SLACK,
    st.Surface.EMAIL: pb.ASK_SURFACE_EMAIL,
    st.Surface.PUSH: pb.ASK_SURFACE_PUSH,
}
_ENDING_TO_WIRE = {
    st.EndingKind.ANSWERED: pb.ASK_ENDING_KIND_ANSWERED,
    st.EndingKind.WITHDRAWN_BY_AGENT: pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT,
    st.EndingKind.WITHDRAWN_BY_OWNER: pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER,
    st.EndingKind.DECLINED: pb.ASK_ENDING_KIND_DECLINED,
    st.EndingKind.EXPIRED: pb.ASK_ENDING_KIND_EXPIRED,
    st.EndingKind.REPLACED: pb.ASK_ENDING_KIND_REPLACED,
    st.EndingKind.WITHDRAWN_BY_PERSON: pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON,
}
_CHANGE_TO_WIRE = {
    st.AskChange.POSTED: pb.ASK_HISTORY_KIND_POSTED,
    st.AskChange.ANSWERED: pb.ASK_HISTORY_KIND_ANSWERED,
    st.AskChange.WITHDRAWN_BY_AGENT: pb.ASK_HISTORY_KIND_WITHDRAWN_BY_AGENT,
    st.AskChange.WITHDRAWN_BY_OWNER: pb.ASK_HISTORY_KIND_WITHDRAWN_BY_OWNER,
    st.AskChange.DECLINED: pb.ASK_HISTORY_KIND_DECLINED,
    st.AskChange.EXPIRED: pb.ASK_HISTORY_KIND_EXPIRED,
    st.AskChange.QUORUM_ANSWER: pb.ASK_HISTORY_KIND_QUORUM_ANSWER,
    st.AskChange.QUORUM_DECLINE: pb.ASK_HISTORY_KIND_QUORUM_DECLINE,
}
_VOTE_TO_WIRE = {
    st.VoteKind.ANSWER: pb.QUORUM_VOTE_KIND_ANSWER,
    st.VoteKind.DECLINE: pb.QUORUM_VOTE_KIND_DECLINE,
}


def _surface(s: st.Surface | None) -> pb.AskSurface:
    return SURFACE_TO_WIRE[s] if s else pb.ASK_SURFACE_UNSPECIFIED


def _id(value: uuid.UUID | None) -> str:
    return str(value) if value else ""


def _who(e: st.AskEnding | st.AskHistoryEntry) -> dict[str, Any]:
    """Who made a change to an ask, through which surface and why, and the
    standing answer that made it for them."""
    return {
        "actor_account_id": _id(e.actor_id),
        "actor_handle": e.actor_handle,
        "surface": _surface(e.surface),
        "reason": e.reason,
        "standing_answer_id": _id(e.standing_answer_id),
    }


def vote_to_wire(v: st.QuorumVote) -> pb.QuorumVote:
    out = pb.QuorumVote(
        account_id=str(v.account_id),
        handle=v.handle,
        kind=_VOTE_TO_WIRE[v.kind],
        answers=[
            pb.QuorumAnswer(
                question_id=a.question_id,
                chosen_option_ids=list(a.chosen_option_ids),
                custom_text=a.custom_text,
            )
            for a in v.answers
        ],
        reason=v.reason,
        surface=_surface(v.surface),
        standing_answer_id=_id(v.standing_answer_id),
    )
    if v.at is not None:
        out.at.CopyFrom(timestamp(v.at))
    return out


def ending_to_wire(e: st.AskEnding) -> pb.AskEnding:
    out = pb.AskEnding(kind=_ENDING_TO_WIRE[e.kind], **_who(e))
    if e.at is not None:
        out.ended_at.CopyFrom(timestamp(e.at))
    return out


def ask_to_wire(a: st.Ask, receipt: str = "") -> pb.Ask:
    out = pb.Ask(
        ask_id=a.ask_id,
        questions=questions_to_wire(a.questions),
        answered=a.answered,
        cancelled=a.cancelled,
        answerer_account_ids=[str(i) for i in a.answerer_ids],
        answerer_handles=list(a.answerer_handles),
        quorum=a.quorum,
        declines_count_against_quorum=a.declines_count_against_quorum,
        quorum_votes=[vote_to_wire(v) for v in a.quorum_votes],
        follow_up_steps=[follow_up_step_to_wire(x) for x in a.follow_up_steps],
    )
    if a.follow_up is not None:
        out.follow_up.CopyFrom(follow_up_to_wire(a.follow_up))
    if a.deadline is not None:
        out.deadline.CopyFrom(timestamp(a.deadline))
    if a.ending is not None:
        out.ending.CopyFrom(ending_to_wire(a.ending))
        out.ending.receipt = receipt
    return out


def history_to_wire(h: st.AskHistory, receipt: str = "") -> pb.GetAskHistoryResponse:
    """`receipt` goes on the entry that ended the ask."""
    entries = []
    for e in h.entries:
        entry = pb.AskHistoryEntry(kind=_CHANGE_TO_WIRE[e.change], **_who(e))
        entry.at.CopyFrom(timestamp(e.at))
        if e.change.ends:
            entry.receipt = receipt
        entries.append(entry)
    return pb.GetAskHistoryResponse(
        ask_id=h.ask_id,
        entries=entries,
        caller_may_answer=h.may_answer,
        caller_may_withdraw=h.may_withdraw,
    )


def block_to_wire(b: st.Block, receipt: str = "") -> pb.MessageBlock:
    if isinstance(b, st.TextBlock):
        return pb.MessageBlock(text=pb.TextBlock(text=b.text))
    if isinstance(b, st.Ask):
        return pb.MessageBlock(ask=ask_to_wire(b, receipt))
    return pb.MessageBlock(
        ask_answer=pb.AskAnswerBlock(
            ask_id=b.ask_id,
            ask_message_id=str(b.ask_message_id),
            questions=questions_to_wire(b.questions),
            quorum_votes=[vote_to_wire(v) for v in b.quorum_votes],
        )
    )


def standing_to_wire(s: st.StandingAnswer) -> pb.StandingAnswer:
    out = pb.StandingAnswer(
        standing_answer_id=str(s.standing_answer_id),
        account_id=str(s.account_id),
        handle=s.handle,
        agent_account_id=str(s.agent_id),
        agent_handle=s.agent_handle,
        include_subagents=s.include_subagents,
        questions=questions_to_wire(s.questions),
        made_from_ask_id=s.made_from_ask_id,
        created_at=timestamp(s.created_at),
        expires_at=timestamp(s.expires_at),
        asks_answered=s.asks_answered,
    )
    if s.revoked_at is not None:
        out.revoked_at.CopyFrom(timestamp(s.revoked_at))
    return out


def message_to_wire(m: st.Message, stamp: Stamp | None = None) -> pb.Message:
    """With `stamp`, each ended ask carries its receipt."""
    return pb.Message(
        message_id=str(m.message_id),
        channel_id=str(m.channel_id),
        author_account_id=str(m.author_id),
        author_handle=m.author_handle,
        blocks=[
            block_to_wire(b, stamp(m, b) if stamp and isinstance(b, st.Ask) and b.ending else "")
            for b in m.blocks
        ],
        created_at=timestamp(m.created_at),
    )


def inbox_message_to_message(m: st.InboxMessage, stamp: Stamp | None = None) -> pb.Message:
    """A thread message as a compass.v1.Message; it belongs to no channel.
    With `stamp`, each ended ask carries its receipt."""
    return pb.Message(
        message_id=str(m.message_id),
        author_account_id=str(m.author_id),
        author_handle=m.author_handle,
        blocks=[
            block_to_wire(b, stamp(m, b) if stamp and isinstance(b, st.Ask) and b.ending else "")
            for b in m.blocks
        ],
        created_at=timestamp(m.created_at),
    )


INBOX_STATUS_TO_WIRE = {
    st.InboxStatus.OPEN: pb.INBOX_ITEM_STATUS_OPEN,
    st.InboxStatus.ANSWERED: pb.INBOX_ITEM_STATUS_ANSWERED,
    st.InboxStatus.CLOSED: pb.INBOX_ITEM_STATUS_CLOSED,
    st.InboxStatus.NOTE: pb.INBOX_ITEM_STATUS_NOTE,
}


def inbox_change_to_wire(c: st.InboxChange, stamp: Stamp | None = None) -> pb.InboxItemChanged:
    out = pb.InboxItemChanged(
        item_id=str(c.item_id),
        agent_account_id=str(c.agent_id),
        key=c.key,
        revision=c.revision,
        status=INBOX_STATUS_TO_WIRE[c.status],
        actor_account_id=str(c.actor_id),
    )
    if c.message is not None:
        out.message.CopyFrom(inbox_message_to_message(c.message, stamp))
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
        account_id=str(a.account_id),
        handle=a.handle,
        kind=_ACCOUNT_KIND_TO_WIRE[a.kind],
        parent_account_id=str(a.parent_id) if a.parent_id else "",
    )


def event_to_wire(e: st.Event, stamp: Stamp | None = None) -> pb.Event:
    if e.message is not None:
        msg = message_to_wire(e.message, stamp)
        if e.kind is st.EventKind.MESSAGE_POSTED:
            return pb.Event(event_id=e.event_id, message_posted=pb.MessagePosted(message=msg))
        return pb.Event(event_id=e.event_id, message_updated=pb.MessageUpdated(message=msg))
    if e.inbox is not None:
        return pb.Event(
            event_id=e.event_id, inbox_item_changed=inbox_change_to_wire(e.inbox, stamp)
        )
    if e.presence is not None:
        return pb.Event(
            event_id=e.event_id,
            presence_changed=pb.PresenceChanged(presence=presence_to_wire(e.presence)),
        )
    assert e.channel is not None
    return pb.Event(
        event_id=e.event_id, channel_changed=pb.ChannelChanged(channel=channel_to_wire(e.channel))
    )
