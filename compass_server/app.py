"""The server: database, event hub, gRPC and HTTP (Connect + the page)."""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import uuid
from dataclasses import dataclass, field
from typing import Any

from compass.v1 import (
    agent_gateway_connect,
    agent_gateway_pb2,
    comms_connect,
    comms_pb2,
    inbox_connect,
    inbox_pb2,
)
from compass_server.api.agent import AgentApi
from compass_server.api.auth import Authenticator
from compass_server.api.comms import STREAMS_PER_ACCOUNT, WIRE_CACHE_BYTES, CommsApi
from compass_server.api.errors import ApiError, Status
from compass_server.api.inbox import AgentInboxApi, InboxApi
from compass_server.events.hub import (
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
from compass_server.store.embedded import EmbeddedPostgres
from compass_server.store.inbox import InboxStore
from compass_server.store.store import ASK_CACHE_BYTES
from compass_server.transport.binding import ServiceBinding
from compass_server.transport.connect_app import (
    DRAIN_BYTES,
    DRAIN_SECONDS,
    HttpServer,
    apps_for,
)
from compass_server.transport.grpc_server import GrpcServer

log = logging.getLogger(__name__)


def _env(name: str, default: float) -> Any:
    """A limit from COMPASS_<name>, else its default (of the default's type)."""
    raw = os.environ.get(f"COMPASS_{name}")
    return default if raw is None else type(default)(raw)


@dataclass
class Settings:
    """How the server runs; every limit it enforces on clients is one of these
    (the README's limits table lists them), read from COMPASS_<NAME>."""

    database_url: str | None = None
    data_dir: pathlib.Path = pathlib.Path(".compass")
    grpc_listen: str = "127.0.0.1:50051"
    http_listen: str = "127.0.0.1:8080"
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


async def open_database(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The configured database, or an embedded one under the data dir."""
    if settings.database_url:
        return settings.database_url, None
    embedded = EmbeddedPostgres(settings.data_dir)
    url = await asyncio.to_thread(embedded.start)
    return url, embedded


class CompassServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedded: EmbeddedPostgres | None = None
        self.grpc_port = 0
        self.http_port = 0

    async def start(self) -> None:
        url, self.embedded = await open_database(self.settings)
        self.database_url = url
        self.db = Database(url, max_size=self.settings.pool_size)
        await self.db.open()
        settings = self.settings
        self.store = Store(self.db, ask_cache_bytes=settings.ask_cache_bytes)
        self.hub = EventHub(
            self.store,
            url,
            window_bytes=settings.event_window_bytes,
            page_bytes=settings.replay_page_bytes,
            replay_bytes=settings.replay_bytes,
            replay_bytes_per_token=settings.replay_bytes_per_token,
        )
        await self.hub.start()
        self.auth = Authenticator(self.store)
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
        self.heartbeat = Heartbeat(
            self.store,
            self.settings.server_id,
            lambda: self.gateway.end_all(
                ApiError(Status.UNAVAILABLE, "the server lost its registration; reconnect")
            ),
        )
        await self.heartbeat.start()
        relay = ServiceBinding.of(agent_gateway_pb2, "AgentGatewayService", self.gateway, "runner")
        bindings = [comms, inbox, relay]
        connect = [
            (comms, comms_connect.CommsServiceASGIApplication),
            (inbox, inbox_connect.InboxServiceASGIApplication),
            (relay, agent_gateway_connect.AgentGatewayServiceASGIApplication),
        ]
        self.grpc = GrpcServer(
            bindings, self.auth, slow_stream_seconds=self.settings.slow_stream_seconds
        )
        self.grpc_port = await self.grpc.start(self.settings.grpc_listen)
        self.http = HttpServer(
            apps_for(
                connect,
                self.auth,
                slow_stream_seconds=settings.slow_stream_seconds,
                drain_bytes=settings.http_drain_bytes,
                drain_seconds=settings.http_drain_seconds,
            )
        )
        self.http_port = await self.http.start(self.settings.http_listen)
        host = self.settings.grpc_listen.rpartition(":")[0]
        http_host = self.settings.http_listen.rpartition(":")[0]
        log.info("gRPC listening on %s:%d", host, self.grpc_port)
        log.info(
            "HTTP (Connect and the web page) listening on http://%s:%d", http_host, self.http_port
        )

    async def stop(self, grace: float = 5.0) -> None:
        # Streams end first, so the transports can drain without waiting on them;
        # relay sessions unbind first, so their agents go OFFLINE.
        await self.gateway.close()
        await self.heartbeat.stop()
        await self.hub.close()
        await self.grpc.stop(grace)
        await self.http.stop()
        await self.db.close()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)
