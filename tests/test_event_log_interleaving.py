"""A property of the event log under interleaved transactions: writers on
their own connections append (also in savepoints they roll back), commit and
roll back in any order, and a reader pages through the log from its
cursor, alternating between two processes' stores. Whatever the order, the
reader sees only committed events, each once, in a dense run of ids, each
transaction's in the order it appended them, all of them by the end; and a
replay from the start equals what it read live."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from compass_server.store import Database, Store
from compass_server.store.types import Event
from tests.world import World

WRITERS = 3

step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, WRITERS - 1), st.integers(1, 3)),
    # Appended in a savepoint that is rolled back.
    st.tuples(st.just("undone"), st.integers(0, WRITERS - 1), st.integers(1, 2)),
    st.tuples(st.just("commit"), st.integers(0, WRITERS - 1)),
    st.tuples(st.just("rollback"), st.integers(0, WRITERS - 1)),
    st.tuples(st.just("read"), st.integers(0, 1), st.integers(1, 4)),
)


@dataclasses.dataclass
class Writer:
    conn: psycopg.AsyncConnection[tuple[object, ...]]
    open_tags: list[str] = dataclasses.field(default_factory=list)


@contextlib.asynccontextmanager
async def writers(db: Database, world: World) -> AsyncIterator[list[Writer]]:
    async with contextlib.AsyncExitStack() as stack:
        out = []
        for _ in range(WRITERS):
            conn = await stack.enter_async_context(await psycopg.AsyncConnection.connect(db.url))
            await conn.execute("SET ROLE compass_app")
            await conn.execute(
                "SELECT set_config('compass.credential', %s, false)",
                (world.human.credential.hex(),),
            )
            await conn.commit()
            out.append(Writer(conn))
        yield out


def tag_of(event: Event) -> str:
    assert event.presence is not None
    return event.presence.status_text


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(schedule=st.lists(step, max_size=30))
async def test_interleaved_transactions_are_read_once_each_in_a_dense_committed_order(
    db: Database, store: Store, schedule: list[tuple[object, ...]]
) -> None:
    world = await World.create(store)
    other_db = Database(db.url, min_size=1, max_size=2)
    await other_db.open()
    stores = [store, Store(other_db)]
    start = await store.last_event_id(world.human)
    cursor = start
    read: list[Event] = []
    committed: set[str] = set()
    rolled_back: set[str] = set()
    appended: list[list[str]] = []  # each committed transaction's tags, in append order
    n = 0

    async def settle(w: Writer, commit: bool) -> None:
        if commit:
            await w.conn.commit()
            committed.update(w.open_tags)
            if w.open_tags:
                appended.append(list(w.open_tags))
        else:
            await w.conn.rollback()
            rolled_back.update(w.open_tags)
        w.open_tags = []

    async def read_page(which: int, limit: int) -> None:
        nonlocal cursor
        visible = set(committed)
        page = await stores[which].read_events(world.human, cursor, limit)
        for event in page:
            assert event.event_id == cursor + 1, "ids run densely from the cursor"
            assert tag_of(event) in visible, "only events committed before the read"
            cursor = event.event_id
            read.append(event)

    try:
        async with writers(db, world) as ws:
            for op in schedule:
                if op[0] in ("append", "undone"):
                    w, count = ws[int(str(op[1]))], int(str(op[2]))
                    tags = [f"t{n + i}" for i in range(count)]
                    n += count
                    if op[0] == "undone":
                        await w.conn.execute("SAVEPOINT undone")
                    payloads = [
                        Jsonb(
                            {
                                "account_id": str(world.agent.account_id),
                                "state": "working",
                                "status_text": t,
                            }
                        )
                        for t in tags
                    ]
                    await w.conn.execute(
                        "SELECT compass_append_events(%s, %s::uuid[], %s)",
                        (["presence_changed"] * count, [None] * count, payloads),
                    )
                    if op[0] == "undone":
                        await w.conn.execute("ROLLBACK TO SAVEPOINT undone")
                        rolled_back.update(tags)
                    else:
                        w.open_tags += tags
                elif op[0] in ("commit", "rollback"):
                    await settle(ws[int(str(op[1]))], op[0] == "commit")
                else:
                    await read_page(int(str(op[1])), int(str(op[2])))
            for w in ws:
                await settle(w, True)
        while True:
            before = cursor
            await read_page(len(read) % 2, 4)
            if cursor == before:
                break
    finally:
        await other_db.close()

    tags = [tag_of(e) for e in read]
    assert len(tags) == len(set(tags)), "each event once"
    assert set(tags) == committed, "every committed event, nothing rolled back"
    assert not set(tags) & rolled_back
    for txn in appended:
        assert [t for t in tags if t in set(txn)] == txn, "a transaction's events in its order"
    replay = await store.read_events(world.human, start, 1000)
    assert [(e.event_id, tag_of(e)) for e in replay] == [(e.event_id, tag_of(e)) for e in read]
