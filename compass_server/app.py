"""The server: database, event hub, gRPC and HTTP (Connect + the page)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import errno
import logging
import os
import pathlib
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
import psycopg_pool

from compass.v1 import (
    admin_connect,
    admin_pb2,
    agent_gateway_connect,
    agent_gateway_pb2,
    comms_connect,
    comms_pb2,
    inbox_connect,
    inbox_pb2,
)
from compass_server.api.admin import AdminApi, IdentityApi
from compass_server.api.agent import AgentApi
from compass_server.api.auth import Authenticator
from compass_server.api.comms import STREAMS_PER_ACCOUNT, WIRE_CACHE_BYTES, CommsApi
from compass_server.api.errors import ApiError, Status
from compass_server.api.inbox import AgentInboxApi, InboxApi
from compass_server.asks import Expiry
from compass_server.events.hub import (
    CHANNEL,
    PAGE_BYTES,
    REPLAY_BYTES,
    REPLAY_BYTES_PER_TOKEN,
    WINDOW_BYTES,
    EventHub,
)
from compass_server.relay import AgentGateway, Dispatcher, Heartbeat, arms_for
from compass_server.relay.gateway import (
    ACK_TIMEOUT_SECONDS,
    OUTBOX_BYTES,
    SESSIONS_PER_STREAM,
    STREAMS_PER_RUNNER,
    WINDOW,
)
from compass_server.store import Database, Store
from compass_server.store.admin import ACCESS_CHANNEL
from compass_server.store.asks import ASK_CACHE_BYTES
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.db import redacted_url
from compass_server.store.embedded import EmbeddedPostgres
from compass_server.store.inbox import InboxStore
from compass_server.store.vault import KEY_FILE, KeyProblem, Vault, key_from_file, parse_key
from compass_server.store.webhooks import WebhookStore
from compass_server.transport.binding import ServiceBinding
from compass_server.transport.connect_app import (
    DRAIN_BYTES,
    DRAIN_SECONDS,
    HttpServer,
    apps_for,
)
from compass_server.transport.grpc_server import GrpcServer
from compass_server.webhooks.courier import POLL_SECONDS, RETRY_SCHEDULE, Courier, schedule
from compass_server.webhooks.destination import Reach, networks
from compass_server.webhooks.payloads import Drafts
from compass_server.webhooks.sender import Sender

log = logging.getLogger(__name__)

# A bare port listens here: listening beyond loopback is only ever typed.
LOOPBACK = "127.0.0.1"
DEFAULT_GRPC_LISTEN = f"{LOOPBACK}:50051"
DEFAULT_HTTP_LISTEN = f"{LOOPBACK}:8080"
# The page's address as the links in webhooks and chat cards give it.
DEFAULT_PUBLIC_URL = f"http://{DEFAULT_HTTP_LISTEN}"


class StartupError(Exception):
    """Why the server (or an admin command) can't start, in one line an
    operator can act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def listen_address(value: str, flag: str) -> tuple[str, int]:
    """(host, port) from PORT, HOST:PORT or [V6]:PORT; a bare port or an empty
    host means 127.0.0.1."""
    host, _, port = value.strip().rpartition(":")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or int(port) > 65535:
        raise StartupError(f"{flag} {value!r} is not a PORT or HOST:PORT")
    return host or LOOPBACK, int(port)


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check_free(host: str, port: int, flag: str) -> None:
    """StartupError naming the address and its flag when nothing could listen
    there; binding a probe first keeps gRPC's own bind failure (a traceback-like
    log) out of the way."""
    where = _joined(host, port)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family) as probe:
            # As the servers do: connections of an earlier run in TIME_WAIT don't count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except socket.gaierror:
        raise StartupError(f"can't listen on {where} ({flag}): no such host") from None
    except OSError as exc:
        why = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise StartupError(
            f"can't listen on {where} ({flag}): {why}; stop what holds it or pick another "
            f"address with {flag}"
        ) from None


