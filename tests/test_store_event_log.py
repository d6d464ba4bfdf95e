"""The event log: each event is written once, numbered as its transaction
commits, densely and in causal order; a write that finds the workspace's
counter held waits for it only at its commit."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from compass_server.store import Database, Store
from compass_server.store.types import Answer, Ask, EventKind, Message
from tests.world import World


def ask_id_of(message: Message) -> str:
    block = message.blocks[0]
    assert isinstance(block, Ask)
    return block.ask_id


@contextlib.asynccontextmanager
async def as_app(db: Database, world: World) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection as the request path's role, scoped by world's person."""
    async with await psycopg.AsyncConnection.connect(db.url) as conn:
        await conn.execute("SET ROLE compass_app")
        await conn.execute(
            "SELECT set_config('compass.credential', %s, false)", (world.human.credential.hex(),)
        )
        await conn.commit()
        yield conn


def presence(world: World, text: str, pad: int = 0) -> Jsonb:
    return Jsonb(
        {
            "account_id": str(world.agent.account_id),
            "state": "working",
            "status_text": text + " " * pad,
        }
    )


async def append(
    conn: psycopg.AsyncConnection[Any], world: World, texts: list[str], pad: int = 0
) -> None:
    await conn.execute(
        "SELECT compass_append_events_to(%s, %s, %s::uuid[], %s)",
        (
            world.workspace_id,
            ["presence_changed"] * len(texts),
            [None] * len(texts),
            [presence(world, t, pad) for t in texts],
        ),
    )


async def texts_after(world: World, start: int, limit: int = 100) -> list[tuple[int, str]]:
    events = await world.store.read_events(world.human, start, limit)
    return [(e.event_id, e.presence.status_text.strip()) for e in events if e.presence]


async def test_a_write_waits_at_its_commit_for_a_held_counter_and_is_numbered_then(
    db: Database, world: World
) -> None:
    start = await world.store.last_event_id(world.human)
    async with await psycopg.AsyncConnection.connect(db.url) as holder:
        await holder.execute(
            "SELECT 1 FROM event_counters WHERE workspace_id = %s FOR NO KEY UPDATE",
            (world.workspace_id,),
        )
        posting = asyncio.ensure_future(world.post_text(world.human, "after the holder"))
        await asyncio.sleep(0.3)
        assert not posting.done()  # its commit waits for the counter
        assert await world.store.read_events(world.human, start, 10) == []
        await holder.rollback()
    message = await asyncio.wait_for(posting, timeout=5)
    events = await world.store.read_events(world.human, start, 10)
    assert [(e.event_id, e.message.message_id if e.message else None) for e in events] == [
        (start + 1, message.message_id)
    ]


async def test_concurrent_lifecycles_in_one_workspace_write_each_event_once_densely_and_in_causal_order(  # noqa: E501
    db: Database, store: Store
) -> None:
    worlds = [await World.create(store)]
    base = worlds[0]
    for _ in range(11):
        worlds.append(await base.add_pair())
    start = await store.last_event_id(base.human)

    async def lifecycle(w: World) -> list[str]:
        ids = []
        for _ in range(5):
            ask_id = ask_id_of(await w.post_ask())
            await store.answer_ask(w.human, ask_id, [Answer("db"), Answer("langs")])
            ids.append(ask_id)
        return ids

    asked = [a for ids in await asyncio.gather(*(lifecycle(w) for w in worlds)) for a in ids]
    events = await store.read_events(base.human, start, 1000)
    assert [e.event_id for e in events] == list(range(start + 1, start + 1 + len(events)))
    seen: dict[str, list[str]] = {a: [] for a in asked}
    for e in events:
        if e.kind is EventKind.PRESENCE_CHANGED or e.message is None:
            continue
        for block in e.message.blocks:
            if isinstance(block, Ask) and block.ask_id in seen:
                seen[block.ask_id].append("answered" if block.answered else "posted")
    assert all(states == ["posted", "answered"] for states in seen.values()), seen
    # Each answer's events are rows its own transaction wrote, never rewritten
    # by a numbering after it: the rows' xmin is the answer message's.
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        rows = await (
            await conn.execute(
                "SELECT e.id, e.xmin::text AS event_tx, m.xmin::text AS message_tx"
                " FROM events e JOIN messages m ON m.id = (e.payload ->> 'message_id')::uuid"
                " WHERE e.workspace_id = %s AND e.id > %s AND e.kind = 'message_posted'"
                "   AND m.author_id = ANY(%s)",
                (base.workspace_id, start, [w.human.account_id for w in worlds]),
            )
        ).fetchall()
    assert len(rows) == len(asked)
    assert [r for r in rows if r["event_tx"] != r["message_tx"]] == []


