"""The agent kit's comms tools on quorum asks and standing answers: a post
names how many must answer, comms_get_ask says k of K while open and every
person's answers at the end, and a post a standing answer answers says so
in its own result."""

from __future__ import annotations

import datetime

from compass.v1 import comms_pb2 as pb
from tests.test_agentkit_tools import NATIVE_ASK, Lane, another_ask, ask_id_of, lane  # noqa: F401


async def test_a_quorum_ask_through_the_kit(lane: Lane) -> None:  # noqa: F811
    w = lane.w
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    named = [str(w.human.account_id), str(w.other_human.account_id)]
    text = await lane.run(
        "comms_post_ask",
        {
            **NATIVE_ASK,
            "channel_id": lane.channel,
            "answerer_account_ids": named,
            "quorum": 2,
            "declines_count_against_quorum": True,
        },
    )
    assert "It needs 2 of their answers; a decline counts against that." in text
    ask_id = ask_id_of(text)
    assert lane.sent.requests[-1].post_ask.ask.quorum == 2
    await lane.grpc.call(
        "DeclineAsk",
        pb.DeclineAskRequest(ask_id=ask_id, reason="away"),
        w.tokens[w.other_human.account_id],
    )
    opened = await lane.run("comms_get_ask", {"ask_id": ask_id})
    # With one decline of two named, two answers can no longer come: it ended.
    assert opened.startswith(f"Ask {ask_id} was declined by @grace")

    text = await lane.run(
        "comms_post_ask",
        {**NATIVE_ASK, "channel_id": lane.channel, "answerer_account_ids": named, "quorum": 2},
    )
    ask_id = ask_id_of(text)
    await lane.ada_answers(ask_id)
    opened = await lane.run("comms_get_ask", {"ask_id": ask_id})
    assert opened.startswith(f"Ask {ask_id} is open: 1 of 2 answers so far.")
    assert "So far 1 of 2: @ada answered." in opened
    listed = await lane.run("comms_list_messages", {"channel_id": lane.channel})
    assert "needs 2 answers, 1 so far" in listed


async def test_a_post_a_standing_answer_answers_says_so(lane: Lane) -> None:  # noqa: F811
    asked = another_ask(lane.channel)
    ask_id = ask_id_of(await lane.run("comms_post_ask", asked))
    terms = pb.StandingAnswerTerms()
    terms.duration.FromTimedelta(datetime.timedelta(hours=2))
    made = await lane.as_ada(
        "RespondToAsk",
        pb.RespondToAskRequest(
            ask_id=ask_id,
            answers=[
                pb.AskQuestionAnswer(question_id="db", chosen_option_ids=["0"]),
                pb.AskQuestionAnswer(question_id="langs", custom_text="Rust"),
            ],
            standing=terms,
        ),
    )
    rule = made.standing_answer.standing_answer_id
    text = await lane.run("comms_post_ask", asked)
    assert f"was answered by @ada's standing answer {rule}:" in text
    assert "- Which database? → PostgreSQL" in text
    assert "arrives in a later turn" not in text
