"""The database holds participation too: whatever SQL the request path's role
runs, it reads and writes only the channels the account it acts as takes
part in (a member, or below one in its tree), and only an account its
credential vouches for."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from compass_server.store import Database, Store
from compass_server.store.types import AccountKind, Actor, Ask, RunnerPrincipal, TextBlock
from tests.relay_client import runner_for
from tests.world import World


@pytest.fixture
async def app_conn(db: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        yield conn
        await conn.rollback()


async def act_as(conn: psycopg.AsyncConnection[Any], credential: bytes, actor: Actor) -> None:
    """As the request path's role, in a transaction (a rollback ends both)."""
    await conn.execute("SET ROLE compass_app")
    await conn.execute(
        "SELECT set_config('compass.credential', %s, false),"
        " set_config('compass.actor', %s, false)",
        (credential.hex(), str(actor.account_id)),
    )


async def channels_seen(conn: psycopg.AsyncConnection[Any]) -> set[uuid.UUID]:
    rows = await (await conn.execute("SELECT DISTINCT channel_id FROM messages")).fetchall()
    named = await (await conn.execute("SELECT id FROM channels")).fetchall()
    assert {r["id"] for r in named} >= {r["channel_id"] for r in rows}
    return {r["id"] for r in named}


async def tree(store: Store) -> tuple[World, Actor, Actor, uuid.UUID]:
    """ada's scout in general; planner and beta under scout; a channel of
    planner's own, with a message in each."""
    w = await World.create(store)
    planner = await w.add_subagent("planner", w.agent)
    beta = await w.add_subagent("beta", w.agent)
    own = await store.create_channel(w.human, "planner-only", "", [planner.account_id])
    await w.post_text(w.human, "in general")
    await store.append_message(w.human, own.channel_id, [TextBlock("planner only")])
    return w, planner, beta, own.channel_id


async def test_rows_are_those_of_the_channels_the_named_account_takes_part_in(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    w, planner, beta, own = await tree(store)
    general = w.channel.channel_id
    await act_as(app_conn, planner.credential, planner)
    assert await channels_seen(app_conn) == {general, own}
    await act_as(app_conn, beta.credential, beta)
    assert await channels_seen(app_conn) == {general}
    await act_as(app_conn, w.agent.credential, w.agent)
    assert await channels_seen(app_conn) == {general}


async def test_an_account_its_credential_does_not_vouch_for_sees_nothing(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    w, planner, beta, _ = await tree(store)
    # beta's token naming planner, and a person's naming the agent.
    await act_as(app_conn, beta.credential, planner)
    assert await channels_seen(app_conn) == set()
    await act_as(app_conn, w.human.credential, w.agent)
    assert await channels_seen(app_conn) == set()
    # No account named: nothing either.
    await app_conn.execute("SELECT set_config('compass.actor', '', false)")
    assert await channels_seen(app_conn) == set()


async def test_a_runners_credential_vouches_for_its_assigned_agents_only(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    w, planner, beta, own = await tree(store)
    runner = (await store.admin.sign_in(await runner_for(w, planner))).principal
    assert isinstance(runner, RunnerPrincipal)
    await act_as(app_conn, runner.credential, planner)
    assert await channels_seen(app_conn) == {w.channel.channel_id, own}
    await act_as(app_conn, runner.credential, beta)
    assert await channels_seen(app_conn) == set()


async def test_a_write_into_a_channel_it_takes_no_part_in_is_refused(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    w, _, beta, own = await tree(store)
    await act_as(app_conn, beta.credential, beta)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await app_conn.execute(
            "INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks)"
            " VALUES (%s, %s, %s, %s, '[]')",
            (uuid.uuid4(), w.workspace_id, own, beta.account_id),
        )
    await app_conn.rollback()
    await act_as(app_conn, beta.credential, beta)
    changed = await app_conn.execute("UPDATE channels SET topic = 'taken' WHERE id = %s", (own,))
    assert changed.rowcount == 0
    # Messages are written only through the write functions.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await app_conn.execute("UPDATE messages SET blocks = '[]' WHERE channel_id = %s", (own,))
    await app_conn.rollback()


async def test_a_chain_is_written_only_by_the_tree(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    """Claiming planner as beta's ancestor by hand would let beta read
    planner's channel; only the tree's own triggers write a chain."""
    w, planner, beta, _ = await tree(store)
    await act_as(app_conn, w.human.credential, w.human)
    with pytest.raises(psycopg.Error) as refused:
        await app_conn.execute(
            "UPDATE accounts SET chain = ARRAY[id, %s::uuid, %s::uuid] WHERE id = %s",
            (planner.account_id, w.agent.account_id, beta.account_id),
        )
    assert refused.value.sqlstate == "CT005"
    await app_conn.rollback()
    await act_as(app_conn, w.human.credential, w.human)
    # A parent of another owner or a person, set by hand, is refused as well.
    other = await w.add_account("rover-owner")
    rover, _ = await store.create_account(
        w.workspace_id, "rover", AccountKind.AGENT, other.account_id
    )
    for parent in (rover.account_id, w.human.account_id):
        with pytest.raises(psycopg.Error) as refused:
            await app_conn.execute(
                "UPDATE accounts SET parent_id = %s WHERE id = %s", (parent, beta.account_id)
            )
        assert refused.value.sqlstate == "CT004"
        await app_conn.rollback()
        await act_as(app_conn, w.human.credential, w.human)


async def test_the_write_functions_act_only_as_an_account_the_credential_vouches_for(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    """Each write names its credential and the account it acts as: a name the
    credential does not vouch for writes nothing, even into a channel that
    account takes part in."""
    w, planner, beta, own = await tree(store)
    asked = await w.post_ask(planner, channel=w.channel)
    ask_id = next(b.ask_id for b in asked.blocks if isinstance(b, Ask))
    await app_conn.execute("SET ROLE compass_app")

    async def call(sql: str, *args: Any) -> Any:
        row = await (await app_conn.execute(f"SELECT {sql} AS r", args)).fetchone()
        assert row is not None
        return row["r"]

    post = (
        "compass_post_message(%s, %s, %s, %s, '[]'::jsonb, '', ARRAY[]::text[],"
        " ARRAY[]::timestamptz[], NULL)"
    )
    # beta's token naming planner, in planner's own channel.
    assert await call(post, beta.credential, uuid.uuid4(), own, planner.account_id) is None
    # grace's token naming ada (a member of general) answering, declining.
    answer = "compass_answer_ask(%s, %s, %s, '[]'::jsonb, %s, NULL, NULL)"
    result = await call(answer, w.other_human.credential, w.human.account_id, ask_id, uuid.uuid4())
    assert result["status"] == "not_found"
    end = "compass_end_ask(%s, %s, %s, %s, NULL, '')"
    for cred, actor, kind in (
        (w.other_human.credential, w.human.account_id, "declined"),
        (w.other_human.credential, w.human.account_id, "withdrawn_by_owner"),
        (beta.credential, planner.account_id, "withdrawn_by_agent"),
    ):
        assert (await call(end, cred, actor, ask_id, kind))["status"] == "not_found"
    # The same calls with a vouching credential do land.
    posted = await call(post, planner.credential, uuid.uuid4(), own, planner.account_id)
    assert posted["message"]["author_id"] == str(planner.account_id)
    ended = await call(end, w.human.credential, w.human.account_id, ask_id, "declined")
    assert ended["status"] == "changed"
    await app_conn.rollback()
    stored = await store.get_message(w.human, asked.message_id)
    assert stored.blocks == asked.blocks
