"""Coalesced writes: posts and ask endings that arrive while one of their
kind is at the database go as one statement and one transaction. Each keeps
its own outcome, contenders in one batch still have exactly one winner, and
a batch that fails as a whole is retried write by write.

To put writes in one batch, a test holds a row lock (from its own
connection) that a lone write is waiting on, queues the writes behind it,
then lets go. Rows written in one transaction share their xmin."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest

from compass_server.store import Conflict, NotFound, PermissionDenied, Store
from compass_server.store.coalesce import WRITE_BATCH, WRITE_BATCH_BYTES, Coalescer
from compass_server.store.db import Database
from compass_server.store.types import AccountKind, Answer, Ask, Message, TextBlock
from tests.world import World, two_question_ask

GOOD = [Answer("db", ("pg",)), Answer("langs", ("py",))]


def ask_of(message: Message) -> Ask:
    return next(b for b in message.blocks if isinstance(b, Ask))


@contextlib.asynccontextmanager
async def holding(database_url: str, sql: str, *args: Any) -> AsyncIterator[None]:
    """A transaction of the test's own holding the rows `sql` locks."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute(sql, args)
        yield
        await conn.rollback()


async def queued_behind(
    lane: Coalescer,
    lone: Callable[[], Awaitable[Any]],
    writes: list[Callable[[], Awaitable[Any]]],
    release: contextlib.AbstractAsyncContextManager[None],
    queued: int | None = None,
) -> tuple[Any, list[Any]]:
    """Runs `lone` while `release` holds it at the database, queues `writes`
    behind it (`queued` of them reach the lane; the rest are refused before),
    then lets go: the writes go together as the next statement."""
    async with release:
        first = asyncio.ensure_future(lone())
        await until(lambda: lane.waiting() == 0 and not first.done(), "the lone write is sent")
        await asyncio.sleep(0.05)
        assert not first.done(), "the lone write was not held"
        rest = [asyncio.ensure_future(w()) for w in writes]
        want = len(writes) if queued is None else queued
        await until(lambda: lane.waiting() == want, "the writes are queued")
    results = await asyncio.gather(*rest, return_exceptions=True)
    return await first, results


async def until(ok: Callable[[], bool], what: str) -> None:
    for _ in range(400):
        if ok():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting until {what}")


async def xmins(database_url: str, ids: list[uuid.UUID]) -> list[int]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT id, xmin::text::bigint FROM messages WHERE id = ANY(%s)", (ids,)
        )
        found = dict(await cur.fetchall())
    return [found[i] for i in ids]


async def history(database_url: str, ask_id: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT kind FROM ask_history WHERE ask_id = %s ORDER BY at, kind", (ask_id,)
        )
        return [r[0] for r in await cur.fetchall()]


async def answer_rows(database_url: str, ask_id: str) -> list[uuid.UUID]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT id FROM messages WHERE blocks @> %s::jsonb",
            (f'[{{"kind": "ask_answer", "ask_answer": {{"ask_id": "{ask_id}"}}}}]',),
        )
        return [r[0] for r in await cur.fetchall()]


def lock_message(
    database_url: str, message: Message
) -> contextlib.AbstractAsyncContextManager[None]:
    return holding(
        database_url, "SELECT 1 FROM messages WHERE id = %s FOR UPDATE", message.message_id
    )


@dataclasses.dataclass
class Two:
    world: World
    store: Store
    grace: Any


@pytest.fixture
async def two(world: World, store: Store) -> Two:
    await store.add_channel_member(
        world.human, world.channel.channel_id, world.other_human.account_id
    )
    return Two(world, store, world.other_human)


async def test_two_answers_in_one_batch_one_wins_and_the_other_hears_it(
    two: Two, database_url: str
) -> None:
    w, store = two.world, two.store
    plug = await w.post_ask()
    contested = ask_of(await w.post_ask()).ask_id
    bystander = ask_of(await w.post_ask()).ask_id
    first, results = await queued_behind(
        store._endings,
        lambda: store.answer_ask(w.human, ask_of(plug).ask_id, GOOD),
        [
            lambda: store.answer_ask(w.human, contested, GOOD),
            lambda: store.answer_ask(two.grace, contested, GOOD),
            lambda: store.answer_ask(two.grace, bystander, GOOD),
        ],
        lock_message(database_url, plug),
    )
    won = [r for r in results[:2] if not isinstance(r, BaseException)]
    lost = [r for r in results[:2] if isinstance(r, BaseException)]
    assert len(won) == 1 and len(lost) == 1, results
    assert isinstance(lost[0], Conflict) and "is already answered" in str(lost[0])
    assert not isinstance(results[2], BaseException), results[2]
    # One ask_answer for the contested ask; it and the bystander's committed together.
    answers = await answer_rows(database_url, contested)
    assert answers == [won[0][1].message_id]
    both = await xmins(database_url, [won[0][1].message_id, results[2][1].message_id])
    assert both[0] == both[1]
    assert await history(database_url, contested) == ["posted", "answered"]
    assert (await xmins(database_url, [first[1].message_id]))[0] != both[0]


