"""Workspace isolation, presence, sign-in and the block-writer guard."""

from __future__ import annotations

import inspect
import pathlib
import re
import typing
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from compass_server.store import Conflict, Database, NotFound, Store, Unauthenticated
from compass_server.store import types as T
from compass_server.store.types import Answer, Ask, AskQuestion, PresenceState
from tests.conftest import migrated_database
from tests.world import World

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1] / "compass_server"
STORE_DIR = PACKAGE_DIR / "store"


async def test_a_query_that_forgets_the_workspace_filter_sees_only_its_workspace(
    db: Database, store: Store
) -> None:
    a = await World.create(store)
    b = await World.create(store)
    await a.post_text(a.human, "secret of a")
    await b.post_text(b.human, "secret of b")
    async with db.tx(a.human) as conn:
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
    async with db.tx(a.human) as conn:
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
    start = await world.store.last_event_id(world.human)
    message = await world.post_ask()
    await world.post_ask()  # still waiting: no second event
    await world.store.cancel_ask(world.agent, message.blocks[0].ask_id)  # type: ignore[union-attr]
    events = await world.store.read_events(world.human, start, 100)
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


# A statement that writes the messages table, however it is spelled: any
# case, any whitespace, quoted, schema-qualified, ONLY.
WRITES_MESSAGES = re.compile(
    r"\b(?:insert\s+into|update|delete\s+from|merge\s+into|truncate(?:\s+table)?|copy)"
    r"\s+(?:only\s+)?(?:\"?public\"?\s*\.\s*)?\"?messages\"?(?![\w\"])",
    re.IGNORECASE,
)
# Dynamic SQL could write anything; a function that runs it counts as a writer.
DYNAMIC_SQL = re.compile(r"\bexecute\s+(?!function\b|procedure\b)", re.IGNORECASE)

# Post writes a message (a standing answer may answer its ask at once); only
# answers (a quorum's votes among them) and the other endings rewrite one, and
# only its server-owned ask state (a follow-up step only appends to the ask's
# record of steps). The app role writes through these functions, which
# run as compass_writer (a role nothing logs in as); the trigger is the one
# that refuses any other change (see the end of this file). At the insert, an
# ask sent without a follow-up policy takes its channel's or workspace's
# default (checked when it was set) and nothing else of the post changes.
MESSAGE_WRITERS = {
    "function compass_take_answer",
    "function compass_write_ending",
    "function compass_write_vote",
    "function compass_post_message",
    "function compass_take_follow_ups",
    "compass_writer may INSERT messages",
    "compass_writer may UPDATE messages",
    "trigger messages_kept on messages",
    "trigger messages_follow_up_inherited on messages",
}


async def message_writers(conn: psycopg.AsyncConnection[Any]) -> set[str]:
    """Everything in the migrated database that can write message rows: the
    functions whose bodies write them (or run dynamic SQL), triggers and rules
    on them, rules and views elsewhere that write or expose them, and the roles
    granted writes on the table or one of its columns."""
    found: set[str] = set()
    functions = await conn.execute(
        """
        SELECT p.proname, pg_get_functiondef(p.oid) AS body, l.lanname
        FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        JOIN pg_language l ON l.oid = p.prolang
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg_toast%%'
          AND p.prokind IN ('f', 'p')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                            AND d.deptype = 'e')
        """
    )
    for name, body, language in await functions.fetchall():
        if WRITES_MESSAGES.search(body) or (language == "plpgsql" and DYNAMIC_SQL.search(body)):
            found.add(f"function {name}")
    triggers = await conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'messages'::regclass AND NOT tgisinternal"
    )
    found |= {f"trigger {name} on messages" for (name,) in await triggers.fetchall()}
    rules = await conn.execute(
        "SELECT rulename, tablename, definition FROM pg_rules "
        "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
    )
    for name, table, definition in await rules.fetchall():
        if table == "messages" or WRITES_MESSAGES.search(definition):
            found.add(f"rule {name} on {table}")
    views = await conn.execute(
        """
        SELECT DISTINCT v.relname FROM pg_rewrite r
        JOIN pg_class v ON v.oid = r.ev_class
        JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
        WHERE d.refobjid = 'messages'::regclass AND v.relkind IN ('v', 'm')
        """
    )
    found |= {f"view {name} over messages" for (name,) in await views.fetchall()}
    grants = await conn.execute(
        """
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
               a.privilege_type
        FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid = 'messages'::regclass AND a.grantee <> c.relowner
          AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE')
        UNION
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
               a.privilege_type
        FROM pg_class c
        JOIN pg_attribute att ON att.attrelid = c.oid
        CROSS JOIN aclexplode(att.attacl) a
        WHERE c.oid = 'messages'::regclass AND a.grantee <> c.relowner
          AND a.privilege_type IN ('INSERT', 'UPDATE')
        """
    )
    found |= {f"{role} may {what} messages" for role, what in await grants.fetchall()}
    return found


