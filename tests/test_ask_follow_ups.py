"""Follow-ups: an ask's reminders and escalation come at their times, each
once, whichever server is up; a step never lands after the ask ended; the
people an escalation adds may answer, and the steps are in the ask as every
reader sees it."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.asks import Expiry
from compass_server.store import Database, InvalidArgument, PermissionDenied, Store
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.types import (
    Answer,
    Ask,
    EndingKind,
    EventKind,
    FollowUp,
    FollowUpStep,
    TextBlock,
)
from tests.conftest import _with_db
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_faults import invariants
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(300)

GOOD = [Answer("db", ("pg",)), Answer("langs", ("py",))]
SHORT = DeadlineBounds(datetime.timedelta(milliseconds=1), datetime.timedelta(days=30))
S = datetime.timedelta(seconds=1)


def only_ask(message: Any) -> Ask:
    (ask,) = [b for b in message.blocks if isinstance(b, Ask)]
    return ask


async def steps_of(w: World, ask_id: str) -> tuple[FollowUpStep, ...]:
    return (await w.store._ask_state(w.human, ask_id)).follow_up_steps


async def follow_up_at(db: Database, ask_id: str) -> datetime.datetime | None:
    async with await psycopg.AsyncConnection.connect(db.url) as conn:
        cur = await conn.execute("SELECT follow_up_at FROM asks WHERE ask_id = %s", (ask_id,))
        row = await cur.fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def test_reminders_then_an_escalation_at_their_times(world: World, db: Database) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world
    await store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ask = dataclasses.replace(
        two_question_ask(),
        timeout=30 * S,
        answerer_ids=(w.human.account_id,),
        follow_up=FollowUp(
            remind_after=0.4 * S,
            remind_times=2,
            escalate_after=1.2 * S,
            escalate_to=(w.other_human.account_id,),
        ),
    )
    mark = await store.last_event_id(w.human)
    posted = await store.append_message(w.agent, w.channel.channel_id, [ask])
    ask_id = only_ask(posted).ask_id
    created = posted.created_at
    assert created is not None
    # Not named and not yet escalated to: the other person may not answer.
    with pytest.raises(PermissionDenied):
        await store.answer_ask(w.other_human, ask_id, GOOD)

    expiry = Expiry(store, interval=0.1)
    await expiry.start()
    try:
        give_up = asyncio.get_running_loop().time() + 20
        while len(await steps_of(w, ask_id)) < 3:
            assert asyncio.get_running_loop().time() < give_up, await steps_of(w, ask_id)
            await asyncio.sleep(0.05)
        # Nothing is left: two reminders at most, one escalation.
        await asyncio.sleep(1.0)
    finally:
        await expiry.stop()
    first, second, escalated = await steps_of(w, ask_id)
    assert [s.kind for s in (first, second, escalated)] == ["reminded", "reminded", "escalated"]
    # Each no sooner than due, and promptly (a loaded machine allowed for).
    assert created + 0.4 * S <= first.at < created + 3 * S
    assert first.at + 0.4 * S <= second.at < first.at + 3 * S
    assert created + 1.2 * S <= escalated.at < created + 4 * S
    assert first.account_ids == second.account_ids == (w.human.account_id,)
    assert escalated.account_ids == (w.other_human.account_id,)
    assert escalated.urgent and not first.urgent and not second.urgent
    assert await follow_up_at(db, ask_id) is None
    # Each step is an event the page and the mail read.
    events = await store.read_events(w.human, mark, 100)
    updated = [
        only_ask(e.message).follow_up_steps
        for e in events
        if e.kind is EventKind.MESSAGE_UPDATED and e.message is not None
    ]
    assert [len(s) for s in updated] == [1, 2, 3]
    # The person escalated to answers it now.
    await store.answer_ask(w.other_human, ask_id, GOOD)
    ended = await store._ask_state(w.human, ask_id)
    assert ended.ending is not None and ended.ending.actor_id == w.other_human.account_id
    await invariants(db.url, w.workspace_id)


async def test_a_step_racing_an_answer_loses_cleanly(world: World, db: Database) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world
    # Due in 3 s: room for a loaded machine to hold the row before it is due.
    ask = dataclasses.replace(
        two_question_ask(), follow_up=FollowUp(remind_after=3 * S, remind_times=3)
    )
    posted = time.monotonic()
    held = await store.append_message(w.agent, w.channel.channel_id, [ask])
    ask_id = only_ask(held).ask_id
    # An answer holds the row as the reminder comes due: the sweep skips
    # it without waiting, and once the answer commits no step follows.
    async with await psycopg.AsyncConnection.connect(db.url) as lock:
        await lock.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (held.message_id,))
        assert time.monotonic() - posted < 3, "the row was held only after the reminder was due"
        answering = asyncio.ensure_future(store.answer_ask(w.human, ask_id, GOOD))
        await asyncio.sleep(max(0.5, posted + 3.3 - time.monotonic()))
        assert not answering.done()
        assert await asyncio.wait_for(store.take_follow_ups(), 5) == 0
        await lock.commit()
    await answering
    await store.take_follow_ups()
    final = await store._ask_state(w.human, ask_id)
    assert final.ending is not None and final.ending.kind is EndingKind.ANSWERED
    assert final.follow_up_steps == ()
    assert await follow_up_at(db, ask_id) is None

    # Ended, yet still indexed as due: the state on the locked row decides.
    other = await store.append_message(w.agent, w.channel.channel_id, [ask])
    other_id = only_ask(other).ask_id
    await store.cancel_ask(w.agent, other_id)
    async with await psycopg.AsyncConnection.connect(db.url) as conn:
        await conn.execute(
            "UPDATE asks SET follow_up_at = now() - interval '1 second' WHERE ask_id = %s",
            (other_id,),
        )
    await store.take_follow_ups()
    assert (await steps_of(w, other_id)) == ()
    assert await follow_up_at(db, other_id) is None
    await invariants(db.url, w.workspace_id)


async def test_no_step_at_or_after_the_deadline(world: World, db: Database) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world
    ask = dataclasses.replace(
        two_question_ask(),
        timeout=0.5 * S,
        follow_up=FollowUp(remind_after=0.3 * S, remind_times=5),
    )
    posted = await store.append_message(w.agent, w.channel.channel_id, [ask])
    ask_id = only_ask(posted).ask_id
    expiry = Expiry(store, interval=0.1)
    await expiry.start()
    try:
        await asyncio.sleep(1.5)
    finally:
        await expiry.stop()
    final = await store._ask_state(w.human, ask_id)
    assert final.ending is not None and final.ending.kind is EndingKind.EXPIRED
    # One reminder before the deadline; the next would have come after it.
    assert [s.kind for s in final.follow_up_steps] == ["reminded"]
    assert await follow_up_at(db, ask_id) is None


# --- what a client sends ---------------------------------------------------------------------


def ask_block(follow_up: pb.AskFollowUp, **fields: Any) -> pb.MessageBlock:
    block = pb.MessageBlock(
        ask=pb.Ask(
            questions=[
                pb.AskQuestion(
                    question_id="q", question="Go?", options=[pb.AskOption(id="y", label="Yes")]
                )
            ],
            **fields,
        )
    )
    block.ask.follow_up.CopyFrom(follow_up)
    return block


def policy(
    remind: float | None = None,
    times: int = 0,
    escalate: float | None = None,
    to: tuple[str, ...] = (),
    owner: bool = False,
) -> pb.AskFollowUp:
    f = pb.AskFollowUp(
        remind_times=times, escalate_to_account_ids=list(to), escalate_to_owner=owner
    )
    if remind is not None:
        f.remind_after.FromTimedelta(remind * S)
    if escalate is not None:
        f.escalate_after.FromTimedelta(escalate * S)
    return f


async def post_through(client: GrpcClient, w: World, block: pb.MessageBlock) -> pb.Ask:
    res = await client.call(
        "PostMessage",
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id), blocks=[block], allow_identical=True
        ),
        w.tokens[w.agent.account_id],
    )
    return res.message.blocks[0].ask


@pytest.fixture
async def fresh_database_url(pg_admin_url: str) -> AsyncIterator[str]:
    """A database of its own, so no other server's loop sweeps it."""
    name = f"compass_follow_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"'.encode())
    yield _with_db(pg_admin_url, name)
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


