"""How an ask ended, in the words an agent reads, and the endings an agent
has heard of.

An ask ends once. Each kind of ending is one row of ENDINGS: its name, how
to tell it from the ask's server-owned state (`Ask.ending`, or the older
flags), and its words: answered, declined (by whom, and why), withdrawn by
its agent, withdrawn by the agent's owner, or expired at its deadline; an
inbox ask also replaced by the agent's newer ask, or withdrawn by a person
who closed its item. Every reader (the MCP `ask` and `check_ask` tools,
`comms_get_ask`) knows them all.
A quorum ask's answer lists each person's answers, and while it is open
its readers say how many of the answers it needs it has (k of K). An answer
a person's standing answer gave says so.

`AskEndings` keeps the endings one agent session has heard of, by ask id,
and wakes whoever waits on them. It is fed from the delivery lane (`hear`:
an answer arrives as the answer message, any other ending by someone else as
the update of the agent's own ask; in its inbox, both as the item's change)
and in process (the agent's own withdrawal, which the lane does not carry
back to it).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from compass.v1 import comms_pb2 as pb
from compass_agentkit.native_ask import answers_from_ask

__all__ = [
    "ENDINGS",
    "AskEndings",
    "Ending",
    "EndingKind",
    "actor",
    "answer_text",
    "answerers",
    "ask_state",
    "continued",
    "ending_of",
    "open_terms",
    "quorum_terms",
    "rfc3339",
    "state_text",
    "vote_questions",
    "withdrawn_by_me",
]

# Endings kept per session for asks nobody waits on yet (an answer that
# comes before its waiter); the oldest go first.
KEPT_ENDINGS = 1024


def _one_line(text: str) -> str:
    return " ".join(text.split())


def continued(line: str) -> str:
    """Every line break, of any kind, continues indented: text inside an
    entry can't start a line that looks like another entry."""
    return "\n  ".join(line.splitlines())


def answer_text(question: pb.AskQuestion) -> str:
    """One question's answer: the chosen labels, then `other: <text>`."""
    labels = {option.id: option.label for option in question.options}
    parts = []
    chosen = [labels[i] for i in question.chosen_option_ids if i in labels]
    if chosen:
        parts.append(", ".join(chosen))
    if question.custom_text:
        parts.append(f"other: {question.custom_text}")
    answer = "; ".join(parts) or "(skipped)"
    return answer + (" (timed out)" if question.timed_out else "")


def actor(ending: pb.AskEnding) -> str:
    """Who ended an ask: @handle, else the account id."""
    if ending.actor_handle:
        return "@" + _one_line(ending.actor_handle)
    return ending.actor_account_id or "someone"


def rfc3339(at: Timestamp) -> str:
    """A server time as an agent reads and writes it: UTC, to the second."""
    return at.ToDatetime().strftime("%Y-%m-%dT%H:%M:%SZ")


def _voter(vote: pb.QuorumVote) -> str:
    return "@" + _one_line(vote.handle) if vote.handle.strip() else vote.account_id


def _answers(ask: pb.Ask) -> list[pb.QuorumVote]:
    return [v for v in ask.quorum_votes if v.kind == pb.QUORUM_VOTE_KIND_ANSWER]


def vote_questions(ask: pb.Ask, vote: pb.QuorumVote) -> list[pb.AskQuestion]:
    """The ask's questions as one person's vote answered them."""
    given = {a.question_id: a for a in vote.answers}
    out = []
    for question in ask.questions:
        answered = pb.AskQuestion()
        answered.CopyFrom(question)
        if question.question_id in given:
            answered.chosen_option_ids[:] = given[question.question_id].chosen_option_ids
            answered.custom_text = given[question.question_id].custom_text
        out.append(answered)
    return out


def _by_rule(ending: pb.AskEnding) -> str:
    if not ending.standing_answer_id:
        return ""
    return f" by {actor(ending)}'s standing answer {ending.standing_answer_id}"


