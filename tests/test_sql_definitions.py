"""Every database function, trigger and policy has one home: a file of its
own under compass_server/store/sql/, applied after the migration it names and
again whenever its text changes. A database built from empty and one upgraded
from the release before end with the same definitions, and a server of that
release keeps serving while a newer one applies them."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import pathlib
import re
import subprocess
import tarfile
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.store import Database, Store
from compass_server.store.db import migrate, migrations
from compass_server.store.definitions import definitions
from tests.conftest import MIGRATE_LOCK, ROOT
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_api_comms import GOOD, ask_pb, tok
from tests.world import World

pytestmark = pytest.mark.timeout(300)

SQL = ROOT / "compass_server" / "store" / "sql"
MIGRATIONS = ROOT / "compass_server" / "store" / "migrations"

_CREATES = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)\s*\(|"
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?TRIGGER\s+(\w+)|"
    r"CREATE\s+POLICY\s+(\w+)\s+ON\s+(\w+)",
    re.I,
)
# A migration may drop a definition whose file is gone, never make or change one.
_DDL = re.compile(
    r"\b(CREATE\s+(OR\s+REPLACE\s+)?FUNCTION|(CREATE|ALTER)\s+(OR\s+REPLACE\s+)?"
    r"(CONSTRAINT\s+)?TRIGGER|(CREATE|ALTER)\s+POLICY|ALTER\s+FUNCTION|ON\s+FUNCTION)\b",
    re.I,
)


def _code(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def test_no_migration_makes_or_changes_a_function_trigger_or_policy() -> None:
    found = [
        f"{path.name}: {m.group(0)}"
        for path in sorted(MIGRATIONS.glob("*.sql"))
        for m in _DDL.finditer(_code(path.read_text()))
    ]
    assert found == [], found


def test_each_function_trigger_and_policy_is_defined_once_in_the_file_named_for_it() -> None:
    homes: dict[str, list[str]] = {}
    for d in definitions():
        kind, name = d.path.split("/")
        stem = name.removesuffix(".sql")
        for m in _CREATES.finditer(_code(d.text)):
            function, trigger, _, table = m.groups()
            if function:
                assert kind == "functions" and function == f"compass_{stem}", (d.path, function)
                key = f"function {function}"
            elif trigger:
                assert kind == "triggers" and trigger == stem, (d.path, trigger)
                key = f"trigger {trigger}"
            else:
                assert kind == "policies" and table == stem, (d.path, table)
                key = f"policy {m.group(3)} on {table}"
            homes.setdefault(key, []).append(d.path)
    twice = {k: v for k, v in homes.items() if len(set(v)) > 1}
    assert not twice, twice
    assert len([k for k in homes if k.startswith("function")]) >= 100


def test_each_definition_follows_a_migration_that_exists() -> None:
    versions = {v for v, _, _ in migrations()}
    assert {d.after for d in definitions()} <= versions


# --- the same definitions, however the database got here ---------------------------


async def definitions_in(url: str) -> dict[str, Any]:
    """What the database holds of every compass function, trigger and policy."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        functions = await (
            await conn.execute(
                "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid),"
                " pg_get_userbyid(p.proowner), p.proacl::text"
                " FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = 'public' ORDER BY 1"
            )
        ).fetchall()
        policies = await (
            await conn.execute(
                "SELECT tablename, policyname, permissive, roles::text, cmd, qual, with_check"
                " FROM pg_policies WHERE schemaname = 'public' ORDER BY 1, 2"
            )
        ).fetchall()
        triggers = await (
            await conn.execute(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
                " WHERE NOT tgisinternal ORDER BY 1"
            )
        ).fetchall()
    return {"functions": functions, "policies": policies, "triggers": triggers}


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout


def release_before() -> str:
    """The last commit whose migrations still held every definition: the
    parent of the one that made compass_server/store/sql/."""
    made = _git("log", "--diff-filter=A", "--format=%H", "--", "compass_server/store/sql").split()
    assert made, (
        "this test needs the repository's history back to the commit that made "
        "compass_server/store/sql/ (a clone with its history, not a shallow one)"
    )
    return _git("rev-parse", f"{made[-1].decode()}^").decode().strip()


def tree_at(commit: str, into: pathlib.Path, *paths: str) -> pathlib.Path:
    archive = _git("archive", "--format=tar", commit, "--", *paths)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def _migration_files(folder: pathlib.Path) -> list[tuple[str, str]]:
    return [(path.stem, path.read_text()) for path in sorted(folder.glob("*.sql"))]


