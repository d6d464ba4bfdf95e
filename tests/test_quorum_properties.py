"""Property tests of quorum asks and standing answers.

Quorum: any K of N named people, declines that veto or count against the
quorum, some of the named people with a standing answer already (their vote
at the post), then any sequence of answers, declines (by named people or
not), the agent's and the owner's withdraws and expiries. After every step
the ask holds exactly the votes and the ending a model of the rules
predicts; an ask_answer (with every answer) exists only for an answer; the
history holds the post, each vote that didn't end it and the ending; the
agent's lane carries the ending once; WAITING holds exactly while it is
open.

Matching: random standing answers (some revoked or expired) and a random
ask; the ask is answered at its post exactly when the model says one rule
in force answers every one of its questions, by the newest such rule."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from dataclasses import dataclass, field

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compass_server.events.reach import Participations, Reach
from compass_server.relay.gateway import hears
from compass_server.store import Conflict, PermissionDenied, StoreError
from compass_server.store.types import (
    AccountKind,
    Actor,
    Answer,
    Ask,
    AskAnswerBlock,
    AskChange,
    AskOption,
    AskQuestion,
    Channel,
    EndingKind,
    EventKind,
    PresenceState,
    StandingTerms,
    Surface,
    VoteKind,
)
from tests.test_ask_race_matrix import SAID
from tests.test_quorum_asks import PG, ask_of
from tests.world import World, two_question_ask

SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
POOL = 4
HOUR = StandingTerms(datetime.timedelta(hours=1))


@dataclass
class QuorumCase:
    named: list[int]
    k: int
    count_against: bool
    deadline: bool
    standing: list[int]
    ops: list[tuple[str, int]]


@st.composite
def quorum_cases(draw: st.DrawFn) -> QuorumCase:
    people = st.lists(st.integers(0, POOL - 1), unique=True, max_size=POOL)
    named = draw(st.one_of(people.filter(len), people.filter(lambda n: len(n) >= 2)))
    # (what, who): who is a person's index in the pool (0 is ada, the agent's
    # owner; mostly one of those named), or -1 for the agent or the server.
    # Votes come far more often than the endings that cut a sequence short.
    vote = st.tuples(
        st.sampled_from(["answer", "decline"]),
        st.one_of(st.sampled_from(named), st.sampled_from(named), st.integers(0, POOL - 1)),
    )
    other = st.tuples(st.sampled_from(["cancel", "withdraw", "expire"]), st.just(-1))
    return QuorumCase(
        named=named,
        k=draw(st.integers(1, len(named))),
        count_against=draw(st.booleans()),
        deadline=draw(st.booleans()),
        standing=draw(st.lists(st.sampled_from(named), unique=True, max_size=len(named) - 1)),
        ops=draw(st.lists(st.one_of(vote, vote, vote, other), min_size=1, max_size=7)),
    )


@dataclass
class Model:
    case: QuorumCase
    votes: list[tuple[int, VoteKind]] = field(default_factory=list)
    # Votes that did not end the ask: each has its own history entry.
    entries: list[AskChange] = field(default_factory=list)
    ended: EndingKind | None = None

    def answers(self) -> int:
        return sum(1 for _, k in self.votes if k is VoteKind.ANSWER)

    def vote(self, who: int, kind: VoteKind) -> None:
        self.votes.append((who, kind))
        named, k = len(self.case.named), self.case.k
        declines = sum(1 for _, v in self.votes if v is VoteKind.DECLINE)
        if kind is VoteKind.ANSWER and self.answers() == k:
            self.ended = EndingKind.ANSWERED
        elif kind is VoteKind.DECLINE and (not self.case.count_against or named - declines < k):
            self.ended = EndingKind.DECLINED
        else:
            self.entries.append(
                AskChange.QUORUM_ANSWER if kind is VoteKind.ANSWER else AskChange.QUORUM_DECLINE
            )

    def step(self, op: tuple[str, int]) -> str:
        """What the rules say the step does: "ok", "same", "nothing",
        "denied", "conflict" (the ending named) or "voted"."""
        what, who = op
        if what in ("answer", "decline"):
            if who not in self.case.named:
                return "denied"
            if self.ended is not None:
                return "conflict"
            if any(p == who for p, _ in self.votes):
                return "voted"
            self.vote(who, VoteKind.ANSWER if what == "answer" else VoteKind.DECLINE)
            return "ok"
        if what in ("cancel", "withdraw"):
            kind = (
                EndingKind.WITHDRAWN_BY_AGENT if what == "cancel" else EndingKind.WITHDRAWN_BY_OWNER
            )
            if self.ended is kind:
                return "same"
            if self.ended is not None:
                return "conflict"
            self.ended = kind
            return "ok"
        if self.case.deadline and self.ended is None:
            self.ended = EndingKind.EXPIRED
            return "ok"
        return "nothing"


async def pool(world: World) -> tuple[Actor, Channel, list[Actor]]:
    """A fresh agent of ada's and a channel of it with POOL people."""
    agent = await world.add_account(f"a-{uuid.uuid4().hex[:8]}", AccountKind.AGENT)
    people = [world.human, world.other_human]
    while len(people) < POOL:
        people.append(await world.add_account(f"p-{uuid.uuid4().hex[:8]}"))
    channel = await world.store.create_channel(
        world.human,
        f"c-{uuid.uuid4().hex[:6]}",
        "",
        [agent.account_id, *(p.account_id for p in people[1:])],
    )
    return agent, channel, people