# --- the rows -----------------------------------------------------------------------
# Each ending kind's note is what a marker adds after the ask's first
# question (render.py); its words are the sentence a tool returns.


def _answered(ask: pb.Ask) -> str:
    answers = _answers(ask)
    if not answers:
        lines = [f"Ask {ask.ask_id} was answered{_by_rule(ask.ending)}:"]
        lines += [continued(f"- {_one_line(q.question)} → {answer_text(q)}") for q in ask.questions]
        return "\n".join(lines)
    lines = [f"Ask {ask.ask_id} was answered by {len(answers)} people, as many as it needed:"]
    for vote in answers:
        rule = f" (standing answer {vote.standing_answer_id})" if vote.standing_answer_id else ""
        lines.append(f"- {_voter(vote)}{rule}:")
        lines += [
            continued(f"  - {_one_line(q.question)} → {answer_text(q)}")
            for q in vote_questions(ask, vote)
        ]
    return "\n".join(lines)


def _withdrawn(ask: pb.Ask) -> str:
    reason = _one_line(ask.ending.reason)
    why = f': "{reason}"' if reason else ""
    return f"Ask {ask.ask_id} was withdrawn{why}; it takes no answer."


def _by_person(ask: pb.Ask) -> str:
    return f"withdrawn by {actor(ask.ending)}, who closed its inbox item without answering"


def _withdrawn_by_person(ask: pb.Ask) -> str:
    return f"Ask {ask.ask_id} was {_by_person(ask)}; it takes no answer."


def _replaced_note(ask: pb.Ask) -> str:
    return "replaced by a newer ask"


def _replaced(ask: pb.Ask) -> str:
    at = f" at {rfc3339(ask.ending.ended_at)}" if ask.ending.HasField("ended_at") else ""
    return (
        f"Ask {ask.ask_id} was replaced by a newer ask in its inbox item{at}; it takes no answer."
    )


def _by_owner(ask: pb.Ask) -> str:
    return f"withdrawn by {actor(ask.ending)}, the owner of the agent that asked"


def _withdrawn_by_owner(ask: pb.Ask) -> str:
    return f"Ask {ask.ask_id} was {_by_owner(ask)}; it takes no answer."


def _declined_note(ask: pb.Ask) -> str:
    reason = f": {ask.ending.reason}" if ask.ending.reason else ""
    return f"declined by {actor(ask.ending)}{reason}"


def _declined(ask: pb.Ask) -> str:
    reason = _one_line(ask.ending.reason)
    why = f': "{reason}"' if reason else " (no reason given)"
    return (
        f"Ask {ask.ask_id} was declined by {actor(ask.ending)}{why}. Nobody answered it; it "
        "takes no answer."
    )


def _expired_at(ask: pb.Ask) -> str:
    if ask.ending.HasField("ended_at"):
        return rfc3339(ask.ending.ended_at)
    return rfc3339(ask.deadline) if ask.HasField("deadline") else ""


def _expired_note(ask: pb.Ask) -> str:
    at = _expired_at(ask)
    return f"nobody answered by {at}" if at else "nobody answered in time"


def _expired(ask: pb.Ask) -> str:
    at = _expired_at(ask)
    return (
        f"Ask {ask.ask_id} expired{f' at {at}' if at else ''}: nobody answered it before its "
        "deadline; it takes no answer."
    )


def _kind(ask: pb.Ask) -> int:
    return ask.ending.kind if ask.HasField("ending") else pb.ASK_ENDING_KIND_UNSPECIFIED


def _no_note(ask: pb.Ask) -> str:
    return ""


@dataclass(frozen=True, slots=True)
class EndingKind:
    name: str
    # The marker kind a rendered ask carries: [<marker> <fence> id="…"].
    marker: str
    # Whether the ask ended this way, from its server-owned state.
    ended: Callable[[pb.Ask], bool]
    words: Callable[[pb.Ask], str]
    note: Callable[[pb.Ask], str] = _no_note


