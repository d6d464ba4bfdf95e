"""Workspace isolation, presence, sign-in and the block-writer guard."""

from __future__ import annotations

import inspect
import pathlib
import re
import typing
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from compass_server.store import Conflict, Database, NotFound, Store, Unauthenticated
from compass_server.store import types as T
from compass_server.store.types import Answer, Ask, AskQuestion, PresenceState
from tests.world import World

STORE_DIR = pathlib.Path(__file__).resolve().parents[1] / "compass_server" / "store"


async def test_a_query_that_forgets_the_workspace_filter_sees_only_its_workspace(
    db: Database, store: Store
) -> None:
    a = await World.create(store)
    b = await World.create(store)
    await a.post_text(a.human, "secret of a")
    await b.post_text(b.human, "secret of b")
    async with db.tx(a.workspace_id) as conn:
        # No WHERE at all: row-level security is what keeps b's rows out.
        rows = await (await conn.execute("SELECT workspace_id, blocks FROM messages")).fetchall()
        accounts = await (await conn.execute("SELECT workspace_id FROM accounts")).fetchall()
    assert rows and {r["workspace_id"] for r in rows} == {a.workspace_id}
    assert {r["workspace_id"] for r in accounts} == {a.workspace_id}


async def test_a_transaction_with_no_workspace_sees_no_rows(db: Database, world: World) -> None:
    await world.post_text(world.human, "hello")
    async with db.connection() as conn:
        rows = await (await conn.execute("SELECT 1 FROM messages")).fetchall()
    assert rows == []


async def test_a_write_into_another_workspace_is_refused_by_the_database(
    db: Database, store: Store
) -> None:
    a = await World.create(store)
    b = await World.create(store)
    async with db.tx(a.workspace_id) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(
                "INSERT INTO channels (id, workspace_id, name, kind)"
                " VALUES (%s, %s, 'x', 'channel')",
                (uuid.uuid4(), b.workspace_id),
            )


async def test_another_workspaces_ask_is_not_found(store: Store) -> None:
    a = await World.create(store)
    b = await World.create(store)
    message = await a.post_ask()
    ask_id = next(x for x in message.blocks if isinstance(x, Ask)).ask_id
    with pytest.raises(NotFound):
        await store.answer_ask(b.human, ask_id, [Answer("db"), Answer("langs")])


async def test_tokens_are_stored_hashed_and_sign_in(db: Database, world: World) -> None:
    token = world.tokens[world.agent.account_id]
    assert (await world.store.admin.sign_in(token)).principal == world.agent
    for wrong in (token + "x", ""):
        with pytest.raises(Unauthenticated):
            await world.store.admin.sign_in(wrong)
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        rows = await (await conn.execute("SELECT token_hash FROM credentials")).fetchall()
    assert all(token.encode() not in bytes(r["token_hash"]) for r in rows)


async def presence(world: World) -> PresenceState:
    (p,) = await world.store.get_presence(world.human, [world.agent.account_id])
    return p.state


async def test_presence_waits_on_an_open_ask_and_clears_on_answer_and_cancel(
    world: World,
) -> None:
    assert await presence(world) is PresenceState.OFFLINE
    first = await world.post_ask()
    assert await presence(world) is PresenceState.WAITING
    second = await world.post_ask(world.agent, Ask(questions=(AskQuestion("q", "Q?"),)))
    await world.store.cancel_ask(world.agent, second.blocks[0].ask_id)  # type: ignore[union-attr]
    assert await presence(world) is PresenceState.WAITING  # the first is still open
    await world.store.answer_ask(
        world.human,
        first.blocks[0].ask_id,
        [Answer("db"), Answer("langs")],  # type: ignore[union-attr]
    )
    assert await presence(world) is PresenceState.OFFLINE


async def test_waiting_wins_over_the_agents_own_status(world: World) -> None:
    p = await world.store.set_status(world.agent, PresenceState.WORKING, "reading")
    assert p.state is PresenceState.OFFLINE  # no runner session is bound
    await world.post_ask()
    assert await presence(world) is PresenceState.WAITING