def _database_problem(url: str, exc: Exception) -> StartupError:
    # psycopg's first line ends in the reason: "... failed: Connection refused".
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = " ".join(first.rpartition("failed: ")[2].split()) or first
    return StartupError(
        f"can't reach the database at {redacted_url(url)} ({reason}): check that PostgreSQL "
        "runs there and takes this user and password, or point --database-url "
        "(or COMPASS_DATABASE_URL) at the right one"
    )


def _env(name: str, default: float | str) -> Any:
    """A limit from COMPASS_<name>, else its default (of the default's type)."""
    raw = os.environ.get(f"COMPASS_{name}")
    return default if raw is None else type(default)(raw)


@dataclass
class Settings:
    """How the server runs; every limit it enforces on clients is one of these
    (the README's limits table lists them), read from COMPASS_<NAME>."""

    database_url: str | None = None
    data_dir: pathlib.Path = pathlib.Path(".compass")
    grpc_listen: str = DEFAULT_GRPC_LISTEN
    http_listen: str = DEFAULT_HTTP_LISTEN
    pool_size: int = 20
    server_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # A stream whose client doesn't take a message for this long is closed.
    slow_stream_seconds: float = field(default_factory=lambda: _env("SLOW_STREAM_SECONDS", 30.0))
    subscribe_streams_per_account: int = field(
        default_factory=lambda: _env("SUBSCRIBE_STREAMS_PER_ACCOUNT", STREAMS_PER_ACCOUNT)
    )
    relay_streams_per_runner: int = field(
        default_factory=lambda: _env("RELAY_STREAMS_PER_RUNNER", STREAMS_PER_RUNNER)
    )
    relay_sessions_per_stream: int = field(
        default_factory=lambda: _env("RELAY_SESSIONS_PER_STREAM", SESSIONS_PER_STREAM)
    )
    relay_window: int = field(default_factory=lambda: _env("RELAY_WINDOW", WINDOW))
    relay_outbox_bytes: int = field(
        default_factory=lambda: _env("RELAY_OUTBOX_BYTES", OUTBOX_BYTES)
    )
    relay_ack_timeout_seconds: float = field(
        default_factory=lambda: _env("RELAY_ACK_TIMEOUT_SECONDS", ACK_TIMEOUT_SECONDS)
    )
    event_window_bytes: int = field(
        default_factory=lambda: _env("EVENT_WINDOW_BYTES", WINDOW_BYTES)
    )
    replay_page_bytes: int = field(default_factory=lambda: _env("REPLAY_PAGE_BYTES", PAGE_BYTES))
    replay_bytes: int = field(default_factory=lambda: _env("REPLAY_BYTES", REPLAY_BYTES))
    replay_bytes_per_token: int = field(
        default_factory=lambda: _env("REPLAY_BYTES_PER_TOKEN", REPLAY_BYTES_PER_TOKEN)
    )
    http_drain_bytes: int = field(default_factory=lambda: _env("HTTP_DRAIN_BYTES", DRAIN_BYTES))
    http_drain_seconds: float = field(
        default_factory=lambda: _env("HTTP_DRAIN_SECONDS", DRAIN_SECONDS)
    )
    ask_cache_bytes: int = field(default_factory=lambda: _env("ASK_CACHE_BYTES", ASK_CACHE_BYTES))
    wire_cache_bytes: int = field(
        default_factory=lambda: _env("WIRE_CACHE_BYTES", WIRE_CACHE_BYTES)
    )
    # An ask's deadline may be this soon and this late after its post.
    ask_deadline_min_seconds: float = field(
        default_factory=lambda: _env("ASK_DEADLINE_MIN_SECONDS", 60.0)
    )
    ask_deadline_max_seconds: float = field(
        default_factory=lambda: _env("ASK_DEADLINE_MAX_SECONDS", 30 * 86_400.0)
    )
    # The expiry loop sweeps at least this often, besides waking at deadlines.
    expiry_interval_seconds: float = field(
        default_factory=lambda: _env("EXPIRY_INTERVAL_SECONDS", 30.0)
    )
    # How long a process trusts a sign-in before looking the token up again;
    # revocations reach every process at once, this bounds a lost one.
    auth_cache_seconds: float = field(default_factory=lambda: _env("AUTH_CACHE_SECONDS", 5.0))
    # Where people open the page: the base of every link a webhook carries.
    public_url: str = field(default_factory=lambda: _env("PUBLIC_URL", DEFAULT_PUBLIC_URL))
    # The key webhook URLs and secrets are sealed with (32 bytes, URL-safe
    # base64), or a file holding it; the embedded setup makes one under the
    # data dir when neither is set. Without a key, webhooks are off.
    webhook_key: str = field(default_factory=lambda: _env("WEBHOOK_KEY", ""), repr=False)
    webhook_key_file: str = field(default_factory=lambda: _env("WEBHOOK_KEY_FILE", ""))
    # Networks webhooks may reach besides public addresses, e.g. "10.0.0.0/8,::1".
    webhook_allowed_networks: str = field(
        default_factory=lambda: _env("WEBHOOK_ALLOWED_NETWORKS", "")
    )
    # Waits between a delivery's failed attempts; past the last, it has failed.
    webhook_retry_schedule: str = field(
        default_factory=lambda: _env("WEBHOOK_RETRY_SCHEDULE", RETRY_SCHEDULE)
    )
    webhook_timeout_seconds: float = field(
        default_factory=lambda: _env("WEBHOOK_TIMEOUT_SECONDS", 10.0)
    )
    webhook_concurrency: int = field(default_factory=lambda: _env("WEBHOOK_CONCURRENCY", 16))
    webhook_concurrency_per_endpoint: int = field(
        default_factory=lambda: _env("WEBHOOK_CONCURRENCY_PER_ENDPOINT", 4)
    )
    webhook_response_bytes: int = field(
        default_factory=lambda: _env("WEBHOOK_RESPONSE_BYTES", 4096)
    )
    webhook_retention_seconds: float = field(
        default_factory=lambda: _env("WEBHOOK_RETENTION_SECONDS", 7 * 86_400.0)
    )
    # The courier looks for retries coming due at least this often.
    webhook_poll_seconds: float = field(
        default_factory=lambda: _env("WEBHOOK_POLL_SECONDS", POLL_SECONDS)
    )