# Checked in order. Every withdrawal, and an inbox ask's replacement, sets
# `cancelled` (all but the agent's own are told apart by their ending), and
# a withdrawn ask takes no answer, whatever else it says.
ENDINGS: tuple[EndingKind, ...] = (
    EndingKind(
        "withdrawn_by_owner",
        "withdrawn-by-owner",
        lambda ask: _kind(ask) == pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER,
        _withdrawn_by_owner,
        _by_owner,
    ),
    EndingKind(
        "withdrawn_by_person",
        "withdrawn-by-person",
        lambda ask: _kind(ask) == pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON,
        _withdrawn_by_person,
        _by_person,
    ),
    EndingKind(
        "replaced",
        "replaced",
        lambda ask: _kind(ask) == pb.ASK_ENDING_KIND_REPLACED,
        _replaced,
        _replaced_note,
    ),
    EndingKind("withdrawn", "withdrawn", lambda ask: ask.cancelled, _withdrawn),
    EndingKind(
        "declined",
        "declined",
        lambda ask: _kind(ask) == pb.ASK_ENDING_KIND_DECLINED,
        _declined,
        _declined_note,
    ),
    EndingKind(
        "expired",
        "expired",
        lambda ask: _kind(ask) == pb.ASK_ENDING_KIND_EXPIRED,
        _expired,
        _expired_note,
    ),
    EndingKind("answered", "answered", lambda ask: ask.answered, _answered),
)


@dataclass(frozen=True, slots=True)
class Ending:
    kind: EndingKind
    ask: pb.Ask

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def text(self) -> str:
        return self.kind.words(self.ask)


def ending_of(ask: pb.Ask) -> Ending | None:
    """How the ask ended, or None while it is open."""
    for kind in ENDINGS:
        if kind.ended(ask):
            return Ending(kind, ask)
    return None


def withdrawn_by_me(ask_id: str) -> Ending:
    """The agent's own withdrawal, known in process: the server acknowledged
    it, and the lane does not carry an agent's own changes back to it."""
    ask = pb.Ask(
        ask_id=ask_id,
        cancelled=True,
        ending=pb.AskEnding(kind=pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT),
    )
    ending = ending_of(ask)
    assert ending is not None
    return ending


def answerers(ask: pb.Ask) -> list[str]:
    """Whom the ask names: @handle, else the account id."""
    handles = list(ask.answerer_handles)
    return [
        f"@{_one_line(handles[i])}" if i < len(handles) and handles[i].strip() else account
        for i, account in enumerate(ask.answerer_account_ids)
    ]


def quorum_terms(ask: pb.Ask) -> list[str]:
    """How many answers a quorum ask needs, what a decline does, and each
    vote so far, as sentences; none for an ask without a quorum."""
    if not ask.quorum:
        return []
    terms = [
        f"It needs {ask.quorum} of their answers; "
        + (
            "a decline counts against that."
            if ask.declines_count_against_quorum
            else "a decline by any of them ends it."
        )
    ]
    if ask.quorum_votes:
        votes = []
        for vote in ask.quorum_votes:
            if vote.kind == pb.QUORUM_VOTE_KIND_ANSWER:
                votes.append(f"{_voter(vote)} answered")
            else:
                why = f' ("{_one_line(vote.reason)}")' if vote.reason else ""
                votes.append(f"{_voter(vote)} declined{why}")
        terms.append(f"So far {len(_answers(ask))} of {ask.quorum}: " + "; ".join(votes) + ".")
    return terms


def open_terms(ask: pb.Ask) -> list[str]:
    """Whom an open ask lets answer, how many it needs and when it expires,
    as sentences."""
    terms = []
    names = answerers(ask)
    if names:
        whom = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        terms.append(f"Only {whom} may answer or decline it.")
    terms += quorum_terms(ask)
    if ask.HasField("deadline"):
        terms.append(f"If nobody answers by {rfc3339(ask.deadline)}, it expires.")
    return terms