async def test_presence_changes_publish_one_event_each(world: World) -> None:
    start = await world.store.last_event_id(world.workspace_id)
    message = await world.post_ask()
    await world.post_ask()  # still waiting: no second event
    await world.store.cancel_ask(world.agent, message.blocks[0].ask_id)  # type: ignore[union-attr]
    events = await world.store.read_events(world.workspace_id, start, 100)
    states = [e.presence.state for e in events if e.presence is not None]
    assert states == [PresenceState.WAITING]


async def open_asks_in_rows(db: Database, agent_id: uuid.UUID) -> tuple[int, int]:
    """The agent's stored open-ask count, and the open asks its messages hold."""
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        row = await (
            await conn.execute(
                "SELECT open_asks, (SELECT count(*) FROM messages m,"
                " jsonb_array_elements(m.blocks) b WHERE m.author_id = a.id"
                " AND b ->> 'kind' = 'ask' AND (b -> 'ask' ->> 'answered') IS NULL"
                " AND (b -> 'ask' ->> 'cancelled') IS NULL) AS held"
                " FROM accounts a WHERE a.id = %s",
                (agent_id,),
            )
        ).fetchone()
    assert row is not None
    return row["open_asks"], row["held"]


async def test_the_open_ask_count_follows_posts_answers_and_cancels(
    db: Database, world: World
) -> None:
    two = Ask(questions=(AskQuestion("q", "Q?"),))
    both = await world.store.append_message(world.agent, world.channel.channel_id, [two, two])
    first = await world.post_ask()
    assert await open_asks_in_rows(db, world.agent.account_id) == (3, 3)
    await world.store.cancel_ask(world.agent, both.blocks[0].ask_id)  # type: ignore[union-attr]
    await world.store.cancel_ask(world.agent, both.blocks[0].ask_id)  # type: ignore[union-attr]
    assert await open_asks_in_rows(db, world.agent.account_id) == (2, 2)
    await world.store.answer_ask(world.human, both.blocks[1].ask_id, [Answer("q", custom_text="x")])  # type: ignore[union-attr]
    with pytest.raises(Conflict):
        await world.store.cancel_ask(world.agent, both.blocks[1].ask_id)  # type: ignore[union-attr]
    assert await open_asks_in_rows(db, world.agent.account_id) == (1, 1)
    assert await presence(world) is PresenceState.WAITING
    await world.store.answer_ask(
        world.human,
        first.blocks[0].ask_id,  # type: ignore[union-attr]
        [Answer("db"), Answer("langs")],
    )
    assert await open_asks_in_rows(db, world.agent.account_id) == (0, 0)
    assert await presence(world) is PresenceState.OFFLINE


BLOCK_TYPES = {T.Message, T.TextBlock, T.Ask, T.AskAnswerBlock, T.AskQuestion}


def _mentions_blocks(annotation: object) -> bool:
    if annotation in BLOCK_TYPES:
        return True
    return any(_mentions_blocks(arg) for arg in typing.get_args(annotation))


def test_no_new_message_block_writers() -> None:
    """Only append_message takes blocks: a new block-writing path needs its own
    ask rule before it joins this list."""
    hints = {
        name: typing.get_type_hints(fn)
        for name, fn in inspect.getmembers(Store, inspect.isfunction)
        if not name.startswith("_")
    }
    takers = sorted(
        name
        for name, h in hints.items()
        if any(_mentions_blocks(v) for k, v in h.items() if k != "return")
    )
    assert takers == ["append_message"], (
        f"{takers}: a new method takes blocks; asks are immutable after append, so a "
        "block-rewrite path needs its own rule"
    )
    writers = []
    for sql in (STORE_DIR / "queries").glob("*.sql"):
        for name, body in re.findall(
            r"-- name: (\w+)\n(.*?)(?=\n-- name:|\Z)", sql.read_text(), re.S
        ):
            if re.search(r"(INSERT INTO|UPDATE) messages\b", body):
                writers.append(name)
    for sql in (STORE_DIR / "migrations").glob("*.sql"):
        for name, body in re.findall(r"CREATE FUNCTION (\w+)\((.*?)\n\$\$;", sql.read_text(), re.S):
            if re.search(r"(INSERT INTO|UPDATE) messages\b", body):
                writers.append(name)
    # Post writes a message; only answer and cancel rewrite one, and only its
    # server-owned ask state.
    assert sorted(writers) == [
        "compass_answer_ask",
        "compass_cancel_ask",
        "compass_post_message",
    ], writers
