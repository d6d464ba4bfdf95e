"""Message blocks as stored JSONB, and the rules of an ask.

Every surface (gRPC, Connect, relay, inbox) reaches these rules through the
store; nothing else validates an ask or an answer.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from compass_server.store.errors import Corrupt, InvalidArgument, ResourceExhausted, quoted
from compass_server.store.types import (
    AlwaysOption,
    Answer,
    Ask,
    AskAnswerBlock,
    AskEnding,
    AskOption,
    AskQuestion,
    Block,
    EndingKind,
    FollowUp,
    FollowUpStep,
    Message,
    QuorumVote,
    Surface,
    TextBlock,
    VoteKind,
)

# The endings an ask reads `cancelled` after: it was withdrawn, or (in an
# inbox) the agent's newer ask took its place.
CANCELLING = frozenset(
    {
        EndingKind.WITHDRAWN_BY_AGENT,
        EndingKind.WITHDRAWN_BY_OWNER,
        EndingKind.WITHDRAWN_BY_PERSON,
        EndingKind.REPLACED,
    }
)

MAX_BLOCKS = 20
MAX_TEXT_CHARS = 32_000
MAX_QUESTIONS = 20
MAX_OPTIONS = 50
MAX_ID_CHARS = 128
MAX_QUESTION_CHARS = 2_000
MAX_HEADER_CHARS = 100
MAX_LABEL_CHARS = 500
MAX_DESCRIPTION_CHARS = 2_000
MAX_PREVIEW_CHARS = 10_000
MAX_CUSTOM_TEXT_CHARS = 10_000
# Sizes that bound memory are counted in encoded bytes (UTF-8 JSON as
# stored), not characters: an emoji is four bytes.
MAX_MESSAGE_BYTES = 256 * 1024
# The free text of all of one answer's questions together.
MAX_ANSWER_TEXT_BYTES = 64 * 1024
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
MAX_ANSWERERS = 50
MAX_REASON_CHARS = 1_000
# A follow-up policy's bounds: reminders, their spacing, the escalation.
MAX_REMINDERS = 5
MAX_ESCALATE_TO = 10
# The shortest spacing and escalation are the deadline bounds' shortest.
REMIND_LONGEST = datetime.timedelta(days=7)


@dataclass(frozen=True, slots=True)
class DeadlineBounds:
    """How soon and how late after its post an ask's deadline may be."""

    shortest: datetime.timedelta = datetime.timedelta(minutes=1)
    longest: datetime.timedelta = datetime.timedelta(days=30)


DEADLINE_BOUNDS = DeadlineBounds()


def mint_ask_id() -> str:
    # 128 random bits: globally unique and unguessable.
    return "ask_" + secrets.token_hex(16)


def _check_len(value: str, limit: int, what: str) -> None:
    if len(value) > limit:
        raise InvalidArgument(f"{what} is {len(value)} characters; the limit is {limit}")


