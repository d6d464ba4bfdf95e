"""Connections, migrations and workspace-scoped transactions."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import importlib.resources
import logging
import math
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from compass_server.store.definitions import Definition, definitions
from compass_server.store.errors import ResourceExhausted, Unauthenticated, Unavailable
from compass_server.store.outage import (
    PROBE_SECONDS,
    WAIT_SECONDS,
    Connection,
    Outage,
    connect_options,
)
from compass_server.store.types import Actor, Operator, Scope

log = logging.getLogger(__name__)

Conn = psycopg.AsyncConnection[dict[str, Any]]

# Connections of the maintenance pool: the heartbeat, the expiry sweep and a
# revocation's wait for every server can run at once.
MAINTENANCE_POOL = 4
# Connections of the webhook senders (as compass_maintenance too), apart from
# the servers' upkeep so a backlog of deliveries never delays it.
DELIVERY_POOL = 4

# Connections of the request pool one token may hold at once (a runner's
# token for all its sessions), so a flood of one client's calls leaves the
# rest of the pool to everyone else.
CONNECTIONS_PER_TOKEN = 5
# How long a call waits for its token's share before RESOURCE_EXHAUSTED.
POOL_TIMEOUT_SECONDS = 10.0

# The tokens whose share the current task holds: a transaction opened inside
# another of the same token takes no second place in its share.
_HOLDING: contextvars.ContextVar[frozenset[bytes]] = contextvars.ContextVar(
    "compass_holding", default=frozenset()
)

# Set for work done for everyone (a workspace's shared feed of events),
# whichever token's scope it reads with: it takes no token's share.
_UNSHARED: contextvars.ContextVar[bool] = contextvars.ContextVar("compass_unshared", default=False)


@contextlib.contextmanager
def unshared() -> Iterator[None]:
    """Transactions opened inside take no place in their token's share."""
    token = _UNSHARED.set(True)
    try:
        yield
    finally:
        _UNSHARED.reset(token)


_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@functools.cache
def queries(table: str) -> dict[str, str]:
    """The named queries of queries/<table>.sql (`-- name: x` starts each)."""
    text = (
        importlib.resources.files("compass_server.store")
        .joinpath("queries", f"{table}.sql")
        .read_text()
    )
    parts = _NAME.split(text)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


def signed_out() -> Unauthenticated:
    """A credential that signed in a moment ago no longer scopes anything: it
    was revoked, or it expired, since."""
    return Unauthenticated("the token was revoked or has expired; sign in with a valid token")


def migrations() -> list[tuple[int, str, str]]:
    folder = importlib.resources.files("compass_server.store").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        m = re.match(r"^(\d+)_(\w+)\.sql$", entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text()))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        dupes = sorted({v for v in versions if versions.count(v) > 1})
        raise RuntimeError(f"two migrations share a number: {dupes}")
    return sorted(found)


