"""Quorum asks and standing answers on webhooks: a vote that doesn't end a
quorum ask is an ask.voted delivery with the vote and the progress; the
ending carries every vote; an ask a standing answer answered says which
rule and through which surface; Slack cards say how many must answer and
follow each vote and the ending."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from typing import Any

import pytest

from compass.v1 import admin_pb2 as ad
from compass_agentkit.receipts import fetch_jwks, verify_receipt
from compass_server.store.types import Answer, StandingTerms
from tests.receiver import Receiver
from tests.servers import GrpcClient
from tests.test_webhooks import (  # noqa: F401
    create,
    hooks,
    receiver,
    rpc,
    verified,
    w,
)
from tests.test_webhooks_slack import slack_message, texts
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

PG = [Answer("db", ("pg",)), Answer("langs", ("py",))]
MY = [Answer("db", ("my",)), Answer("langs", (), "only Rust")]


async def quorum_of_two(w: World) -> str:  # noqa: F811
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ask = dataclasses.replace(
        two_question_ask(),
        answerer_ids=(w.human.account_id, w.other_human.account_id),
        quorum=2,
    )
    message = await w.post_ask(w.agent, ask)
    (posted,) = message.blocks
    return posted.ask_id  # type: ignore[union-attr]


async def jwks_of(hooks: Any) -> dict[str, Any]:  # noqa: F811
    return await asyncio.to_thread(fetch_jwks, f"http://127.0.0.1:{hooks.http_port}")


async def test_votes_and_the_ending_of_a_quorum_ask_arrive_with_every_vote(
    hooks: Any,  # noqa: F811
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    made = await create(rpc, w, receiver.url())
    ask_id = await quorum_of_two(w)
    await w.store.answer_ask(w.other_human, ask_id, MY)
    await w.store.answer_ask(w.human, ask_id, PG)
    got = [verified(made.secret, r) for r in await receiver.wait_for(3)]
    seen = sorted(got, key=lambda p: p["data"]["sequence"])
    assert [p["type"] for p in seen] == ["ask.posted", "ask.voted", "ask.answered"]
    posted, voted, answered = (p["data"]["ask"] for p in seen)
    assert posted["quorum"] == {
        "required": 2,
        "declines_count_against": False,
        "answered": 0,
        "votes": [],
    }
    assert voted["state"] == "open" and voted["quorum"]["answered"] == 1
    vote = seen[1]["data"]["vote"]
    assert vote["by"]["handle"] == "grace" and vote["kind"] == "answer"
    assert vote["answers"] == [
        {"question_id": "db", "chosen_option_ids": ["my"], "chosen_labels": ["MySQL"],
         "custom_text": ""},
        {"question_id": "langs", "chosen_option_ids": [], "chosen_labels": [],
         "custom_text": "only Rust"},
    ]  # fmt: skip
    assert answered["state"] == "answered" and answered["ending"]["by"]["handle"] == "ada"
    votes = answered["quorum"]["votes"]
    assert [(v["by"]["handle"], v["answers"][0]["chosen_labels"]) for v in votes] == [
        ("grace", ["MySQL"]),
        ("ada", ["PostgreSQL"]),
    ]
    # The ending's receipt carries both answers; a vote, with no ending, none.
    assert voted["ending"] is None
    proof = verify_receipt(answered["ending"]["receipt"], await jwks_of(hooks))
    assert (proof.ask_id, proof.ending, proof.by_handle) == (ask_id, "answered", "ada")
    assert [(a["by"]["handle"], a["questions"][0]["chosen"]) for a in proof.answers] == [
        ("grace", ["my"]),
        ("ada", ["pg"]),
    ]


async def test_an_ask_a_standing_answer_answered_names_the_rule(
    hooks: Any,  # noqa: F811
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    first = await w.post_ask()
    (ask,) = first.blocks
    hour = StandingTerms(datetime.timedelta(hours=1))
    done = await w.store.answer(w.human, ask.ask_id, PG, standing=hour)  # type: ignore[union-attr]
    assert done.standing_answer is not None
    made = await create(rpc, w, receiver.url())
    await w.post_ask()
    got = [verified(made.secret, r) for r in await receiver.wait_for(2)]
    seen = sorted(got, key=lambda p: p["data"]["sequence"])
    assert [p["type"] for p in seen] == ["ask.posted", "ask.answered"]
    assert seen[0]["data"]["ask"]["state"] == "open"
    ending = seen[1]["data"]["ask"]["ending"]
    assert ending["surface"] == "standing_answer"
    assert ending["standing_answer_id"] == str(done.standing_answer.standing_answer_id)
    assert ending["by"]["handle"] == "ada"
    proof = verify_receipt(ending["receipt"], await jwks_of(hooks))
    assert proof.claims["rule"] == ending["standing_answer_id"]
    assert [a["rule"] for a in proof.answers] == [ending["standing_answer_id"]]


async def test_slack_cards_say_how_many_must_answer_and_follow_each_vote(
    rpc: GrpcClient,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    w: World,  # noqa: F811
) -> None:
    await create(rpc, w, receiver.url("/services/T1/B1/q"), kind=ad.WEBHOOK_KIND_SLACK)
    ask_id = await quorum_of_two(w)
    await w.store.answer_ask(w.other_human, ask_id, MY)
    await w.store.answer_ask(w.human, ask_id, PG)
    got = [slack_message(r) for r in await receiver.wait_for(3)]
    card = next(m for m in got if "Answer in Compass" in json.dumps(m))
    assert texts(card)[0].splitlines()[1] == "Needs 2 answers of ada, grace; a decline ends it."
    vote = next(m for m in got if m["text"].startswith("grace answered"))
    assert texts(vote)[0] == "*grace answered*\n1 of 2 answers so far"
    ended = next(m for m in got if m["text"].startswith("Answered"))
    assert texts(ended)[0].splitlines() == [
        "*Answered by grace, ada (2 of 2)*",
        "*grace*: Which database? → MySQL; Which languages? → “only Rust”",
        "*ada*: Which database? → PostgreSQL; Which languages? → Python",
    ]
