"""The event log's numbering: writes take no shared lock, ids are handed out
after commit in causal order with no gaps, and events a server committed but
did not live to number are numbered by the next server's sweep."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from compass_server.relay.liveness import Heartbeat
from compass_server.store import Database, Store
from compass_server.store.types import Answer, Ask, EventKind, Message
from tests.conftest import migrated_database
from tests.world import World


def ask_id_of(message: Message) -> str:
    block = message.blocks[0]
    assert isinstance(block, Ask)
    return block.ask_id


async def test_a_write_commits_while_the_workspace_counter_is_held(
    db: Database, world: World
) -> None:
    start = await world.store.last_event_id(world.human)
    async with await psycopg.AsyncConnection.connect(db.url) as holder:
        await holder.execute(
            "SELECT 1 FROM event_counters WHERE workspace_id = %s FOR NO KEY UPDATE",
            (world.workspace_id,),
        )
        # The post returns although its events can't be numbered yet.
        message = await asyncio.wait_for(world.post_text(world.human, "no queue"), timeout=5)
        async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as peek:
            row = await (
                await peek.execute(
                    "SELECT count(*) AS n FROM messages WHERE id = %s", (message.message_id,)
                )
            ).fetchone()
        assert row is not None and row["n"] == 1
        reading = asyncio.ensure_future(world.store.read_events(world.human, start, 10))
        await asyncio.sleep(0.2)
        assert not reading.done()  # a read waits for this process's own writes
        await holder.rollback()
    events = await asyncio.wait_for(reading, timeout=5)
    assert [(e.event_id, e.message.message_id if e.message else None) for e in events] == [
        (start + 1, message.message_id)
    ]


async def test_concurrent_lifecycles_in_one_workspace_number_densely_and_in_causal_order(
    store: Store,
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


async def leave_an_unnumbered_event(db: Database, world: World) -> None:
    """What a server that died right after its commit leaves: an event it could
    not number (another held the counter) and did not live to have numbered."""
    async with (
        await psycopg.AsyncConnection.connect(db.url) as holder,
        await psycopg.AsyncConnection.connect(db.url) as conn,
    ):
        await holder.execute(
            "SELECT 1 FROM event_counters WHERE workspace_id = %s FOR NO KEY UPDATE",
            (world.workspace_id,),
        )
        await conn.execute("SET ROLE compass_app")
        await conn.execute(
            "SELECT set_config('compass.credential', %s, false)", (world.human.credential.hex(),)
        )
        cur = await conn.execute(
            "SELECT compass_append_events(ARRAY['presence_changed'], ARRAY[NULL]::uuid[], %s)",
            (
                [
                    Jsonb(
                        {
                            "account_id": str(world.agent.account_id),
                            "state": "working",
                            "status_text": "left behind",
                        }
                    )
                ],
            ),
        )
        assert await cur.fetchone() == (None,)
        await conn.commit()
        await holder.rollback()


async def test_events_left_unnumbered_by_a_dead_server_are_numbered_by_the_sweep(
    pg_admin_url: str,
) -> None:
    # A database of its own: a server running on the run's database would sweep first.
    async with migrated_database(pg_admin_url) as url:
        db = Database(url, min_size=1, max_size=2)
        await db.open()
        try:
            world = await World.create(Store(db))
            start = await world.store.last_event_id(world.human)
            await leave_an_unnumbered_event(db, world)
            assert await world.store.read_events(world.human, start, 10) == []
            assert await world.store.number_leftover_events() >= 1
            (event,) = await world.store.read_events(world.human, start, 10)
            assert event.event_id == start + 1
            assert event.presence is not None and event.presence.status_text == "left behind"
            assert await world.store.last_event_id(world.human) == start + 1
        finally:
            await db.close()


async def test_a_starting_server_numbers_what_a_dead_one_left(db: Database, world: World) -> None:
    start = await world.store.last_event_id(world.human)
    await leave_an_unnumbered_event(db, world)
    heartbeat = Heartbeat(world.store, uuid.uuid4(), lambda: None)
    await heartbeat.start()
    try:
        async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FILTER (WHERE id IS NULL) AS unnumbered, max(id) AS last"
                    " FROM events WHERE workspace_id = %s",
                    (world.workspace_id,),
                )
            ).fetchone()
        assert row == {"unnumbered": 0, "last": start + 1}
    finally:
        await heartbeat.stop()


async def unnumbered(db: Database, workspace_id: uuid.UUID) -> int:
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        row = await (
            await conn.execute(
                "SELECT count(*) AS n FROM events WHERE workspace_id = %s AND id IS NULL",
                (workspace_id,),
            )
        ).fetchone()
    assert row is not None
    return int(row["n"])


async def test_the_sweep_skips_a_workspace_whose_counter_is_held(
    db: Database, store: Store
) -> None:
    busy, free = await World.create(store), await World.create(store)
    await leave_an_unnumbered_event(db, busy)
    await leave_an_unnumbered_event(db, free)
    async with await psycopg.AsyncConnection.connect(db.url) as holder:
        await holder.execute(
            "SELECT 1 FROM event_counters WHERE workspace_id = %s FOR NO KEY UPDATE",
            (busy.workspace_id,),
        )
        # Whoever holds a counter numbers what is pending; the sweep needn't wait.
        await asyncio.wait_for(store.number_leftover_events(), timeout=5)
        assert (
            await unnumbered(db, free.workspace_id),
            await unnumbered(db, busy.workspace_id),
        ) == (
            0,
            1,
        )
        await holder.rollback()
    await store.number_leftover_events()
    assert await unnumbered(db, busy.workspace_id) == 0


async def test_tens_of_thousands_of_pending_events_are_numbered_promptly_whatever_the_statistics(
    pg_admin_url: str,
) -> None:
    # A database of its own: its statistics were taken when the log held one
    # event, and its numbering connection planned its statements then.
    async with migrated_database(pg_admin_url) as url:
        db = Database(url, min_size=1, max_size=1)
        await db.open()
        try:
            world = await World.create(Store(db))
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
                await admin.execute("ANALYZE events")

            async def leave_pending(n: int) -> None:
                # What writes leave when they find the counter busy.
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
                    await admin.execute(
                        "INSERT INTO events (workspace_id, kind, payload)"
                        " SELECT %s, 'presence_changed', jsonb_build_object('account_id', %s::text,"
                        "   'state', 'working', 'status_text', 'load ' || i)"
                        " FROM generate_series(1, %s) AS i",
                        (world.workspace_id, world.agent.account_id, n),
                    )
                db.sequencer.committed(world.workspace_id)

            for _ in range(8):
                await leave_pending(1)
                await db.sequencer.flush(world.workspace_id)
            start = await world.store.last_event_id(world.human)
            pending = 20_000
            await leave_pending(pending)
            # Linear numbering takes well under a second here; the quadratic
            # plan this guards against took minutes.
            await asyncio.wait_for(db.sequencer.flush(world.workspace_id), timeout=30)
            assert await unnumbered(db, world.workspace_id) == 0
            assert await world.store.last_event_id(world.human) == start + pending
            events = await world.store.read_events(world.human, start, 500)
            assert [e.event_id for e in events] == list(range(start + 1, start + 501))
            assert [e.presence.status_text for e in events if e.presence] == [
                f"load {i}" for i in range(1, 501)
            ]
            # The next write numbers inline, after them.
            await world.post_text(world.human, "after the load")
            assert await world.store.last_event_id(world.human) == start + pending + 1
        finally:
            await _stop_numbering(pg_admin_url, url)
            await db.close()


async def _stop_numbering(admin_url: str, url: str) -> None:
    """Ends whatever still runs in the database, so a failed test stops at once."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND state = 'active' AND pid <> pg_backend_pid()",
            (name,),
        )
