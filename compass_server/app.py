"""The server: database, event hub, gRPC and HTTP (Connect + the page)."""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import uuid
from dataclasses import dataclass, field

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
from compass_server.api.comms import CommsApi
from compass_server.api.errors import ApiError, Status
from compass_server.api.inbox import AgentInboxApi, InboxApi
from compass_server.events.hub import EventHub
from compass_server.relay import AgentGateway, Dispatcher, Heartbeat, arms_for
from compass_server.store import Database, Store
from compass_server.store.admin import ACCESS_CHANNEL
from compass_server.store.embedded import EmbeddedPostgres
from compass_server.store.inbox import InboxStore
from compass_server.transport.binding import ServiceBinding
from compass_server.transport.connect_app import HttpServer, apps_for
from compass_server.transport.grpc_server import GrpcServer

log = logging.getLogger(__name__)


@dataclass
class Settings:
    database_url: str | None = None
    data_dir: pathlib.Path = pathlib.Path(".compass")
    grpc_listen: str = "127.0.0.1:50051"
    http_listen: str = "127.0.0.1:8080"
    pool_size: int = 20
    server_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # A stream whose client doesn't take a message for this long is closed.
    slow_stream_seconds: float = field(
        default_factory=lambda: float(os.environ.get("COMPASS_SLOW_STREAM_SECONDS", "30"))
    )
    # How long a process trusts a sign-in before looking the token up again;
    # revocations reach every process at once, this bounds a lost one.
    auth_cache_seconds: float = field(
        default_factory=lambda: float(os.environ.get("COMPASS_AUTH_CACHE_SECONDS", "5"))
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
        self.store = Store(self.db)
        self.hub = EventHub(self.store, url)
        self.auth = Authenticator(
            self.store.admin,
            server_id=self.settings.server_id,
            cache_seconds=self.settings.auth_cache_seconds,
        )
        self.hub.watch(ACCESS_CHANNEL, self.auth.on_access)
        self.comms = CommsApi(self.store, self.hub)
        comms = ServiceBinding.of(comms_pb2, "CommsService", self.comms, "account")
        self.inbox = InboxStore(self.db)
        inbox = ServiceBinding.of(inbox_pb2, "InboxService", InboxApi(self.inbox), "account")
        self.agent_api = AgentApi(self.store, self.comms)
        self.gateway = AgentGateway(
            self.store,
            self.hub,
            Dispatcher(arms_for(self.comms, self.agent_api, AgentInboxApi(self.inbox))),
            self.settings.server_id,
        )
        self.heartbeat = Heartbeat(
            self.store,
            self.settings.server_id,
            lambda: self.gateway.end_all(
                ApiError(Status.UNAVAILABLE, "the server lost its registration; reconnect")
            ),
        )
        self.hub.watch(ACCESS_CHANNEL, self.gateway.on_access)
        await self.hub.start()
        await self.auth.start()
        await self.heartbeat.start()
        relay = ServiceBinding.of(agent_gateway_pb2, "AgentGatewayService", self.gateway, "runner")
        admin = ServiceBinding.of(
            admin_pb2, "AdminService", AdminApi(self.store.admin, self.auth), "account"
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
        self.grpc = GrpcServer(
            bindings, self.auth, slow_stream_seconds=self.settings.slow_stream_seconds
        )
        self.grpc_port = await self.grpc.start(self.settings.grpc_listen)
        self.http = HttpServer(
            apps_for(connect, self.auth, slow_stream_seconds=self.settings.slow_stream_seconds)
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
        await self.auth.close()
        await self.heartbeat.stop()
        await self.hub.close()
        await self.grpc.stop(grace)
        await self.http.stop()
        await self.db.close()
        if self.embedded is not None:
            await asyncio.to_thread(self.embedded.stop)
