"""Deadlines: the sweep never expires an ask that ended first, several server
processes on one database expire each ask once, and a deadline that passed
while every server was down expires as soon as one starts."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Conflict, Database, Store
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.types import (
    Answer,
    Ask,
    AskChange,
    EndingKind,
    EventKind,
    PresenceState,
)
from tests.conftest import _with_db
from tests.procs import ServerProcess
from tests.servers import GrpcClient
from tests.test_faults import invariants
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(300)

GOOD = [Answer("db", ("pg",)), Answer("langs", ("py",))]
SHORT = DeadlineBounds(datetime.timedelta(milliseconds=1), datetime.timedelta(days=30))


def soon(seconds: float) -> Ask:
    return dataclasses.replace(two_question_ask(), timeout=datetime.timedelta(seconds=seconds))


def only_ask(message: Any) -> Ask:
    (ask,) = [b for b in message.blocks if isinstance(b, Ask)]
    return ask


async def state(w: World, message_id: uuid.UUID) -> Ask:
    return only_ask(await w.store.get_message(w.human, message_id))


async def endings(store: Store, w: World, ask_id: str) -> list[AskChange]:
    record = await store.ask_history(w.human, ask_id)
    return [e.change for e in record.entries if e.change is not AskChange.POSTED]


async def due_again(db: Database, w: World, ask_id: str) -> None:
    """The ask's index entry says it is due, as a sweep that read it before the
    ending committed would have found it."""
    async with db.tx(w.human) as conn:
        await conn.execute(
            "UPDATE asks SET due_at = now() - interval '1 second' WHERE ask_id = %s", (ask_id,)
        )


# --- the sweep on one database ----------------------------------------------------------


async def test_an_ask_answered_first_is_never_expired(world: World, db: Database) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world

    # Answered well before its deadline: nothing is left to expire.
    early = await store.append_message(w.agent, w.channel.channel_id, [soon(0.2)])
    await store.answer_ask(w.human, only_ask(early).ask_id, GOOD)
    await asyncio.sleep(0.3)
    await store.expire_due_asks()
    assert (await state(w, early.message_id)).ending.kind is EndingKind.ANSWERED  # type: ignore[union-attr]

    # Due, but a change holds the ask: the sweep skips it without waiting.
    # The row is locked before the deadline passes, so no other sweep (a
    # server of this test run shares the database) can end it first.
    held = await store.append_message(w.agent, w.channel.channel_id, [soon(0.3)])
    ask_id = only_ask(held).ask_id
    async with await psycopg.AsyncConnection.connect(db.url) as lock:
        await lock.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (held.message_id,))
        answering = asyncio.ensure_future(store.answer_ask(w.human, ask_id, GOOD))
        await asyncio.sleep(0.4)
        assert not answering.done()
        assert await asyncio.wait_for(store.expire_due_asks(), 5) == 0
        await lock.commit()
    # The answer asked before the deadline but holds the row after it: the
    # deadline decides under the lock.
    with pytest.raises(Conflict, match="expired"):
        await answering
    assert (await state(w, held.message_id)).ending.kind is EndingKind.EXPIRED  # type: ignore[union-attr]
    assert await endings(store, w, ask_id) == [AskChange.EXPIRED]

    # Answered, yet still indexed as due: the state on the locked row decides.
    early_id = only_ask(early).ask_id
    await due_again(db, w, early_id)
    await store.expire_due_asks()
    final = await state(w, early.message_id)
    assert final.answered and final.ending.kind is EndingKind.ANSWERED  # type: ignore[union-attr]
    assert not any(q.timed_out for q in final.questions)
    assert await endings(store, w, early_id) == [AskChange.ANSWERED]
    await invariants(db.url, w.workspace_id)


async def test_every_other_ending_also_wins_over_a_later_deadline(
    world: World, db: Database
) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world
    await store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ends = {
        EndingKind.DECLINED: lambda a: store.decline_ask(w.other_human, a, "no"),
        EndingKind.WITHDRAWN_BY_AGENT: lambda a: store.cancel_ask(w.agent, a),
        EndingKind.WITHDRAWN_BY_OWNER: lambda a: store.withdraw_ask(w.human, a),
    }
    for kind, end in ends.items():
        message = await store.append_message(w.agent, w.channel.channel_id, [soon(30)])
        ask_id = only_ask(message).ask_id
        await end(ask_id)
        await due_again(db, w, ask_id)
        await store.expire_due_asks()
        assert (await state(w, message.message_id)).ending.kind is kind  # type: ignore[union-attr]
        assert await endings(store, w, ask_id) == [AskChange(kind.value)]


async def test_the_sweep_ends_due_asks_once_with_their_events(world: World, db: Database) -> None:
    store = Store(db, deadline_bounds=SHORT)
    w = world
    mark = await store.last_event_id(w.human)
    posted = [
        await store.append_message(w.agent, w.channel.channel_id, [soon(0.05)]) for _ in range(5)
    ]
    later = await store.append_message(w.agent, w.channel.channel_id, [soon(3600)])
    assert (await store.get_presence(w.human, [w.agent.account_id]))[0].state is (
        PresenceState.WAITING
    )
    await asyncio.sleep(0.1)
    # Two small sweeps at once share the due asks between them.
    await asyncio.gather(store.expire_due_asks(2), store.expire_due_asks(2))
    await store.expire_due_asks()
    for m in posted:
        ask = await state(w, m.message_id)
        assert ask.ending is not None and ask.ending.kind is EndingKind.EXPIRED
        assert ask.ending.actor_id is None and ask.ending.at is not None
        assert all(q.timed_out for q in ask.questions)
    assert (await state(w, later.message_id)).is_open
    events = await store.read_events(w.human, mark, 100)
    updates = [e for e in events if e.kind is EventKind.MESSAGE_UPDATED]
    assert sorted(e.message.message_id for e in updates if e.message) == sorted(
        m.message_id for m in posted
    )
    # The later ask still waits; withdrawing it clears WAITING.
    assert (await store.get_presence(w.human, [w.agent.account_id]))[0].state is (
        PresenceState.WAITING
    )
    await store.cancel_ask(w.agent, only_ask(later).ask_id)
    assert (await store.get_presence(w.human, [w.agent.account_id]))[0].state is not (
        PresenceState.WAITING
    )
    await invariants(db.url, w.workspace_id)


# --- server processes ---------------------------------------------------------------------


@pytest.fixture
async def fresh_database_url(pg_admin_url: str) -> AsyncIterator[str]:
    """A database of its own, so no other server's loop sweeps it."""
    name = f"compass_expiry_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"'.encode())
    yield _with_db(pg_admin_url, name)
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