async def test_no_new_message_block_writers(database_url: str) -> None:
    """Only append_message and post (its one path, posts.py) take blocks, and
    only post, answer and cancel write message rows: a new block-writing path
    needs its own ask rule before it joins these lists."""
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
    assert takers == ["append_message", "post"], (
        f"{takers}: a new method takes blocks; asks are immutable after append, so a "
        "block-rewrite path needs its own rule"
    )
    # The server's own SQL: named queries and any statement inlined in Python.
    inline = []
    for sql in (STORE_DIR / "queries").glob("*.sql"):
        for name, body in re.findall(
            r"-- name: (\w+)\n(.*?)(?=\n-- name:|\Z)", sql.read_text(), re.S
        ):
            if WRITES_MESSAGES.search(body):
                inline.append(name)
    for source in PACKAGE_DIR.rglob("*.py"):
        if WRITES_MESSAGES.search(source.read_text()):
            inline.append(str(source.relative_to(PACKAGE_DIR)))
    # The named queries only call the functions that write.
    assert inline == [], inline
    # What really runs: the migrated database itself.
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        assert await message_writers(conn) == MESSAGE_WRITERS


@pytest.fixture(scope="module")
async def scratch_url(pg_admin_url: str) -> AsyncIterator[str]:
    """A database of its own, so injected writers never touch the run's."""
    async with migrated_database(pg_admin_url) as url:
        yield url


INJECTED = [
    pytest.param(
        "CREATE OR REPLACE FUNCTION compass_tidy() RETURNS void LANGUAGE plpgsql AS $$ "
        "BEGIN UPDATE messages SET blocks = '[]'; END $$",
        "function compass_tidy",
        id="create-or-replace",
    ),
    pytest.param(
        # An existing reader, replaced in place, spelled oddly.
        "CREATE OR REPLACE FUNCTION compass_ask_state(ask text, actor uuid) RETURNS jsonb "
        'LANGUAGE plpgsql AS $$ BEGIN\n  update\n ONLY public."messages" m '
        "SET blocks = '[]' WHERE m.id IS NULL; RETURN NULL; END $$",
        "function compass_ask_state",
        id="replaced-reader",
    ),
    pytest.param(
        "CREATE FUNCTION compass_tidy() RETURNS void LANGUAGE sql "
        "BEGIN ATOMIC DELETE FROM messages WHERE false; END",
        "function compass_tidy",
        id="sql-body",
    ),
    pytest.param(
        "CREATE FUNCTION compass_tidy() RETURNS void LANGUAGE plpgsql AS $$ "
        "BEGIN EXECUTE 'UPD' || 'ATE mess' || 'ages SET blocks = blocks'; END $$",
        "function compass_tidy",
        id="dynamic-sql",
    ),
    pytest.param(
        "CREATE FUNCTION compass_tidy() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN NEW.blocks := '[]'; RETURN NEW; END $$; "
        "CREATE TRIGGER tidy BEFORE UPDATE ON messages "
        "FOR EACH ROW EXECUTE FUNCTION compass_tidy()",
        "trigger tidy on messages",
        id="trigger",
    ),
    pytest.param(
        "CREATE RULE tidy AS ON UPDATE TO channels DO ALSO UPDATE messages SET blocks = blocks",
        "rule tidy on channels",
        id="rule",
    ),
    pytest.param(
        "CREATE VIEW every_message AS SELECT * FROM messages",
        "view every_message over messages",
        id="updatable-view",
    ),
    pytest.param(
        "GRANT UPDATE (blocks) ON messages TO PUBLIC",
        "PUBLIC may UPDATE messages",
        id="column-grant",
    ),
]


@pytest.mark.parametrize(("statement", "writer"), INJECTED)
async def test_the_block_writer_guard_sees_an_injected_writer(
    scratch_url: str, statement: str, writer: str
) -> None:
    async with await psycopg.AsyncConnection.connect(scratch_url) as conn:
        assert await message_writers(conn) == MESSAGE_WRITERS
        await conn.execute(statement.encode())
        assert await message_writers(conn) == MESSAGE_WRITERS | {writer}
        await conn.rollback()


# --- an ask's content holds by construction ------------------------------------------
#
# However a path to the rows is spelled, the tables refuse it: a trigger on
# messages and on inbox_messages refuses any change to an ask's content (only
# its server-owned state may change), and compass_app holds no UPDATE on
# messages at all. Each case below is a path the text guard above can't see.

FORGED = '"Deploy on Friday?"'


@pytest.fixture
async def guarded(pg_admin_url: str) -> AsyncIterator[tuple[str, World]]:
    """A database of its own (the cases commit what they inject)."""
    async with migrated_database(pg_admin_url) as url:
        db = Database(url, min_size=1, max_size=4)
        await db.open()
        try:
            yield url, await World.create(Store(db))
        finally:
            await db.close()


async def ask_content(url: str, message_id: uuid.UUID, table: str = "messages") -> Any:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            f"SELECT blocks FROM {table} WHERE id = %s".encode(),  # a fixed name of this test
            (message_id,),
        )
        row = await cur.fetchone()
    assert row is not None
    return row[0]


async def as_owner(url: str, statement: str | psycopg.sql.Composed, *args: Any) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement, args or None)  # type: ignore[arg-type]


