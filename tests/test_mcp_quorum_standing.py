"""Quorum asks and standing answers as an MCP client sees them through
compass-mcp: check_ask says k of K while a quorum ask is open, `ask`
returns every person's answers at the ending, and an ask a standing answer
answers at its post returns at once, saying whose rule answered."""

from __future__ import annotations

import asyncio
import datetime
import pathlib
from typing import Any

from compass.v1 import comms_pb2 as pb
from tests.test_mcp_server import QUESTIONS, mcp_for, text_of
from tests.world import World

ANSWERS = [
    pb.AskQuestionAnswer(question_id="1", chosen_option_ids=["0"]),
    pb.AskQuestionAnswer(question_id="2", chosen_option_ids=["0", "1"], custom_text="and a CLI"),
]


async def test_check_ask_shows_k_of_k_and_ask_returns_every_answer(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    w = api_world
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ada, grace = (w.tokens[p.account_id] for p in (w.human, w.other_human))
    async with mcp_for(server, w, tmp_path) as m:
        waiting = m.ask_task(
            {
                "questions": QUESTIONS,
                "answerer_account_ids": [str(w.human.account_id), str(w.other_human.account_id)],
                "quorum": 2,
            }
        )
        ask_id = await m.posted_ask_id()
        await m.grpc.call(
            "RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id, answers=ANSWERS), grace
        )
        opened = await m.call("check_ask", {"ask_id": ask_id})
        await asyncio.sleep(0.3)
        assert not waiting.done(), "a vote short of the quorum ended the wait"
        await m.grpc.call(
            "RespondToAsk",
            pb.RespondToAskRequest(
                ask_id=ask_id,
                answers=[
                    pb.AskQuestionAnswer(question_id="1", chosen_option_ids=["1"]),
                    pb.AskQuestionAnswer(question_id="2", chosen_option_ids=["2"]),
                ],
            ),
            ada,
        )
        result = await asyncio.wait_for(waiting, 30)

    said = text_of(opened)
    assert said.startswith(f"Ask {ask_id} is open: 1 of 2 answers so far.")
    assert "It needs 2 of their answers; a decline by any of them ends it." in said
    assert "So far 1 of 2: @grace answered." in said
    quorum = opened.structured_content["quorum"]  # type: ignore[index]
    assert (quorum["required"], quorum["answered"]) == (2, 1)
    assert [(v["by"], v["kind"]) for v in quorum["votes"]] == [("grace", "answer")]
    assert quorum["votes"][0]["answers"][0]["selected_options"] == ["PostgreSQL"]

    assert not result.is_error, text_of(result)
    assert text_of(result) == (
        f"Ask {ask_id} was answered by 2 people, as many as it needed:\n"
        "- @grace:\n"
        "  - Which database should the service use? → PostgreSQL\n"
        "  - Which clients ship first? → Python, Go; other: and a CLI\n"
        "- @ada:\n"
        "  - Which database should the service use? → SQLite\n"
        "  - Which clients ship first? → TypeScript"
    )
    votes = result.structured_content["quorum"]["votes"]  # type: ignore[index]
    assert [v["by"] for v in votes] == ["grace", "ada"]
    assert votes[1]["answers"][1]["selected_options"] == ["TypeScript"]


async def test_an_ask_a_standing_answer_answers_returns_at_once(
    server: Any, api_world: World, tmp_path: pathlib.Path
) -> None:
    w = api_world
    ada = w.tokens[w.human.account_id]
    async with mcp_for(server, w, tmp_path) as m:
        first = m.ask_task({"questions": QUESTIONS})
        ask_id = await m.posted_ask_id()
        terms = pb.StandingAnswerTerms()
        terms.duration.FromTimedelta(datetime.timedelta(days=1))
        made = await m.grpc.call(
            "RespondToAsk",
            pb.RespondToAskRequest(ask_id=ask_id, answers=ANSWERS, standing=terms),
            ada,
        )
        rule = made.standing_answer.standing_answer_id
        assert not (await asyncio.wait_for(first, 30)).is_error

        result = await asyncio.wait_for(m.call("ask", {"questions": QUESTIONS}), 10)
        assert await m.scouts_state() != pb.PRESENCE_STATE_WAITING

    said = text_of(result)
    assert said.startswith("Ask ") and f" was answered by @ada's standing answer {rule}:" in said
    assert "- Which clients ship first? → Python, Go; other: and a CLI" in said
    assert result.structured_content is not None
    assert result.structured_content["standing_answer_id"] == rule
    assert result.structured_content["ended_by"] == "ada"
