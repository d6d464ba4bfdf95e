"""How an ask ended, in words, and the endings one agent session hears of."""

from __future__ import annotations

import asyncio

import pytest

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


def test_today_an_ask_ends_by_an_answer_or_a_withdrawal() -> None:
    assert [kind.name for kind in ENDINGS] == ["withdrawn", "answered"]
    assert ending_of(_ask()) is None


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
