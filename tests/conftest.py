"""Fixtures: a real PostgreSQL (COMPASS_TEST_DATABASE_URL or an embedded one)
with a fresh database per test run, and a fresh workspace per test."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pathlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from compass_server.store import Database, Store, migrate
from compass_server.store.embedded import EmbeddedPostgres
from tests.browser import browser_fixture, page_fixture, shots_fixture  # noqa: F401  (fixtures)
from tests.world import World

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEST_DEADLINE_MIN_SECONDS = 0.2
_EMBEDDED = pytest.StashKey[EmbeddedPostgres]()
# Roles are shared by the whole cluster: two databases migrating at once (two
# xdist workers, two checkouts) would race to create them.
MIGRATE_LOCK = pathlib.Path(tempfile.gettempdir()) / "compass-test-migrate.lock"
# The run's own cluster serves every xdist worker's servers at once, and
# nothing in it needs to survive the machine crashing.
TEST_CLUSTER = {
    "max_connections": "600",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def pytest_configure(config: pytest.Config) -> None:
    """Without COMPASS_TEST_DATABASE_URL the run starts one embedded
    PostgreSQL here, before any xdist worker, and hands its URL to them all."""
    if hasattr(config, "workerinput") or os.environ.get("COMPASS_TEST_DATABASE_URL"):
        return
    embedded = EmbeddedPostgres(ROOT / ".venv" / "compass-test-pg")
    url = embedded.start()
    if _tune(url):
        embedded.stop()
        url = embedded.start()
    os.environ["COMPASS_TEST_DATABASE_URL"] = url
    config.stash[_EMBEDDED] = embedded


def _tune(url: str) -> bool:
    """Settings for a throwaway cluster; True when it must restart to take them."""
    with psycopg.connect(url, autocommit=True) as conn:
        wanted = {
            name: value
            for name, value in TEST_CLUSTER.items()
            if conn.execute(f"SELECT current_setting('{name}')".encode()).fetchone() != (value,)
        }
        for name, value in wanted.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'".encode())
        conn.execute("SELECT pg_reload_conf()")
    return "max_connections" in wanted


def pytest_unconfigure(config: pytest.Config) -> None:
    embedded = config.stash.get(_EMBEDDED, None)
    if embedded is not None:
        embedded.stop()


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    return os.environ["COMPASS_TEST_DATABASE_URL"]


def _with_db(url: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def migrated_database(admin_url: str) -> AsyncIterator[str]:
    """A new database, migrated, dropped on exit."""
    name = f"compass_test_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        url = _with_db(admin_url, name)
        with MIGRATE_LOCK.open("a") as lock:
            await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
            await migrate(url)
        yield url
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


@pytest.fixture(scope="session")
async def database_url(pg_admin_url: str) -> AsyncIterator[str]:
    """A database of its own for this run, migrated once."""
    async with migrated_database(pg_admin_url) as url:
        yield url


# How long a test's transaction may wait on the database before it fails
# UNAVAILABLE: the product's 10 s is room enough on a quiet machine, not on
# one whose cores several suites and benchmarks share. The tests of the bound
# itself set theirs (tests/test_database_outage.py).
TEST_WAIT_SECONDS = 60.0
# Servers the tests start as processes read it from the environment.
os.environ.setdefault("COMPASS_DATABASE_WAIT_SECONDS", str(int(TEST_WAIT_SECONDS)))


@pytest.fixture(scope="session")
async def db(database_url: str) -> AsyncIterator[Database]:
    database = Database(database_url, min_size=2, max_size=24, wait_seconds=TEST_WAIT_SECONDS)
    await database.open()
    yield database
    await database.close()


@pytest.fixture(scope="session")
def store(db: Database) -> Store:
    return Store(db)


@pytest.fixture
async def world(store: Store) -> World:
    """A fresh workspace with a human, an agent it owns and a shared channel."""
    return await World.create(store)


@contextlib.asynccontextmanager
async def running_server(
    database_url: str, data_dir: pathlib.Path, **limits: Any
) -> AsyncIterator[Any]:
    """An in-process server on loopback ports, with any settings changed;
    its receipt keys in a folder of the data dir unless `receipt_keys_dir`
    says otherwise (None: receipts off)."""
    from compass_server.app import CompassServer, Settings
    from compass_server.receipts.keys import new_key_file

    if "receipt_keys_dir" not in limits:
        limits["receipt_keys_dir"] = data_dir / "receipt-keys"
        if not limits["receipt_keys_dir"].exists():
            new_key_file(limits["receipt_keys_dir"])

    srv = CompassServer(
        Settings(
            database_url=database_url,
            data_dir=data_dir,
            # Deadlines tests can wait for; the 1 minute default is tested on a store.
            **{
                "grpc_listen": "127.0.0.1:0",
                "http_listen": "127.0.0.1:0",
                "ask_deadline_min_seconds": TEST_DEADLINE_MIN_SECONDS,
                "database_wait_seconds": TEST_WAIT_SECONDS,
                **limits,
            },
        )
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop(1.0)


@pytest.fixture(scope="session")
async def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """One in-process server on loopback ports for the whole run."""
    async with running_server(database_url, tmp_path_factory.mktemp("data")) as srv:
        yield srv


@pytest.fixture(scope="session", params=["grpc", "json", "proto"])
async def client(request: pytest.FixtureRequest, server: Any) -> AsyncIterator[Any]:
    """The same calls over gRPC, Connect JSON and Connect binary."""
    from tests.servers import ConnectClient, GrpcClient

    c: Any = (
        GrpcClient(server.grpc_port)
        if request.param == "grpc"
        else ConnectClient(server.http_port, request.param)
    )
    yield c
    await c.close()


@pytest.fixture(scope="module")
def two_servers(database_url: str) -> Iterator[tuple[Any, Any]]:
    """Two `compass-server serve` processes on the run's database, per module."""
    from tests.procs import ServerProcess

    a = ServerProcess(database_url).start()
    b = ServerProcess(database_url).start()
    yield a, b
    assert a.stop() == 0 and b.stop() == 0


@pytest.fixture
async def api_world(server: Any) -> World:
    """A fresh workspace in the running server's database."""
    return await World.create(server.store)