async def test_a_replaced_writer_cannot_rewrite_an_ask(guarded: tuple[str, World]) -> None:
    url, w = guarded
    message = await w.post_ask()
    before = await ask_content(url, message.message_id)
    # An allowed writer, replaced in place, now also rewrites the question.
    await as_owner(
        url,
        "CREATE OR REPLACE FUNCTION compass_write_ending(m messages, idx int, kind text, "
        "actor uuid, surface text, reason text, answered jsonb DEFAULT NULL, "
        "rule uuid DEFAULT NULL, vote jsonb DEFAULT NULL) RETURNS jsonb "
        "LANGUAGE plpgsql AS $$ DECLARE written messages%ROWTYPE; BEGIN "
        "UPDATE messages SET blocks = jsonb_set(blocks, "
        f"ARRAY[idx::text, 'ask', 'questions', '0', 'question'], '{FORGED}') "
        "WHERE id = m.id RETURNING * INTO written; "
        "RETURN compass_message_json(written, ''); END $$",
    )
    with pytest.raises(psycopg.errors.CheckViolation, match="content"):
        await w.store.cancel_ask(w.agent, message.blocks[0].ask_id)  # type: ignore[union-attr]
    assert await ask_content(url, message.message_id) == before


async def test_forged_content_routed_through_an_allowed_writer_is_refused(
    guarded: tuple[str, World],
) -> None:
    url, w = guarded
    message = await w.post_ask()
    before = await ask_content(url, message.message_id)
    # A new function hands the writer a row whose ask says something else.
    await as_owner(
        url,
        "CREATE FUNCTION compass_tidy(msg uuid) RETURNS jsonb LANGUAGE plpgsql AS $$ "
        "DECLARE m messages; BEGIN SELECT * INTO m FROM messages WHERE id = msg; "
        f"m.blocks := jsonb_set(m.blocks, '{{0,ask,questions,0,question}}', '{FORGED}'); "
        "RETURN compass_write_ending(m, 0, 'withdrawn_by_agent', m.author_id, 'server', NULL); "
        "END $$",
    )
    with pytest.raises(psycopg.errors.CheckViolation, match="content"):
        await as_owner(url, "SELECT compass_tidy(%s)", message.message_id)
    assert await ask_content(url, message.message_id) == before


async def test_sql_composed_in_python_cannot_rewrite_an_ask(guarded: tuple[str, World]) -> None:
    url, w = guarded
    message = await w.post_ask()
    before = await ask_content(url, message.message_id)
    table = "mess" + "ages"  # no text guard reads this
    rewrite = psycopg.sql.SQL(
        "UPDATE {} SET blocks = jsonb_set(blocks, '{{0,ask,questions,0,question}}', %s) "
        "WHERE id = %s"
    ).format(psycopg.sql.Identifier(table))
    # As the request path runs: compass_app may not update messages at all.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with w.store.db.tx(w.human) as conn:
            await conn.execute(rewrite, (FORGED, message.message_id))
    # As the tables' owner: the table itself refuses.
    with pytest.raises(psycopg.errors.CheckViolation, match="content"):
        await as_owner(url, rewrite, FORGED, message.message_id)
    assert await ask_content(url, message.message_id) == before


async def test_an_inbox_asks_content_cannot_be_rewritten(guarded: tuple[str, World]) -> None:
    from compass_server.store.inbox import InboxStore
    from tests.world import two_question_ask

    url, w = guarded
    _, posted = await InboxStore(w.store.db).post(w.agent, "k", "T", "", two_question_ask())
    before = await ask_content(url, posted.message_id, "inbox_messages")
    rewrite = (
        "UPDATE inbox_messages SET blocks = jsonb_set(blocks, "
        "'{0,ask,questions,0,question}', %s) WHERE id = %s"
    )
    # compass_app updates an inbox ask's standing, never its content.
    with pytest.raises(psycopg.errors.CheckViolation, match="content"):
        async with w.store.db.tx(w.human) as conn:
            await conn.execute(rewrite, (FORGED, posted.message_id))
    with pytest.raises(psycopg.errors.CheckViolation, match="content"):
        await as_owner(url, rewrite, FORGED, posted.message_id)
    assert await ask_content(url, posted.message_id, "inbox_messages") == before


async def test_an_asks_state_still_changes_and_only_once(guarded: tuple[str, World]) -> None:
    """What the endings write passes; a second ending of the same ask, written
    past the functions, does not."""
    url, w = guarded
    message = await w.post_ask()
    ask_id = message.blocks[0].ask_id  # type: ignore[union-attr]
    await w.store.answer_ask(w.human, ask_id, [Answer("db", ("pg",)), Answer("langs", ("py",))])
    answered = await ask_content(url, message.message_id)
    with pytest.raises(psycopg.errors.CheckViolation, match="ended"):
        await as_owner(
            url,
            "UPDATE messages SET blocks = jsonb_set(blocks, '{0,ask,ending,kind}', "
            "'\"withdrawn_by_agent\"') WHERE id = %s",
            message.message_id,
        )
    assert await ask_content(url, message.message_id) == answered