async def test_every_ending_kind_contends_in_one_batch_exactly_one_wins(
    two: Two, database_url: str
) -> None:
    w, store = two.world, two.store
    plug = await w.post_ask()
    contested = ask_of(await w.post_ask()).ask_id
    contenders = {
        "answer": lambda: store.answer_ask(two.grace, contested, GOOD),
        "decline": lambda: store.decline_ask(w.human, contested, "not now"),
        "cancel": lambda: store.cancel_ask(w.agent, contested),
        "withdraw": lambda: store.withdraw_ask(w.human, contested),
    }
    _, results = await queued_behind(
        store._endings,
        lambda: store.answer_ask(w.human, ask_of(plug).ask_id, GOOD),
        list(contenders.values()),
        lock_message(database_url, plug),
    )
    outcomes = dict(zip(contenders, results, strict=True))
    winners = [k for k, r in outcomes.items() if not isinstance(r, BaseException)]
    assert len(winners) == 1, outcomes
    for kind, r in outcomes.items():
        if kind not in winners:
            assert isinstance(r, Conflict), (kind, r)
    ended = await store.get_ask(w.human, contested)
    assert ended[1].ending is not None
    said = {
        "answer": "answered",
        "decline": "declined",
        "cancel": "withdrawn_by_agent",
        "withdraw": "withdrawn_by_owner",
    }
    assert await history(database_url, contested) == ["posted", said[winners[0]]]


async def test_a_refusal_in_a_batch_never_fails_its_neighbours(two: Two, database_url: str) -> None:
    w, store = two.world, two.store
    plug = await w.post_ask()
    named = ask_of(
        await w.post_ask(
            w.agent, dataclasses.replace(two_question_ask(), answerer_ids=(w.human.account_id,))
        )
    ).ask_id
    fine = ask_of(await w.post_ask()).ask_id
    elsewhere = await w.add_pair()
    hidden = ask_of(await elsewhere.post_ask(elsewhere.agent, channel=elsewhere.channel)).ask_id
    _, results = await queued_behind(
        store._endings,
        lambda: store.answer_ask(w.human, ask_of(plug).ask_id, GOOD),
        [
            # Refused before it is queued: no ask of that id was ever seen.
            lambda: store.answer_ask(two.grace, "ask_no_such_thing", GOOD),
            lambda: store.answer_ask(two.grace, named, GOOD),
            lambda: store.answer_ask(two.grace, hidden, GOOD),
            lambda: store.answer_ask(two.grace, fine, GOOD),
        ],
        lock_message(database_url, plug),
        queued=3,
    )
    assert isinstance(results[0], NotFound), results[0]
    assert isinstance(results[1], PermissionDenied), results[1]
    assert isinstance(results[2], NotFound), results[2]
    assert not isinstance(results[3], BaseException), results[3]
    assert await history(database_url, fine) == ["posted", "answered"]
    assert await history(database_url, named) == ["posted"]


async def test_posts_in_one_batch_each_land_or_are_refused_alone(
    two: Two, database_url: str
) -> None:
    w, store = two.world, two.store
    outsider = await w.add_pair()
    posts = [
        lambda: store.append_message(w.agent, w.channel.channel_id, [TextBlock("one")]),
        lambda: store.append_message(
            outsider.human, w.channel.channel_id, [TextBlock("not a member")]
        ),
        lambda: store.append_message(w.human, w.channel.channel_id, [two_question_ask()]),
        lambda: store.append_message(two.grace, w.channel.channel_id, [TextBlock("three")]),
    ]
    first, results = await queued_behind(
        store._posts,
        lambda: store.append_message(w.agent, w.channel.channel_id, [TextBlock("held")]),
        posts,
        holding(
            database_url,
            "SELECT 1 FROM accounts WHERE id = %s FOR UPDATE",
            w.agent.account_id,
        ),
    )
    assert isinstance(results[1], NotFound), results[1]
    landed = [r for i, r in enumerate(results) if i != 1]
    assert all(isinstance(m, Message) for m in landed), landed
    together = await xmins(database_url, [m.message_id for m in landed])
    assert len(set(together)) == 1
    page = await store.list_messages(w.human, w.channel.channel_id, 50, "")
    assert {m.message_id for m in landed} | {first.message_id} <= {m.message_id for m in page.items}
    # The ask posted in the batch is open and answerable.
    asked = ask_of(landed[1]).ask_id
    await store.answer_ask(two.grace, asked, GOOD)