async def test_one_transactions_thousands_of_appends_are_numbered_in_order(
    db: Database, world: World
) -> None:
    start = await world.store.last_event_id(world.human)
    async with as_app(db, world) as conn:
        for i in range(0, 5000, 10):
            await append(conn, world, [f"e{j}" for j in range(i, i + 10)], pad=900)
        await asyncio.wait_for(conn.commit(), timeout=60)
    got = []
    cursor = start
    while page := await texts_after(world, cursor, 1000):
        got += page
        cursor = page[-1][0]
    assert got == [(start + 1 + j, f"e{j}") for j in range(5000)]


async def test_the_events_of_a_rolled_back_savepoint_are_not_written(
    db: Database, world: World
) -> None:
    start = await world.store.last_event_id(world.human)
    async with as_app(db, world) as conn:
        await append(conn, world, ["kept 1"])
        await conn.execute("SAVEPOINT s")
        await append(conn, world, ["undone"])
        await conn.execute("ROLLBACK TO SAVEPOINT s")
        await append(conn, world, ["kept 2"])
        await conn.commit()
    assert await texts_after(world, start) == [(start + 1, "kept 1"), (start + 2, "kept 2")]
    assert await world.store.last_event_id(world.human) == start + 2


async def test_transactions_appending_to_two_workspaces_in_opposite_orders_both_commit(
    db: Database, store: Store
) -> None:
    a, b = await World.create(store), await World.create(store)
    starts = [await store.last_event_id(w.human) for w in (a, b)]
    async with (
        await psycopg.AsyncConnection.connect(db.url) as one,
        await psycopg.AsyncConnection.connect(db.url) as two,
    ):
        # As the owner's sweeps do, across workspaces.
        await append(one, a, ["one in a"])
        await append(two, b, ["two in b"])
        await append(one, b, ["one in b"])
        await append(two, a, ["two in a"])
        await asyncio.wait_for(asyncio.gather(one.commit(), two.commit()), timeout=10)
    for w, start in zip((a, b), starts, strict=True):
        got = await texts_after(w, start)
        assert [i for i, _ in got] == [start + 1, start + 2]
        name = "a" if w is a else "b"
        assert sorted(t for _, t in got) == [f"one in {name}", f"two in {name}"]


async def test_a_credential_cannot_append_to_another_workspace(db: Database, store: Store) -> None:
    a, b = await World.create(store), await World.create(store)
    start = await store.last_event_id(b.human)
    async with as_app(db, a) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await append(conn, b, ["into b"])
        await conn.rollback()
    assert await store.last_event_id(b.human) == start


async def test_appenders_waiting_on_each_others_rows_are_each_numbered_at_commit(
    db: Database, world: World
) -> None:
    """The counter is taken as a transaction commits, after every other lock:
    an appender waiting on a row another appender holds is numbered after it."""
    start = await world.store.last_event_id(world.human)
    async with (
        await psycopg.AsyncConnection.connect(db.url) as one,
        await psycopg.AsyncConnection.connect(db.url) as two,
    ):
        await append(one, world, ["one"])
        await one.execute(
            "SELECT 1 FROM channels WHERE id = %s FOR UPDATE", (world.channel.channel_id,)
        )
        await append(two, world, ["two"])
        waiting = asyncio.ensure_future(
            two.execute(
                "SELECT 1 FROM channels WHERE id = %s FOR UPDATE", (world.channel.channel_id,)
            )
        )
        await asyncio.sleep(0.2)
        await asyncio.wait_for(one.commit(), timeout=5)
        await asyncio.wait_for(waiting, timeout=5)
        await asyncio.wait_for(two.commit(), timeout=5)
    assert await texts_after(world, start) == [(start + 1, "one"), (start + 2, "two")]


async def test_events_staged_by_hand_for_another_workspace_are_refused_at_commit(
    db: Database, store: Store
) -> None:
    """A caller that writes the staged events' settings itself, naming a
    workspace it can't write to, has its transaction refused."""
    a, b = await World.create(store), await World.create(store)
    start = await store.last_event_id(b.human)
    async with as_app(db, a) as conn:
        await append(conn, a, ["own"])
        forged = Jsonb(
            {"w": str(b.workspace_id), "k": ["presence_changed"], "c": [None], "p": [{}]}
        )
        await conn.execute(
            "SELECT set_config('compass.staged_1',"
            " current_setting('compass.staged_1') || E'\\n' || %s::text, true)",
            (forged,),
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.commit()
    assert await store.last_event_id(b.human) == start