def redacted_url(url: str) -> str:
    """The database URL (or key=value string) as safe to print: any password
    replaced by ***."""
    if "://" not in url:
        return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{hostport}"
    query = "&".join(
        "password=***" if pair.partition("=")[0].lower() == "password" else pair
        for pair in parts.query.split("&")
        if pair
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# Held by whoever migrates: several processes may start at once.
MIGRATION_LOCK = 5716373801


async def migrate(url: str) -> list[int]:
    """Applies the numbered migrations not yet recorded (a database built from
    empty gets each followed by the definitions, sql/, that name it), then,
    in one transaction, every definition whose text changed since it was applied;
    safe to run from several processes at once, and while servers of the
    release before run on the database. Returns the versions it applied."""
    applied: list[int] = []
    following: dict[int, list[Definition]] = {}
    for d in definitions():
        following.setdefault(d.after, []).append(d)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version int PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_definitions ("
            " path text PRIMARY KEY, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT count(*) FROM schema_migrations")
        row = await cur.fetchone()
        fresh = row is None or row[0] == 0
        for version, name, sql in migrations():
            for attempt in range(1, MIGRATION_TRIES + 1):
                try:
                    done = await _apply(conn, version, name, sql, following, fresh)
                    break
                except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
                    if attempt == MIGRATION_TRIES:
                        raise
                    log.warning("migration %04d waited too long for a lock; trying again", version)
                    await asyncio.sleep(min(0.1 * attempt, 1.0))
            if done:
                applied.append(version)
                log.info("applied migration %04d_%s", version, name)
        # Migrations grant every table to compass_app: not this one.
        await conn.execute("REVOKE ALL ON schema_definitions FROM compass_app")
        await _redefine(conn)
    return applied


# How long a migration waits for a table's lock before it lets go of every
# lock it holds and tries again, and how often it does. Shorter than
# PostgreSQL's deadlock_timeout (1 s): a migration that takes a second table's
# lock while a running server's transaction waits for the first gives up
# before that transaction could be the one a deadlock aborts.
MIGRATION_LOCK_TIMEOUT = "500ms"
MIGRATION_TRIES = 40


async def _apply(
    conn: psycopg.AsyncConnection[Any],
    version: int,
    name: str,
    sql: str,
    following: dict[int, list[Definition]],
    fresh: bool,
) -> bool:
    """One migration in a transaction of its own; False when another process
    applied it first."""
    async with conn.transaction():
        await conn.execute(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})".encode())
        cur = await conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (version,))
        if await cur.fetchone():
            return False
        await conn.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'".encode())
        if _statements(sql):
            await conn.execute(sql.encode())
        await conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
        )
        # Built from empty, a database gets each file right after the
        # migration it follows; one migrated before (servers may be
        # running on it) gets every changed file at once, after them all.
        for d in following.get(version, ()) if fresh else ():
            await _define(conn, d)
    return True


# How long a redefinition waits for its table's lock (a policy is replaced
# under an exclusive one) before it tries again, and how often it does.
REDEFINE_LOCK_TIMEOUT = "5s"
REDEFINE_TRIES = 5


async def _redefine(conn: psycopg.AsyncConnection[Any]) -> None:
    """Every definition whose text changed: the functions in one transaction,
    so a server running meanwhile sees all the old bodies or all the new (a
    new body may call a function that is new too); then each trigger and
    each table's policies in a transaction of its own, which holds only that
    table's lock (never one table's while waiting for another's)."""
    cur = await conn.execute("SELECT path, checksum FROM schema_definitions")
    applied = {row[0]: row[1] for row in await cur.fetchall()}
    changed = [d for d in definitions() if applied.get(d.path) != d.checksum]
    functions = [d for d in changed if d.path.startswith("functions/")]
    batches = [functions] if functions else []
    batches += [[d] for d in changed if not d.path.startswith("functions/")]
    for batch in batches:
        for attempt in range(1, REDEFINE_TRIES + 1):
            try:
                async with conn.transaction():
                    await conn.execute(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})".encode())
                    await conn.execute(
                        f"SET LOCAL lock_timeout = '{REDEFINE_LOCK_TIMEOUT}'".encode()
                    )
                    for d in batch:
                        await _define(conn, d)
                break
            except (psycopg.errors.LockNotAvailable, psycopg.errors.DeadlockDetected):
                if attempt == REDEFINE_TRIES:
                    raise
                log.warning("a redefinition waited too long for a lock; trying again")
                await asyncio.sleep(attempt)
        for d in batch:
            log.info("applied sql/%s", d.path)


def _statements(sql: str) -> bool:
    """Whether the text holds anything but comments."""
    return any(line.strip() and not line.strip().startswith("--") for line in sql.splitlines())


async def _define(conn: psycopg.AsyncConnection[Any], d: Definition) -> None:
    # A body may name what a later migration makes; it is checked when called.
    await conn.execute("SET LOCAL check_function_bodies = off")
    await conn.execute(d.text.encode())
    await conn.execute(
        "INSERT INTO schema_definitions (path, checksum) VALUES (%s, %s)"
        " ON CONFLICT (path) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
        (d.path, d.checksum),
    )


def _as(
    role: str, statement_seconds: float | None = None
) -> Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]:
    setup = f"SET ROLE {role}"
    if statement_seconds is not None:
        # The server ends a statement the caller stopped waiting for, rather
        # than keep its locks.
        setup += f"; SET statement_timeout = {math.ceil(statement_seconds * 1000)}"

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(setup.encode())

    return configure


