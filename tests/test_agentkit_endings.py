"""How an ask ended, in words, and the endings one agent session hears of."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from compass.v1 import comms_pb2 as pb
from compass_agentkit.endings import (
    ENDINGS,
    AskEndings,
    ask_state,
    ending_of,
    state_text,
    withdrawn_by_me,
)


def _ask(**state: object) -> pb.Ask:
    ask = pb.Ask(
        ask_id="ask_1",
        questions=[
            pb.AskQuestion(
                question_id="db",
                question="Which database?",
                options=[
                    pb.AskOption(id="0", label="PostgreSQL"),
                    pb.AskOption(id="1", label="SQLite"),
                ],
            ),
            pb.AskQuestion(
                question_id="langs",
                question="Which languages?",
                options=[pb.AskOption(id="0", label="Python"), pb.AskOption(id="1", label="Go")],
                allow_multiple=True,
            ),
        ],
    )
    for key, value in state.items():
        setattr(ask, key, value)
    return ask


def _answered(custom: str = "and some Rust") -> pb.Ask:
    ask = _ask(answered=True)
    ask.questions[0].chosen_option_ids.append("0")
    ask.questions[1].chosen_option_ids.extend(["0", "1"])
    ask.questions[1].custom_text = custom
    return ask


def test_every_ending_kind_is_a_row() -> None:
    assert [kind.name for kind in ENDINGS] == [
        "withdrawn_by_owner",
        "withdrawn_by_person",
        "replaced",
        "withdrawn",
        "declined",
        "expired",
        "answered",
    ]
    assert ending_of(_ask()) is None


def _ended(kind: int, **ending: Any) -> pb.Ask:
    """An ask as the server writes it after an ending of this kind."""
    ask = _ask(
        cancelled=kind
        in (
            pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT,
            pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER,
            pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON,
            pb.ASK_ENDING_KIND_REPLACED,
        )
    )
    ask.ending.CopyFrom(pb.AskEnding(kind=kind, **ending))
    if kind == pb.ASK_ENDING_KIND_EXPIRED:
        for q in ask.questions:
            q.timed_out = True
    return ask


AT = Timestamp(seconds=1_767_261_600)  # 2026-01-01T10:00:00Z


def test_a_decline_reads_who_and_why() -> None:
    ending = ending_of(
        _ended(
            pb.ASK_ENDING_KIND_DECLINED,
            actor_account_id="acc-ada",
            actor_handle="ada",
            reason="not before\nthe audit",
        )
    )
    assert ending is not None and ending.name == "declined"
    assert ending.text == (
        'Ask ask_1 was declined by @ada: "not before the audit". Nobody answered it; it '
        "takes no answer."
    )
    silent = ending_of(_ended(pb.ASK_ENDING_KIND_DECLINED, actor_account_id="acc-ada"))
    assert silent is not None
    assert silent.text == (
        "Ask ask_1 was declined by acc-ada (no reason given). Nobody answered it; it takes "
        "no answer."
    )


def test_the_owners_withdrawal_is_not_the_agents_own() -> None:
    owner = ending_of(
        _ended(
            pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER, actor_account_id="acc-ada", actor_handle="ada"
        )
    )
    assert owner is not None and owner.name == "withdrawn_by_owner"
    assert owner.text == (
        "Ask ask_1 was withdrawn by @ada, the owner of the agent that asked; it takes no answer."
    )
    own = ending_of(_ended(pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT, actor_handle="scout"))
    assert own is not None and own.name == "withdrawn"
    assert own.text == "Ask ask_1 was withdrawn; it takes no answer."


def test_an_inbox_asks_endings_read_who_and_how() -> None:
    closed = ending_of(
        _ended(
            pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON, actor_account_id="acc-ada", actor_handle="ada"
        )
    )
    assert closed is not None and closed.name == "withdrawn_by_person"
    assert closed.text == (
        "Ask ask_1 was withdrawn by @ada, who closed its inbox item without answering; it "
        "takes no answer."
    )
    replaced = _ended(pb.ASK_ENDING_KIND_REPLACED, actor_handle="scout")
    replaced.ending.ended_at.CopyFrom(AT)
    ending = ending_of(replaced)
    assert ending is not None and ending.name == "replaced"
    assert ending.text == (
        "Ask ask_1 was replaced by a newer ask in its inbox item at 2026-01-01T10:00:00Z; it "
        "takes no answer."
    )
    assert ask_state(replaced) == {
        "ask_id": "ask_1",
        "state": "replaced",
        "ended_by": "scout",
        "ended_at": "2026-01-01T10:00:00Z",
    }
    # The agent's own close of its inbox item says why.
    own = ending_of(_ended(pb.ASK_ENDING_KIND_WITHDRAWN_BY_AGENT, reason="moot\nnow"))
    assert own is not None and own.name == "withdrawn"
    assert own.text == 'Ask ask_1 was withdrawn: "moot now"; it takes no answer.'


def test_an_expiry_reads_when_and_that_nobody_answered() -> None:
    expired = _ended(pb.ASK_ENDING_KIND_EXPIRED)
    expired.ending.ended_at.CopyFrom(AT)
    ending = ending_of(expired)
    assert ending is not None and ending.name == "expired"
    assert ending.text == (
        "Ask ask_1 expired at 2026-01-01T10:00:00Z: nobody answered it before its deadline; "
        "it takes no answer."
    )
    assert ask_state(expired) == {
        "ask_id": "ask_1",
        "state": "expired",
        "ended_at": "2026-01-01T10:00:00Z",
    }


def test_the_structured_state_says_who_ended_it_and_why() -> None:
    declined = _ended(
        pb.ASK_ENDING_KIND_DECLINED,
        actor_account_id="acc-ada",
        actor_handle="ada",
        reason="later",
    )
    declined.ending.ended_at.CopyFrom(AT)
    assert ask_state(declined) == {
        "ask_id": "ask_1",
        "state": "declined",
        "ended_by": "ada",
        "ended_at": "2026-01-01T10:00:00Z",
        "reason": "later",
    }
    owner = _ended(pb.ASK_ENDING_KIND_WITHDRAWN_BY_OWNER, actor_account_id="acc-ada")
    assert ask_state(owner) == {
        "ask_id": "ask_1",
        "state": "withdrawn_by_owner",
        "ended_by": "acc-ada",
    }


def test_an_answer_reads_as_each_questions_labels_and_free_text() -> None:
    ending = ending_of(_answered())
    assert ending is not None and ending.name == "answered"
    assert ending.text == (
        "Ask ask_1 was answered:\n"
        "- Which database? → PostgreSQL\n"
        "- Which languages? → Python, Go; other: and some Rust"
    )


def test_free_text_cannot_pose_as_another_question() -> None:
    ending = ending_of(_answered("fine\n- Which database? → SQLite"))
    assert ending is not None
    lines = ending.text.splitlines()
    assert [line for line in lines if line.startswith("- ")] == [
        "- Which database? → PostgreSQL",
        "- Which languages? → Python, Go; other: fine",
    ]
    assert "  - Which database? → SQLite" in lines


def test_withdrawn_wins_over_answered() -> None:
    ending = ending_of(_ask(answered=True, cancelled=True))
    assert ending is not None and ending.name == "withdrawn"
    assert ending.text == "Ask ask_1 was withdrawn; it takes no answer."


def test_the_state_of_an_open_ask_names_its_questions() -> None:
    assert state_text(_ask()) == (
        "Ask ask_1 is open: nobody has answered it yet. It asks:\n"
        "- Which database?\n"
        "- Which languages?"
    )
    assert ask_state(_ask()) == {"ask_id": "ask_1", "state": "open"}


def test_an_open_ask_says_whom_it_asks_and_until_when() -> None:
    ask = _ask()
    ask.deadline.CopyFrom(AT)
    ask.answerer_account_ids.extend(["acc-ada", "acc-bob", "acc-cy"])
    ask.answerer_handles.extend(["ada", "bob", ""])
    assert state_text(ask) == (
        "Ask ask_1 is open: nobody has answered it yet. Only @ada, @bob and acc-cy may answer "
        "or decline it. If nobody answers by 2026-01-01T10:00:00Z, it expires. It asks:\n"
        "- Which database?\n"
        "- Which languages?"
    )


def test_the_structured_state_of_an_answered_ask() -> None:
    assert ask_state(_answered()) == {
        "ask_id": "ask_1",
        "state": "answered",
        "answers": [
            {
                "question_id": "db",
                "question": "Which database?",
                "selected_options": ["PostgreSQL"],
                "custom_input": None,
                "timed_out": False,
            },
            {
                "question_id": "langs",
                "question": "Which languages?",
                "selected_options": ["Python", "Go"],
                "custom_input": "and some Rust",
                "timed_out": False,
            },
        ],
    }
    assert ask_state(_ask(cancelled=True)) == {"ask_id": "ask_1", "state": "withdrawn"}


async def test_a_waiter_wakes_on_the_ending_heard_later() -> None:
    endings = AskEndings()
    waiting = asyncio.ensure_future(endings.wait("ask_1"))
    await asyncio.sleep(0)
    assert not waiting.done()
    assert endings.heard(_ask()) is None  # still open: nothing ends
    await asyncio.sleep(0)
    assert not waiting.done()
    endings.heard(_answered())
    assert (await asyncio.wait_for(waiting, 1)).name == "answered"
    assert endings.waiting == 0


async def test_an_ending_heard_before_anyone_waits_is_kept() -> None:
    endings = AskEndings()
    endings.heard(_answered())
    assert (await asyncio.wait_for(endings.wait("ask_1"), 1)).name == "answered"


async def test_the_first_ending_heard_is_the_ending() -> None:
    endings = AskEndings()
    endings.ended(withdrawn_by_me("ask_1"))
    endings.heard(_answered())
    got = endings.get("ask_1")
    assert got is not None and got.name == "withdrawn"


async def test_a_waiter_that_gives_up_leaves_nothing_behind() -> None:
    endings = AskEndings()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(endings.wait("ask_1"), 0.01)
    assert endings.waiting == 0


async def test_kept_endings_are_bounded() -> None:
    endings = AskEndings(kept=3)
    for i in range(10):
        endings.ended(withdrawn_by_me(f"ask_{i}"))
    assert len(endings) == 3
    assert endings.get("ask_0") is None and endings.get("ask_9") is not None


# --- what on the delivery lane ends an ask --------------------------------------------

SCOUT = "acc-scout"


def _event(kind: str, author: str, *blocks: pb.MessageBlock) -> pb.Event:
    message = pb.Message(message_id="m1", author_account_id=author, blocks=blocks)
    event = pb.Event(event_id=7)
    getattr(event, kind).message.CopyFrom(message)
    return event


def test_the_lane_ends_an_ask_by_its_answer_message_or_its_update() -> None:
    endings = AskEndings()
    answer = pb.AskAnswerBlock(ask_id="ask_1", questions=_answered().questions)
    heard = endings.hear(
        _event("message_posted", "acc-ada", pb.MessageBlock(ask_answer=answer)), SCOUT
    )
    assert [(e.name, e.ask.ask_id) for e in heard] == [("answered", "ask_1")]

    declined = _ended(pb.ASK_ENDING_KIND_DECLINED, actor_handle="ada")
    declined.ask_id = "ask_2"
    heard = endings.hear(_event("message_updated", SCOUT, pb.MessageBlock(ask=declined)), SCOUT)
    assert [(e.name, e.ask.ask_id) for e in heard] == [("declined", "ask_2")]
    assert endings.get("ask_2") is not None


def test_a_standing_answers_name_heard_after_its_answer_message_is_kept() -> None:
    """The answer message can reach the lane before the post's reply, which
    alone says the ask was answered by a standing answer: the ending names it."""
    endings = AskEndings()
    answer = pb.AskAnswerBlock(ask_id="ask_1", questions=_answered().questions)
    endings.hear(_event("message_posted", "acc-ada", pb.MessageBlock(ask_answer=answer)), SCOUT)
    by_rule = _answered()
    by_rule.ending.CopyFrom(
        pb.AskEnding(
            kind=pb.ASK_ENDING_KIND_ANSWERED, actor_handle="ada", standing_answer_id="rule-1"
        )
    )
    endings.heard(by_rule)
    got = endings.get("ask_1")
    assert got is not None and got.name == "answered"
    assert got.ask.ending.standing_answer_id == "rule-1"


def test_the_lane_ends_an_inbox_ask_by_its_items_change() -> None:
    endings = AskEndings()
    answer = pb.AskAnswerBlock(ask_id="ask_1", questions=_answered().questions, receipt="r1")
    answered = pb.Event(event_id=3)
    answered.inbox_item_changed.agent_account_id = SCOUT
    answered.inbox_item_changed.message.author_account_id = "acc-ada"
    answered.inbox_item_changed.message.blocks.add(ask_answer=answer)
    heard = endings.hear(answered, SCOUT)
    assert [(e.name, e.ask.ask_id, e.ask.ending.receipt) for e in heard] == [
        ("answered", "ask_1", "r1")
    ]
    closed = _ended(pb.ASK_ENDING_KIND_WITHDRAWN_BY_PERSON, actor_handle="ada")
    closed.ask_id = "ask_2"
    event = pb.Event(event_id=4)
    event.inbox_item_changed.agent_account_id = SCOUT
    event.inbox_item_changed.message.author_account_id = SCOUT
    event.inbox_item_changed.message.blocks.add(ask=closed)
    heard = endings.hear(event, SCOUT)
    assert [(e.name, e.ask.ask_id) for e in heard] == [("withdrawn_by_person", "ask_2")]
    # Another agent's inbox: not this agent's to hear.
    event.inbox_item_changed.agent_account_id = "acc-other"
    closed.ask_id = "ask_3"
    event.inbox_item_changed.message.blocks[0].ask.CopyFrom(closed)
    assert endings.hear(event, SCOUT) == []


def test_the_lane_ignores_what_ends_no_ask_of_this_agent() -> None:
    endings = AskEndings()
    text = pb.MessageBlock(text=pb.TextBlock(text="hello"))
    still_open = pb.MessageBlock(ask=_ask())
    others = _ended(pb.ASK_ENDING_KIND_DECLINED)
    assert endings.hear(_event("message_posted", "acc-ada", text), SCOUT) == []
    assert endings.hear(_event("message_updated", SCOUT, still_open), SCOUT) == []
    # Another agent's ask, updated: not this agent's to hear.
    assert (
        endings.hear(_event("message_updated", "acc-other", pb.MessageBlock(ask=others)), SCOUT)
        == []
    )
    assert endings.hear(pb.Event(event_id=9), SCOUT) == []
    assert len(endings) == 0