async def stand_for(
    world: World, agent: Actor, channel: Channel, person: Actor, ask: Ask | None = None
) -> uuid.UUID:
    """A standing answer of `person` for `agent`: each question's first option."""
    ask = ask or two_question_ask()
    asked = dataclasses.replace(ask, answerer_ids=(person.account_id,))
    message = await world.store.append_message(agent, channel.channel_id, [asked])
    answers = [Answer(q.question_id, (q.options[0].id,)) for q in ask.questions]
    done = await world.store.answer(person, ask_of(message).ask_id, answers, standing=HOUR)
    assert done.standing_answer is not None
    return done.standing_answer.standing_answer_id


@SETTINGS
@given(case=quorum_cases())
async def test_any_sequence_of_votes_and_endings_leaves_what_the_rules_say(
    world: World, case: QuorumCase
) -> None:
    store = world.store
    agent, channel, people = await pool(world)
    model = Model(case)
    for i in case.standing:
        await stand_for(world, agent, channel, people[i])
    mark = await store.last_event_id(world.human)
    ask = dataclasses.replace(
        two_question_ask(),
        answerer_ids=tuple(people[i].account_id for i in case.named),
        quorum=case.k,
        declines_count_against_quorum=case.count_against,
        timeout=datetime.timedelta(hours=1) if case.deadline else None,
    )
    message = await store.append_message(agent, channel.channel_id, [ask])
    ask_id = ask_of(message).ask_id
    # Standing answers vote at the post, in the order the ask names their people.
    for i in case.named:
        if i in case.standing and model.ended is None:
            model.vote(i, VoteKind.ANSWER)
    assert [(v.account_id, v.surface) for v in ask_of(message).quorum_votes] == [
        (people[i].account_id, Surface.STANDING_ANSWER) for i, _ in model.votes
    ]

    for op in case.ops:
        said = model.step(op)
        what, who = op
        try:
            if what == "answer":
                await store.answer_ask(people[who], ask_id, PG)
            elif what == "decline":
                await store.decline_ask(people[who], ask_id, "no")
            elif what == "cancel":
                _, changed = await store.cancel_ask(agent, ask_id)
                assert changed == (said == "ok"), (op, said)
            elif what == "withdraw":
                _, changed = await store.withdraw_ask(world.human, ask_id)
                assert changed == (said == "ok"), (op, said)
            elif case.deadline:
                async with store.db.tx(world.human) as conn:
                    await conn.execute(
                        "UPDATE asks SET due_at = now() WHERE ask_id = %s", (ask_id,)
                    )
                await store.expire_due_asks()
            assert said in ("ok", "same", "nothing"), (op, said)
        except StoreError as exc:
            if said == "denied":
                assert isinstance(exc, PermissionDenied), (op, exc)
            elif said == "voted":
                assert isinstance(exc, Conflict) and "you already" in exc.message, (op, exc)
            else:
                assert said == "conflict" and isinstance(exc, Conflict), (op, said, exc)
                assert model.ended is not None and exc.message.endswith(SAID[model.ended])
        await check(world, agent, channel, people, message.message_id, ask_id, model, mark)