async def test_a_batch_that_fails_as_a_whole_is_retried_write_by_write(
    two: Two, database_url: str, pg_admin_url: str
) -> None:
    w, store = two.world, two.store
    marker = f"refused-{uuid.uuid4().hex}"
    trigger = f"refuse_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            f"""
            CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.search_text = '{marker}' THEN
                RAISE EXCEPTION 'refused by the test';
              END IF;
              RETURN NEW;
            END $$;
            CREATE TRIGGER {trigger} BEFORE INSERT ON messages
              FOR EACH ROW EXECUTE FUNCTION {trigger}();
            """.encode()
        )
    try:
        _, results = await queued_behind(
            store._posts,
            lambda: store.append_message(w.agent, w.channel.channel_id, [TextBlock("held")]),
            [
                lambda: store.append_message(w.human, w.channel.channel_id, [TextBlock("before")]),
                lambda: store.append_message(w.human, w.channel.channel_id, [TextBlock(marker)]),
                lambda: store.append_message(two.grace, w.channel.channel_id, [TextBlock("after")]),
            ],
            holding(
                database_url,
                "SELECT 1 FROM accounts WHERE id = %s FOR UPDATE",
                w.agent.account_id,
            ),
        )
    finally:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                f"DROP TRIGGER {trigger} ON messages; DROP FUNCTION {trigger}()".encode()
            )
    assert isinstance(results[1], psycopg.Error), results[1]
    assert isinstance(results[0], Message) and isinstance(results[2], Message), results
    page = await store.list_messages(w.human, w.channel.channel_id, 50, "")
    texts = [b.text for m in page.items for b in m.blocks if isinstance(b, TextBlock)]
    assert "before" in texts and "after" in texts and marker not in texts


async def test_batches_from_two_servers_on_the_same_agents_never_deadlock(
    two: Two, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An ending locks its ask's message, then the asking agent's row. Two
    servers' batches over asks of the same agents, released at the same
    moment, must never wait on each other in a cycle: a deadlock would fail a
    batch and send its writes again one by one, which the log says."""
    w = two.world
    other_db = Database(database_url, min_size=2, max_size=8)
    await other_db.open()
    try:
        stores = [two.store, Store(other_db)]
        # The sizes of the endings' statements, per server.
        sizes: list[list[int]] = [[], []]
        listeners = [
            lambda kind, n, seen=seen: seen.append(n) if kind == "ending" else None
            for seen in sizes
        ]
        for s, listener in zip(stores, listeners, strict=True):
            s.write_listeners.append(listener)
        # Many agents, so each batch takes their rows one by one as it goes.
        agents = [await w.add_account(f"ag-{i}", AccountKind.AGENT) for i in range(32)]
        for a in agents:
            await two.store.add_channel_member(w.human, w.channel.channel_id, a.account_id)
        plug = await w.post_ask(w.agent, two_question_ask(), two_question_ask())
        plugs = [b.ask_id for b in plug.blocks if isinstance(b, Ask)]
        rng = random.Random(7)
        asks = [ask_of(await w.post_ask(agents[i % 32])).ask_id for i in range(2 * WRITE_BATCH)]
        rng.shuffle(asks)
        caplog.set_level(logging.INFO, logger="compass_server.store.coalesce")
        async with lock_message(database_url, plug):
            lone = [
                asyncio.ensure_future(s.answer_ask(w.human, p, GOOD))
                for s, p in zip(stores, plugs, strict=True)
            ]
            await asyncio.sleep(0.1)
            rest = [
                asyncio.ensure_future(stores[i % 2].answer_ask(two.grace, a, GOOD))
                for i, a in enumerate(asks)
            ]
            for s in stores:
                await until(lambda s=s: s._endings.waiting() == WRITE_BATCH, "both are queued")
        results = await asyncio.wait_for(asyncio.gather(*lone, *rest, return_exceptions=True), 60)
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert not [r for r in caplog.records if "failed together" in r.getMessage()]
        assert [max(seen) for seen in sizes] == [WRITE_BATCH, WRITE_BATCH]
    finally:
        two.store.write_listeners.remove(listeners[0])
        await other_db.close()


async def test_large_posts_go_one_by_one_past_the_batch_bytes(two: Two, database_url: str) -> None:
    w, store = two.world, two.store
    # Over half the batch bytes each, in blocks under the text limit.
    big = [TextBlock("x" * 30_000) for _ in range(WRITE_BATCH_BYTES // 2 // 30_000 + 1)]
    small = [
        lambda i=i: store.append_message(w.human, w.channel.channel_id, [TextBlock(f"s{i}")])
        for i in range(3)
    ]
    large = [
        lambda i=i: store.append_message(w.human, w.channel.channel_id, [*big, TextBlock(str(i))])
        for i in range(3)
    ]
    _, results = await queued_behind(
        store._posts,
        lambda: store.append_message(w.agent, w.channel.channel_id, [TextBlock("held")]),
        large + small,
        holding(
            database_url,
            "SELECT 1 FROM accounts WHERE id = %s FOR UPDATE",
            w.agent.account_id,
        ),
    )
    assert all(isinstance(m, Message) for m in results), results
    written = await xmins(database_url, [m.message_id for m in results])
    # Two halves never fit together; the last large one takes the small ones along.
    assert len(set(written[:3])) == 3
    assert written[2] == written[3] == written[4] == written[5]