ENV = {"COMPASS_ASK_DEADLINE_MIN_SECONDS": "0.1", "COMPASS_LOG_LEVEL": "INFO"}


def ask_block(seconds: float) -> pb.MessageBlock:
    block = pb.MessageBlock(
        ask=pb.Ask(
            questions=[
                pb.AskQuestion(
                    question_id="q", question="Go?", options=[pb.AskOption(id="y", label="Yes")]
                )
            ]
        )
    )
    block.ask.timeout.FromTimedelta(datetime.timedelta(seconds=seconds))
    return block


async def post_through(client: GrpcClient, w: World, seconds: float) -> str:
    res = await client.call(
        "PostMessage",
        # Each its own ask, though they ask the same.
        pb.PostMessageRequest(
            channel_id=str(w.channel.channel_id), blocks=[ask_block(seconds)], allow_identical=True
        ),
        w.tokens[w.agent.account_id],
    )
    return res.message.blocks[0].ask.ask_id  # type: ignore[no-any-return]


async def open_world(url: str) -> tuple[Database, World]:
    db = Database(url, min_size=1, max_size=4)
    await db.open()
    return db, await World.create(Store(db))


async def still_due(url: str, ask_ids: list[str]) -> list[str]:
    """The asks whose rows no ending has reached (a read shows them expired
    once past their deadline, swept or not)."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT ask_id FROM asks WHERE ask_id = ANY(%s) AND due_at IS NOT NULL", (ask_ids,)
        )
        return [r[0] for r in await cur.fetchall()]


async def until_all_ended(w: World, ask_ids: list[str], wait: float = 20.0) -> None:
    give_up = asyncio.get_running_loop().time() + wait
    while True:
        left = await still_due(w.store.db.url, ask_ids)
        if not left:
            return
        assert asyncio.get_running_loop().time() < give_up, f"{len(left)} never expired"
        await asyncio.sleep(0.1)


async def expired_once(w: World, ask_ids: list[str], mark: int) -> None:
    for ask_id in ask_ids:
        ended = await w.store._ask_state(w.human, ask_id)
        assert ended.ending is not None and ended.ending.kind is EndingKind.EXPIRED
        assert await endings(w.store, w, ask_id) == [AskChange.EXPIRED]
    events = await w.store.read_events(w.human, mark, 1000)
    updated = [
        only_ask(e.message).ask_id
        for e in events
        if e.kind is EventKind.MESSAGE_UPDATED and e.message is not None
    ]
    assert sorted(updated) == sorted(ask_ids)


async def test_two_servers_on_one_database_expire_each_ask_once(fresh_database_url: str) -> None:
    url = fresh_database_url
    db, w = await open_world(url)
    env = {**ENV, "COMPASS_EXPIRY_INTERVAL_SECONDS": "1"}
    a = ServerProcess(url, env=env).start()
    b = ServerProcess(url, env=env).start()
    clients = [GrpcClient(a.grpc_port), GrpcClient(b.grpc_port)]
    try:
        mark = await w.store.last_event_id(w.human)
        # Both servers hear of deadlines: half are posted through each.
        ask_ids = list(
            await asyncio.gather(
                *(post_through(clients[i % 2], w, 0.6 + (i % 5) * 0.1) for i in range(40))
            )
        )
        await until_all_ended(w, ask_ids)
        await expired_once(w, ask_ids, mark)
        (presence,) = await w.store.get_presence(w.human, [w.agent.account_id])
        assert presence.state is not PresenceState.WAITING

        # A server dies right after taking deadlines: the other, which never
        # heard of them, expires them on its interval.
        mark = await w.store.last_event_id(w.human)
        orphans = [await post_through(clients[0], w, 0.3) for _ in range(10)]
        a.kill9()
        await until_all_ended(w, orphans, wait=10)
        await expired_once(w, orphans, mark)
        await invariants(url, w.workspace_id)
    finally:
        for c in clients:
            await c.close()
        a.stop()
        assert b.stop() == 0
        await db.close()
    # Sweeping side by side, neither server ever failed a sweep.
    for server in (a, b):
        assert not [line for line in server.log if "expiring asks failed" in line], server.log


async def test_deadlines_passed_while_every_server_was_down_expire_at_start(
    fresh_database_url: str,
) -> None:
    url = fresh_database_url
    db, w = await open_world(url)
    server = ServerProcess(url, env=ENV).start()
    try:
        client = GrpcClient(server.grpc_port)
        ask_ids = [await post_through(client, w, 0.5) for _ in range(3)]
        await client.close()
        assert server.stop() == 0
        await asyncio.sleep(0.8)
        # Past due with no server up: nothing ended them (reads show them
        # expired all the same).
        assert sorted(await still_due(url, ask_ids)) == sorted(ask_ids)
        server.start()
        # Swept before the server said it was ready.
        assert await still_due(url, ask_ids) == []
        for ask_id in ask_ids:
            ended = await w.store._ask_state(w.human, ask_id)
            assert ended.ending is not None and ended.ending.kind is EndingKind.EXPIRED
        await invariants(url, w.workspace_id)
    finally:
        server.stop()
        await db.close()