ENV = {
    "COMPASS_ASK_DEADLINE_MIN_SECONDS": "0.1",
    "COMPASS_EXPIRY_INTERVAL_SECONDS": "1",
    "COMPASS_LOG_LEVEL": "INFO",
}


async def test_bad_policies_are_refused_with_reasons(fresh_database_url: str) -> None:
    url = fresh_database_url
    db = Database(url, min_size=1, max_size=4)
    await db.open()
    w = await World.create(Store(db))
    server = ServerProcess(url, env=ENV).start()
    client = GrpcClient(server.grpc_port)
    stranger = str(uuid.uuid4())
    try:
        cases = [
            (policy(remind=1, times=6), "remind_times must be 0 to 5"),
            (policy(times=2), "remind_times without remind_after"),
            (policy(remind=0.01), "remind_after must be"),
            (policy(remind=8 * 86400), "remind_after must be"),
            (policy(escalate=1), "escalates to nobody"),
            (policy(owner=True), "without escalate_after"),
            (policy(escalate=1, to=(stranger,)), "not a person in this channel"),
            (policy(escalate=1, to=(stranger, stranger)), "escalates to a person twice"),
            (policy(escalate=1, to=("nope",)), "escalate_to_account_ids has 'nope'"),
        ]
        for f, said in cases:
            with pytest.raises(CallError) as err:
                await post_through(client, w, ask_block(f))
            assert err.value.code == "invalid_argument", (f, err.value)
            assert said in err.value.message, (said, err.value.message)
        with pytest.raises(CallError) as err:
            await post_through(
                client,
                w,
                ask_block(
                    policy(escalate=1, owner=True),
                    answerer_account_ids=[str(w.human.account_id)],
                    quorum=1,
                ),
            )
        assert "escalates a quorum ask" in err.value.message
        # A good one reads back as sent, with no steps yet: steps a client
        # sends are the server's to write, and dropped.
        good = ask_block(policy(remind=60, escalate=120, owner=True))
        good.ask.follow_up_steps.add(
            kind=pb.ASK_FOLLOW_UP_STEP_KIND_ESCALATED, account_ids=[stranger], urgent=True
        )
        ask = await post_through(client, w, good)
        assert ask.follow_up.remind_after.ToTimedelta() == 60 * S
        assert ask.follow_up.remind_times == 1
        assert ask.follow_up.escalate_to_owner and not ask.follow_up_steps
    finally:
        await client.close()
        server.stop()
        await db.close()


