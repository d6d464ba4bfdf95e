"""The ask history is hash-chained: `compass-server admin verify-history`
walks a workspace and holds while nothing was touched, and names the first
entry that no longer holds after someone edits, removes or forges rows of
the history table with SQL."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
from typing import Any

import psycopg
import pytest

from compass_server.store.types import Answer, Ask, Surface
from tests.procs import BIN
from tests.test_admin_cli import cli
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(180)


async def _every_ending(w: World) -> dict[str, str]:
    """An ask ended each way, by kind."""
    ids = {}
    for kind in ("answered", "declined", "withdrawn_by_owner", "withdrawn_by_agent", "expired"):
        ask = two_question_ask()
        if kind == "expired":
            due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.3)
            ask = Ask(questions=ask.questions, deadline=due)
        message = await w.post_ask(w.agent, ask)
        ids[kind] = message.blocks[0].ask_id  # type: ignore[union-attr]
    store = w.store
    await store.answer_ask(
        w.human, ids["answered"], [Answer("db", ("pg",)), Answer("langs")], surface=Surface.WEB
    )
    await store.decline_ask(w.human, ids["declined"], "not now")
    await store.withdraw_ask(w.human, ids["withdrawn_by_owner"])
    await store.cancel_ask(w.agent, ids["withdrawn_by_agent"])
    await asyncio.sleep(0.4)
    while await store.expire_due_asks():
        pass
    return ids


async def _entry(url: str, ask_id: str, kind: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT id FROM ask_history WHERE ask_id = %s AND kind = %s", (ask_id, kind)
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _sql(url: str, statement: str, *params: Any) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(statement.encode(), params)


def _cli_holding(url: str, w: World) -> dict[str, Any]:
    out = cli(url, "verify-history", "--workspace", str(w.workspace_id))
    assert out["holds"] is True, out
    return out


@pytest.fixture
async def ended(server: Any, api_world: World) -> dict[str, str]:
    return await _every_ending(api_world)


def _cli_failing(url: str, w: World) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "COMPASS_DATABASE_URL"}
    done = subprocess.run(
        [
            BIN / "compass-server",
            "admin",
            "verify-history",
            "--workspace",
            str(w.workspace_id),
            "--database-url",
            url,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    # It says what it found on stdout, and fails.
    assert done.returncode == 1, done
    (line,) = done.stdout.strip().splitlines()
    out: dict[str, Any] = json.loads(line)
    assert out["holds"] is False
    return out


async def test_an_untouched_history_holds(
    database_url: str, api_world: World, ended: dict[str, str]
) -> None:
    out = _cli_holding(database_url, api_world)
    assert out == {
        "workspace_id": str(api_world.workspace_id),
        "asks": 5,
        "entries": 10,
        "holds": True,
    }


async def test_an_entry_edited_with_sql_is_named(
    database_url: str, api_world: World, ended: dict[str, str]
) -> None:
    declined = await _entry(database_url, ended["declined"], "declined")
    await _sql(database_url, "UPDATE ask_history SET reason = 'approved' WHERE id = %s", declined)
    out = _cli_failing(database_url, api_world)
    assert out["first_altered"]["entry_id"] == declined
    assert out["first_altered"]["ask_id"] == ended["declined"]
    assert out["first_altered"]["kind"] == "declined"
    assert "altered" in out["first_altered"]["why"]
    # Two edits: the earlier entry is the one named.
    posted = await _entry(database_url, ended["answered"], "posted")
    assert posted < declined
    await _sql(
        database_url,
        "UPDATE ask_history SET at = at - interval '1 day' WHERE id = %s",
        posted,
    )
    assert _cli_failing(database_url, api_world)["first_altered"]["entry_id"] == posted


async def test_a_forger_who_rehashes_the_edited_entry_is_caught_by_the_next(
    database_url: str, api_world: World, ended: dict[str, str]
) -> None:
    posted = await _entry(database_url, ended["answered"], "posted")
    answered = await _entry(database_url, ended["answered"], "answered")
    await _sql(
        database_url,
        "UPDATE ask_history SET actor_id = %s WHERE id = %s",
        api_world.other_human.account_id,
        posted,
    )
    # It is an ask's first entry: rehashed as it now reads, it holds by itself.
    await _sql(
        database_url,
        "UPDATE ask_history h SET entry_hash = compass_history_hash(NULL, h) WHERE h.id = %s",
        posted,
    )
    out = _cli_failing(database_url, api_world)
    assert out["first_altered"]["entry_id"] == answered
    assert out["first_altered"]["kind"] == "answered"


async def test_a_removed_ending_and_a_removed_history_are_named(
    database_url: str, api_world: World, ended: dict[str, str]
) -> None:
    expired = await _entry(database_url, ended["expired"], "expired")
    posted = await _entry(database_url, ended["expired"], "posted")
    await _sql(database_url, "DELETE FROM ask_history WHERE id = %s", expired)
    out = _cli_failing(database_url, api_world)
    # The ask still shows its expiry, which its last entry never recorded.
    assert out["first_altered"]["entry_id"] == posted
    assert "no longer stands" in out["first_altered"]["why"]
    assert out["entries"] == 9
    await _sql(database_url, "DELETE FROM ask_history WHERE ask_id = %s", ended["declined"])
    gone = _cli_failing(database_url, api_world)["first_altered"]
    assert (gone["ask_id"], gone["entry_id"]) == (ended["declined"], None)
    assert "every entry of this ask was removed" in gone["why"]


async def test_each_workspace_is_checked_alone(
    database_url: str, server: Any, api_world: World, ended: dict[str, str]
) -> None:
    other = await World.create(server.store)
    await _every_ending(other)
    declined = await _entry(database_url, ended["declined"], "declined")
    await _sql(database_url, "UPDATE ask_history SET reason = '' WHERE id = %s", declined)
    _cli_failing(database_url, api_world)
    _cli_holding(database_url, other)