def follow_up_text(ask: pb.Ask) -> str:
    """The ask's follow-up steps so far, as one sentence; empty with none."""
    said = []
    for step in ask.follow_up_steps:
        people = ", ".join(step.account_ids)
        at = rfc3339(step.at)
        if step.kind == pb.ASK_FOLLOW_UP_STEP_KIND_ESCALATED:
            where = (
                f", reposted in channel {step.reposted_channel_id}"
                if step.reposted_channel_id
                else ""
            )
            said.append(f"escalated to {people or 'nobody new'}{where} at {at} (urgent)")
        else:
            said.append(f"reminded {people or 'the channel'} at {at}")
    return ("Follow-ups: " + "; ".join(said) + ".") if said else ""


def _follow_up_state(ask: pb.Ask) -> list[dict[str, Any]]:
    return [
        {
            "kind": "escalated"
            if step.kind == pb.ASK_FOLLOW_UP_STEP_KIND_ESCALATED
            else "reminded",
            "at": rfc3339(step.at),
            "account_ids": list(step.account_ids),
            "urgent": step.urgent,
            **(
                {
                    "reposted_channel_id": step.reposted_channel_id,
                    "repost_message_id": step.repost_message_id,
                }
                if step.reposted_channel_id
                else {}
            ),
        }
        for step in ask.follow_up_steps
    ]


def state_text(ask: pb.Ask) -> str:
    """The ask's ending in words, or that it is open and what it asks; and
    its follow-up steps."""
    steps = follow_up_text(ask)
    ending = ending_of(ask)
    if ending is not None:
        return ending.text + (f"\n{steps}" if steps else "")
    if ask.quorum:
        progress = f"{len(_answers(ask))} of {ask.quorum} answers so far."
    else:
        progress = "nobody has answered it yet."
    said = " ".join([progress, *open_terms(ask)])
    lines = [f"Ask {ask.ask_id} is open: {said} It asks:"]
    lines += [continued(f"- {_one_line(q.question)}") for q in ask.questions]
    if steps:
        lines.append(steps)
    return "\n".join(lines)


def _vote_state(ask: pb.Ask, vote: pb.QuorumVote) -> dict[str, Any]:
    out: dict[str, Any] = {
        "by": vote.handle or vote.account_id,
        "kind": "answer" if vote.kind == pb.QUORUM_VOTE_KIND_ANSWER else "decline",
    }
    if vote.kind == pb.QUORUM_VOTE_KIND_ANSWER:
        answered = pb.Ask(questions=vote_questions(ask, vote))
        out["answers"] = _results(answered)
    if vote.reason:
        out["reason"] = vote.reason
    if vote.standing_answer_id:
        out["standing_answer_id"] = vote.standing_answer_id
    return out


def _results(ask: pb.Ask) -> list[dict[str, Any]]:
    questions = {q.question_id: q.question for q in ask.questions}
    return [
        {**asdict(result), "question": questions.get(result.question_id, "")}
        for result in answers_from_ask(ask)
    ]


def ask_state(ask: pb.Ask) -> dict[str, Any]:
    """The same as structured content: the state, who ended it, when and why,
    each question's answer, and the ending's receipt when the server gave one
    (see receipts.py)."""
    ending = ending_of(ask)
    state: dict[str, Any] = {"ask_id": ask.ask_id, "state": ending.name if ending else "open"}
    if ending is not None and ask.HasField("ending"):
        told = ask.ending
        if told.actor_handle or told.actor_account_id:
            state["ended_by"] = told.actor_handle or told.actor_account_id
        if told.HasField("ended_at"):
            state["ended_at"] = rfc3339(told.ended_at)
        if told.reason:
            state["reason"] = told.reason
        if told.standing_answer_id:
            state["standing_answer_id"] = told.standing_answer_id
        if told.receipt:
            state["receipt"] = told.receipt
    if ask.quorum:
        state["quorum"] = {
            "required": ask.quorum,
            "answered": len(_answers(ask)),
            "declines_count_against": ask.declines_count_against_quorum,
            "votes": [_vote_state(ask, v) for v in ask.quorum_votes],
        }
    elif ending is not None and ending.name == "answered":
        state["answers"] = _results(ask)
    if ask.follow_up_steps:
        state["follow_up_steps"] = _follow_up_state(ask)
    return state