async def test_two_servers_and_restarts_take_each_step_once(fresh_database_url: str) -> None:
    url = fresh_database_url
    db = Database(url, min_size=1, max_size=4)
    await db.open()
    w = await World.create(Store(db))
    a = ServerProcess(url, env=ENV).start()
    b = ServerProcess(url, env=ENV).start()
    clients = [GrpcClient(a.grpc_port), GrpcClient(b.grpc_port)]
    try:
        mark = await w.store.last_event_id(w.human)
        # Two reminders 0.5 s apart, then the agent's owner added at 1.5 s.
        f = policy(remind=0.5, times=2, escalate=1.5, owner=True)
        asks = list(
            await asyncio.gather(
                *(post_through(clients[i % 2], w, ask_block(f)) for i in range(30))
            )
        )
        ask_ids = [x.ask_id for x in asks]
        # One server dies before any step, the other stops mid-way and
        # comes back; the first comes back later.
        await asyncio.sleep(0.2)
        await clients[0].close()
        a.kill9()
        await asyncio.sleep(0.6)
        assert b.stop() == 0
        await asyncio.sleep(0.5)
        b.start()
        await asyncio.sleep(0.5)
        a.start()
        give_up = asyncio.get_running_loop().time() + 30
        while True:
            counts = [len(await steps_of(w, i)) for i in ask_ids]
            if all(c >= 3 for c in counts):
                break
            assert asyncio.get_running_loop().time() < give_up, counts
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.5)  # anything taken twice would show by now
        for ask_id in ask_ids:
            steps = await steps_of(w, ask_id)
            # Late after the outage, the escalation may come between the
            # reminders (it goes first when both are due).
            assert sorted(s.kind for s in steps) == ["escalated", "reminded", "reminded"], steps
            (escalation,) = [s for s in steps if s.kind == "escalated"]
            assert escalation.account_ids == (w.human.account_id,) and escalation.urgent
            assert await follow_up_at(db, ask_id) is None
        events = await w.store.read_events(w.human, mark, 1000)
        per_ask: dict[str, int] = {}
        for e in events:
            if e.kind is EventKind.MESSAGE_UPDATED and e.message is not None:
                per_ask[only_ask(e.message).ask_id] = per_ask.get(only_ask(e.message).ask_id, 0) + 1
        assert per_ask == {i: 3 for i in ask_ids}
        await invariants(url, w.workspace_id)
    finally:
        await clients[1].close()
        a.stop()
        b.stop()
        await db.close()
    for server in (a, b):
        assert not [line for line in server.log if "expiring asks failed" in line], server.log


# --- the servers' default -------------------------------------------------------------------


def test_the_default_policy_setting_parses_or_says_why() -> None:
    from compass_server.store.blocks import follow_up_default

    assert follow_up_default("") is None
    f = follow_up_default("remind=30m,times=2,escalate=4h,owner")
    assert f == FollowUp(
        remind_after=30 * 60 * S,
        remind_times=2,
        escalate_after=4 * 3600 * S,
        escalate_to_owner=True,
    )
    for bad, said in [
        ("remind=soon", "is not remind=WAIT"),
        ("remind=30m,times=9", "remind_times must be 0 to 5"),
        ("escalate=1h", "escalates to nobody"),
        ("remind=0s", "more than 0"),
        ("owner", "without escalate_after"),
    ]:
        with pytest.raises(ValueError, match=said):
            follow_up_default(bad)