def _pool(
    url: str,
    role: str,
    min_size: int,
    max_size: int,
    *,
    wait_seconds: float,
    cursor_factory: Any = None,
    statement_seconds: float | None = None,
) -> psycopg_pool.AsyncConnectionPool[Conn]:
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "row_factory": dict_row,
        **connect_options(wait_seconds),
    }
    if cursor_factory is not None:
        kwargs["cursor_factory"] = cursor_factory
    return psycopg_pool.AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        open=False,
        connection_class=Connection,
        configure=_as(role, statement_seconds),
        kwargs=kwargs,
        timeout=wait_seconds,
        reconnect_timeout=0,
    )


class _Share:
    __slots__ = ("free", "users")

    def __init__(self, most: int) -> None:
        self.free = asyncio.Semaphore(most)
        self.users = 0


class Shares:
    """Places in the request pool, at most `most` per token at once; a call
    past its token's share waits for one of its own calls to finish."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._shares: dict[bytes, _Share] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: bytes) -> AsyncIterator[None]:
        held = _HOLDING.get()
        if key in held or _UNSHARED.get():
            yield
            return
        share = self._shares.get(key)
        if share is None:
            share = self._shares[key] = _Share(self.most)
        share.users += 1
        try:
            try:
                async with asyncio.timeout(POOL_TIMEOUT_SECONDS):
                    await share.free.acquire()
            except TimeoutError:
                raise ResourceExhausted(
                    f"this token's calls have held its {self.most} database connections for "
                    f"{POOL_TIMEOUT_SECONDS:g} s while more waited; send fewer at once"
                ) from None
            token = _HOLDING.set(held | {key})
            try:
                yield
            finally:
                _HOLDING.reset(token)
                share.free.release()
        finally:
            share.users -= 1
            if not share.users:
                del self._shares[key]


class Database:
    """A pool of connections that run as compass_app (every request), so
    row-level security holds; and a small one that runs as
    compass_maintenance, for the operator's commands and the servers' own
    cross-workspace work (liveness, reaping, expiry, revocations)."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 2,
        max_size: int = 20,
        cursor_factory: Any = None,
        per_token: int = CONNECTIONS_PER_TOKEN,
        wait_seconds: float = WAIT_SECONDS,
        probe_seconds: float = PROBE_SECONDS,
    ) -> None:
        """`cursor_factory`, when given, runs every statement (a traced cursor).
        No transaction waits on the database longer than `wait_seconds`; see
        Outage for what happens while it doesn't answer."""
        self.url = url
        self.shares = Shares(per_token)
        self.outage = Outage(url, wait_seconds=wait_seconds, probe_seconds=probe_seconds)
        self.outage.before_up.append(self.drop_dead)
        common: dict[str, Any] = {"wait_seconds": wait_seconds, "cursor_factory": cursor_factory}
        self.pool = _pool(
            url, "compass_app", min_size, max_size, statement_seconds=wait_seconds, **common
        )
        self.maintenance_pool = _pool(url, "compass_maintenance", 1, MAINTENANCE_POOL, **common)
        self.delivery_pool = _pool(url, "compass_maintenance", 0, DELIVERY_POOL, **common)

    async def open(self) -> None:
        await migrate(self.url)
        await self.pool.open(wait=True, timeout=30.0)
        await self.maintenance_pool.open(wait=True, timeout=30.0)
        await self.delivery_pool.open()

    async def close(self) -> None:
        await self.outage.close()
        await self.pool.close()
        await self.maintenance_pool.close()
        await self.delivery_pool.close()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        async with self._available(self.pool) as conn:
            yield conn

    async def drop_dead(self) -> None:
        """Checks every idle connection of every pool, dropping those that
        died: for when the database is seen to restart."""
        for pool in (self.pool, self.maintenance_pool, self.delivery_pool):
            try:
                async with asyncio.timeout(self.outage.wait_seconds):
                    await pool.check()
            except Exception as exc:  # a pool closing, or the database still down
                log.info("checking pooled connections: %s", exc or "timed out")

    async def check(self) -> None:
        """Drops the request pool's idle connections that died (with a
        database restart); never waits for a busy one."""
        try:
            async with self.outage.wait():
                await self.pool.check()
        except psycopg.Error as exc:
            self.outage.suspect()
            raise Unavailable("the database is unavailable; retry shortly") from exc

    @contextlib.asynccontextmanager
    async def maintenance(self) -> AsyncIterator[Conn]:
        """A connection as compass_maintenance, for the functions that work
        across workspaces; its own reads see only the workspace an operator's
        transaction names (see tx)."""
        async with self._available(self.maintenance_pool) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def deliveries(self) -> AsyncIterator[Conn]:
        """A connection of the webhook senders' pool, as compass_maintenance."""
        async with self._available(self.delivery_pool) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def delivery_tx(self, workspace_id: uuid.UUID) -> AsyncIterator[Conn]:
        """A transaction of the webhook senders, held to one workspace the way
        the operator's are."""
        async with self._tx(Operator(workspace_id), self.delivery_pool) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def tx(self, scope: Scope | Operator) -> AsyncIterator[Conn]:
        """One transaction scoped to the caller's workspace: row-level
        security shows it that workspace's rows and no other's. The database
        finds the workspace from the caller's credential, and one revoked or
        expired since it signed in is UNAUTHENTICATED. The operator at the
        command line has no credential: its transaction runs as
        compass_maintenance and names its workspace, which only that role
        may do. An account's transaction also names the account, and
        row-level security holds it to the channels that account takes part
        in (the database checks the credential vouches for it)."""
        if isinstance(scope, Operator):
            async with self._tx(scope, self.maintenance_pool) as conn:
                yield conn
            return
        await self.outage.admit()
        async with self.shares.hold(scope.credential), self._tx(scope, self.pool) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _tx(
        self, scope: Scope | Operator, pool: psycopg_pool.AsyncConnectionPool[Conn]
    ) -> AsyncIterator[Conn]:
        workspace_id = scope.workspace_id
        # BEGIN and the scope go in one round trip; hex digits and a UUID only,
        # so nothing of the input is interpolated.
        if isinstance(scope, Operator):
            begin = (
                "BEGIN; SELECT set_config('compass.operator_workspace', "
                f"'{workspace_id}', true) AS ws"
            ).encode()
        else:
            actor = f"'{scope.account_id}'" if isinstance(scope, Actor) else "NULL"
            begin = (
                f"BEGIN; SELECT compass_scope('\\x{scope.credential.hex()}', {actor}::uuid) AS ws"
            ).encode()
        try:
            async with self.outage.wait() as wait:
                for attempt in (1, 2):
                    # Connections aren't checked on checkout (a round trip per call);
                    # one that died with a database restart fails at BEGIN, before
                    # anything was sent.
                    async with pool.connection() as conn:
                        wait.hold(conn)
                        try:
                            cur = await conn.execute(begin)
                        except psycopg.OperationalError:
                            if attempt == 2 or not conn.closed:
                                raise
                        else:
                            cur.nextset()
                            scoped = await cur.fetchone()
                            if scoped is None or scoped["ws"] is None:
                                await conn.execute("ROLLBACK")
                                raise signed_out()
                            try:
                                yield conn
                            except BaseException:
                                if wait.ended is not None:
                                    # A server that doesn't answer won't answer a
                                    # rollback either; closing rolls back.
                                    await conn.close()
                                elif not conn.closed:
                                    with contextlib.suppress(psycopg.Error):
                                        await conn.execute("ROLLBACK")
                                raise
                            await conn.execute("COMMIT")
                            return
                    # The others idle beside it died with it too: the pool checks
                    # each and drops the dead, and the call takes a live one.
                    await pool.check()
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise self._lost(exc) from exc

    @contextlib.asynccontextmanager
    async def _available(self, pool: psycopg_pool.AsyncConnectionPool[Conn]) -> AsyncIterator[Conn]:
        try:
            async with self.outage.wait() as wait, pool.connection() as conn:
                wait.hold(conn)
                yield conn
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            raise self._lost(exc) from exc

    def _lost(self, exc: Exception) -> Unavailable:
        log.warning("database unavailable: %s", exc)
        self.outage.suspect()
        return Unavailable("the database is unavailable; retry shortly")