def webhook_vault(settings: Settings, *, embedded: bool) -> Vault | None:
    """The vault of the configured webhook key; for the embedded database a
    key file under the data dir, made on first use; else None (webhooks off)."""
    try:
        if settings.webhook_key:
            return Vault(parse_key(settings.webhook_key, "COMPASS_WEBHOOK_KEY"))
        if settings.webhook_key_file:
            return Vault(key_from_file(pathlib.Path(settings.webhook_key_file), create=False))
        if embedded:
            return Vault(key_from_file(settings.data_dir / KEY_FILE, create=True))
    except KeyProblem as exc:
        raise StartupError(exc.message) from None
    return None


def webhook_reach(settings: Settings) -> Reach:
    try:
        return Reach(networks(settings.webhook_allowed_networks))
    except ValueError as exc:
        raise StartupError(f"COMPASS_WEBHOOK_ALLOWED_NETWORKS: {exc}") from None


async def open_database(
    settings: Settings, *, create: bool = True, min_size: int = 2, max_size: int = 20
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
    db = Database(url, min_size=min_size, max_size=max_size)
    try:
        await db.open()
    except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
        await db.close()
        if embedded is not None:
            await asyncio.to_thread(embedded.stop)
        raise _database_problem(url, exc) from exc
    return db, embedded


class CompassServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedded: EmbeddedPostgres | None = None
        self.grpc_port = 0
        self.http_port = 0

    async def start(self) -> None:
        """Starts everything, or fails with StartupError (after stopping what
        it started) when an address or the database is unusable."""
        grpc_at = listen_address(self.settings.grpc_listen, "--grpc-listen")
        http_at = listen_address(self.settings.http_listen, "--http-listen")
        _check_free(*grpc_at, "--grpc-listen")
        _check_free(*http_at, "--http-listen")
        self.db, self.embedded = await open_database(
            self.settings, max_size=self.settings.pool_size
        )
        self.database_url = url = self.db.url
        try:
            await self._start(url, grpc_at, http_at)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.stop(0)
            raise

    async def _start(self, url: str, grpc_at: tuple[str, int], http_at: tuple[str, int]) -> None:
        settings = self.settings
        self.store = Store(
            self.db,
            ask_cache_bytes=settings.ask_cache_bytes,
            deadline_bounds=DeadlineBounds(
                datetime.timedelta(seconds=self.settings.ask_deadline_min_seconds),
                datetime.timedelta(seconds=self.settings.ask_deadline_max_seconds),
            ),
        )
        # Each part is kept once it started, so a failed start stops only those.
        self.hub = hub = EventHub(
            self.store,
            url,
            window_bytes=settings.event_window_bytes,
            page_bytes=settings.replay_page_bytes,
            replay_bytes=settings.replay_bytes,
            replay_bytes_per_token=settings.replay_bytes_per_token,
        )
        self.auth = Authenticator(
            self.store.admin,
            server_id=self.settings.server_id,
            cache_seconds=self.settings.auth_cache_seconds,
        )
        hub.watch(ACCESS_CHANNEL, self.auth.on_access)
        self.comms = CommsApi(
            self.store,
            self.hub,
            wire_cache_bytes=settings.wire_cache_bytes,
            streams_per_account=settings.subscribe_streams_per_account,
        )
        comms = ServiceBinding.of(comms_pb2, "CommsService", self.comms, "account")
        self.inbox = InboxStore(self.db)
        inbox = ServiceBinding.of(inbox_pb2, "InboxService", InboxApi(self.inbox), "account")
        self.agent_api = AgentApi(self.store, self.comms)
        self.gateway = AgentGateway(
            self.store,
            self.hub,
            Dispatcher(arms_for(self.comms, self.agent_api, AgentInboxApi(self.inbox))),
            settings.server_id,
            window=settings.relay_window,
            outbox_bytes=settings.relay_outbox_bytes,
            sessions_per_stream=settings.relay_sessions_per_stream,
            streams_per_runner=settings.relay_streams_per_runner,
            ack_timeout=settings.relay_ack_timeout_seconds,
        )
        heartbeat = Heartbeat(
            self.store,
            self.settings.server_id,
            lambda: self.gateway.end_all(
                ApiError(Status.UNAVAILABLE, "the server lost its registration; reconnect")
            ),
        )
        hub.watch(ACCESS_CHANNEL, self.gateway.on_access)
        reach = webhook_reach(settings)
        self.webhooks = WebhookStore(
            self.db,
            self.store.admin,
            webhook_vault(settings, embedded=self.embedded is not None),
        )
        courier = self._courier(reach)
        if courier is not None:
            self.courier = courier
            hub.watch(CHANNEL, courier.poke)
        await hub.start()
        await self.auth.start()
        await heartbeat.start()
        self.heartbeat = heartbeat
        expiry = Expiry(self.store, interval=self.settings.expiry_interval_seconds)
        await expiry.start()
        self.expiry = expiry
        if courier is not None:
            await courier.start()
        relay = ServiceBinding.of(agent_gateway_pb2, "AgentGatewayService", self.gateway, "runner")
        admin = ServiceBinding.of(
            admin_pb2,
            "AdminService",
            AdminApi(self.store.admin, self.auth, webhooks=self.webhooks, reach=reach),
            "account",
        )
        identity = ServiceBinding.of(
            admin_pb2, "IdentityService", IdentityApi(self.store.admin), "any"
        )
        bindings = [comms, inbox, relay, admin, identity]
        connect = [
            (comms, comms_connect.CommsServiceASGIApplication),
            (inbox, inbox_connect.InboxServiceASGIApplication),
            (relay, agent_gateway_connect.AgentGatewayServiceASGIApplication),
            (admin, admin_connect.AdminServiceASGIApplication),
            (identity, admin_connect.IdentityServiceASGIApplication),
        ]
        grpc_server = GrpcServer(
            bindings, self.auth, slow_stream_seconds=self.settings.slow_stream_seconds
        )
        try:
            self.grpc_port = await grpc_server.start(_joined(*grpc_at))
        except (OSError, RuntimeError):
            _check_free(*grpc_at, "--grpc-listen")
            raise StartupError(f"can't listen for gRPC on {_joined(*grpc_at)}") from None
        self.grpc = grpc_server
        http_server = HttpServer(
            apps_for(
                connect,
                self.auth,
                slow_stream_seconds=settings.slow_stream_seconds,
                drain_bytes=settings.http_drain_bytes,
                drain_seconds=settings.http_drain_seconds,
            )
        )
        try:
            self.http_port = await http_server.start(_joined(*http_at))
        except OSError:
            _check_free(*http_at, "--http-listen")
            raise StartupError(f"can't listen for HTTP on {_joined(*http_at)}") from None
        self.http = http_server
        log.info("gRPC listening on %s", _joined(grpc_at[0], self.grpc_port))
        log.info(
            "HTTP (Connect and the web page) listening on http://%s",
            _joined(http_at[0], self.http_port),
        )

    def _courier(self, reach: Reach) -> Courier | None:
        """The webhook courier, when this server has a webhook key."""
        settings = self.settings
        if not settings.public_url.startswith(("http://", "https://")):
            raise StartupError(
                f"COMPASS_PUBLIC_URL {settings.public_url!r} is not an http:// or https:// URL"
            )
        if self.webhooks.vault is None:
            log.info(
                "webhooks are off: no webhook key (set COMPASS_WEBHOOK_KEY or "
                "COMPASS_WEBHOOK_KEY_FILE)"
            )
            return None
        try:
            retries = schedule(settings.webhook_retry_schedule)
        except ValueError as exc:
            raise StartupError(f"COMPASS_WEBHOOK_RETRY_SCHEDULE: {exc}") from None
        return Courier(
            self.webhooks,
            Sender(
                reach,
                timeout=settings.webhook_timeout_seconds,
                response_bytes=settings.webhook_response_bytes,
                connections=settings.webhook_concurrency,
            ),
            Drafts(settings.public_url),
            settings.server_id,
            retry_schedule=retries,
            concurrency=settings.webhook_concurrency,
            per_endpoint=settings.webhook_concurrency_per_endpoint,
            retention=datetime.timedelta(seconds=settings.webhook_retention_seconds),
            poll=settings.webhook_poll_seconds,
        )

    async def stop(self, grace: float = 5.0) -> None:
        """Stops what started; after a failed start, only that much."""
        # Streams end first, so the transports can drain without waiting on them;
        # relay sessions unbind first, so their agents go OFFLINE.
        if hasattr(self, "gateway"):
            await self.gateway.close()
        if hasattr(self, "expiry"):
            await self.expiry.stop()
        if hasattr(self, "courier"):
            await self.courier.stop()
        if hasattr(self, "auth"):
            await self.auth.close()
        if hasattr(self, "heartbeat"):
            await self.heartbeat.stop()
        if hasattr(self, "hub"):
            await self.hub.close()
        if hasattr(self, "grpc"):
            await self.grpc.stop(grace)
        if hasattr(self, "http"):
            await self.http.stop()
        if hasattr(self, "db"):
            await self.db.close()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)