def validate_ask(ask: Ask, where: str = "ask") -> None:
    """The append-time rules of an ask's client-owned content."""
    if not ask.questions:
        raise InvalidArgument(f"{where} has no questions; an ask needs at least one")
    if len(ask.questions) > MAX_QUESTIONS:
        raise InvalidArgument(
            f"{where} has {len(ask.questions)} questions; the limit is {MAX_QUESTIONS}"
        )
    seen: set[str] = set()
    for qi, q in enumerate(ask.questions):
        at = f"{where} question {qi}"
        if not q.question_id:
            raise InvalidArgument(f"{at} has an empty question_id")
        _check_len(q.question_id, MAX_ID_CHARS, f"{at} question_id")
        if q.question_id in seen:
            raise InvalidArgument(f"{at} repeats question_id {quoted(q.question_id)}")
        seen.add(q.question_id)
        _check_len(q.question, MAX_QUESTION_CHARS, f"{at} text")
        _check_len(q.header, MAX_HEADER_CHARS, f"{at} header")
        if len(q.options) > MAX_OPTIONS:
            raise InvalidArgument(f"{at} has {len(q.options)} options; the limit is {MAX_OPTIONS}")
        option_ids: set[str] = set()
        for oi, o in enumerate(q.options):
            if not o.id:
                raise InvalidArgument(f"{at} option {oi} has an empty id")
            _check_len(o.id, MAX_ID_CHARS, f"{at} option {oi} id")
            if o.id in option_ids:
                raise InvalidArgument(f"{at} repeats option id {quoted(o.id)}")
            option_ids.add(o.id)
            _check_len(o.label, MAX_LABEL_CHARS, f"{at} option {oi} label")
            _check_len(o.description, MAX_DESCRIPTION_CHARS, f"{at} option {oi} description")
            _check_len(o.preview, MAX_PREVIEW_CHARS, f"{at} option {oi} preview")
        # Not checked against the options: an index out of range is stored as
        # sent and every surface shows it as no recommendation.
        if q.recommended is not None and not _INT32_MIN <= q.recommended <= _INT32_MAX:
            raise InvalidArgument(f"{at} recommended is not a 32-bit integer")
    if len(ask.answerer_ids) > MAX_ANSWERERS:
        raise InvalidArgument(
            f"{where} names {len(ask.answerer_ids)} answerers; the limit is {MAX_ANSWERERS}"
        )
    if len(set(ask.answerer_ids)) != len(ask.answerer_ids):
        raise InvalidArgument(f"{where} names an answerer twice")
    if ask.quorum < 0 or ask.quorum > len(ask.answerer_ids):
        raise InvalidArgument(
            f"{where} quorum is {ask.quorum}; a quorum is 1 to the number of answerers it "
            f"names ({len(ask.answerer_ids)}), or 0 for none"
        )
    if ask.declines_count_against_quorum and not ask.quorum:
        raise InvalidArgument(
            f"{where} says declines count against its quorum, but it has no quorum"
        )
    if ask.follow_up is not None:
        validate_follow_up(ask.follow_up, f"{where} follow_up")
        if ask.quorum and ask.follow_up.escalate_after is not None:
            raise InvalidArgument(
                f"{where} escalates a quorum ask; a quorum's answerers are the people it names"
            )


def validate_follow_up(f: FollowUp, where: str) -> None:
    if not 0 <= f.remind_times <= MAX_REMINDERS:
        raise InvalidArgument(f"{where} remind_times must be 0 to {MAX_REMINDERS}")
    if f.remind_times and f.remind_after is None:
        raise InvalidArgument(f"{where} sets remind_times without remind_after")
    if len(f.escalate_to) > MAX_ESCALATE_TO:
        raise InvalidArgument(f"{where} escalates to more than {MAX_ESCALATE_TO} people")
    if len(set(f.escalate_to)) != len(f.escalate_to):
        raise InvalidArgument(f"{where} escalates to a person twice")
    targets = f.escalate_to or f.escalate_to_owner or f.escalate_to_channel is not None
    if targets and f.escalate_after is None:
        raise InvalidArgument(f"{where} names whom to escalate to without escalate_after")
    if f.escalate_after is not None and not targets:
        raise InvalidArgument(f"{where} sets escalate_after but escalates to nobody")


def settle_deadline(
    ask: Ask, now: datetime.datetime, bounds: DeadlineBounds, where: str = "ask"
) -> datetime.datetime | None:
    """The ask's absolute deadline, from its deadline or its timeout (not both),
    or INVALID_ARGUMENT when it falls outside the bounds."""
    if ask.deadline is not None and ask.timeout is not None:
        raise InvalidArgument(f"{where} sets both deadline and timeout; set one")
    if ask.timeout is not None:
        deadline = now + ask.timeout
    elif ask.deadline is not None:
        deadline = ask.deadline
    else:
        return None
    if not bounds.shortest <= deadline - now <= bounds.longest:
        raise InvalidArgument(
            f"{where} deadline must be {span(bounds.shortest)} to {span(bounds.longest)} "
            "after the post"
        )
    return deadline


