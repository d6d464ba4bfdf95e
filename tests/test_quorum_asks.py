"""Quorum asks: an ask that names its answerers and needs K of them.

Each named person's answer is recorded (visible to everyone who sees the
ask, final for them) until the K-th ends the ask, whose one ask_answer
message carries all K answers. A decline ends it unless declines count
against the quorum; then it ends declined only when K can't be reached.
Withdraws and expiry end it as any ask, its votes kept. 2K people answering
at once record exactly K answers and one ending; the others hear
already_exists naming it; the agent hears the ending once."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid

import psycopg
import pytest

from compass_server.events.reach import Participations, Reach
from compass_server.relay.gateway import hears
from compass_server.store import Conflict, InvalidArgument, Store
from compass_server.store.inbox import InboxStore
from compass_server.store.types import (
    Actor,
    Answer,
    Ask,
    AskAnswerBlock,
    AskChange,
    EndingKind,
    Event,
    EventKind,
    Message,
    PresenceState,
    VoteKind,
)
from tests.test_coalesced_writes import lock_message, queued_behind
from tests.test_deadline_cutoff import past, quiet, quiet_url, stored_ask  # noqa: F401
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

PG = [Answer("db", ("pg",)), Answer("langs", ("py",))]
MY = [Answer("db", ("my",)), Answer("langs", ("go", "ts"), "and Rust")]


async def people(w: World, n: int) -> list[Actor]:
    """n people in the world's channel: ada, grace, then new ones."""
    found = [w.human, w.other_human]
    while len(found) < n:
        found.append(await w.add_account(f"p{len(found)}-{uuid.uuid4().hex[:6]}"))
    for person in found[1:n]:
        await w.store.add_channel_member(w.human, w.channel.channel_id, person.account_id)
    return found[:n]


def quorum_ask(
    named: list[Actor], k: int, *, count_against: bool = False, seconds: float | None = None
) -> Ask:
    return dataclasses.replace(
        two_question_ask(),
        answerer_ids=tuple(p.account_id for p in named),
        quorum=k,
        declines_count_against_quorum=count_against,
        timeout=datetime.timedelta(seconds=seconds) if seconds else None,
    )


def ask_of(message: Message) -> Ask:
    return next(b for b in message.blocks if isinstance(b, Ask))


async def post(w: World, ask: Ask) -> tuple[Message, str]:
    message = await w.store.append_message(w.agent, w.channel.channel_id, [ask])
    return message, ask_of(message).ask_id


async def answer_messages(w: World, ask_id: str) -> list[AskAnswerBlock]:
    page = await w.store.list_messages(w.human, w.channel.channel_id, 200, "")
    return [
        b
        for m in page.items
        for b in m.blocks
        if isinstance(b, AskAnswerBlock) and b.ask_id == ask_id
    ]


async def heard_by_agent(w: World, mark: int, ask_id: str) -> list[Event]:
    """What the agent's delivery lane carries about the ask since `mark`."""
    lane = hears(w.agent.account_id, await Reach.of(Participations(w.store), w.agent))
    events = await w.store.read_events(w.human, mark, 500)
    return [
        e
        for e in events
        if lane(e)
        and e.message is not None
        and (
            e.message.ask(ask_id) is not None
            or any(isinstance(b, AskAnswerBlock) and b.ask_id == ask_id for b in e.message.blocks)
        )
    ]