async def test_an_ask_without_a_policy_takes_the_default(world: World, db: Database) -> None:
    from compass_server.store.blocks import follow_up_default

    store = Store(db, deadline_bounds=SHORT)
    store.follow_up_default = follow_up_default("remind=0.3s,escalate=0.6s,owner")
    w = world
    await store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    plain = two_question_ask()
    took = only_ask(await store.append_message(w.agent, w.channel.channel_id, [plain]))
    assert took.follow_up == FollowUp(
        remind_after=0.3 * S, remind_times=1, escalate_after=0.6 * S, escalate_to_owner=True
    )
    # An empty policy sent is none; a quorum ask keeps the reminders only.
    opted_out = only_ask(
        await store.append_message(
            w.agent, w.channel.channel_id, [dataclasses.replace(plain, follow_up=FollowUp())]
        )
    )
    assert opted_out.follow_up is None
    quorum = only_ask(
        await store.append_message(
            w.agent,
            w.channel.channel_id,
            [dataclasses.replace(plain, answerer_ids=(w.other_human.account_id,), quorum=1)],
        )
    )
    assert quorum.follow_up == FollowUp(remind_after=0.3 * S, remind_times=1)
    expiry = Expiry(store, interval=0.1)
    await expiry.start()
    try:
        give_up = asyncio.get_running_loop().time() + 20
        while len(await steps_of(w, took.ask_id)) < 2 or not await steps_of(w, quorum.ask_id):
            assert asyncio.get_running_loop().time() < give_up
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
    finally:
        await expiry.stop()
    reminded, escalated = await steps_of(w, took.ask_id)
    # The channel is reminded (the ask names nobody); the agent's owner is added.
    assert reminded.kind == "reminded" and reminded.account_ids == ()
    assert escalated.kind == "escalated" and escalated.account_ids == (w.human.account_id,)
    assert await steps_of(w, opted_out.ask_id) == ()
    assert [s.account_ids for s in await steps_of(w, quorum.ask_id)] == [
        (w.other_human.account_id,)
    ]


async def test_an_escalation_reposts_the_ask_in_another_channel(world: World, db: Database) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world
    oncall = await store.create_channel(w.human, "oncall", "", [w.agent.account_id])
    elsewhere = await store.create_channel(w.human, "elsewhere", "", [])
    policy_to = lambda c: FollowUp(escalate_after=0.4 * S, escalate_to_channel=c)  # noqa: E731
    # Only a channel the asker may post in.
    with pytest.raises(InvalidArgument, match="which you can't post in"):
        await store.append_message(
            w.agent,
            w.channel.channel_id,
            [dataclasses.replace(two_question_ask(), follow_up=policy_to(elsewhere.channel_id))],
        )
    mark = await store.last_event_id(w.human)
    posted = await store.append_message(
        w.agent,
        w.channel.channel_id,
        [dataclasses.replace(two_question_ask(), follow_up=policy_to(oncall.channel_id))],
    )
    ask_id = only_ask(posted).ask_id
    expiry = Expiry(store, interval=0.1)
    await expiry.start()
    try:
        give_up = asyncio.get_running_loop().time() + 20
        while not await steps_of(w, ask_id):
            assert asyncio.get_running_loop().time() < give_up
            await asyncio.sleep(0.05)
    finally:
        await expiry.stop()
    (step,) = await steps_of(w, ask_id)
    assert step.kind == "escalated" and step.urgent and step.account_ids == ()
    assert step.reposted_channel == oncall.channel_id
    page = await store.list_messages(w.human, oncall.channel_id, 10, "")
    (note,) = page.items
    assert note.message_id == step.repost_message and note.author_id == w.agent.account_id
    (text,) = note.blocks
    assert isinstance(text, TextBlock)
    assert text.text.startswith(f"Still waiting for an answer in #general (ask {ask_id}): ")
    events = await store.read_events(w.human, mark, 100)
    assert [
        (e.kind, e.message.channel_id if e.message else None)
        for e in events
        if e.kind in (EventKind.MESSAGE_POSTED, EventKind.MESSAGE_UPDATED)
    ][-2:] == [
        (EventKind.MESSAGE_UPDATED, w.channel.channel_id),
        (EventKind.MESSAGE_POSTED, oncall.channel_id),
    ]
    await invariants(db.url, w.workspace_id)
