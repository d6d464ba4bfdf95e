"""What starting the server or an admin command needs before the server
itself: the database (embedded or configured), the keys, the addresses, and
the one-line reasons a start fails. Kept apart from the server so that the
command line starts without loading it."""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any

import psycopg
import psycopg_pool

from compass_server import config
from compass_server.config import Settings
from compass_server.receipts.keys import KEY_FOLDER, ReceiptKeys
from compass_server.receipts.keys import KeyProblem as ReceiptKeyProblem
from compass_server.store import Database
from compass_server.store.db import CONNECTIONS_PER_TOKEN, redacted_url
from compass_server.store.embedded import EmbeddedPostgres
from compass_server.store.vault import KEY_FILE, KeyProblem, Vault, key_from_file, parse_key
from compass_server.webhooks.destination import Reach, networks


class StartupError(Exception):
    """Why the server (or an admin command) can't start, in one line an
    operator can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def listen_address(value: str, flag: str) -> tuple[str, int]:
    """(host, port) of a listen setting; StartupError naming the flag."""
    try:
        return config.listen_address(value)
    except ValueError:
        raise StartupError(f"{flag} {value!r} is not a PORT or HOST:PORT") from None


def joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# The listeners workers share; --metrics-listen is each worker's own.
SHARED_LISTENS = ("--grpc-listen", "--http-listen", "--relay-listen")


def check_free(host: str, port: int, flag: str, shared: bool = False) -> None:
    """StartupError naming the address and its flag when nothing could listen
    there; binding a probe first keeps gRPC's own bind failure (a traceback-like
    log) out of the way. A `shared` address may be bound by this server's
    sibling workers (SO_REUSEPORT), not by anything else."""
    where = joined(host, port)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family) as probe:
            # As the servers do: connections of an earlier run in TIME_WAIT don't count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if shared:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            probe.bind((host, port))
    except socket.gaierror:
        raise StartupError(f"can't listen on {where} ({flag}): no such host") from None
    except OSError as exc:
        why = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise StartupError(
            f"can't listen on {where} ({flag}): {why}; stop what holds it or pick another "
            f"address with {flag}"
        ) from None


def database_problem(url: str, exc: Exception) -> StartupError:
    # psycopg's first line ends in the reason: "... failed: Connection refused".
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = " ".join(first.rpartition("failed: ")[2].split()) or first
    return StartupError(
        f"can't reach the database at {redacted_url(url)} ({reason}): check that PostgreSQL "
        "runs there and takes this user and password, or point --database-url "
        "(or COMPASS_DATABASE_URL) at the right one"
    )


def webhook_vault(settings: Settings, *, embedded: bool) -> Vault | None:
    """The vault of the configured webhook key; for the embedded database a
    key file under the data dir, made on first use; else None (webhooks off)."""
    try:
        if settings.webhook_key:
            return Vault(parse_key(settings.webhook_key, "COMPASS_WEBHOOK_KEY"))
        if settings.webhook_key_file:
            return Vault(key_from_file(settings.webhook_key_file, create=False))
        if embedded:
            return Vault(key_from_file(settings.data_dir / KEY_FILE, create=True))
    except KeyProblem as exc:
        raise StartupError(exc.message) from None
    return None


def receipt_keys(settings: Settings, *, embedded: bool) -> ReceiptKeys | None:
    """The configured receipt keys; for the embedded database a folder under
    the data dir, its first key made on first use; else None (receipts off)."""
    try:
        if settings.receipt_keys_dir is not None:
            return ReceiptKeys.load(settings.receipt_keys_dir)
        if embedded:
            return ReceiptKeys.load(settings.data_dir / KEY_FOLDER, create=True)
    except ReceiptKeyProblem as exc:
        raise StartupError(exc.message) from None
    return None


def webhook_reach(settings: Settings) -> Reach:
    """Where webhooks may go: public addresses and the allowed networks (the
    setting was checked when the configuration loaded)."""
    return Reach(networks(settings.webhook_allowed_networks))


async def open_database(
    settings: Settings,
    *,
    create: bool = True,
    min_size: int = 2,
    max_size: int = 20,
    cursor_factory: Any = None,
    per_token: int = CONNECTIONS_PER_TOKEN,
) -> tuple[Database, EmbeddedPostgres | None]:
    """The configured database, or an embedded one under the data dir,
    migrated and open. Without `create` an embedded database must exist
    already. Fails with StartupError."""
    embedded: EmbeddedPostgres | None = None
    url = settings.database_url
    if not url:
        embedded = EmbeddedPostgres(settings.data_dir)
        if not create and not embedded.exists():
            raise StartupError(
                f"no Compass database under {embedded.data_dir} (where `compass-server serve` "
                "keeps its embedded PostgreSQL when started in this folder); run this where "
                "serve runs, or point at the right one with --data-dir (or COMPASS_DATA_DIR) "
                "or --database-url (or COMPASS_DATABASE_URL)"
            )
        try:
            url = await asyncio.to_thread(embedded.start)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StartupError(
                f"can't start the embedded PostgreSQL under {embedded.data_dir}: {first}"
            ) from exc
    db = Database(
        url,
        min_size=min_size,
        max_size=max_size,
        cursor_factory=cursor_factory,
        per_token=per_token,
        wait_seconds=settings.database_wait_seconds,
        probe_seconds=settings.database_probe_seconds,
    )
    try:
        await db.open()
    except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        raise database_problem(url, exc) from exc
    return db, embedded