async def waiting(w: World) -> bool:
    (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
    return presence.state is PresenceState.WAITING


async def test_a_quorum_ask_ends_at_the_kth_answer_carrying_every_answer(world: World) -> None:
    w = world
    ada, grace, cy = await people(w, 3)
    message, ask_id = await post(w, quorum_ask([ada, grace, cy], 2))
    mark = await w.store.last_event_id(w.human)

    first, none = await w.store.answer_ask(ada, ask_id, PG)
    assert none is None
    ask = ask_of(first)
    assert ask.is_open and ask.ending is None and not ask.answered
    assert [(v.account_id, v.kind, v.answers) for v in ask.quorum_votes] == [
        (ada.account_id, VoteKind.ANSWER, tuple(PG))
    ]
    assert ask.quorum_votes[0].handle == "ada"
    # Visible to the others, and to the agent's reads; the agent still waits.
    seen = (await w.store.get_message(grace, message.message_id)).ask(ask_id)
    assert seen is not None and seen.quorum_answers == 1
    assert await waiting(w)
    assert await answer_messages(w, ask_id) == []
    assert await heard_by_agent(w, mark, ask_id) == []
    history = await w.store.ask_history(grace, ask_id)
    assert [e.change for e in history.entries] == [AskChange.POSTED, AskChange.QUORUM_ANSWER]
    assert history.may_answer
    assert not (await w.store.ask_history(ada, ask_id)).may_answer

    ended, answer = await w.store.answer_ask(cy, ask_id, MY)
    ask = ask_of(ended)
    assert ask.ending is not None and ask.ending.kind is EndingKind.ANSWERED
    assert ask.ending.actor_id == cy.account_id and ask.answered
    assert [(v.account_id, v.answers) for v in ask.quorum_votes] == [
        (ada.account_id, tuple(PG)),
        (cy.account_id, tuple(MY)),
    ]
    assert answer is not None and answer.author_id == cy.account_id
    (block,) = await answer_messages(w, ask_id)
    assert [(v.account_id, v.answers) for v in block.quorum_votes] == [
        (ada.account_id, tuple(PG)),
        (cy.account_id, tuple(MY)),
    ]
    assert not await waiting(w)
    # One signal to the agent at the ending: the answer message with both answers.
    (told,) = await heard_by_agent(w, mark, ask_id)
    assert told.kind is EventKind.MESSAGE_POSTED
    assert [e.change for e in (await w.store.ask_history(ada, ask_id)).entries] == [
        AskChange.POSTED,
        AskChange.QUORUM_ANSWER,
        AskChange.ANSWERED,
    ]
    with pytest.raises(Conflict, match="already answered"):
        await w.store.answer_ask(grace, ask_id, PG)


async def test_a_vote_is_final_for_its_person(world: World) -> None:
    w = world
    ada, grace, cy = await people(w, 3)
    _, ask_id = await post(w, quorum_ask([ada, grace, cy], 2, count_against=True))
    await w.store.answer_ask(ada, ask_id, PG)
    with pytest.raises(Conflict, match="you already answered"):
        await w.store.answer_ask(ada, ask_id, MY)
    with pytest.raises(Conflict, match="you already answered"):
        await w.store.decline_ask(ada, ask_id, "changed my mind")
    # Even an answer that breaks the rules hears first that the vote is final.
    with pytest.raises(Conflict, match="you already answered"):
        await w.store.answer_ask(ada, ask_id, [Answer("nope")])
    await w.store.decline_ask(grace, ask_id, "not me")
    with pytest.raises(Conflict, match="you already declined"):
        await w.store.answer_ask(grace, ask_id, PG)
    message, _ = await w.store.get_ask(w.human, ask_id)
    assert [(v.account_id, v.kind) for v in ask_of(message).quorum_votes] == [
        (ada.account_id, VoteKind.ANSWER),
        (grace.account_id, VoteKind.DECLINE),
    ]
    assert ask_of(message).quorum_votes[1].reason == "not me"


@pytest.mark.parametrize(
    ("k", "named", "count_against", "said"),
    [
        (3, 2, False, "quorum is 3"),
        (-1, 2, False, "quorum is -1"),
        (1, 0, False, "quorum is 1"),
        (0, 2, True, "no quorum"),
    ],
)
async def test_a_post_with_a_quorum_it_cant_have_is_refused(
    world: World, k: int, named: int, count_against: bool, said: str
) -> None:
    w = world
    who = await people(w, max(named, 1))
    ask = quorum_ask(who[:named], k, count_against=count_against)
    with pytest.raises(InvalidArgument, match=said):
        await w.store.append_message(w.agent, w.channel.channel_id, [ask])


async def test_a_decline_ends_a_quorum_ask_unless_declines_count_against_it(
    world: World,
) -> None:
    w = world
    ada, grace, cy = await people(w, 3)
    # Declines veto: the first one ends it, the votes before it kept.
    _, vetoed = await post(w, quorum_ask([ada, grace, cy], 2))
    await w.store.answer_ask(ada, vetoed, PG)
    message = await w.store.decline_ask(grace, vetoed, "no")
    ask = ask_of(message)
    assert ask.ending is not None and ask.ending.kind is EndingKind.DECLINED
    assert ask.ending.actor_id == grace.account_id and ask.ending.reason == "no"
    assert [v.kind for v in ask.quorum_votes] == [VoteKind.ANSWER, VoteKind.DECLINE]
    assert not await waiting(w)

    # Declines count against: one leaves 2 of 3 reachable, the second doesn't.
    _, counted = await post(w, quorum_ask([ada, grace, cy], 2, count_against=True))
    message = await w.store.decline_ask(grace, counted, "not me")
    assert ask_of(message).is_open and await waiting(w)
    message = await w.store.decline_ask(cy, counted, "nor me")
    ask = ask_of(message)
    assert ask.ending is not None and ask.ending.kind is EndingKind.DECLINED
    assert ask.ending.actor_id == cy.account_id
    assert [e.change for e in (await w.store.ask_history(ada, counted)).entries] == [
        AskChange.POSTED,
        AskChange.QUORUM_DECLINE,
        AskChange.DECLINED,
    ]

    # A decline between the answers leaves the quorum to the rest.
    _, reached = await post(w, quorum_ask([ada, grace, cy], 2, count_against=True))
    await w.store.answer_ask(ada, reached, PG)
    await w.store.decline_ask(grace, reached, "")
    ended, answer = await w.store.answer_ask(cy, reached, MY)
    assert ask_of(ended).answered and answer is not None
    (block,) = await answer_messages(w, reached)
    assert [v.account_id for v in block.quorum_votes] == [ada.account_id, cy.account_id]


async def test_withdraws_end_a_quorum_ask_with_its_votes_kept(world: World) -> None:
    w = world
    ada, grace = await people(w, 2)
    for withdraw in (
        lambda a: w.store.cancel_ask(w.agent, a),
        lambda a: w.store.withdraw_ask(w.human, a),
    ):
        _, ask_id = await post(w, quorum_ask([ada, grace], 2))
        await w.store.answer_ask(grace, ask_id, PG)
        message, changed = await withdraw(ask_id)
        ask = ask_of(message)
        assert changed and ask.cancelled
        assert [v.account_id for v in ask.quorum_votes] == [grace.account_id]
        with pytest.raises(Conflict, match="already withdrawn"):
            await w.store.answer_ask(ada, ask_id, PG)
        assert await answer_messages(w, ask_id) == []
        assert not await waiting(w)


async def test_a_vote_at_or_after_the_deadline_expires_the_quorum_ask(
    quiet: World,  # noqa: F811
    quiet_url: str,  # noqa: F811
) -> None:
    w = quiet
    ada, grace, cy = await people(w, 3)
    message, ask_id = await post(w, quorum_ask([ada, grace, cy], 2, seconds=0.3))
    await w.store.answer_ask(ada, ask_id, PG)
    await past(message)
    with pytest.raises(Conflict, match="already expired"):
        await w.store.answer_ask(grace, ask_id, PG)
    stored = await stored_ask(quiet_url, message.message_id)
    assert stored["ending"]["kind"] == "expired"
    assert [v["account_id"] for v in stored["quorum_votes"]] == [str(ada.account_id)]
    # The expiry was told and recorded once; the late vote wrote nothing.
    async with await psycopg.AsyncConnection.connect(quiet_url) as conn:
        cur = await conn.execute(
            "SELECT kind FROM ask_history WHERE ask_id = %s ORDER BY id", (ask_id,)
        )
        assert [r[0] for r in await cur.fetchall()] == ["posted", "quorum_answer", "expired"]


@pytest.mark.parametrize("k", [1, 3])
async def test_2k_people_answering_at_once_record_k_answers_and_one_ending(
    world: World, k: int
) -> None:
    w = world
    everyone = await people(w, 2 * k)
    message, ask_id = await post(w, quorum_ask(everyone, k))
    mark = await w.store.last_event_id(w.human)
    results = await asyncio.gather(
        *(w.store.answer_ask(p, ask_id, PG) for p in everyone), return_exceptions=True
    )
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == k, results
    assert all(isinstance(r, Conflict) and "already answered" in r.message for r in refused)
    endings = [r for r in results if not isinstance(r, BaseException) and r[1] is not None]
    assert len(endings) == 1
    ask = (await w.store.get_message(w.human, message.message_id)).ask(ask_id)
    assert ask is not None and ask.answered and len(ask.quorum_votes) == k
    (block,) = await answer_messages(w, ask_id)
    assert len(block.quorum_votes) == k
    heard = await heard_by_agent(w, mark, ask_id)
    assert [e.kind for e in heard] == [EventKind.MESSAGE_POSTED]
    assert not await waiting(w)


async def test_quorum_answers_in_one_coalesced_batch_keep_one_ending(
    world: World, database_url: str, store: Store
) -> None:
    w = world
    everyone = await people(w, 4)
    held, held_id = await post(w, quorum_ask(everyone, 1))
    _, ask_id = await post(w, quorum_ask(everyone, 2))
    first, results = await queued_behind(
        store._endings,
        lambda: store.answer_ask(everyone[0], held_id, PG),
        [(lambda p=p: store.answer_ask(p, ask_id, MY)) for p in everyone],
        lock_message(database_url, held),
    )
    assert first[1] is not None
    outcomes = [
        "refused" if isinstance(r, Conflict) else ("ended" if r[1] is not None else "voted")
        for r in results
    ]
    assert sorted(outcomes) == ["ended", "refused", "refused", "voted"], results
    assert len(await answer_messages(w, ask_id)) == 1


async def test_the_database_keeps_a_vote_final(world: World, database_url: str) -> None:
    w = world
    ada, grace = await people(w, 2)
    message, ask_id = await post(w, quorum_ask([ada, grace], 2))
    await w.store.answer_ask(ada, ask_id, PG)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        with pytest.raises(psycopg.errors.UniqueViolation):
            await conn.execute(
                "INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id)"
                " VALUES (%s, %s, 'quorum_answer', %s)",
                (w.workspace_id, ask_id, ada.account_id),
            )
        await conn.rollback()
        for rewrite in (
            "'{0,ask,quorum_votes}', '[]'",
            "'{0,ask,quorum_votes,0,answers}', '[]'",
            "'{0,ask,quorum}', '1'",
        ):
            with pytest.raises(psycopg.errors.CheckViolation):
                await conn.execute(
                    f"UPDATE messages SET blocks = jsonb_set(blocks, {rewrite}) WHERE id = %s",
                    (message.message_id,),
                )
            await conn.rollback()


async def test_an_inbox_ask_takes_no_quorum(world: World) -> None:
    w = world
    ask = dataclasses.replace(two_question_ask(), quorum=1)
    with pytest.raises(InvalidArgument, match="needs no quorum"):
        await InboxStore(w.store.db).post(w.agent, "k", "t", "body", ask)
