"""The rules of an ask, in the store, against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from compass_server.store import Conflict, InvalidArgument, NotFound, PermissionDenied
from compass_server.store.types import (
    Answer,
    Ask,
    AskAnswerBlock,
    AskOption,
    AskQuestion,
    EventKind,
    Message,
    TextBlock,
)
from tests.world import World, two_question_ask

GOOD = [Answer("db", ("pg",)), Answer("langs", ("py", "go"), "and Rust")]


def only_ask(message: Message) -> Ask:
    asks = [b for b in message.blocks if isinstance(b, Ask)]
    assert len(asks) == 1
    return asks[0]


async def channel_messages(world: World) -> list[Message]:
    page = await world.store.list_messages(world.human, world.channel.channel_id, 200, "")
    return page.items


async def answers_of(world: World, ask_id: str) -> list[Message]:
    return [
        m
        for m in await channel_messages(world)
        if any(isinstance(b, AskAnswerBlock) and b.ask_id == ask_id for b in m.blocks)
    ]


# --- append -------------------------------------------------------------------


async def test_append_mints_one_unique_ask_id_per_ask_block(world: World) -> None:
    message = await world.post_ask(world.agent, two_question_ask(), two_question_ask())
    ids = [b.ask_id for b in message.blocks if isinstance(b, Ask)]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert all(i.startswith("ask_") and len(i) == 36 for i in ids)
    again = await world.store.get_message(world.human, message.message_id)
    assert [b.ask_id for b in again.blocks if isinstance(b, Ask)] == ids


async def test_append_drops_inbound_server_owned_state(world: World) -> None:
    forged = Ask(
        ask_id="ask_chosen_by_client",
        answered=True,
        questions=(
            AskQuestion(
                question_id="q",
                question="Ship it?",
                options=(AskOption("y", "Yes"),),
                chosen_option_ids=("y",),
                custom_text="forged",
                timed_out=True,
            ),
        ),
    )
    message = await world.post_ask(world.agent, forged)
    stored = only_ask(await world.store.get_message(world.human, message.message_id))
    assert stored.ask_id != "ask_chosen_by_client"
    assert not stored.answered and not stored.cancelled
    q = stored.questions[0]
    assert q.chosen_option_ids == () and q.custom_text == "" and not q.timed_out


@pytest.mark.parametrize(
    ("ask", "needle"),
    [
        (Ask(questions=()), "no questions"),
        (Ask(questions=(AskQuestion("", "Q?"),)), "empty question_id"),
        (Ask(questions=(AskQuestion("a", "Q?"), AskQuestion("a", "R?"))), "repeats question_id"),
        (
            Ask(questions=(AskQuestion("a", "Q?", options=(AskOption("x", "X"),) * 2),)),
            "repeats option id",
        ),
        (Ask(questions=(AskQuestion("a", "Q?", options=(AskOption("", "X"),)),)), "empty id"),
    ],
)
async def test_append_rejects_a_malformed_ask_and_writes_nothing(
    world: World, ask: Ask, needle: str
) -> None:
    before = len(await channel_messages(world))
    with pytest.raises(InvalidArgument, match=needle):
        await world.post_ask(world.agent, ask)
    assert len(await channel_messages(world)) == before


@pytest.mark.parametrize("recommended", [1, 5, -1, 2**31 - 1, -(2**31)])
async def test_an_out_of_range_recommendation_is_stored_as_sent(
    world: World, recommended: int
) -> None:
    """Not bounds-checked: out of range only means nothing is recommended."""
    ask = Ask(
        questions=(
            AskQuestion("a", "Q?", options=(AskOption("x", "X"),), recommended=recommended),
            AskQuestion("b", "Free?", recommended=recommended),
        )
    )
    message = await world.post_ask(world.agent, ask)
    stored = only_ask(await world.store.get_message(world.human, message.message_id))
    assert [q.recommended for q in stored.questions] == [recommended, recommended]
    updated, _ = await world.store.answer_ask(
        world.human, stored.ask_id, [Answer("a", ("x",)), Answer("b", (), "yes")]
    )
    assert [q.recommended for q in only_ask(updated).questions] == [recommended, recommended]


async def test_append_refuses_an_ask_answer_block(world: World) -> None:
    block = AskAnswerBlock("ask_x", uuid.uuid4(), ())
    with pytest.raises(InvalidArgument, match="ask_answer"):
        await world.store.append_message(world.human, world.channel.channel_id, [block])


async def test_zero_option_question_is_free_text_only(world: World) -> None:
    ask = Ask(questions=(AskQuestion("why", "Why?"),))
    message = await world.post_ask(world.agent, ask)
    ask_id = only_ask(message).ask_id
    updated, _ = await world.store.answer_ask(world.human, ask_id, [Answer("why", (), "because")])
    assert only_ask(updated).questions[0].custom_text == "because"


# --- answer ----------------------------------------------------------------------


async def test_answer_marks_answered_and_posts_one_answer_message(world: World) -> None:
    message = await world.post_ask()
    ask_id = only_ask(message).ask_id
    updated, answer = await world.store.answer_ask(world.human, ask_id, GOOD)
    reread = only_ask(await world.store.get_message(world.human, message.message_id))
    assert reread.answered and not reread.cancelled
    assert reread.questions[0].chosen_option_ids == ("pg",)
    assert reread.questions[1].chosen_option_ids == ("py", "go")
    assert reread.questions[1].custom_text == "and Rust"
    assert answer.author_id == world.human.account_id
    assert answer.channel_id == world.channel.channel_id
    (snapshot,) = answer.blocks
    assert isinstance(snapshot, AskAnswerBlock)
    assert snapshot.ask_id == ask_id and snapshot.ask_message_id == message.message_id
    assert snapshot.questions == reread.questions
    assert only_ask(updated) == reread
    assert [m.message_id for m in await answers_of(world, ask_id)] == [answer.message_id]


async def test_answer_keeps_the_ask_content(world: World) -> None:
    message = await world.post_ask()
    before = only_ask(message)
    await world.store.answer_ask(world.human, before.ask_id, GOOD)
    after = only_ask(await world.store.get_message(world.human, message.message_id))
    for a, b in zip(before.questions, after.questions, strict=True):
        assert (
            a.question_id,
            a.question,
            a.header,
            a.options,
            a.allow_multiple,
            a.recommended,
        ) == (
            b.question_id,
            b.question,
            b.header,
            b.options,
            b.allow_multiple,
            b.recommended,
        )


async def test_an_empty_answer_is_an_accepted_skip(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    updated, _ = await world.store.answer_ask(world.human, ask_id, [Answer("db"), Answer("langs")])
    assert only_ask(updated).answered


@pytest.mark.parametrize(
    ("answers", "needle"),
    [
        ([Answer("db", ("pg",))], "missing: 'langs'"),
        ([*GOOD, Answer("db", ("my",))], "more than once"),
        ([*GOOD, Answer("nope")], "no question 'nope'"),
        ([Answer("db", ("pg", "my")), Answer("langs")], "at most one option"),
        ([Answer("db", ("sqlite",)), Answer("langs")], "no option 'sqlite'"),
        ([Answer("db"), Answer("langs", ("py", "py"))], "names an option twice"),
        ([Answer(""), *GOOD], "empty question_id"),
        ([], "missing"),
    ],
)
async def test_answer_rejection_matrix_writes_nothing(
    world: World, answers: list[Answer], needle: str
) -> None:
    message = await world.post_ask()
    ask_id = only_ask(message).ask_id
    with pytest.raises(InvalidArgument, match=needle):
        await world.store.answer_ask(world.human, ask_id, answers)
    assert not only_ask(await world.store.get_message(world.human, message.message_id)).answered
    assert await answers_of(world, ask_id) == []


async def test_second_answer_conflicts_and_posts_nothing(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    await world.store.answer_ask(world.human, ask_id, GOOD)
    with pytest.raises(Conflict, match="already answered"):
        await world.store.answer_ask(world.human, ask_id, GOOD)
    assert len(await answers_of(world, ask_id)) == 1


async def test_answer_by_a_non_member_is_not_found_like_an_unknown_id(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    with pytest.raises(NotFound) as hidden:
        await world.store.answer_ask(world.other_human, ask_id, GOOD)
    with pytest.raises(NotFound) as unknown:
        await world.store.answer_ask(world.human, "ask_" + "0" * 32, GOOD)
    assert hidden.value.message.replace(ask_id, "?") == unknown.value.message.replace(
        "ask_" + "0" * 32, "?"
    )


async def test_answer_by_a_non_author_member_works(world: World) -> None:
    await world.store.add_channel_member(
        world.human, world.channel.channel_id, world.other_human.account_id
    )
    ask = Ask(questions=(AskQuestion("q", "Lunch?"),))
    ask_id = only_ask(await world.post_ask(world.human, ask)).ask_id
    updated, answer = await world.store.answer_ask(
        world.other_human, ask_id, [Answer("q", (), "yes")]
    )
    assert only_ask(updated).answered and answer.author_id == world.other_human.account_id


async def test_an_agent_never_answers_even_through_the_store(world: World) -> None:
    ask = Ask(questions=(AskQuestion("q", "Lunch?"),))
    message = await world.post_ask(world.human, ask)
    with pytest.raises(PermissionDenied, match="agents never answer"):
        await world.store.answer_ask(world.agent, only_ask(message).ask_id, [Answer("q", (), "x")])
    assert only_ask(await world.store.get_message(world.human, message.message_id)).is_open


# --- cancel --------------------------------------------------------------------------


async def test_cancel_closes_an_open_ask(world: World) -> None:
    message = await world.post_ask()
    ask_id = only_ask(message).ask_id
    count = len(await channel_messages(world))
    _, changed = await world.store.cancel_ask(world.agent, ask_id)
    assert changed
    reread = only_ask(await world.store.get_message(world.human, message.message_id))
    assert reread.cancelled and not reread.answered
    assert len(await channel_messages(world)) == count


async def test_cancel_twice_is_idempotent(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    first, changed = await world.store.cancel_ask(world.agent, ask_id)
    second, changed_again = await world.store.cancel_ask(world.agent, ask_id)
    assert changed and not changed_again
    assert first == second


async def test_cancel_after_answer_conflicts(world: World) -> None:
    message = await world.post_ask()
    ask_id = only_ask(message).ask_id
    await world.store.answer_ask(world.human, ask_id, GOOD)
    with pytest.raises(Conflict, match="already answered"):
        await world.store.cancel_ask(world.agent, ask_id)
    assert only_ask(await world.store.get_message(world.human, message.message_id)).answered


async def test_answer_after_cancel_conflicts_and_inserts_no_answer(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    await world.store.cancel_ask(world.agent, ask_id)
    count = len(await channel_messages(world))
    with pytest.raises(Conflict, match="already withdrawn"):
        await world.store.answer_ask(world.human, ask_id, GOOD)
    assert len(await channel_messages(world)) == count


async def test_cancel_by_a_non_author_participant_is_permission_denied(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    with pytest.raises(PermissionDenied):
        await world.store.cancel_ask(world.human, ask_id)


async def test_cancel_by_a_non_participant_is_not_found_like_an_unknown_id(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    with pytest.raises(NotFound):
        await world.store.cancel_ask(world.other_human, ask_id)
    with pytest.raises(NotFound):
        await world.store.cancel_ask(world.agent, "ask_" + "f" * 32)


async def test_cancel_with_an_empty_id_is_invalid(world: World) -> None:
    with pytest.raises(InvalidArgument):
        await world.store.cancel_ask(world.agent, "")


async def test_cancel_keeps_a_sibling_ask_open(world: World) -> None:
    message = await world.post_ask(world.agent, two_question_ask(), two_question_ask())
    first, second = (b.ask_id for b in message.blocks if isinstance(b, Ask))
    await world.store.cancel_ask(world.agent, first)
    updated, _ = await world.store.answer_ask(world.human, second, GOOD)
    by_id = {b.ask_id: b for b in updated.blocks if isinstance(b, Ask)}
    assert by_id[first].cancelled and not by_id[first].answered
    assert by_id[second].answered and not by_id[second].cancelled


# --- events ------------------------------------------------------------------------------


async def test_events_for_post_answer_and_cancel(world: World) -> None:
    start = await world.store.last_event_id(world.human)
    message = await world.post_ask()
    ask_id = only_ask(message).ask_id
    await world.store.answer_ask(world.human, ask_id, GOOD)
    other = await world.post_ask()
    await world.store.cancel_ask(world.agent, only_ask(other).ask_id)
    await world.store.cancel_ask(world.agent, only_ask(other).ask_id)
    await world.post_text(world.human, "after")
    events = await world.store.read_events(world.human, start, 100)
    kinds = [e.kind for e in events if e.kind is not EventKind.PRESENCE_CHANGED]
    assert kinds == [
        EventKind.MESSAGE_POSTED,  # the ask
        EventKind.MESSAGE_UPDATED,  # answered
        EventKind.MESSAGE_POSTED,  # the answer
        EventKind.MESSAGE_POSTED,  # the second ask
        EventKind.MESSAGE_UPDATED,  # cancelled; the repeat cancel adds nothing
        EventKind.MESSAGE_POSTED,  # the text
    ]
    ids = [e.event_id for e in events]
    assert ids == list(range(start + 1, start + 1 + len(ids)))


async def test_failed_writes_append_no_events(world: World) -> None:
    ask_id = only_ask(await world.post_ask()).ask_id
    start = await world.store.last_event_id(world.human)
    with pytest.raises(InvalidArgument):
        await world.store.answer_ask(world.human, ask_id, [])
    with pytest.raises(PermissionDenied):
        await world.store.cancel_ask(world.human, ask_id)
    assert await world.store.read_events(world.human, start, 100) == []


# --- races ---------------------------------------------------------------------------------


async def test_answer_and_cancel_race_has_exactly_one_winner(world: World) -> None:
    for _ in range(200):
        message = await world.post_ask(world.agent, Ask(questions=(AskQuestion("q", "Go?"),)))
        ask_id = only_ask(message).ask_id
        gate = asyncio.Event()

        async def answer(ask_id: str = ask_id, gate: asyncio.Event = gate) -> object:
            await gate.wait()
            return await world.store.answer_ask(world.human, ask_id, [Answer("q", (), "go")])

        async def cancel(ask_id: str = ask_id, gate: asyncio.Event = gate) -> object:
            await gate.wait()
            return await world.store.cancel_ask(world.agent, ask_id)

        tasks = [asyncio.create_task(answer()), asyncio.create_task(cancel())]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], Conflict), results
        final = only_ask(await world.store.get_message(world.human, message.message_id))
        assert final.answered != final.cancelled
        assert len(await answers_of_ask(world, message, ask_id)) == (1 if final.answered else 0)


async def answers_of_ask(world: World, ask_message: Message, ask_id: str) -> list[Message]:
    # Only messages after the ask can answer it; keeps the scan short.
    page = await world.store.list_messages(world.human, world.channel.channel_id, 5, "")
    return [
        m
        for m in page.items
        if m.position > ask_message.position
        and any(isinstance(b, AskAnswerBlock) and b.ask_id == ask_id for b in m.blocks)
    ]


async def test_two_concurrent_answers_have_exactly_one_winner(world: World) -> None:
    for _ in range(50):
        message = await world.post_ask(world.agent, Ask(questions=(AskQuestion("q", "Go?"),)))
        ask_id = only_ask(message).ask_id
        results = await asyncio.gather(
            world.store.answer_ask(world.human, ask_id, [Answer("q", (), "a")]),
            world.store.answer_ask(world.human, ask_id, [Answer("q", (), "b")]),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], Conflict)
        assert len(await answers_of_ask(world, message, ask_id)) == 1


async def test_text_blocks_round_trip(world: World) -> None:
    message = await world.post_text(world.human, "hello")
    again = await world.store.get_message(world.human, message.message_id)
    assert again.blocks == (TextBlock("hello"),)


# --- the stored shape -----------------------------------------------------------------


def test_marshal_rejects_an_ask_both_answered_and_cancelled() -> None:
    from compass_server.store.blocks import block_to_json

    both = Ask(questions=(AskQuestion("q", "?"),), ask_id="ask_x", answered=True, cancelled=True)
    with pytest.raises(InvalidArgument, match="both answered and cancelled"):
        block_to_json(both)


def test_reading_an_ask_both_answered_and_cancelled_is_corrupt() -> None:
    from compass_server.store import Corrupt
    from compass_server.store.blocks import block_from_json

    raw = {
        "kind": "ask",
        "ask": {
            "ask_id": "ask_x",
            "answered": True,
            "cancelled": True,
            "questions": [{"question_id": "q", "question": "?"}],
        },
    }
    with pytest.raises(Corrupt, match="both answered and cancelled"):
        block_from_json(raw)
    with pytest.raises(Corrupt, match="no questions"):
        block_from_json({"kind": "ask", "ask": {"ask_id": "ask_x", "questions": []}})
    with pytest.raises(Corrupt):
        block_from_json({"kind": "video"})


async def test_a_corrupt_row_is_internal_not_a_wrong_answer(world: World, db: object) -> None:
    """A stored ask both answered and cancelled fails loudly on read."""
    from compass_server.store import Corrupt, Database

    assert isinstance(db, Database)
    message = await world.post_ask()
    async with await psycopg.AsyncConnection.connect(db.url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE messages SET blocks = jsonb_set(jsonb_set(blocks, '{0,ask,answered}', 'true'),"
            " '{0,ask,cancelled}', 'true') WHERE id = %s",
            (message.message_id,),
        )
    with pytest.raises(Corrupt):
        await world.store.get_message(world.human, message.message_id)