async def migrate_as_released(url: str, files: list[tuple[str, str]]) -> None:
    """The release before's migrations, as its runner applied them."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version int PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for stem, text in files:
            version, _, name = stem.partition("_")
            async with conn.transaction():
                await conn.execute(text.encode())
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (int(version), name),
                )


async def _database(admin_url: str) -> AsyncIterator[str]:
    name = f"compass_test_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        info = psycopg.conninfo.conninfo_to_dict(admin_url)
        info["dbname"] = name
        yield psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


@pytest.fixture
async def empty_url(pg_admin_url: str) -> AsyncIterator[str]:
    async for url in _database(pg_admin_url):
        yield url


@pytest.fixture
async def released_url(pg_admin_url: str, tmp_path: pathlib.Path) -> AsyncIterator[str]:
    """A database as the release before left it."""
    old = tree_at(release_before(), tmp_path / "old", "compass_server/store/migrations")
    async for url in _database(pg_admin_url):
        await migrate_as_released(
            url, _migration_files(old / "compass_server" / "store" / "migrations")
        )
        yield url


async def test_a_database_from_empty_and_one_upgraded_hold_the_same_definitions(
    empty_url: str, released_url: str
) -> None:
    async with migrating():
        await migrate(empty_url)
        await migrate(released_url)
    fresh, upgraded = await definitions_in(empty_url), await definitions_in(released_url)
    for kind in ("functions", "policies", "triggers"):
        assert fresh[kind] == upgraded[kind], kind
    # Applied once: a second start changes nothing.
    async with await psycopg.AsyncConnection.connect(empty_url) as conn:
        before = await (
            await conn.execute("SELECT path, applied_at FROM schema_definitions")
        ).fetchall()
    await migrate(empty_url)
    async with await psycopg.AsyncConnection.connect(empty_url) as conn:
        after = await (
            await conn.execute("SELECT path, applied_at FROM schema_definitions")
        ).fetchall()
    assert sorted(before) == sorted(after) and len(after) == len(definitions())


async def test_a_definition_whose_text_changed_is_applied_again(empty_url: str) -> None:
    async with migrating():
        await migrate(empty_url)
    changed = "functions/answer_ask.sql"
    async with await psycopg.AsyncConnection.connect(empty_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE schema_definitions SET checksum = 'older' WHERE path = %s", (changed,)
        )
        # As a release with another body would have left it.
        await conn.execute(
            "ALTER FUNCTION compass_answer_ask(bytea, uuid, text, jsonb, uuid, text, jsonb)"
            " SET work_mem = '1MB'"
        )
    async with migrating():
        await migrate(empty_url)
    async with await psycopg.AsyncConnection.connect(empty_url) as conn:
        rows = await (
            await conn.execute("SELECT path, checksum FROM schema_definitions")
        ).fetchall()
        config = await (
            await conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'compass_answer_ask'")
        ).fetchone()
    assert dict(rows)[changed] == next(d for d in definitions() if d.path == changed).checksum
    # CREATE OR REPLACE keeps settings it doesn't name; the file is the whole truth
    # only of what it says. What it says is back.
    assert config is not None


async def until(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("waited too long")


@contextlib.asynccontextmanager
async def migrating() -> AsyncIterator[None]:
    """Roles are the cluster's: migrations of two databases at once would race."""
    with MIGRATE_LOCK.open("a") as lock:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        yield


async def test_a_server_of_the_release_before_serves_while_a_newer_one_upgrades(
    released_url: str, tmp_path: pathlib.Path
) -> None:
    old = tree_at(release_before(), tmp_path / "code", "compass_server", "gen")
    db = Database(released_url, min_size=1, max_size=2)
    # Its pools only: migrating it is the newer server's step, below.
    for pool in (db.pool, db.maintenance_pool, db.delivery_pool):
        await pool.open(wait=True)
    try:
        w = await World.create(Store(db))
    finally:
        await db.close()
    server = ServerProcess(
        released_url,
        env={"PYTHONPATH": os.pathsep.join([str(old), str(old / "gen")])},
    ).start()
    client = GrpcClient(server.grpc_port)
    done = 0
    failed: list[str] = []
    stop = asyncio.Event()

    async def lifecycles() -> None:
        nonlocal done
        while not stop.is_set():
            try:
                posted = await client.call(
                    "PostMessage",
                    pb.PostMessageRequest(
                        channel_id=str(w.channel.channel_id),
                        blocks=[pb.MessageBlock(ask=ask_pb())],
                        allow_identical=True,
                    ),
                    tok(w, w.agent),
                )
                await client.call(
                    "RespondToAsk",
                    pb.RespondToAskRequest(
                        ask_id=posted.message.blocks[0].ask.ask_id, answers=GOOD
                    ),
                    tok(w, w.human),
                )
                done += 1
            except CallError as exc:
                failed.append(f"{exc.code}: {exc.message}")

    try:
        running = [asyncio.create_task(lifecycles()) for _ in range(4)]
        await until(lambda: done >= 20)
        async with migrating():
            await migrate(released_url)
        upgraded = done
        await until(lambda: done >= upgraded + 20)
        stop.set()
        await asyncio.gather(*running)
    finally:
        await client.close()
        assert server.stop() == 0, "".join(server.log)
    assert failed == [], (failed[:3], "".join(server.log)[-3000:])
