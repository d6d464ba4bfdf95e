"""Property tests: any valid ask survives JSONB; any answer set is either taken
with exactly its stated effect or refused with nothing written."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass_server.store import InvalidArgument
from compass_server.store.blocks import apply_answers
from compass_server.store.types import (
    Answer,
    Ask,
    AskAnswerBlock,
    AskOption,
    AskQuestion,
    EndingKind,
)
from tests.world import World

text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
ident = st.text("abcxyz0123-_", min_size=1, max_size=6)


@st.composite
def questions(draw: st.DrawFn) -> AskQuestion:
    option_ids = draw(st.lists(ident, unique=True, max_size=4))
    options = tuple(AskOption(i, draw(text), draw(text), draw(text)) for i in option_ids)
    # Any int32: an index out of range is stored as sent and means no recommendation.
    recommended = draw(st.none() | st.integers(0, len(options)) | st.integers(-(2**31), 2**31 - 1))
    return AskQuestion(
        question_id="",
        question=draw(text),
        header=draw(text),
        options=options,
        allow_multiple=draw(st.booleans()),
        recommended=recommended,
    )


@st.composite
def asks(draw: st.DrawFn) -> Ask:
    ids = draw(st.lists(ident, unique=True, min_size=1, max_size=4))
    qs = [draw(questions()) for _ in ids]
    return Ask(
        questions=tuple(
            AskQuestion(i, q.question, q.header, q.options, q.allow_multiple, q.recommended)
            for i, q in zip(ids, qs, strict=True)
        )
    )


@st.composite
def ask_and_answers(draw: st.DrawFn) -> tuple[Ask, list[Answer]]:
    ask = draw(asks())
    answers: list[Answer] = []
    for q in ask.questions:
        if draw(st.integers(0, 9)) == 0:
            continue  # sometimes leave a question out
        pool = [o.id for o in q.options] + draw(st.lists(ident, max_size=1))
        chosen = draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
        answers.append(Answer(q.question_id, tuple(chosen), draw(text)))
    if draw(st.integers(0, 9)) == 0:
        answers.append(Answer(draw(ident)))  # sometimes an extra or repeated one
    return ask, draw(st.permutations(answers))


def expected_valid(ask: Ask, answers: list[Answer]) -> bool:
    by_id = {q.question_id: q for q in ask.questions}
    ids = [a.question_id for a in answers]
    if sorted(ids) != sorted(by_id) or len(set(ids)) != len(ids):
        return False
    for a in answers:
        q = by_id[a.question_id]
        if len(set(a.chosen_option_ids)) != len(a.chosen_option_ids):
            return False
        if not q.allow_multiple and len(a.chosen_option_ids) > 1:
            return False
        if not set(a.chosen_option_ids) <= {o.id for o in q.options}:
            return False
    return True


SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(ask=asks())
async def test_any_valid_ask_round_trips_through_jsonb(world: World, ask: Ask) -> None:
    message = await world.post_ask(world.agent, ask)
    stored = await world.store.get_message(world.human, message.message_id)
    (got,) = stored.blocks
    assert isinstance(got, Ask)
    assert got.questions == ask.questions
    assert got.ask_id and not got.answered and not got.cancelled


@SETTINGS
@given(case=ask_and_answers())
async def test_any_answer_set_is_taken_exactly_or_refused_with_nothing_written(
    world: World, case: tuple[Ask, list[Answer]]
) -> None:
    ask, answers = case
    message = await world.post_ask(world.agent, ask)
    (posted,) = message.blocks
    assert isinstance(posted, Ask)
    start = await world.store.last_event_id(world.human)
    try:
        _updated, answer = await world.store.answer_ask(world.human, posted.ask_id, answers)
    except InvalidArgument:
        assert not expected_valid(ask, answers)
        reread = await world.store.get_message(world.human, message.message_id)
        assert reread.blocks == message.blocks
        assert await world.store.read_events(world.human, start, 10) == []
        return
    assert expected_valid(ask, answers)
    by_id = {a.question_id: a for a in answers}
    reread = await world.store.get_message(world.human, message.message_id)
    (got,) = reread.blocks
    assert isinstance(got, Ask) and got.answered
    for q in got.questions:
        assert q.chosen_option_ids == by_id[q.question_id].chosen_option_ids
        assert q.custom_text == by_id[q.question_id].custom_text
    (snapshot,) = answer.blocks
    assert isinstance(snapshot, AskAnswerBlock) and snapshot.questions == got.questions
    assert got.ending is not None and got.ending.kind is EndingKind.ANSWERED
    assert got.ending.actor_id == world.human.account_id
    assert dataclasses.replace(got, ending=None) == apply_answers(posted, answers)