class AskEndings:
    """The endings one agent session heard of, by ask id; the first one heard
    for an ask is its ending (told more fully, by the standing answer that
    gave it, when the ask itself is heard after its answer message)."""

    def __init__(self, kept: int = KEPT_ENDINGS) -> None:
        self.kept = kept
        self._endings: collections.OrderedDict[str, Ending] = collections.OrderedDict()
        self._waiters: dict[str, list[asyncio.Future[Ending]]] = {}

    def __len__(self) -> int:
        return len(self._endings)

    def get(self, ask_id: str) -> Ending | None:
        return self._endings.get(ask_id)

    def hear(self, event: pb.Event, agent_id: str) -> list[Ending]:
        """Records what a delivery ends of this agent's asks; returns it. An
        answer arrives as the answer message; any other ending by someone
        else as the update of the agent's own ask (declined, withdrawn by its
        owner, expired); in the agent's inbox, each as the item's change,
        carrying the answer message or the ask. Everything else on the lane
        ends nothing."""
        asks: list[pb.Ask] = []
        kind = event.WhichOneof("kind")
        blocks: list[pb.MessageBlock] = []
        if kind == "message_posted":
            blocks += event.message_posted.message.blocks
        elif kind == "message_updated":
            message = event.message_updated.message
            if message.author_account_id == agent_id:
                asks += [block.ask for block in message.blocks if block.HasField("ask")]
        elif kind == "inbox_item_changed":
            change = event.inbox_item_changed
            if change.agent_account_id == agent_id:
                blocks += change.message.blocks
                asks += [block.ask for block in change.message.blocks if block.HasField("ask")]
        for block in blocks:
            if block.HasField("ask_answer"):
                answer = block.ask_answer
                ask = pb.Ask(
                    ask_id=answer.ask_id,
                    questions=answer.questions,
                    answered=True,
                    quorum=len(answer.quorum_votes),
                    quorum_votes=answer.quorum_votes,
                )
                if answer.receipt:
                    ask.ending.kind = pb.ASK_ENDING_KIND_ANSWERED
                    ask.ending.receipt = answer.receipt
                asks.append(ask)
        heard = [self.heard(ask) for ask in asks]
        return [ending for ending in heard if ending is not None]

    def heard(self, ask: pb.Ask) -> Ending | None:
        """Records the ask's ending, if it has one; returns it."""
        ending = ending_of(ask)
        if ending is not None:
            self.ended(ending)
        return ending

    def ended(self, ending: Ending) -> None:
        ask_id = ending.ask.ask_id
        known = self._endings.get(ask_id)
        if known is not None:
            # The answer message can come before the post's reply, and only the
            # ask itself names the standing answer that answered it.
            if (
                known.name == ending.name
                and ending.ask.ending.standing_answer_id
                and not known.ask.ending.standing_answer_id
            ):
                self._endings[ask_id] = ending
            return
        self._endings[ask_id] = ending
        while len(self._endings) > self.kept:
            self._endings.popitem(last=False)
        for waiter in self._waiters.pop(ask_id, []):
            if not waiter.done():
                waiter.set_result(ending)

    async def wait(self, ask_id: str) -> Ending:
        """The ask's ending, as soon as one is heard."""
        found = self._endings.get(ask_id)
        if found is not None:
            return found
        waiter: asyncio.Future[Ending] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(ask_id, []).append(waiter)
        try:
            return await waiter
        finally:
            # A waiter that gave up (cancelled, timed out) leaves nothing behind.
            waiting = self._waiters.get(ask_id)
            if waiting is not None and waiter in waiting:
                waiting.remove(waiter)
                if not waiting:
                    del self._waiters[ask_id]

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())
