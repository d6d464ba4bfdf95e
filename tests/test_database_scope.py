"""The database as the last line: whatever SQL the request path's role runs,
it stays in the workspace of the credential it was given, no row can point
into another workspace, and maintenance is not its to call."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from compass_server.store import Database, Store, Unauthenticated
from compass_server.store.types import (
    Ask,
    Message,
    Operator,
    PresenceState,
    RunnerPrincipal,
    TextBlock,
)
from tests.world import World


@pytest.fixture
async def app_conn(db: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection as the request path's role, in a transaction rolled back."""
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        await conn.execute("SET ROLE compass_app")
        yield conn
        await conn.rollback()


async def scope(conn: psycopg.AsyncConnection[Any], w: World) -> None:
    """As the request path scopes a call by w's person: its credential, and
    the account it acts as."""
    await conn.execute(
        "SELECT set_config('compass.credential', %s, false),"
        " set_config('compass.actor', %s, false)",
        (w.human.credential.hex(), str(w.human.account_id)),
    )


async def test_the_request_role_cannot_name_another_workspace(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    a, b = await World.create(store), await World.create(store)
    await a.post_text(a.human, "of a")
    await b.post_text(b.human, "of b")
    await scope(app_conn, a)
    # Claiming b's workspace the way the request path once named its own.
    await app_conn.execute(
        "SELECT set_config('compass.workspace_id', %s, false)", (str(b.workspace_id),)
    )
    rows = await (await app_conn.execute("SELECT workspace_id FROM messages")).fetchall()
    assert {r["workspace_id"] for r in rows} == {a.workspace_id}
    # A credential it was not given names no workspace at all.
    made_up = hashlib.sha256(b"not a token").hexdigest()
    await app_conn.execute("SELECT set_config('compass.credential', %s, false)", (made_up,))
    assert await (await app_conn.execute("SELECT 1 FROM messages")).fetchall() == []
    assert await (await app_conn.execute("SELECT 1 FROM accounts")).fetchall() == []
    # And it can't read the credentials it would need.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await app_conn.execute("SELECT token_hash FROM credentials")


async def test_the_request_role_cannot_name_the_write_functions_workspace(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    """The write functions run as compass_writer, whose workspace they name
    after proving it; naming one as compass_app reaches nothing, and
    compass_app is no member of compass_writer."""
    a, b = await World.create(store), await World.create(store)
    await a.post_text(a.human, "of a")
    await b.post_text(b.human, "of b")
    await scope(app_conn, a)
    await app_conn.execute(
        "SELECT set_config('compass.writer_workspace', %s, false)", (str(b.workspace_id),)
    )
    rows = await (await app_conn.execute("SELECT workspace_id FROM messages")).fetchall()
    assert {r["workspace_id"] for r in rows} == {a.workspace_id}
    member = await (
        await app_conn.execute("SELECT pg_has_role('compass_app', 'compass_writer', 'MEMBER') AS m")
    ).fetchone()
    assert member == {"m": False}


async def test_the_write_functions_role_cannot_name_a_workspace_either(
    db: Database, store: Store
) -> None:
    """Whatever compass_writer itself sets, its statements stay in the
    workspace of the credential they were given."""
    a, b = await World.create(store), await World.create(store)
    await a.post_text(a.human, "of a")
    await b.post_text(b.human, "of b")
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        await conn.execute("SET ROLE compass_writer")
        await scope(conn, a)
        await conn.execute(
            "SELECT set_config('compass.writer_workspace', %s, false)", (str(b.workspace_id),)
        )
        rows = await (await conn.execute("SELECT workspace_id FROM messages")).fetchall()
        assert {r["workspace_id"] for r in rows} == {a.workspace_id}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(
                "INSERT INTO events (workspace_id, kind, channel_id, payload)"
                " VALUES (%s, 'message_posted', %s, '{}')",
                (b.workspace_id, b.channel.channel_id),
            )
        await conn.rollback()
        # With no credential it names, it reaches no workspace at all.
        await conn.execute("SET ROLE compass_writer")
        await conn.execute(
            "SELECT set_config('compass.writer_workspace', %s, false)", (str(b.workspace_id),)
        )
        assert await (await conn.execute("SELECT 1 FROM messages")).fetchall() == []
        # And it can't read the credentials it would need.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute("SELECT token_hash FROM credentials")
        await conn.rollback()


async def test_a_write_call_with_a_credential_it_was_not_given_writes_nothing(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    b = await World.create(store)
    made_up = hashlib.sha256(b"not a token").digest()
    row = await (
        await app_conn.execute(
            "SELECT compass_post_message(%s, %s, %s, %s, '[]'::jsonb, '', ARRAY[]::text[],"
            " ARRAY[]::timestamptz[], NULL) AS m",
            (made_up, uuid.uuid4(), b.channel.channel_id, b.human.account_id),
        )
    ).fetchone()
    assert row == {"m": {"unscoped": True}}
    await scope(app_conn, b)
    assert await (await app_conn.execute("SELECT 1 FROM messages")).fetchall() == []


def _cross_workspace_rows(
    a: World, b: World, b_message: uuid.UUID, a_ask: str, b_ask: str, b_token: uuid.UUID
) -> list[tuple[str, tuple[Any, ...]]]:
    """Rows of workspace a that point at a row of workspace b."""
    return [
        (
            "INSERT INTO channel_members (channel_id, account_id, workspace_id)"
            " VALUES (%s, %s, %s)",
            (a.channel.channel_id, b.human.account_id, a.workspace_id),
        ),
        (
            "INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks)"
            " VALUES (%s, %s, %s, %s, '[]')",
            (uuid.uuid4(), a.workspace_id, a.channel.channel_id, b.human.account_id),
        ),
        (
            "INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks)"
            " VALUES (%s, %s, %s, %s, '[]')",
            (uuid.uuid4(), a.workspace_id, b.channel.channel_id, a.human.account_id),
        ),
        (
            "INSERT INTO asks (ask_id, workspace_id, message_id) VALUES (%s, %s, %s)",
            (f"ask_{uuid.uuid4().hex}", a.workspace_id, b_message),
        ),
        (
            "INSERT INTO inbox_grants (agent_id, account_id, workspace_id) VALUES (%s, %s, %s)",
            (a.agent.account_id, b.human.account_id, a.workspace_id),
        ),
        (
            "INSERT INTO accounts (id, workspace_id, handle, kind, owner_id)"
            " VALUES (%s, %s, 'stray', 'agent', %s)",
            (uuid.uuid4(), a.workspace_id, b.human.account_id),
        ),
        (
            "INSERT INTO delivery_cursors (agent_id, workspace_id) VALUES (%s, %s)",
            (b.agent.account_id, a.workspace_id),
        ),
        (
            "INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id)"
            " VALUES (%s, %s, 'declined', %s)",
            (a.workspace_id, b_ask, a.human.account_id),
        ),
        (
            "INSERT INTO ask_history (workspace_id, ask_id, kind, actor_id)"
            " VALUES (%s, %s, 'declined', %s)",
            (a.workspace_id, a_ask, b.human.account_id),
        ),
        (
            "INSERT INTO credentials (token_hash, workspace_id, account_id, replaced_by)"
            " VALUES (%s, %s, %s, %s)",
            (hashlib.sha256(b"stray").digest(), a.workspace_id, a.human.account_id, b_token),
        ),
    ]


def _ask_id(message: Message) -> str:
    return next(b for b in message.blocks if isinstance(b, Ask)).ask_id


async def test_no_row_can_point_into_another_workspace(db: Database, store: Store) -> None:
    """Not as the request path scoped to a, and not even as the owner, who
    is not held by row-level security."""
    a, b = await World.create(store), await World.create(store)
    b_message = (await b.post_text(b.human, "of b")).message_id
    a_ask, b_ask = _ask_id(await a.post_ask()), _ask_id(await b.post_ask())
    b_token = (await store.admin.sign_in(b.tokens[b.human.account_id])).token_id
    rows = _cross_workspace_rows(a, b, b_message, a_ask, b_ask, b_token)
    async with await psycopg.AsyncConnection.connect(db.url, autocommit=True) as conn:
        # An agent has its cursor from its creation: b's goes, for a's to point at.
        await conn.execute(
            "DELETE FROM delivery_cursors WHERE agent_id = %s", (b.agent.account_id,)
        )
    for sql, params in rows:
        for role in ("compass_app", None):
            async with await psycopg.AsyncConnection.connect(db.url) as conn:
                if role is not None:
                    await conn.execute(f"SET ROLE {role}")
                    await scope(conn, a)
                # The request path may not write some of these tables at all.
                refused = (
                    psycopg.errors.ForeignKeyViolation
                    if role is None
                    else (psycopg.errors.ForeignKeyViolation, psycopg.errors.InsufficientPrivilege)
                )
                with pytest.raises(refused):
                    await conn.execute(sql.encode(), params)
                await conn.rollback()


async def test_the_same_rows_within_one_workspace_are_fine(db: Database, store: Store) -> None:
    """The references themselves are allowed: only their workspace is checked."""
    a = await World.create(store)
    grace = await a.add_account("grace2")
    async with await psycopg.AsyncConnection.connect(db.url) as conn:
        await conn.execute("SET ROLE compass_app")
        await scope(conn, a)
        await conn.execute(
            "INSERT INTO channel_members (channel_id, account_id, workspace_id)"
            " VALUES (%s, %s, %s)",
            (a.channel.channel_id, grace.account_id, a.workspace_id),
        )
        await conn.rollback()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM compass_reap_stale_sessions('-1 hour')",
        "SELECT compass_sequence_leftovers()",
        "SELECT compass_workspace_of(gen_random_uuid())",
        "SELECT compass_sequence_events(gen_random_uuid())",
        "SELECT compass_expire_due_asks(10)",
        "SELECT compass_next_ask_deadline()",
        "SELECT * FROM compass_token_states(ARRAY[gen_random_uuid()])",
        "SELECT compass_end_session(gen_random_uuid(), gen_random_uuid())",
        "INSERT INTO servers (id) VALUES (gen_random_uuid())",
        "DELETE FROM servers",
        "UPDATE servers SET access_seen = 0",
        "INSERT INTO workspaces (id, name) VALUES (gen_random_uuid(), 'mine')",
        "UPDATE credentials SET workspace_id = workspace_id",
        "UPDATE credentials SET token_hash = token_hash",
    ],
)
async def test_maintenance_is_not_the_request_paths_to_run(
    app_conn: psycopg.AsyncConnection[Any], world: World, sql: str
) -> None:
    await scope(app_conn, world)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await app_conn.execute(sql.encode())


async def test_the_reaper_runs_as_maintenance_and_leaves_live_servers_alone(
    db: Database, world: World
) -> None:
    """The call that once deleted every server's sessions from the request
    path: as maintenance, '-1 hour' takes only servers silent that long."""
    from tests.relay_client import runner_for

    await runner_for(world)
    live = uuid.uuid4()
    await world.store.heartbeat(live)
    async with db.maintenance() as conn:
        rows = await (
            await conn.execute("SELECT * FROM compass_reap_stale_sessions('1 hour')")
        ).fetchall()
        assert rows == []
        alive = await (
            await conn.execute("SELECT 1 FROM servers WHERE id = %s", (live,))
        ).fetchall()
        assert alive
    await world.store.remove_server(live)


async def test_the_request_path_still_works_with_its_own_credential(world: World) -> None:
    message = await world.post_ask()
    ask = next(b for b in message.blocks if isinstance(b, Ask))
    await world.store.cancel_ask(world.agent, ask.ask_id)
    page = await world.store.list_messages(world.human, world.channel.channel_id, 10, "")
    assert [m.message_id for m in page.items] == [message.message_id]
    assert await world.store.append_message(
        world.human, world.channel.channel_id, [TextBlock("still here")]
    )


async def test_a_revoked_or_expired_credential_scopes_nothing(db: Database, store: Store) -> None:
    w = await World.create(store)
    await w.post_text(w.human, "before")
    assert await store.list_messages(w.agent, w.channel.channel_id, 10, "")
    signed = await store.admin.sign_in(w.tokens[w.human.account_id])
    await store.admin.revoke_token(Operator(w.workspace_id), signed.token_id)
    # A transaction begun after the revocation.
    async with await psycopg.AsyncConnection.connect(db.url) as conn:
        await conn.execute("SET ROLE compass_app")
        await scope(conn, w)
        assert await (await conn.execute("SELECT 1 FROM messages")).fetchall() == []
    with pytest.raises(Unauthenticated):
        await store.append_message(w.human, w.channel.channel_id, [TextBlock("after")])
    # The agent's token, expired a second ago by the database's clock.
    async with await psycopg.AsyncConnection.connect(db.url) as owner:
        await owner.execute(
            "UPDATE credentials SET expires_at = now() - interval '1 second' WHERE token_hash = %s",
            (w.agent.credential,),
        )
    with pytest.raises(Unauthenticated):
        await store.list_messages(w.agent, w.channel.channel_id, 10, "")


async def test_an_admin_who_revokes_their_own_token_reads_the_result(store: Store) -> None:
    """Revoked in this very transaction, the credential still scopes it."""
    w = await World.create(store)
    signed = await store.admin.sign_in(w.tokens[w.human.account_id])
    token = await store.admin.revoke_token(w.human, signed.token_id)
    assert token.token_id == signed.token_id and not token.active
    with pytest.raises(Unauthenticated):
        await store.get_account(w.human, w.human.account_id)


async def test_only_maintenance_names_the_operators_workspace(
    app_conn: psycopg.AsyncConnection[Any], db: Database, store: Store
) -> None:
    a, b = await World.create(store), await World.create(store)
    await scope(app_conn, a)
    await app_conn.execute(
        "SELECT set_config('compass.operator_workspace', %s, false)", (str(b.workspace_id),)
    )
    rows = await (await app_conn.execute("SELECT workspace_id FROM accounts")).fetchall()
    assert {r["workspace_id"] for r in rows} == {a.workspace_id}
    async with db.tx(Operator(b.workspace_id)) as conn:
        rows = await (await conn.execute("SELECT workspace_id FROM accounts")).fetchall()
    assert {r["workspace_id"] for r in rows} == {b.workspace_id}
    # Maintenance naming no workspace reads no workspace's rows.
    async with db.maintenance() as conn:
        assert await (await conn.execute("SELECT 1 FROM accounts")).fetchall() == []


async def test_the_request_role_writes_credentials_only_in_its_own_workspace(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    """An admin's calls issue tokens, so the request path inserts credentials,
    but only into the workspace its own credential proves."""
    a, b = await World.create(store), await World.create(store)
    await scope(app_conn, a)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        await app_conn.execute(
            "INSERT INTO credentials (token_hash, workspace_id, account_id) VALUES (%s, %s, %s)",
            (hashlib.sha256(b"mine now").digest(), b.workspace_id, b.human.account_id),
        )


async def test_a_server_ends_only_its_own_sessions_and_after_its_runners_token_went(
    db: Database, world: World
) -> None:
    """Ending a relay session is the server's upkeep: it works once the
    runner's token is revoked, and never on another server's session."""
    from tests.relay_client import runner_for

    runner = (await world.store.admin.sign_in(await runner_for(world))).principal
    assert isinstance(runner, RunnerPrincipal)
    mine, other = uuid.uuid4(), uuid.uuid4()
    binding = await world.store.bind_session(runner, world.agent.account_id, mine)
    (p,) = await world.store.get_presence(world.human, [world.agent.account_id])
    assert p.state is PresenceState.IDLE
    async with await psycopg.AsyncConnection.connect(db.url) as owner:
        await owner.execute(
            "UPDATE credentials SET revoked_at = now() WHERE token_hash = %s", (runner.credential,)
        )
    await world.store.unbind_session(other, binding.session_id)
    (p,) = await world.store.get_presence(world.human, [world.agent.account_id])
    assert p.state is PresenceState.IDLE
    await world.store.unbind_session(mine, binding.session_id)
    (p,) = await world.store.get_presence(world.human, [world.agent.account_id])
    assert p.state is PresenceState.OFFLINE


async def _as_member(conn: psycopg.AsyncConnection[Any], w: World) -> None:
    """As the request path scopes a call by w's member (grace, not an admin)."""
    await conn.execute(
        "SELECT set_config('compass.credential', %s, false),"
        " set_config('compass.actor', %s, false)",
        (w.other_human.credential.hex(), str(w.other_human.account_id)),
    )


async def _refused(conn: psycopg.AsyncConnection[Any], sql: str, params: tuple[Any, ...]) -> None:
    async with conn.transaction():
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(sql, params)


async def test_a_members_credential_cannot_write_credentials_or_roles(
    db: Database, store: Store
) -> None:
    """compass_app holding a member's credential writes no credential and no
    role, directly or through the functions that may: they check who asks."""
    w = await World.create(store)
    admin, member = w.human.account_id, w.other_human.account_id
    forged = hashlib.sha256(b"a token for the admin").digest()
    async with await psycopg.AsyncConnection.connect(
        db.url, row_factory=dict_row, autocommit=True
    ) as conn:
        await conn.execute("SET ROLE compass_app")
        await _as_member(conn, w)
        for sql, params in [
            (
                "INSERT INTO credentials (token_hash, id, workspace_id, account_id, label)"
                " VALUES (%s, %s, %s, %s, 'mine')",
                (forged, uuid.uuid4(), w.workspace_id, admin),
            ),
            ("UPDATE accounts SET role = 'admin' WHERE id = %s", (member,)),
            ("UPDATE accounts SET deactivated_at = now() WHERE id = %s", (admin,)),
            ("UPDATE accounts SET email = 'me@example.com' WHERE id = %s", (admin,)),
            ("UPDATE credentials SET revoked_at = now() WHERE account_id = %s", (admin,)),
            (
                "INSERT INTO accounts (id, workspace_id, handle, kind, role)"
                " VALUES (%s, %s, 'boss', 'human', 'admin')",
                (uuid.uuid4(), w.workspace_id),
            ),
            (
                "SELECT compass_issue_token(%s, %s, %s, NULL, 'mine', NULL)",
                (forged, uuid.uuid4(), admin),
            ),
            ("SELECT * FROM compass_set_role(%s, 'admin')", (member,)),
            (
                "SELECT * FROM compass_create_account(%s, 'boss', 'human', NULL, 'admin', NULL)",
                (uuid.uuid4(),),
            ),
            ("SELECT compass_set_deactivated(%s, true)", (admin,)),
            ("SELECT * FROM compass_set_email(%s, 'me@example.com')", (admin,)),
            ("SELECT * FROM compass_revoke_credentials(NULL, NULL, %s, true)", (admin,)),
            ("SELECT compass_retire_token(%s, NULL, '0s')", (uuid.uuid4(),)),
        ]:
            await _refused(conn, sql, params)
        # Naming the admin's tokens as if they were its own sessions ends none.
        ids = await (
            await conn.execute("SELECT id FROM credentials WHERE account_id = %s", (admin,))
        ).fetchall()
        assert ids
        revoked = await (
            await conn.execute(
                "SELECT * FROM compass_revoke_credentials(%s, ARRAY['session'], NULL, false)",
                ([r["id"] for r in ids],),
            )
        ).fetchall()
        assert revoked == []
    # Re-read as the owner: nothing changed.
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        roles = await (
            await conn.execute(
                "SELECT id, role, deactivated_at, email FROM accounts WHERE workspace_id = %s",
                (w.workspace_id,),
            )
        ).fetchall()
        assert {r["id"]: r["role"] for r in roles} == {
            admin: "admin",
            member: "member",
            w.agent.account_id: "member",
        }
        assert all(r["deactivated_at"] is None and r["email"] is None for r in roles)
        creds = await (
            await conn.execute(
                "SELECT token_hash, revoked_at FROM credentials WHERE workspace_id = %s",
                (w.workspace_id,),
            )
        ).fetchall()
        assert len(creds) == 3 and all(c["revoked_at"] is None for c in creds)
        assert forged not in {bytes(c["token_hash"]) for c in creds}


async def test_the_admins_credential_writes_them_through_the_functions(
    db: Database, store: Store
) -> None:
    w = await World.create(store)
    member = w.other_human.account_id
    async with await psycopg.AsyncConnection.connect(
        db.url, row_factory=dict_row, autocommit=True
    ) as conn:
        await conn.execute("SET ROLE compass_app")
        await scope(conn, w)
        row = await (
            await conn.execute("SELECT role FROM compass_set_role(%s, 'admin')", (member,))
        ).fetchone()
        assert row == {"role": "admin"}
        # Another workspace's account is not its to change.
        b = await World.create(store)
        gone = await (
            await conn.execute(
                "SELECT role FROM compass_set_role(%s, 'admin')", (b.other_human.account_id,)
            )
        ).fetchall()
        assert gone == []
        # A member ends its own sessions (and nothing else).
        await _as_member(conn, w)
        ended = await (
            await conn.execute(
                "SELECT * FROM compass_revoke_credentials(NULL, ARRAY['session'], %s, true)",
                (member,),
            )
        ).fetchall()
        assert ended == []


async def test_a_keyed_batch_across_workspaces_writes_each_key_in_its_own(
    db: Database, store: Store
) -> None:
    """One compass_posts_once of two workspaces' keyed posts: each post and
    its key land in the workspace its own credential proves."""
    a, b = await World.create(store), await World.create(store)

    def item(w: World, key: str) -> dict[str, Any]:
        return {
            "cred": w.agent.credential.hex(),
            "id": str(uuid.uuid4()),
            "channel_id": str(w.channel.channel_id),
            "author_id": str(w.agent.account_id),
            "blocks": [{"kind": "text", "text": key}],
            "search_text": key,
            "ask_ids": [],
            "due": [],
            "surface": "api",
            "client_key": key,
            "digest": hashlib.sha256(key.encode()).hexdigest(),
        }

    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        await conn.execute("SET ROLE compass_app")
        row = await (
            await conn.execute(
                "SELECT compass_posts_once(%s::jsonb) AS r",
                (psycopg.types.json.Jsonb([item(a, "of-a"), item(b, "of-b")]),),
            )
        ).fetchone()
        await conn.commit()
    assert row is not None
    assert [r["outcome"] for r in row["r"]] == ["posted", "posted"], row
    async with await psycopg.AsyncConnection.connect(db.url, row_factory=dict_row) as conn:
        keys = await (
            await conn.execute(
                "SELECT client_key, workspace_id FROM post_keys WHERE workspace_id = ANY(%s)",
                ([a.workspace_id, b.workspace_id],),
            )
        ).fetchall()
    assert {(k["client_key"], k["workspace_id"]) for k in keys} == {
        ("of-a", a.workspace_id),
        ("of-b", b.workspace_id),
    }


async def test_a_transactions_noted_scope_cannot_be_forged(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    """The scope a transaction proves once (compass_note_scope) is where row-level
    security reads it; the request role can't write it, see another backend's,
    or note a workspace its credential doesn't prove."""
    a, b = await World.create(store), await World.create(store)
    await a.post_text(a.human, "of a")
    await b.post_text(b.human, "of b")
    async with app_conn.transaction():
        noted = await (
            await app_conn.execute(
                "SELECT compass_scope(%s, %s) AS ws", (a.human.credential, a.human.account_id)
            )
        ).fetchone()
        assert noted == {"ws": a.workspace_id}
        rows = await (await app_conn.execute("SELECT workspace_id FROM messages")).fetchall()
        assert {r["workspace_id"] for r in rows} == {a.workspace_id}
        for attempt in (
            "UPDATE compass_scopes SET workspace_id = %s",
            "INSERT INTO compass_scopes (pid, at, workspace_id) VALUES (1, now(), %s)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                async with app_conn.transaction():
                    await app_conn.execute(attempt, (b.workspace_id,))
        # Naming b's account or b's credential afterwards reaches nothing of b's.
        await app_conn.execute(
            "SELECT set_config('compass.credential', %s, true),"
            " set_config('compass.actor', %s, true)",
            (b.human.credential.hex(), str(b.human.account_id)),
        )
        rows = await (await app_conn.execute("SELECT workspace_id FROM messages")).fetchall()
        assert b.workspace_id not in {r["workspace_id"] for r in rows}
    # A credential it was not given notes no workspace.
    async with app_conn.transaction():
        made_up = hashlib.sha256(b"not a token").digest()
        noted = await (
            await app_conn.execute("SELECT compass_scope(%s, NULL) AS ws", (made_up,))
        ).fetchone()
        assert noted == {"ws": None}
        assert await (await app_conn.execute("SELECT 1 FROM messages")).fetchall() == []
    # Another backend's note is out of sight.
    seen = await (await app_conn.execute("SELECT count(*) AS n FROM compass_scopes")).fetchone()
    assert seen is not None and seen["n"] <= 1


async def credential_reads(conn: psycopg.AsyncConnection[Any]) -> int:
    """How often this transaction has read the credentials table so far."""
    row = await (
        await conn.execute(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) AS n"
            " FROM pg_stat_xact_user_tables WHERE relname = 'credentials'"
        )
    ).fetchone()
    return int(row["n"]) if row else 0


async def test_a_transaction_proves_its_credential_once(
    app_conn: psycopg.AsyncConnection[Any], store: Store
) -> None:
    """Every write function of a transaction proves the credential it is
    given, but the credential is read once: a second proof of the same
    credential and account reads nothing; another credential is proved anew
    and its scope is the one row-level security reads from then on."""
    a, b = await World.create(store), await World.create(store)
    await a.post_text(a.human, "of a")
    await b.post_text(b.human, "of b")
    prove = "SELECT compass_scope(%s, %s) AS ws"
    async with app_conn.transaction():
        first = await (
            await app_conn.execute(prove, (a.human.credential, a.human.account_id))
        ).fetchone()
        read = await credential_reads(app_conn)
        assert first == {"ws": a.workspace_id} and read > 0
        for _ in range(3):
            again = await (
                await app_conn.execute(prove, (a.human.credential, a.human.account_id))
            ).fetchone()
            assert again == {"ws": a.workspace_id}
        assert await credential_reads(app_conn) == read
        other = await (
            await app_conn.execute(prove, (b.human.credential, b.human.account_id))
        ).fetchone()
        assert other == {"ws": b.workspace_id}
        assert await credential_reads(app_conn) > read
        rows = await (await app_conn.execute("SELECT workspace_id FROM messages")).fetchall()
        assert {r["workspace_id"] for r in rows} == {b.workspace_id}
        # The same credential for another account is a proof of its own.
        bare = await (
            await app_conn.execute(prove, (b.human.credential, a.human.account_id))
        ).fetchone()
        assert bare == {"ws": b.workspace_id}
        vouched = await (
            await app_conn.execute("SELECT compass_vouched_actor() AS actor")
        ).fetchone()
        assert vouched == {"actor": None}
