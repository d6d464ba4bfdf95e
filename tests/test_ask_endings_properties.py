"""Property tests of an ask's endings: any sequence of answers, declines,
withdraws (by the agent, its owner, or someone else) and expiries, against
asks that name answerers or not. After every step the ask has at most one
ending, the one a model of the rules predicts; an ask_answer exists only for
an answer; the history holds the post and that ending; the agent's delivery
lane carries the ending exactly once; WAITING holds exactly while it is open."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

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
    Channel,
    EndingKind,
    EventKind,
    PresenceState,
)
from tests.test_ask_race_matrix import SAID
from tests.world import World, two_question_ask

GOOD = [Answer("db", ("pg",)), Answer("langs", ())]

# (what, who): who is "ada" (the agent's owner), "grace" or "agent".
OPS = st.sampled_from(
    [
        ("answer", "ada"),
        ("answer", "grace"),
        ("decline", "ada"),
        ("decline", "grace"),
        ("cancel", "agent"),
        ("withdraw", "ada"),
        ("withdraw", "grace"),
        ("expire", "server"),
    ]
)


@dataclass
class Case:
    named: tuple[str, ...]
    deadline: bool
    ops: list[tuple[str, str]]


CASES = st.builds(
    Case,
    named=st.sampled_from([(), ("grace",), ("ada",), ("ada", "grace")]),
    deadline=st.booleans(),
    ops=st.lists(OPS, min_size=1, max_size=5),
)


def expected(
    case: Case, op: tuple[str, str], ended: EndingKind | None
) -> tuple[str, EndingKind | None]:
    """What the rules say a step does: ("ok" | "same" | "denied" | "conflict" |
    "nothing", the ending after it)."""
    what, who = op
    if what in ("answer", "decline"):
        if case.named and who not in case.named:
            return "denied", ended
        if ended is not None:
            return "conflict", ended
        return "ok", EndingKind.ANSWERED if what == "answer" else EndingKind.DECLINED
    if what == "withdraw" and who != "ada":
        return "denied", ended
    if what in ("cancel", "withdraw"):
        kind = EndingKind.WITHDRAWN_BY_AGENT if what == "cancel" else EndingKind.WITHDRAWN_BY_OWNER
        if ended is kind:
            return "same", ended
        if ended is not None:
            return "conflict", ended
        return "ok", kind
    if case.deadline and ended is None:
        return "ok", EndingKind.EXPIRED
    return "nothing", ended


async def setup(world: World, case: Case) -> tuple[Actor, Channel, dict[str, Actor]]:
    agent = await world.add_account(f"a-{uuid.uuid4().hex[:8]}", AccountKind.AGENT)
    channel = await world.store.create_channel(
        world.human,
        f"c-{uuid.uuid4().hex[:6]}",
        "",
        [agent.account_id, world.other_human.account_id],
    )
    return agent, channel, {"ada": world.human, "grace": world.other_human, "agent": agent}


SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(case=CASES)
async def test_any_sequence_of_endings_leaves_exactly_what_the_rules_say(
    world: World, case: Case
) -> None:
    store = world.store
    agent, channel, who = await setup(world, case)
    ask = two_question_ask()
    ask = Ask(
        ask.questions,
        answerer_ids=tuple(who[n].account_id for n in case.named),
        timeout=datetime.timedelta(hours=1) if case.deadline else None,
    )
    mark = await store.last_event_id(world.human)
    message = await store.append_message(agent, channel.channel_id, [ask])
    (posted,) = message.blocks
    assert isinstance(posted, Ask)
    ask_id = posted.ask_id
    lane = hears(agent.account_id, await Reach.of(Participations(store), agent))

    ended: EndingKind | None = None
    for op in case.ops:
        outcome, after = expected(case, op, ended)
        what, by = op
        try:
            if what == "answer":
                await store.answer_ask(who[by], ask_id, GOOD)
            elif what == "decline":
                await store.decline_ask(who[by], ask_id, "not now")
            elif what == "cancel":
                _, changed = await store.cancel_ask(agent, ask_id)
                assert changed == (outcome == "ok"), (op, outcome)
            elif what == "withdraw":
                _, changed = await store.withdraw_ask(who[by], ask_id)
                assert changed == (outcome == "ok"), (op, outcome)
            elif case.deadline:
                # The clock moves past the deadline (or a stale index says so).
                async with store.db.tx(world.human) as conn:
                    await conn.execute(
                        "UPDATE asks SET due_at = now() WHERE ask_id = %s", (ask_id,)
                    )
                await store.expire_due_asks()
            assert outcome in ("ok", "same", "nothing"), (op, outcome)
        except StoreError as exc:
            if outcome == "denied":
                assert isinstance(exc, PermissionDenied), (op, exc)
            else:
                assert outcome == "conflict" and isinstance(exc, Conflict), (op, exc)
                assert ended is not None and exc.message.endswith(SAID[ended]), (op, exc)
        ended = after
        await check(world, agent, channel, message.message_id, ask_id, ended, mark, lane)


async def check(
    world: World,
    agent: Actor,
    channel: Channel,
    message_id: uuid.UUID,
    ask_id: str,
    ended: EndingKind | None,
    mark: int,
    lane: object,
) -> None:
    store = world.store
    stored = (await store.get_message(world.human, message_id)).ask(ask_id)
    assert stored is not None
    assert (stored.ending.kind if stored.ending else None) is ended
    assert stored.answered == (ended is EndingKind.ANSWERED)
    assert stored.cancelled == (
        ended in (EndingKind.WITHDRAWN_BY_AGENT, EndingKind.WITHDRAWN_BY_OWNER)
    )
    assert all(q.timed_out for q in stored.questions) == (ended is EndingKind.EXPIRED)

    page = await store.list_messages(world.human, channel.channel_id, 200, "")
    answers = [b for m in page.items for b in m.blocks if isinstance(b, AskAnswerBlock)]
    assert len(answers) == (1 if ended is EndingKind.ANSWERED else 0)

    record = await store.ask_history(world.human, ask_id)
    assert [e.change for e in record.entries] == [AskChange.POSTED] + (
        [AskChange(ended.value)] if ended else []
    )

    events = await store.read_events(world.human, mark, 200)
    heard = [e for e in events if lane(e)]  # type: ignore[operator]
    endings = [
        e
        for e in heard
        if e.kind is EventKind.MESSAGE_UPDATED
        and e.message is not None
        and (a := e.message.ask(ask_id)) is not None
        and a.ending is not None
    ]
    # One signal per change by someone else: an answer comes as its answer
    # message, the agent's own withdrawal not at all, any other ending as the
    # ask's update.
    answer_messages = [
        e
        for e in heard
        if e.kind is EventKind.MESSAGE_POSTED
        and e.message is not None
        and any(isinstance(b, AskAnswerBlock) and b.ask_id == ask_id for b in e.message.blocks)
    ]
    assert len(answer_messages) == (1 if ended is EndingKind.ANSWERED else 0)
    told = ended is not None and ended not in (EndingKind.ANSWERED, EndingKind.WITHDRAWN_BY_AGENT)
    assert len(endings) == (1 if told else 0)
    if told:
        ending = endings[0].message.ask(ask_id).ending  # type: ignore[union-attr]
        assert ending is not None and ending.kind is ended

    (presence,) = await store.get_presence(world.human, [agent.account_id])
    assert (presence.state is PresenceState.WAITING) == (ended is None)