def span(value: datetime.timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def check_reason(reason: str) -> None:
    """A decliner's optional reason."""
    _check_len(reason, MAX_REASON_CHARS, "reason")


def pending(question: AskQuestion) -> AskQuestion:
    """The question with every server-owned field dropped."""
    return AskQuestion(
        question_id=question.question_id,
        question=question.question,
        header=question.header,
        options=question.options,
        allow_multiple=question.allow_multiple,
        recommended=question.recommended,
    )


def prepare_for_append(
    blocks: Sequence[Block],
    now: datetime.datetime | None = None,
    bounds: DeadlineBounds = DEADLINE_BOUNDS,
    follow_up_default: FollowUp | None = None,
) -> tuple[list[Block], list[str]]:
    """Validates a post's blocks, drops inbound server-owned ask state, settles
    each ask's deadline and mints one ask_id per ask block. Returns the blocks
    to store and the minted ids. An ask that sends no follow-up policy gets
    `follow_up_default` (an empty policy sent is none)."""
    now = now or datetime.datetime.now(datetime.UTC)
    if not blocks:
        raise InvalidArgument("a message needs at least one block")
    if len(blocks) > MAX_BLOCKS:
        raise InvalidArgument(f"a message has {len(blocks)} blocks; the limit is {MAX_BLOCKS}")
    out: list[Block] = []
    minted: list[str] = []
    for i, block in enumerate(blocks):
        if isinstance(block, TextBlock):
            _check_len(block.text, MAX_TEXT_CHARS, f"block {i} text")
            out.append(block)
        elif isinstance(block, Ask):
            validate_ask(block, f"block {i} ask")
            deadline = settle_deadline(block, now, bounds, f"block {i} ask")
            if block.follow_up is not None:
                follow_up_spans(block.follow_up, bounds, f"block {i} ask follow_up")
            ask_id = mint_ask_id()
            minted.append(ask_id)
            out.append(
                Ask(
                    questions=tuple(pending(q) for q in block.questions),
                    ask_id=ask_id,
                    deadline=deadline,
                    answerer_ids=block.answerer_ids,
                    quorum=block.quorum,
                    declines_count_against_quorum=block.declines_count_against_quorum,
                    follow_up=_settled(
                        block.follow_up
                        if block.follow_up is not None
                        else _default_for(block, follow_up_default)
                    ),
                )
            )
        else:
            raise InvalidArgument(
                f"block {i} is an ask_answer; only the server writes those, through RespondToAsk"
            )
    return out, minted


def apply_answers(ask: Ask, answers: Sequence[Answer]) -> Ask:
    """The ask answered with `answers`, or InvalidArgument naming the first
    broken rule. Coverage is exact: every question once, no unknown ids."""
    by_id = {q.question_id: q for q in ask.questions}
    given: dict[str, Answer] = {}
    for a in answers:
        if not a.question_id:
            raise InvalidArgument("an answer has an empty question_id")
        if a.question_id not in by_id:
            raise InvalidArgument(
                f"ask {quoted(ask.ask_id)} has no question {quoted(a.question_id)}"
            )
        if a.question_id in given:
            raise InvalidArgument(f"question {quoted(a.question_id)} is answered more than once")
        given[a.question_id] = a
    missing = [q.question_id for q in ask.questions if q.question_id not in given]
    if missing:
        raise InvalidArgument(
            "every question must be answered at once; missing: " + ", ".join(map(repr, missing))
        )
    text_bytes = sum(len(a.custom_text.encode()) for a in answers)
    if text_bytes > MAX_ANSWER_TEXT_BYTES:
        raise InvalidArgument(
            f"the answer's text is {text_bytes} bytes in all; the limit is "
            f"{MAX_ANSWER_TEXT_BYTES} bytes"
        )
    answered: list[AskQuestion] = []
    for q in ask.questions:
        a = given[q.question_id]
        option_ids = {o.id for o in q.options}
        if len(set(a.chosen_option_ids)) != len(a.chosen_option_ids):
            raise InvalidArgument(f"question {quoted(q.question_id)} names an option twice")
        if not q.allow_multiple and len(a.chosen_option_ids) > 1:
            raise InvalidArgument(f"question {quoted(q.question_id)} takes at most one option")
        for oid in a.chosen_option_ids:
            if oid not in option_ids:
                raise InvalidArgument(
                    f"question {quoted(q.question_id)} has no option {quoted(oid)}"
                )
        _check_len(
            a.custom_text, MAX_CUSTOM_TEXT_CHARS, f"question {quoted(q.question_id)} answer text"
        )
        answered.append(
            AskQuestion(
                question_id=q.question_id,
                question=q.question,
                header=q.header,
                options=q.options,
                allow_multiple=q.allow_multiple,
                recommended=q.recommended,
                chosen_option_ids=tuple(a.chosen_option_ids),
                custom_text=a.custom_text,
            )
        )
    return Ask(
        questions=tuple(answered),
        ask_id=ask.ask_id,
        answered=True,
        deadline=ask.deadline,
        answerer_ids=ask.answerer_ids,
        answerer_handles=ask.answerer_handles,
    )


# --- JSONB shape -----------------------------------------------------------


def _question_to_json(q: AskQuestion) -> dict[str, Any]:
    out: dict[str, Any] = {"question_id": q.question_id, "question": q.question}
    if q.header:
        out["header"] = q.header
    if q.options:
        out["options"] = [_option_to_json(o) for o in q.options]
    if q.allow_multiple:
        out["allow_multiple"] = True
    if q.recommended is not None:
        out["recommended"] = q.recommended
    if q.chosen_option_ids:
        out["chosen_option_ids"] = list(q.chosen_option_ids)
    if q.custom_text:
        out["custom_text"] = q.custom_text
    if q.timed_out:
        out["timed_out"] = True
    return out


def _option_to_json(o: AskOption) -> dict[str, Any]:
    out: dict[str, Any] = {"id": o.id, "label": o.label}
    if o.description:
        out["description"] = o.description
    if o.preview:
        out["preview"] = o.preview
    return out


def always_to_json(always: AlwaysOption) -> dict[str, Any]:
    return {
        "question_id": always.question_id,
        "option_id": always.option_id,
        "seconds": always.seconds,
    }


def _always_from_json(raw: dict[str, Any]) -> AlwaysOption:
    return AlwaysOption(str(raw["question_id"]), str(raw["option_id"]), float(raw["seconds"]))


def block_to_json(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"kind": "text", "text": block.text}
    if isinstance(block, Ask):
        if block.answered and block.cancelled:
            raise InvalidArgument(
                f"ask {quoted(block.ask_id)} can't be both answered and cancelled"
            )
        ask: dict[str, Any] = {
            "ask_id": block.ask_id,
            "questions": [_question_to_json(q) for q in block.questions],
        }
        if block.answered:
            ask["answered"] = True
        if block.cancelled:
            ask["cancelled"] = True
        if block.deadline is not None:
            ask["deadline"] = block.deadline.isoformat()
        if block.answerer_ids:
            ask["answerer_ids"] = [str(a) for a in block.answerer_ids]
            ask["answerer_handles"] = list(block.answerer_handles)
        if block.ending is not None:
            ask["ending"] = _ending_to_json(block.ending)
        if block.trace:
            ask["trace"] = block.trace
        if block.always is not None:
            ask["always"] = always_to_json(block.always)
        if block.quorum:
            ask["quorum"] = block.quorum
        if block.declines_count_against_quorum:
            ask["declines_count_against_quorum"] = True
        if block.quorum_votes:
            ask["quorum_votes"] = [_vote_to_json(v) for v in block.quorum_votes]
        if block.follow_up is not None:
            ask["follow_up"] = _follow_up_to_json(block.follow_up)
        if block.follow_up_steps:
            ask["follow_up_steps"] = [
                {
                    "kind": st.kind,
                    "at": st.at.isoformat(),
                    "account_ids": [str(a) for a in st.account_ids],
                    "urgent": st.urgent,
                    **(
                        {
                            "reposted_channel_id": str(st.reposted_channel),
                            "repost_message_id": str(st.repost_message),
                        }
                        if st.reposted_channel is not None
                        else {}
                    ),
                }
                for st in block.follow_up_steps
            ]
        return {"kind": "ask", "ask": ask}
    answer: dict[str, Any] = {
        "ask_id": block.ask_id,
        "ask_message_id": str(block.ask_message_id),
        "questions": [_question_to_json(q) for q in block.questions],
    }
    if block.quorum_votes:
        answer["quorum_votes"] = [_vote_to_json(v) for v in block.quorum_votes]
    return {"kind": "ask_answer", "ask_answer": answer}


def _vote_to_json(v: QuorumVote) -> dict[str, Any]:
    """As compass_vote (migration 0025) writes it."""
    out: dict[str, Any] = {"account_id": str(v.account_id), "handle": v.handle, "kind": v.kind}
    if v.answers:
        out["answers"] = [
            {
                "question_id": a.question_id,
                **({"chosen_option_ids": list(a.chosen_option_ids)} if a.chosen_option_ids else {}),
                **({"custom_text": a.custom_text} if a.custom_text else {}),
            }
            for a in v.answers
        ]
    if v.reason:
        out["reason"] = v.reason
    if v.at is not None:
        out["at"] = v.at.isoformat()
    if v.surface is not None:
        out["surface"] = v.surface.value
    if v.standing_answer_id is not None:
        out["standing_answer_id"] = str(v.standing_answer_id)
    return out


def _vote_from_json(raw: dict[str, Any]) -> QuorumVote:
    return QuorumVote(
        account_id=uuid.UUID(raw["account_id"]),
        handle=raw.get("handle", ""),
        kind=VoteKind(raw["kind"]),
        answers=tuple(
            Answer(
                a["question_id"], tuple(a.get("chosen_option_ids", ())), a.get("custom_text", "")
            )
            for a in raw.get("answers", ())
        ),
        reason=raw.get("reason", ""),
        at=datetime.datetime.fromisoformat(raw["at"]) if "at" in raw else None,
        surface=Surface(raw["surface"]) if "surface" in raw else None,
        standing_answer_id=(
            uuid.UUID(raw["standing_answer_id"]) if "standing_answer_id" in raw else None
        ),
    )


def _ending_to_json(e: AskEnding) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": e.kind.value}
    if e.actor_id is not None:
        out["actor_id"] = str(e.actor_id)
        out["actor_handle"] = e.actor_handle
    if e.at is not None:
        out["at"] = e.at.isoformat()
    if e.surface is not None:
        out["surface"] = e.surface.value
    if e.reason:
        out["reason"] = e.reason
    if e.standing_answer_id is not None:
        out["standing_answer_id"] = str(e.standing_answer_id)
    return out


def ending_from_json(a: dict[str, Any]) -> AskEnding | None:
    """The ending as written, or derived from the flags of an ask that ended
    before endings were recorded (who and when unknown)."""
    raw = a.get("ending")
    if raw is None:
        if a.get("answered"):
            return AskEnding(EndingKind.ANSWERED)
        if a.get("cancelled"):
            return AskEnding(EndingKind.WITHDRAWN_BY_AGENT)
        return None
    return AskEnding(
        kind=EndingKind(raw["kind"]),
        at=datetime.datetime.fromisoformat(raw["at"]) if "at" in raw else None,
        actor_id=uuid.UUID(raw["actor_id"]) if "actor_id" in raw else None,
        actor_handle=raw.get("actor_handle", ""),
        surface=Surface(raw["surface"]) if "surface" in raw else None,
        reason=raw.get("reason", ""),
        standing_answer_id=(
            uuid.UUID(raw["standing_answer_id"]) if "standing_answer_id" in raw else None
        ),
    )


def blocks_to_json(blocks: Iterable[Block]) -> list[dict[str, Any]]:
    return [block_to_json(b) for b in blocks]


def question_from_json(raw: dict[str, Any]) -> AskQuestion:
    return AskQuestion(
        question_id=raw["question_id"],
        question=raw.get("question", ""),
        header=raw.get("header", ""),
        options=tuple(
            AskOption(
                id=o["id"],
                label=o.get("label", ""),
                description=o.get("description", ""),
                preview=o.get("preview", ""),
            )
            for o in raw.get("options", ())
        ),
        allow_multiple=bool(raw.get("allow_multiple", False)),
        recommended=raw.get("recommended"),
        chosen_option_ids=tuple(raw.get("chosen_option_ids", ())),
        custom_text=raw.get("custom_text", ""),
        timed_out=bool(raw.get("timed_out", False)),
    )


def block_from_json(raw: dict[str, Any], where: str = "block") -> Block:
    kind = raw.get("kind")
    try:
        if kind == "text":
            return TextBlock(text=raw["text"])
        if kind == "ask":
            a = raw["ask"]
            ask = Ask(
                questions=tuple(question_from_json(q) for q in a.get("questions", ())),
                ask_id=a["ask_id"],
                answered=bool(a.get("answered", False)),
                cancelled=bool(a.get("cancelled", False)),
                deadline=(
                    datetime.datetime.fromisoformat(a["deadline"]) if "deadline" in a else None
                ),
                answerer_ids=tuple(uuid.UUID(i) for i in a.get("answerer_ids", ())),
                answerer_handles=tuple(a.get("answerer_handles", ())),
                ending=ending_from_json(a),
                trace=str(a.get("trace", "")),
                always=_always_from_json(a["always"]) if "always" in a else None,
                quorum=int(a.get("quorum", 0)),
                declines_count_against_quorum=bool(a.get("declines_count_against_quorum", False)),
                quorum_votes=tuple(_vote_from_json(v) for v in a.get("quorum_votes", ())),
                follow_up=_follow_up_from_json(a["follow_up"]) if "follow_up" in a else None,
                follow_up_steps=tuple(
                    FollowUpStep(
                        kind=str(x["kind"]),
                        at=datetime.datetime.fromisoformat(x["at"]),
                        account_ids=tuple(uuid.UUID(i) for i in x.get("account_ids", ())),
                        urgent=bool(x.get("urgent", False)),
                        reposted_channel=(
                            uuid.UUID(x["reposted_channel_id"])
                            if "reposted_channel_id" in x
                            else None
                        ),
                        repost_message=(
                            uuid.UUID(x["repost_message_id"]) if "repost_message_id" in x else None
                        ),
                    )
                    for x in a.get("follow_up_steps", ())
                ),
            )
            if ask.answered and ask.cancelled:
                raise Corrupt(
                    f"stored {where} ask {quoted(ask.ask_id)} is both answered and cancelled"
                )
            kind = ask.ending.kind if ask.ending is not None else None
            if ask.answered != (kind is EndingKind.ANSWERED) or ask.cancelled != (
                kind in CANCELLING
            ):
                raise Corrupt(
                    f"stored {where} ask {quoted(ask.ask_id)} has flags its ending denies"
                )
            if not ask.questions:
                raise Corrupt(f"stored {where} ask {quoted(ask.ask_id)} has no questions")
            return ask
        if kind == "ask_answer":
            a = raw["ask_answer"]
            return AskAnswerBlock(
                ask_id=a["ask_id"],
                ask_message_id=uuid.UUID(a["ask_message_id"]),
                questions=tuple(question_from_json(q) for q in a.get("questions", ())),
                quorum_votes=tuple(_vote_from_json(v) for v in a.get("quorum_votes", ())),
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise Corrupt(f"stored {where} is malformed") from exc
    raise Corrupt(f"stored {where} has unknown kind {kind!r}")


def blocks_from_json(raw: Sequence[dict[str, Any]]) -> tuple[Block, ...]:
    return tuple(block_from_json(b, f"block {i}") for i, b in enumerate(raw))


def ask_as_of(ask: Ask, now: datetime.datetime) -> Ask:
    """The ask as a reader sees it at `now` (the database's clock): open past
    its deadline, it reads expired, exactly as its expiry will be written
    (compass_write_ending), whether or not a sweep has run yet."""
    if not ask.is_open or ask.deadline is None or ask.deadline > now:
        return ask
    return dataclasses.replace(
        ask,
        questions=tuple(dataclasses.replace(q, timed_out=True) for q in ask.questions),
        ending=AskEnding(EndingKind.EXPIRED, at=ask.deadline, surface=Surface.SERVER),
    )


def blocks_as_of(blocks: tuple[Block, ...], now: datetime.datetime) -> tuple[Block, ...]:
    return tuple(ask_as_of(b, now) if isinstance(b, Ask) else b for b in blocks)


def message_from_json(p: dict[str, Any]) -> Message:
    """A message as compass_message_json (migration 0004) writes it."""
    return Message(
        message_id=uuid.UUID(p["message_id"]),
        channel_id=uuid.UUID(p["channel_id"]),
        author_id=uuid.UUID(p["author_id"]),
        author_handle=p["author_handle"],
        blocks=blocks_from_json(p["blocks"]),
        created_at=datetime.datetime.fromisoformat(p["created_at"]),
        position=p.get("position", 0),
    )


def search_text(blocks: Iterable[Block]) -> str:
    words: list[str] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            words.append(b.text)
        elif isinstance(b, Ask):
            words.extend(q.question for q in b.questions)
    return "\n".join(words).lower()


def encoded_size(value: Any) -> int:
    """Bytes of `value` as UTF-8 JSON: what it weighs stored, on the wire and
    (near enough) in memory."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def check_message_size(blocks_json: Sequence[dict[str, Any]]) -> list[int]:
    """The encoded size of each block; refuses a message over the limit."""
    sizes = [encoded_size(b) for b in blocks_json]
    size = sum(sizes) + len(sizes) + 1
    if size > MAX_MESSAGE_BYTES:
        raise ResourceExhausted(
            f"the message is {size} bytes as stored; the limit is {MAX_MESSAGE_BYTES} bytes"
        )
    return sizes


def follow_up_spans(f: FollowUp, bounds: DeadlineBounds, where: str) -> None:
    longest = min(REMIND_LONGEST, bounds.longest)
    if f.remind_after is not None and not bounds.shortest <= f.remind_after <= longest:
        raise InvalidArgument(
            f"{where} remind_after must be {span(bounds.shortest)} to {span(longest)}"
        )
    if f.escalate_after is not None and not (bounds.shortest <= f.escalate_after <= bounds.longest):
        raise InvalidArgument(
            f"{where} escalate_after must be {span(bounds.shortest)} to {span(bounds.longest)}"
        )


def _default_for(ask: Ask, default: FollowUp | None) -> FollowUp | None:
    """The default, without the escalation for a quorum ask (whose answerers
    are the people it names)."""
    if default is None or not ask.quorum:
        return default
    return dataclasses.replace(default, escalate_after=None, escalate_to_owner=False)


_WAIT = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def follow_up_default(text: str) -> FollowUp | None:
    """The servers' default policy from its setting, like
    "remind=30m,times=2,escalate=4h,owner" (a wait is a number with ms, s,
    m, h or d; `owner` escalates to the asking agent's owner); "" is none.
    ValueError for anything else."""
    if not text.strip():
        return None
    remind: datetime.timedelta | None = None
    escalate: datetime.timedelta | None = None
    times, owner = 0, False
    for part in (p.strip() for p in text.split(",")):
        key, _, value = part.partition("=")
        wait = _WAIT.match(value.strip())
        if key == "remind" and wait:
            remind = datetime.timedelta(seconds=float(wait[1]) * _UNIT[wait[2]])
        elif key == "escalate" and wait:
            escalate = datetime.timedelta(seconds=float(wait[1]) * _UNIT[wait[2]])
        elif key == "times" and value.strip().isdigit():
            times = int(value)
        elif part == "owner":
            owner = True
        else:
            raise ValueError(f"{part!r} is not remind=WAIT, times=N, escalate=WAIT or owner")
    f = FollowUp(
        remind_after=remind, remind_times=times, escalate_after=escalate, escalate_to_owner=owner
    )
    try:
        validate_follow_up(f, "the default follow-up")
    except InvalidArgument as exc:
        raise ValueError(exc.message) from None
    if (remind is not None and not remind) or (escalate is not None and not escalate):
        raise ValueError("a follow-up wait is more than 0")
    return f


def _settled(f: FollowUp | None) -> FollowUp | None:
    """A policy with nothing to do is none; remind_after alone reminds once."""
    if f is None or (f.remind_after is None and f.escalate_after is None):
        return None
    if f.remind_after is not None and not f.remind_times:
        return dataclasses.replace(f, remind_times=1)
    return f


def _follow_up_to_json(f: FollowUp) -> dict[str, Any]:
    """Seconds, as migration 0032's step function reads them."""
    out: dict[str, Any] = {}
    if f.remind_after is not None:
        out["remind_after_s"] = f.remind_after.total_seconds()
        out["remind_times"] = f.remind_times
    if f.escalate_after is not None:
        out["escalate_after_s"] = f.escalate_after.total_seconds()
        out["escalate_to"] = [str(a) for a in f.escalate_to]
        out["escalate_to_owner"] = f.escalate_to_owner
        if f.escalate_to_channel is not None:
            out["escalate_to_channel"] = str(f.escalate_to_channel)
    return out


def _follow_up_from_json(raw: dict[str, Any]) -> FollowUp:
    def secs(key: str) -> datetime.timedelta | None:
        return datetime.timedelta(seconds=float(raw[key])) if key in raw else None

    return FollowUp(
        remind_after=secs("remind_after_s"),
        remind_times=int(raw.get("remind_times", 0)),
        escalate_after=secs("escalate_after_s"),
        escalate_to=tuple(uuid.UUID(i) for i in raw.get("escalate_to", ())),
        escalate_to_owner=bool(raw.get("escalate_to_owner", False)),
        escalate_to_channel=(
            uuid.UUID(raw["escalate_to_channel"]) if "escalate_to_channel" in raw else None
        ),
    )


def follow_up_default_to_json(
    f: FollowUp | None, bounds: DeadlineBounds, where: str = "follow_up"
) -> dict[str, Any] | None:
    """A workspace's or channel's default as stored: None for none of its
    own, {} for "no follow-ups", else the policy checked like an ask's. A
    default names no people or channel: it serves every ask of its scope."""
    if f is None:
        return None
    if f.escalate_to or f.escalate_to_channel is not None:
        raise InvalidArgument(
            f"a default {where} names no people or channel to escalate to; it may remind and "
            "escalate to the agent's owner"
        )
    validate_follow_up(f, where)
    follow_up_spans(f, bounds, where)
    settled = _settled(f)
    return {} if settled is None else _follow_up_to_json(settled)


def follow_up_default_from_json(raw: dict[str, Any] | None) -> FollowUp | None:
    """The stored default; an empty FollowUp is "no follow-ups"."""
    return None if raw is None else _follow_up_from_json(raw)
