"""Quorum asks and standing answers with receipts, the chained history and
posting once: a quorum's receipt carries every one of its K answers and a
standing answer's its rule, and the kit verifies both; verify-history names
an edited vote; an ask that ended at its post, or differs in its quorum,
is never an identical open ask."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import uuid
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_agentkit.receipts import ReceiptError, verify_receipt
from compass_server.api import mapping as wire
from compass_server.receipts import Receipts
from compass_server.receipts.keys import ReceiptKeys, new_key_file
from compass_server.store import Conflict
from compass_server.store.posts import PostOutcome
from compass_server.store.types import Actor, Answer, Ask, AskChange, Message
from tests.test_admin_cli import cli
from tests.test_history_chain import _cli_failing, _sql
from tests.test_quorum_asks import MY, PG, ask_of, people, quorum_ask
from tests.test_standing_answers import stand
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

ISSUER = "https://compass.example.com"


def _questions(answers: list[Answer]) -> list[dict[str, Any]]:
    return [
        {"id": a.question_id, "chosen": list(a.chosen_option_ids), "text": a.custom_text}
        for a in answers
    ]


def _by(message: Message, person: Actor) -> dict[str, str]:
    vote = ask_of(message).vote_of(person.account_id)
    assert vote is not None
    return {"id": str(person.account_id), "handle": vote.handle}


def _signed(tmp_path: pathlib.Path) -> tuple[Receipts, dict[str, Any]]:
    new_key_file(tmp_path)
    receipts = Receipts(ReceiptKeys.load(tmp_path), ISSUER)
    return receipts, json.loads(receipts.jwks())


def _on_wire(message: Message) -> pb.Ask:
    return wire.message_to_wire(message).blocks[0].ask


async def test_a_quorums_receipt_carries_every_answer_and_the_kit_verifies_it(
    world: World, tmp_path: pathlib.Path
) -> None:
    w = world
    receipts, jwks = _signed(tmp_path)
    ada, grace, cy = await people(w, 3)
    rule = await stand(w, ada, PG)
    # ada's rule votes at the post; cy's answer is the second of two.
    posted = await w.store.append_message(
        w.agent, w.channel.channel_id, [quorum_ask([ada, grace, cy], 2)]
    )
    asked = ask_of(posted)
    assert len(asked.quorum_votes) == 1
    ended, _ = await w.store.answer_ask(cy, asked.ask_id, MY)
    receipt = receipts.sign(w.workspace_id, ended.author_id, ask_of(ended))

    delivered = _on_wire(ended)
    proof = verify_receipt(receipt, jwks, ask=delivered)
    assert proof.answers == [
        {"by": _by(ended, ada), "rule": rule, "questions": _questions(PG)},
        {"by": _by(ended, cy), "rule": None, "questions": _questions(MY)},
    ]
    assert (proof.ending, proof.by_id, proof.claims["rule"]) == (
        "answered",
        str(cy.account_id),
        None,
    )
    # The digest of the questions is the asked content's, as the agent posted it.
    verify_receipt(receipt, jwks, ask=_on_wire(posted))

    # A delivered ask whose votes say otherwise is refused.
    other = pb.Ask()
    other.CopyFrom(delivered)
    other.quorum_votes[1].answers[0].chosen_option_ids[:] = ["pg"]
    with pytest.raises(ReceiptError, match="answers"):
        verify_receipt(receipt, jwks, ask=other)
    other.CopyFrom(delivered)
    other.quorum_votes[0].standing_answer_id = ""
    with pytest.raises(ReceiptError, match="answers"):
        verify_receipt(receipt, jwks, ask=other)
    other.CopyFrom(delivered)
    del other.quorum_votes[0]
    with pytest.raises(ReceiptError, match="answers"):
        verify_receipt(receipt, jwks, ask=other)

    # Two rules reach the quorum at the post: the ending is the second rule's.
    grace_rule = await stand(w, grace, MY)
    at_post = await w.store.append_message(
        w.agent, w.channel.channel_id, [quorum_ask([ada, grace, cy], 2)]
    )
    proof = verify_receipt(
        receipts.sign(w.workspace_id, at_post.author_id, ask_of(at_post)),
        jwks,
        ask=_on_wire(at_post),
    )
    assert proof.claims["rule"] == grace_rule
    assert [(a["by"]["id"], a["rule"]) for a in proof.answers] == [
        (str(ada.account_id), rule),
        (str(grace.account_id), grace_rule),
    ]


async def test_a_standing_answers_receipt_names_its_rule(
    world: World, tmp_path: pathlib.Path
) -> None:
    w = world
    receipts, jwks = _signed(tmp_path)
    rule = await stand(w, w.human, PG)
    answered = await w.store.append_message(w.agent, w.channel.channel_id, [two_question_ask()])
    ask = ask_of(answered)
    assert ask.ending is not None and str(ask.ending.standing_answer_id) == rule
    receipt = receipts.sign(w.workspace_id, answered.author_id, ask)
    delivered = _on_wire(answered)
    proof = verify_receipt(receipt, jwks, ask=delivered)
    assert proof.claims["rule"] == rule
    assert proof.claims["surface"] == "standing_answer"
    assert proof.answers == [
        {
            "by": {"id": str(w.human.account_id), "handle": "ada"},
            "rule": rule,
            "questions": _questions(PG),
        }
    ]
    # An ending that names another rule, or none, is not this receipt's.
    delivered.ending.standing_answer_id = str(uuid.uuid4())
    with pytest.raises(ReceiptError, match="rule"):
        verify_receipt(receipt, jwks, ask=delivered)
    delivered.ending.standing_answer_id = ""
    with pytest.raises(ReceiptError, match="rule"):
        verify_receipt(receipt, jwks, ask=delivered)


async def test_verify_history_names_an_edited_vote(world: World, database_url: str) -> None:
    w = world
    ada, grace, cy = await people(w, 3)
    rule = await stand(w, ada, PG)
    other_rule = await stand(w, grace, MY)
    ask = ask_of(
        await w.store.append_message(
            w.agent,
            w.channel.channel_id,
            [quorum_ask([ada, grace, cy], 3, count_against=True)],
        )
    )
    # Both rules voted at the post; cy declines, which ends it.
    assert [v.standing_answer_id for v in ask.quorum_votes] == [
        uuid.UUID(rule),
        uuid.UUID(other_rule),
    ]
    await w.store.decline_ask(cy, ask.ask_id, "no")
    history = await w.store.ask_history(ada, ask.ask_id)
    assert [e.change for e in history.entries] == [
        AskChange.POSTED,
        AskChange.QUORUM_ANSWER,
        AskChange.QUORUM_ANSWER,
        AskChange.DECLINED,
    ]
    assert cli(database_url, "verify-history", "--workspace", str(w.workspace_id))["holds"]

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT id FROM ask_history WHERE ask_id = %s AND kind = 'quorum_answer' "
            "AND actor_id = %s",
            (ask.ask_id, ada.account_id),
        )
        (row,) = await cur.fetchall()
    ada_vote = int(row[0])
    # The vote said ada's rule answered; now it says grace's did.
    await _sql(
        database_url,
        "UPDATE ask_history SET standing_answer_id = %s WHERE id = %s",
        uuid.UUID(other_rule),
        ada_vote,
    )
    out = _cli_failing(database_url, w)
    assert (out["first_altered"]["entry_id"], out["first_altered"]["kind"]) == (
        ada_vote,
        "quorum_answer",
    )
    # Put back, it holds; another person's name on the vote does not.
    await _sql(
        database_url,
        "UPDATE ask_history SET standing_answer_id = %s WHERE id = %s",
        uuid.UUID(rule),
        ada_vote,
    )
    assert cli(database_url, "verify-history", "--workspace", str(w.workspace_id))["holds"]
    await _sql(
        database_url,
        "UPDATE ask_history SET actor_id = %s WHERE id = %s",
        cy.account_id,
        ada_vote,
    )
    assert _cli_failing(database_url, w)["first_altered"]["entry_id"] == ada_vote


async def _prints(url: str, ask_id: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT count(*) FROM ask_prints WHERE ask_id = %s", (ask_id,))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _post(w: World, ask: Ask, **how: Any) -> tuple[Ask, PostOutcome]:
    posted = await w.store.post(w.agent, w.channel.channel_id, [ask], **how)
    return ask_of(posted.message), posted.outcome


async def test_an_ask_a_rule_answered_at_its_post_is_not_open(
    world: World, database_url: str
) -> None:
    w = world
    rule = await stand(w, w.human, PG)
    first, outcome = await _post(w, two_question_ask())
    assert outcome is PostOutcome.POSTED and first.answered
    assert await _prints(database_url, first.ask_id) == 0
    # The same ask again is a new ask, which the rule answers too.
    again, outcome = await _post(w, two_question_ask())
    assert outcome is PostOutcome.POSTED and again.ask_id != first.ask_id and again.answered
    # Once the rule is revoked, the same ask stays open, and is then found open.
    await w.store.revoke_standing_answer(w.human, uuid.UUID(rule))
    opened, outcome = await _post(w, two_question_ask())
    assert outcome is PostOutcome.POSTED and opened.is_open
    found, outcome = await _post(w, two_question_ask())
    assert (outcome, found.ask_id) == (PostOutcome.ALREADY_OPEN, opened.ask_id)

    # A vote leaves a quorum ask open (and found); its ending does not.
    ada, grace, cy = await people(w, 3)
    vote_first = quorum_ask([ada, grace, cy], 2)
    quorum, _ = await _post(w, vote_first)
    await w.store.answer_ask(grace, quorum.ask_id, MY)
    found, outcome = await _post(w, vote_first)
    assert (outcome, found.ask_id) == (PostOutcome.ALREADY_OPEN, quorum.ask_id)
    await w.store.answer_ask(cy, quorum.ask_id, PG)
    assert await _prints(database_url, quorum.ask_id) == 0
    fresh, outcome = await _post(w, vote_first)
    assert outcome is PostOutcome.POSTED and fresh.ask_id != quorum.ask_id


async def test_identical_means_the_same_quorum_too(world: World) -> None:
    w = world
    ada, grace, cy = await people(w, 3)
    named = [ada, grace, cy]
    one, _ = await _post(w, quorum_ask(named, 1))
    seen = {one.ask_id}
    for other in (
        quorum_ask(named, 2),
        quorum_ask(named, 2, count_against=True),
        quorum_ask(named[:2], 2),
        dataclasses.replace(two_question_ask(), answerer_ids=tuple(p.account_id for p in named)),
    ):
        posted, outcome = await _post(w, other)
        assert outcome is PostOutcome.POSTED and posted.ask_id not in seen, other
        seen.add(posted.ask_id)
        found, outcome = await _post(w, other)
        assert (outcome, found.ask_id) == (PostOutcome.ALREADY_OPEN, posted.ask_id)
    # A key names one post: the same key with another quorum is another post.
    await _post(w, quorum_ask(named, 2), client_key="k-1", allow_identical=True)
    with pytest.raises(Conflict, match="client_key 'k-1'"):
        await _post(w, quorum_ask(named, 3), client_key="k-1", allow_identical=True)