async def check(
    world: World,
    agent: Actor,
    channel: Channel,
    people: list[Actor],
    message_id: uuid.UUID,
    ask_id: str,
    model: Model,
    mark: int,
) -> None:
    store = world.store
    stored = (await store.get_message(world.human, message_id)).ask(ask_id)
    assert stored is not None
    assert (stored.ending.kind if stored.ending else None) is model.ended
    assert [(v.account_id, v.kind) for v in stored.quorum_votes] == [
        (people[i].account_id, k) for i, k in model.votes
    ]
    page = await store.list_messages(world.human, channel.channel_id, 200, "")
    answers = [
        b
        for m in page.items
        for b in m.blocks
        if isinstance(b, AskAnswerBlock) and b.ask_id == ask_id
    ]
    if model.ended is EndingKind.ANSWERED:
        (block,) = answers
        assert [v.account_id for v in block.quorum_votes] == [
            people[i].account_id for i, k in model.votes if k is VoteKind.ANSWER
        ]
        assert len(block.quorum_votes) == model.case.k
    else:
        assert answers == []
    record = await store.ask_history(world.human, ask_id)
    assert [e.change for e in record.entries] == [
        AskChange.POSTED,
        *model.entries,
        *([AskChange(model.ended.value)] if model.ended else []),
    ]
    lane = hears(agent.account_id, await Reach.of(Participations(store), agent))
    heard = [
        e
        for e in await store.read_events(world.human, mark, 500)
        if lane(e)
        and e.message is not None
        and (
            (e.kind is EventKind.MESSAGE_UPDATED and e.message.ask(ask_id) is not None)
            or any(isinstance(b, AskAnswerBlock) and b.ask_id == ask_id for b in e.message.blocks)
        )
    ]
    told = model.ended is not None and model.ended is not EndingKind.WITHDRAWN_BY_AGENT
    assert len(heard) == (1 if told else 0), heard
    (presence,) = await store.get_presence(world.human, [agent.account_id])
    assert (presence.state is PresenceState.WAITING) == (model.ended is None)


# --- matching ---------------------------------------------------------------------------

OPTIONS = (
    (AskOption("a", "Alpha"), AskOption("b", "Beta")),
    (AskOption("a", "Alpha", "first"), AskOption("b", "Beta")),
    (AskOption("a", "Alpha"), AskOption("b", "Beta"), AskOption("c", "Gamma")),
)
# (text, header, options, multiplicity): small, so rules and asks often meet.
QUESTION = st.tuples(
    st.sampled_from(["Ship it?", "Which region?"]),
    st.sampled_from(["", "Deploy"]),
    st.integers(0, len(OPTIONS) - 1),
    st.booleans(),
)
Shape = tuple[str, str, int, bool]


def question(shape: Shape, qid: str) -> AskQuestion:
    text, header, options, multi = shape
    return AskQuestion(qid, text, header, OPTIONS[options], multi)


def asking(shapes: list[Shape], tag: str) -> Ask:
    return Ask(questions=tuple(question(s, f"{tag}{i}") for i, s in enumerate(shapes)))


@dataclass
class Rule:
    shapes: list[Shape]
    # In force, revoked, or expired when the ask is posted.
    fate: str


RULES = st.lists(
    st.builds(
        Rule,
        shapes=st.lists(QUESTION, min_size=1, max_size=3, unique=True),
        fate=st.sampled_from(["in force", "in force", "revoked", "expired"]),
    ),
    max_size=4,
)
ASK = st.lists(QUESTION, min_size=1, max_size=3, unique=True)


@SETTINGS
@given(rules=RULES, shapes=ASK)
async def test_an_ask_is_answered_at_its_post_by_the_newest_rule_in_force_that_covers_it(
    world: World, database_url: str, rules: list[Rule], shapes: list[Shape]
) -> None:
    agent, channel, people = await pool(world)
    made: list[uuid.UUID] = []
    for n, rule in enumerate(rules):
        # Each rule is one person's, so none answers another's making.
        made.append(
            await stand_for(world, agent, channel, people[n % POOL], asking(rule.shapes, "r"))
        )
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for rule, rule_id in zip(rules, made, strict=True):
            if rule.fate == "revoked":
                await conn.execute(
                    "UPDATE standing_answers SET revoked_at = now() WHERE id = %s", (rule_id,)
                )
            elif rule.fate == "expired":
                await conn.execute(
                    "UPDATE standing_answers SET created_at = now() - interval '2 hours',"
                    " expires_at = now() - interval '1 second' WHERE id = %s",
                    (rule_id,),
                )
    covering = [
        rule_id
        for rule, rule_id in zip(rules, made, strict=True)
        if rule.fate == "in force" and set(shapes) <= set(rule.shapes)
    ]
    message = await world.store.append_message(agent, channel.channel_id, [asking(shapes, "q")])
    ask = ask_of(message)
    if not covering:
        assert ask.is_open
        return
    assert ask.ending is not None and ask.ending.kind is EndingKind.ANSWERED
    assert ask.ending.standing_answer_id == covering[-1]
    # Each question answered as the rule answered its own: its first option.
    assert all(q.chosen_option_ids == ("a",) for q in ask.questions)
