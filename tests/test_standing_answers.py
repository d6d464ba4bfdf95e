"""Standing answers: "answer this the same way from now on".

A person's answer made standing answers later asks of the same agent (or
of its sub-agents, when it says so) whose every question is one of its
questions (the same text, header, options and multiplicity), at their post
and in the post's transaction, for that person and attributed to the rule.
An ask that names its answerers takes only their rules; a quorum ask counts
a rule as its person's vote. A revoked or expired rule answers nothing; a
revoke and a post that uses the rule wait for each other."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from compass_server.events.reach import Participations, Reach
from compass_server.relay.gateway import hears
from compass_server.store import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Store,
)
from compass_server.store.types import (
    Actor,
    Answer,
    Ask,
    AskAnswerBlock,
    AskChange,
    AskOption,
    AskQuestion,
    EndingKind,
    EventKind,
    Operator,
    PresenceState,
    StandingTerms,
    Surface,
    VoteKind,
)
from tests.test_quorum_asks import MY, PG, ask_of, people, quorum_ask
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(60)

HOUR = StandingTerms(datetime.timedelta(hours=1))


async def stand(w: World, person: Actor, answers: list[Answer], terms: StandingTerms = HOUR) -> str:
    """Answers a fresh ask of the agent, asked of `person` alone, the way
    given, made standing; returns the rule's id. (A rule of theirs already
    standing would answer that ask at its post.)"""
    asked = dataclasses.replace(two_question_ask(), answerer_ids=(person.account_id,))
    message = await w.store.append_message(w.agent, w.channel.channel_id, [asked])
    done = await w.store.answer(person, ask_of(message).ask_id, answers, standing=terms)
    assert done.standing_answer is not None
    return str(done.standing_answer.standing_answer_id)


async def post(w: World, ask: Ask | None = None, author: Actor | None = None) -> Ask:
    message = await w.store.append_message(
        author or w.agent, w.channel.channel_id, [ask or two_question_ask()]
    )
    return ask_of(message)


def renamed(ask: Ask) -> Ask:
    """The same questions under other ids and another recommendation."""
    return dataclasses.replace(
        ask,
        questions=tuple(
            dataclasses.replace(q, question_id=f"other-{q.question_id}", recommended=None)
            for q in ask.questions
        ),
    )


def changed(i: int, **what: object) -> Ask:
    ask = two_question_ask()
    questions = list(ask.questions)
    questions[i] = dataclasses.replace(questions[i], **what)  # type: ignore[arg-type]
    return dataclasses.replace(ask, questions=tuple(questions))


async def test_a_standing_answer_answers_the_next_matching_ask_at_its_post(world: World) -> None:
    w = world
    rule = await stand(w, w.human, PG)
    mark = await w.store.last_event_id(w.human)
    message = await w.store.append_message(
        w.agent, w.channel.channel_id, [renamed(two_question_ask())]
    )
    ask = ask_of(message)
    # The post's own result already carries the answer.
    assert ask.answered and ask.ending is not None
    assert ask.ending.kind is EndingKind.ANSWERED
    assert ask.ending.actor_id == w.human.account_id and ask.ending.actor_handle == "ada"
    assert ask.ending.surface is Surface.STANDING_ANSWER
    assert str(ask.ending.standing_answer_id) == rule
    assert [(q.question_id, q.chosen_option_ids) for q in ask.questions] == [
        ("other-db", ("pg",)),
        ("other-langs", ("py",)),
    ]
    history = await w.store.ask_history(w.human, ask.ask_id)
    assert [(e.change, e.actor_id, e.surface, str(e.standing_answer_id)) for e in history.entries][
        1:
    ] == [(AskChange.ANSWERED, w.human.account_id, Surface.STANDING_ANSWER, rule)]

    events = [
        e
        for e in await w.store.read_events(w.human, mark, 100)
        if e.message is not None or e.presence is not None
    ]
    assert [e.kind for e in events] == [
        EventKind.MESSAGE_POSTED,
        EventKind.MESSAGE_UPDATED,
        EventKind.MESSAGE_POSTED,
    ]
    assert events[0].message is not None and ask_of(events[0].message).is_open
    answer = events[2].message
    assert answer is not None and answer.author_id == w.human.account_id
    assert isinstance(answer.blocks[0], AskAnswerBlock)
    # The agent never went WAITING, and its lane carries the answer once.
    (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
    assert presence.state is not PresenceState.WAITING
    lane = hears(w.agent.account_id, await Reach.of(Participations(w.store), w.agent))
    assert [e.kind for e in events if lane(e)] == [EventKind.MESSAGE_POSTED]

    (listed,) = await w.store.list_standing_answers(w.human)
    assert str(listed.standing_answer_id) == rule and listed.asks_answered == 1
    assert listed.agent_id == w.agent.account_id and listed.agent_handle == "scout"


@pytest.mark.parametrize(
    "ask",
    [
        changed(0, question="Which database, really?"),
        changed(0, header="Data"),
        changed(0, options=(AskOption("pg", "Postgres"), AskOption("my", "MySQL"))),
        changed(0, options=(AskOption("pg", "PostgreSQL", "the usual"), AskOption("my", "MySQL"))),
        changed(1, allow_multiple=False),
        dataclasses.replace(
            two_question_ask(),
            questions=(*two_question_ask().questions, AskQuestion("why", "Why?")),
        ),
    ],
    ids=["text", "header", "label", "description", "multiplicity", "a question more"],
)
async def test_an_ask_that_differs_in_any_question_is_left_open(world: World, ask: Ask) -> None:
    w = world
    await stand(w, w.human, PG)
    assert (await post(w, ask)).is_open


async def test_an_ask_of_some_of_the_rules_questions_is_answered(world: World) -> None:
    w = world
    await stand(w, w.human, MY)
    ask = await post(
        w, dataclasses.replace(two_question_ask(), questions=(changed(0).questions[1],))
    )
    assert ask.answered
    (q,) = ask.questions
    assert (q.chosen_option_ids, q.custom_text) == (("go", "ts"), "and Rust")


async def test_a_rule_answers_its_agent_and_with_sub_agents_only_when_it_says_so(
    world: World,
) -> None:
    w = world
    other = await w.add_account(f"other-{uuid.uuid4().hex[:6]}", kind=w.agent.kind)
    await w.store.add_channel_member(w.human, w.channel.channel_id, other.account_id)
    planner = await w.add_subagent(f"planner-{uuid.uuid4().hex[:6]}", w.agent)
    scout_only = uuid.UUID(await stand(w, w.human, PG))
    assert (await post(w, author=other)).is_open
    assert (await post(w, author=planner)).is_open
    await w.store.revoke_standing_answer(w.human, scout_only)
    await stand(w, w.human, PG, StandingTerms(datetime.timedelta(hours=1), True))
    assert (await post(w, author=planner)).answered
    assert (await post(w, author=other)).is_open


async def test_an_ask_that_names_answerers_takes_only_their_rules(world: World) -> None:
    w = world
    ada, grace = await people(w, 2)
    await stand(w, ada, PG)
    only_grace = dataclasses.replace(two_question_ask(), answerer_ids=(grace.account_id,))
    assert (await post(w, only_grace)).is_open
    await stand(w, grace, MY)
    ask = await post(w, only_grace)
    assert ask.ending is not None and ask.ending.actor_id == grace.account_id
    # Unnamed, the newest rule of anyone in the channel answers.
    assert (await post(w)).ending.actor_id == grace.account_id  # type: ignore[union-attr]


async def test_a_quorum_ask_counts_a_rule_as_its_persons_vote(world: World) -> None:
    w = world
    ada, grace, cy = await people(w, 3)
    rule = await stand(w, ada, PG)
    ask = await post(w, quorum_ask([ada, grace, cy], 2))
    assert ask.is_open
    (vote,) = ask.quorum_votes
    assert (vote.account_id, vote.kind, vote.surface) == (
        ada.account_id,
        VoteKind.ANSWER,
        Surface.STANDING_ANSWER,
    )
    assert str(vote.standing_answer_id) == rule
    assert vote.answers == tuple(PG)
    (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
    assert presence.state is PresenceState.WAITING
    ended, answer = await w.store.answer_ask(cy, ask.ask_id, MY)
    assert ask_of(ended).answered and answer is not None

    # Two rules reach a quorum of two at the post itself.
    await stand(w, grace, MY)
    ask = await post(w, quorum_ask([ada, grace, cy], 2))
    assert ask.answered and ask.ending is not None
    assert [v.account_id for v in ask.quorum_votes] == [ada.account_id, grace.account_id]
    assert ask.ending.actor_id == grace.account_id


async def test_a_revoked_or_expired_rule_answers_nothing(world: World, database_url: str) -> None:
    w = world
    rule = uuid.UUID(await stand(w, w.human, PG))
    revoked = await w.store.revoke_standing_answer(w.human, rule)
    assert revoked.revoked_at is not None
    assert (await post(w)).is_open
    # A repeat changes nothing; someone else's is not found.
    again = await w.store.revoke_standing_answer(w.human, rule)
    assert again.revoked_at == revoked.revoked_at
    with pytest.raises(NotFound):
        await w.store.revoke_standing_answer(w.other_human, rule)
    assert await w.store.list_standing_answers(w.human) == []
    assert [s.standing_answer_id for s in await w.store.list_standing_answers(w.human, True)] == [
        rule
    ]

    expiring = uuid.UUID(await stand(w, w.human, PG))
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute(
            "UPDATE standing_answers SET created_at = now() - interval '2 hours',"
            " expires_at = now() - interval '1 second' WHERE id = %s",
            (expiring,),
        )
    assert (await post(w)).is_open


async def test_a_revoke_under_way_holds_a_post_off_and_wins(
    world: World, database_url: str
) -> None:
    w = world
    rule = uuid.UUID(await stand(w, w.human, PG))
    async with await psycopg.AsyncConnection.connect(database_url) as revoking:
        await revoking.execute(
            "UPDATE standing_answers SET revoked_at = now() WHERE id = %s", (rule,)
        )
        posting = asyncio.ensure_future(post(w))
        await asyncio.sleep(0.3)
        assert not posting.done(), "the post went on past a revoke under way"
        await revoking.commit()
    assert (await posting).is_open


async def test_a_post_holding_the_rule_holds_a_revoke_off(world: World, database_url: str) -> None:
    w = world
    rule = uuid.UUID(await stand(w, w.human, PG))
    async with await psycopg.AsyncConnection.connect(database_url) as posting:
        # What a post that took the rule holds until it commits.
        await posting.execute("SELECT 1 FROM standing_answers WHERE id = %s FOR SHARE", (rule,))
        revoking = asyncio.ensure_future(w.store.revoke_standing_answer(w.human, rule))
        await asyncio.sleep(0.3)
        assert not revoking.done(), "the revoke went on past a post holding the rule"
        await posting.rollback()
    assert (await revoking).revoked_at is not None
    assert (await post(w)).is_open


async def test_posts_and_revokes_racing_leave_no_answer_after_the_revoke(world: World) -> None:
    w = world
    for _ in range(20):
        rule = uuid.UUID(await stand(w, w.human, PG))
        posts = [asyncio.ensure_future(post(w)) for _ in range(3)]
        revoked = await w.store.revoke_standing_answer(w.human, rule)
        asks = await asyncio.gather(*posts)
        # Whatever the race decided, nothing posted after the revoke returned is answered.
        assert (await post(w)).is_open
        used = [a for a in asks if a.answered]
        listed = await w.store.list_standing_answers(w.human, include_ended=True)
        counted = next(s for s in listed if s.standing_answer_id == rule)
        assert counted.asks_answered == len(used)
        assert revoked.revoked_at is not None


async def test_a_deactivated_persons_rule_answers_nothing(world: World) -> None:
    w = world
    grace = w.other_human
    await w.store.add_channel_member(w.human, w.channel.channel_id, grace.account_id)
    await stand(w, grace, PG)
    await w.store.set_deactivated(Operator(w.workspace_id), grace.account_id, True)
    assert (await post(w)).is_open


@pytest.fixture
def one_each(store: Store) -> Iterator[Store]:
    store.standing_per_person = 1
    try:
        yield store
    finally:
        del store.standing_per_person


async def test_past_the_most_standing_answers_an_answer_records_nothing(
    world: World, one_each: Store
) -> None:
    w = world
    await stand(w, w.human, PG)
    ask = await post(w, changed(0, header="Other"))
    with pytest.raises(ResourceExhausted, match="revoke one first"):
        await w.store.answer(w.human, ask.ask_id, PG, standing=HOUR)
    message, _ = await w.store.get_ask(w.human, ask.ask_id)
    assert ask_of(message).is_open
    # Without standing it is an answer as any.
    assert (await w.store.answer(w.human, ask.ask_id, PG)).answer_message is not None


@pytest.mark.parametrize("duration", [datetime.timedelta(seconds=59), datetime.timedelta(days=31)])
async def test_a_standing_answer_stands_a_minute_to_thirty_days(
    world: World, duration: datetime.timedelta
) -> None:
    w = world
    ask = await post(w)
    with pytest.raises(InvalidArgument, match="1 minute to 30 days"):
        await w.store.answer(w.human, ask.ask_id, PG, standing=StandingTerms(duration))
    message, _ = await w.store.get_ask(w.human, ask.ask_id)
    assert ask_of(message).is_open


async def test_a_persons_ask_takes_no_standing_answer(world: World) -> None:
    w = world
    grace = w.other_human
    await w.store.add_channel_member(w.human, w.channel.channel_id, grace.account_id)
    ask = await post(w, author=grace)
    with pytest.raises(InvalidArgument, match="asked by a person"):
        await w.store.answer(w.human, ask.ask_id, PG, standing=HOUR)
    message, _ = await w.store.get_ask(w.human, ask.ask_id)
    assert ask_of(message).is_open


async def test_an_admin_lists_the_workspaces_standing_answers(world: World) -> None:
    w = world
    grace = w.other_human
    await w.store.add_channel_member(w.human, w.channel.channel_id, grace.account_id)
    mine = await stand(w, w.human, PG)
    theirs = await stand(w, grace, MY)
    listed = await w.store.workspace_standing_answers(w.human)
    assert [str(s.standing_answer_id) for s in listed] == [theirs, mine]
    only = await w.store.workspace_standing_answers(Operator(w.workspace_id), grace.account_id)
    assert [str(s.standing_answer_id) for s in only] == [theirs]
    with pytest.raises(PermissionDenied):
        await w.store.workspace_standing_answers(grace)
    # Another workspace's admin sees none of them.
    other = await World.create(w.store)
    assert await other.store.workspace_standing_answers(other.human) == []


async def test_an_ask_a_rule_answers_is_an_ending_for_metrics_and_traces(world: World) -> None:
    w = world
    await stand(w, w.human, PG)
    heard: list[tuple[str, int, str | None]] = []

    def listener(kind: str, count: int, message: object) -> None:
        ask = ask_of(message) if message is not None else None  # type: ignore[arg-type]
        heard.append((kind, count, ask.ask_id if ask else None))

    w.store.ending_listeners.append(listener)
    try:
        ask = await post(w)
    finally:
        w.store.ending_listeners.remove(listener)
    assert heard == [(EndingKind.ANSWERED.value, 1, ask.ask_id)]
