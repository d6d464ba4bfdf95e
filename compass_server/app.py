"""The server: database, event hub, gRPC and HTTP (Connect + the page)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import ipaddress
import logging
from collections.abc import Awaitable, Callable

from opentelemetry.sdk.trace import TracerProvider

from compass.v1 import (
    admin_connect,
    admin_pb2,
    agent_gateway_connect,
    agent_gateway_pb2,
    comms_connect,
    comms_pb2,
    inbox_connect,
    inbox_pb2,
    preferences_connect,
    preferences_pb2,
)
from compass_server import config
from compass_server.api.admin import AdminApi, IdentityApi
from compass_server.api.agent import AgentApi
from compass_server.api.auth import Authenticator
from compass_server.api.comms import CommsApi
from compass_server.api.errors import ApiError, Status
from compass_server.api.inbox import AgentInboxApi, InboxApi, InboxFiles
from compass_server.api.preferences import PreferencesApi
from compass_server.asks import DEADLINES, Expiry
from compass_server.config import DEFAULT_GRPC_LISTEN, DEFAULT_HTTP_LISTEN, Settings
from compass_server.events.hub import CHANNEL, EventHub
from compass_server.hooks.held import HookAsks
from compass_server.mail.inbound import Replies
from compass_server.mail.listener import MailListener
from compass_server.mail.routes import MailRoutes
from compass_server.notify.email import MailDrafts
from compass_server.notify.mailer import Mailer, Relay
from compass_server.notify.preferences import Preferences, quiet_hours_of
from compass_server.notify.push import PushDrafts, Pusher
from compass_server.notify.slack_dm import SlackDmDrafts
from compass_server.receipts import Receipts
from compass_server.relay import AgentGateway, Dispatcher, Heartbeat, arms_for
from compass_server.signin.flow import SignInFlow
from compass_server.signin.oidc import OpenIdProvider
from compass_server.signin.providers import ProviderError
from compass_server.slack.interactivity import SlackRoutes
from compass_server.slack.outbox import SlackOutbox
from compass_server.slack.web import SlackWeb
from compass_server.startup import (
    SHARED_LISTENS,
    StartupError,
    check_free,
    joined,
    listen_address,
    open_database,
    receipt_keys,
    webhook_reach,
    webhook_vault,
)
from compass_server.store import Store
from compass_server.store.admin import ACCESS_CHANNEL
from compass_server.store.blocks import DeadlineBounds, follow_up_default
from compass_server.store.embedded import EmbeddedPostgres
from compass_server.store.hooks import HookStore
from compass_server.store.inbox import InboxStore
from compass_server.store.push import PushStore
from compass_server.store.slack import SlackStore
from compass_server.store.webhooks import WebhookStore
from compass_server.telemetry import traces
from compass_server.telemetry.calls import Observer
from compass_server.telemetry.metrics import CONTENT_TYPE, Metrics
from compass_server.transport.binding import ServiceBinding
from compass_server.transport.connect_app import HttpServer, Page, Router, apps_for
from compass_server.transport.cookies import SessionCookies
from compass_server.transport.grpc_server import GrpcServer
from compass_server.transport.hooks_http import HookRoutes
from compass_server.transport.people_http import PeopleRoutes
from compass_server.transport.tls import ServerTls, TlsFiles
from compass_server.webhooks.courier import Courier, schedule
from compass_server.webhooks.destination import Reach
from compass_server.webhooks.payloads import Drafts
from compass_server.webhooks.sender import Sender

__all__ = [
    "DEFAULT_GRPC_LISTEN",
    "DEFAULT_HTTP_LISTEN",
    "CompassServer",
    "Settings",
    "StartupError",
    "open_database",
    "receipt_keys",
    "webhook_reach",
    "webhook_vault",
]

log = logging.getLogger(__name__)

# How long a step of the stop may take beyond the transports' grace.
STOP_STEP_SECONDS = 5.0

# Where the receipt keys' public halves are served, on the HTTP port.
JWKS_PATH = "/.well-known/jwks.json"


def notify_defaults(settings: Settings) -> Preferences:
    """What a person who hasn't chosen gets."""
    start, end = quiet_hours_of(settings.notify_quiet_hours)
    return Preferences(
        settings.notify_page,
        settings.notify_push,
        "named",
        start,
        end,
        settings.notify_time_zone,
        settings.notify_slack_dm,
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CompassServer:
    def __init__(
        self,
        settings: Settings,
        *,
        tracer_provider: TracerProvider | None = None,
        reuse_port: bool = False,
    ) -> None:
        """`tracer_provider` traces the server (a test's in-memory one, say);
        without one, tracing follows the settings: OTLP when configured, else off.
        With `reuse_port` (a worker of `serve --workers`) the gRPC, HTTP and relay
        ports are shared with the other workers."""
        self.settings = settings
        self.reuse_port = reuse_port
        self.embedded: EmbeddedPostgres | None = None
        self.grpc_port = 0
        self.http_port = 0
        self.relay_port = 0
        self.metrics_port = 0
        self.draining = False
        self.database_answers = True
        self._checks: set[asyncio.Task[None]] = set()
        self.started = False
        self._own_provider = tracer_provider is None
        self.tracer_provider = tracer_provider or traces.provider_for(
            settings.tracing_otlp_endpoint,
            headers=settings.tracing_otlp_headers,
            insecure=settings.tracing_otlp_insecure,
            service_name=settings.tracing_service_name,
            sample_ratio=settings.tracing_sample_ratio,
        )
        self.tracer = (
            self.tracer_provider.get_tracer(traces.TRACER_NAME)
            if self.tracer_provider is not None
            else None
        )
        self.metrics = Metrics()
        self.observer = Observer(self.tracer, self.metrics, settings.log_access)
        self.tls: ServerTls | None = None
        self._grpc_servers: list[GrpcServer] = []

    async def start(self) -> None:
        """Starts everything, or fails with StartupError (after stopping what
        it started) when an address, a TLS file or the database is unusable."""
        s = self.settings
        listens = [
            ("--grpc-listen", s.grpc_listen),
            ("--http-listen", s.http_listen),
            ("--relay-listen", s.relay_listen),
            ("--metrics-listen", s.metrics_listen),
            ("--mail-listen", s.mail_listen),
        ]
        addresses = {flag: listen_address(value, flag) for flag, value in listens if value}
        for flag, at in addresses.items():
            check_free(*at, flag, self._shared(flag))
        if s.tls_cert is not None and s.tls_key is not None:
            try:
                self.tls = ServerTls(TlsFiles(s.tls_cert, s.tls_key, s.tls_client_ca))
            except config.ConfigError as exc:
                raise StartupError(exc.message) from None
        cursor = traces.cursor_class(self.tracer) if self.tracer is not None else None
        self.db, self.embedded = await open_database(
            s,
            max_size=s.pool_size,
            cursor_factory=cursor,
            per_token=s.database_connections_per_token,
        )
        self.database_url = self.db.url
        try:
            await self._start(self.db.url, addresses)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.stop(0)
            raise

    async def _start(self, url: str, addresses: dict[str, tuple[str, int]]) -> None:
        settings = self.settings
        self.store = Store(
            self.db,
            ask_cache_bytes=settings.ask_cache_bytes,
            write_batch=settings.write_batch,
            deadline_bounds=DeadlineBounds(
                datetime.timedelta(seconds=self.settings.ask_deadline_min_seconds),
                datetime.timedelta(seconds=self.settings.ask_deadline_max_seconds),
            ),
        )
        self.store.follow_up_default = follow_up_default(settings.ask_follow_up_default)
        self.store.link_lifetime = datetime.timedelta(seconds=settings.signin_link_max_seconds)
        self.store.standing_longest = datetime.timedelta(
            seconds=settings.standing_answer_max_seconds
        )
        self.store.standing_per_person = settings.standing_answers_per_person
        self.store.channels_per_account = settings.channels_per_account
        self.store.ending_listeners.append(self.metrics.ended)
        self.store.write_listeners.append(self.metrics.wrote)
        if self.tracer is not None:
            self.store.ending_listeners.append(traces.AskTraces(self.tracer).ended)
        # Each part is kept once it started, so a failed start stops only those.
        self.hub = hub = EventHub(
            self.store,
            url,
            window_bytes=settings.event_window_bytes,
            page_bytes=settings.replay_page_bytes,
            replay_bytes=settings.replay_bytes,
            replay_bytes_per_token=settings.replay_bytes_per_token,
            # Half the pool at most: binds and writes keep the rest.
            replay_reads=min(settings.replay_reads, max(1, settings.pool_size // 2)),
        )
        self.auth = Authenticator(
            self.store.admin,
            server_id=self.settings.server_id,
            cache_seconds=self.settings.auth_cache_seconds,
            cache_size=self.settings.auth_cache_size,
        )
        hub.on_wake = self.metrics.delivery_wakeups.inc
        hub.watch(ACCESS_CHANNEL, self.auth.on_access)
        hub.on_lost.append(self._database_lost)
        self.db.outage.listeners.append(self._outage)
        keys = receipt_keys(settings, embedded=self.embedded is not None)
        if keys is None:
            log.info(
                "receipts are off: no receipt key folder (set receipts.keys_dir, "
                "COMPASS_RECEIPT_KEYS_DIR)"
            )
        self.receipts = Receipts(keys, settings.public_url, settings.receipt_cache_bytes)
        self.comms = CommsApi(
            self.store,
            self.hub,
            wire_cache_bytes=settings.wire_cache_bytes,
            streams_per_account=settings.subscribe_streams_per_account,
            receipts=self.receipts,
        )
        comms = ServiceBinding.of(comms_pb2, "CommsService", self.comms, "account")
        self.inbox = InboxStore(self.db, thread_bytes=settings.inbox_read_bytes)
        inbox_api = InboxApi(
            self.inbox,
            reading_bytes=settings.inbox_reading_bytes,
            reading_bytes_per_account=settings.inbox_reading_bytes_per_account,
            read_wait_seconds=settings.inbox_read_wait_seconds,
            receipts=self.receipts,
        )
        inbox = ServiceBinding.of(inbox_pb2, "InboxService", inbox_api, "account")
        self.agent_api = AgentApi(self.store, self.comms)
        self.gateway = AgentGateway(
            self.store,
            self.hub,
            Dispatcher(
                arms_for(self.comms, self.agent_api, AgentInboxApi(self.inbox)), self.observer
            ),
            settings.server_id,
            window=settings.relay_window,
            outbox_bytes=settings.relay_outbox_bytes,
            call_bytes=settings.relay_call_bytes,
            sessions_per_stream=settings.relay_sessions_per_stream,
            streams_per_runner=settings.relay_streams_per_runner,
            ack_timeout=settings.relay_ack_timeout_seconds,
            binds_at_once=max(1, min(settings.relay_binds_at_once, settings.pool_size - 4)),
            tracer=self.tracer,
            receipts=self.receipts,
            inbox=self.inbox,
        )
        heartbeat = Heartbeat(
            self.store,
            self.settings.server_id,
            lambda: self.gateway.end_all(
                ApiError(Status.UNAVAILABLE, "the server lost its registration; reconnect")
            ),
            on_health=self._database_answered,
        )
        hub.watch(ACCESS_CHANNEL, self.gateway.on_access)
        reach = webhook_reach(settings)
        self.webhooks = WebhookStore(
            self.db,
            self.store.admin,
            webhook_vault(settings, embedded=self.embedded is not None),
        )
        self.slack = SlackStore(self.db, self.store.admin, self.webhooks.vault)
        self.slack_web = SlackWeb(settings.slack_api_url, settings.webhook_timeout_seconds)
        self.push = PushStore(
            self.db,
            self.webhooks.vault,
            notify_defaults(settings),
            per_person=settings.notify_push_subscriptions,
        )
        courier = self._courier(reach)
        if courier is not None:
            self.courier = courier
            hub.watch(CHANNEL, courier.poke)
        expiry = Expiry(self.store, interval=self.settings.expiry_interval_seconds)
        hub.watch(DEADLINES, expiry.heard)
        await hub.start()
        await self.auth.start()
        await heartbeat.start()
        self.heartbeat = heartbeat
        await expiry.start()
        self.expiry = expiry
        if courier is not None:
            await courier.start()
        self._sample_metrics()
        relay = ServiceBinding.of(agent_gateway_pb2, "AgentGatewayService", self.gateway, "runner")
        admin = ServiceBinding.of(
            admin_pb2,
            "AdminService",
            AdminApi(
                self.store.admin,
                self.auth,
                webhooks=self.webhooks,
                reach=reach,
                people=self.store,
                slack=self.slack,
                defaults=self.store,
            ),
            "account",
        )
        identity = ServiceBinding.of(
            admin_pb2, "IdentityService", IdentityApi(self.store.admin), "any"
        )
        preferences = ServiceBinding.of(
            preferences_pb2,
            "PreferencesService",
            PreferencesApi(
                self.push,
                self.slack,
                datetime.timedelta(seconds=settings.slack_code_seconds),
            ),
            "account",
        )
        # With a relay listener of its own, the relay is served only there.
        own_relay = settings.relay_listen is not None
        bindings = [comms, inbox, admin, identity, preferences, *(() if own_relay else (relay,))]
        connect = [
            (comms, comms_connect.CommsServiceASGIApplication),
            (inbox, inbox_connect.InboxServiceASGIApplication),
            (admin, admin_connect.AdminServiceASGIApplication),
            (identity, admin_connect.IdentityServiceASGIApplication),
            (preferences, preferences_connect.PreferencesServiceASGIApplication),
        ]
        if not own_relay:
            connect.append((relay, agent_gateway_connect.AgentGatewayServiceASGIApplication))
        tls = self.tls
        grpc_at = addresses["--grpc-listen"]
        self.grpc = await self._grpc(bindings, grpc_at, "--grpc-listen", tls)
        self.grpc_port = self.grpc.port
        if own_relay:
            relay_at = addresses["--relay-listen"]
            self.relay_grpc = await self._grpc(
                [relay], relay_at, "--relay-listen", tls, settings.tls_client_ca is not None
            )
            self.relay_port = self.relay_grpc.port
        pages: dict[str, Page] = {
            "/readyz": self._readyz,
            "/metrics": self._metrics_page,
            JWKS_PATH: self._jwks,
        }
        if settings.metrics_listen is not None:
            del pages["/metrics"]
        http_at = addresses["--http-listen"]
        cookies, people_routes = self._people(tls)
        self.slack_routes = SlackRoutes(
            self.slack,
            self.store,
            self.slack_web,
            self.auth,
            cookies,
            self.signin if self.settings.signin_providers else None,
            public_url=settings.public_url,
            link_lifetime=datetime.timedelta(seconds=settings.slack_link_seconds),
            request_bytes=settings.slack_request_bytes,
        )
        self.replies = (
            Replies(
                self.store,
                self.slack,
                domain=settings.mail_reply_domain,
                public_url=settings.public_url,
                relay=self._relay(),
                timeout=settings.webhook_timeout_seconds,
            )
            if settings.mail_reply_domain
            else None
        )
        self.mail_routes = MailRoutes(
            self.replies, settings.mail_inbound_secret, most_bytes=settings.mail_inbound_bytes
        )
        self.hooks = HookStore(self.db, self.store.admin)
        self.hook_routes = HookRoutes(
            self.auth,
            HookAsks(
                self.store,
                self.hooks,
                self.hub,
                self.receipts,
                held_requests=settings.hooks_held_requests,
                held_per_token=settings.hooks_held_per_token,
                margin_seconds=settings.hooks_margin_seconds,
                longest_hold_seconds=settings.hooks_longest_hold_seconds,
                always_seconds=settings.hooks_always_allow_seconds,
            ),
            request_bytes=settings.hooks_request_bytes,
        )
        self.http = await self._http(
            apps_for(
                connect,
                self.auth,
                slow_stream_seconds=settings.slow_stream_seconds,
                drain_bytes=settings.http_drain_bytes,
                drain_seconds=settings.http_drain_seconds,
                files=InboxFiles(self.auth, inbox_api),
                compress_min_bytes=settings.connect_compress_min_bytes,
                observer=self.observer,
                pages=pages,
                cookies=cookies,
                routes={
                    "/auth/": people_routes,
                    "/a/": people_routes,
                    "/slack/": self.slack_routes,
                    "/hooks/": self.hook_routes,
                    "/mail/": self.mail_routes,
                },
            ),
            http_at,
            "--http-listen",
        )
        self.http_port = self.http.port
        if settings.metrics_listen is not None:
            own = Router(
                {}, pages={"/readyz": self._readyz, "/metrics": self._metrics_page}, static=False
            )
            self.metrics_http = await self._http(
                own, addresses["--metrics-listen"], "--metrics-listen"
            )
            self.metrics_port = self.metrics_http.port
        if self.replies is not None and "--mail-listen" in addresses:
            self.mail_listener = MailListener(
                self.replies,
                most_bytes=settings.mail_inbound_bytes,
                hostname=settings.mail_reply_domain or "compass",
                tls_context=self.tls.ssl_context([]) if self.tls is not None else None,
            )
            await self.mail_listener.start(*addresses["--mail-listen"])
            self.mail_port = self.mail_listener.port
            log.info(
                "replies by mail listening on %s (SMTP)",
                joined(addresses["--mail-listen"][0], self.mail_port),
            )
        self.started = True
        await self._health()
        scheme = "https" if tls else "http"
        log.info("gRPC listening on %s%s", joined(grpc_at[0], self.grpc_port), " (TLS)" * bool(tls))
        if own_relay:
            log.info(
                "the relay listening on %s (TLS%s)",
                joined(addresses["--relay-listen"][0], self.relay_port),
                ", client certificates required" if settings.tls_client_ca else "",
            )
        log.info(
            "HTTP (Connect and the web page) listening on %s://%s",
            scheme,
            joined(http_at[0], self.http_port),
        )
        if not tls:
            for flag, (host, _) in addresses.items():
                if not _loopback(host):
                    log.warning(
                        "%s listens on %s without TLS: tokens cross the network in the clear; "
                        "set tls.cert and tls.key",
                        flag,
                        host,
                    )

    def _shared(self, flag: str) -> bool:
        return self.reuse_port and flag in SHARED_LISTENS

    def _people(self, tls: ServerTls | None) -> tuple[SessionCookies, PeopleRoutes]:
        """Browser sessions' cookies, and the sign-in and one-ask pages."""
        s = self.settings
        cookies = SessionCookies(s.public_url, tls is not None or s.public_url.startswith("https:"))
        providers = {}
        for provider in s.signin_providers:
            try:
                secret = provider.secret()
            except ProviderError as exc:
                raise StartupError(str(exc)) from None
            providers[provider.name] = OpenIdProvider(
                provider,
                secret,
                s.public_url.rstrip("/") + "/auth/callback",
                timeout=s.signin_http_timeout_seconds,
                clock_skew=s.signin_clock_skew_seconds,
                jwks_refetch=s.signin_jwks_refetch_seconds,
            )
        self.signin = SignInFlow(
            self.store,
            providers,
            idle=datetime.timedelta(seconds=s.signin_session_idle_seconds),
            lifetime=datetime.timedelta(seconds=s.signin_session_max_seconds),
            attempt_lifetime=datetime.timedelta(seconds=s.signin_attempt_seconds),
        )
        routes = PeopleRoutes(
            self.store,
            self.auth,
            cookies,
            self.signin if providers else None,
            attempt_seconds=s.signin_attempt_seconds,
            session_idle=datetime.timedelta(seconds=s.signin_session_idle_seconds),
            session_lifetime=datetime.timedelta(seconds=s.signin_session_max_seconds),
        )
        return cookies, routes

    async def _grpc(
        self,
        bindings: list[ServiceBinding],
        at: tuple[str, int],
        flag: str,
        tls: ServerTls | None,
        require_client_cert: bool = False,
    ) -> GrpcServer:
        server = GrpcServer(
            bindings,
            self.auth,
            slow_stream_seconds=self.settings.slow_stream_seconds,
            observer=self.observer,
            reuse_port=self._shared(flag),
        )
        credentials = tls.grpc_credentials(require_client_cert) if tls is not None else None
        try:
            await server.start(joined(*at), credentials)
        except (OSError, RuntimeError):
            check_free(*at, flag, self._shared(flag))
            raise StartupError(f"can't listen for gRPC on {joined(*at)} ({flag})") from None
        self._grpc_servers.append(server)
        return server

    async def _http(self, app: Router, at: tuple[str, int], flag: str) -> HttpServer:
        context = self.tls.ssl_context(["h2", "http/1.1"]) if self.tls is not None else None
        server = HttpServer(
            app,
            context,
            reuse_port=self._shared(flag),
            idle_seconds=self.settings.http_idle_seconds,
        )
        try:
            await server.start(joined(*at))
        except OSError:
            check_free(*at, flag, self._shared(flag))
            raise StartupError(f"can't listen for HTTP on {joined(*at)} ({flag})") from None
        self._http_servers = [*getattr(self, "_http_servers", []), server]
        return server

    # --- health ------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Serving calls: started, the database answered its last beat and is
        not known to be down since, not draining."""
        return (
            self.started and self.database_answers and not self.db.outage.down and not self.draining
        )

    def _outage(self, answering: bool) -> None:
        self.metrics.database_up.set(int(answering))
        if answering:
            # The probe just saw it answer; the next beat says otherwise if not.
            self.database_answers = True
        asyncio.get_running_loop().create_task(self._health())

    def _database_answered(self, answered: bool) -> None:
        if not answered:
            self.db.outage.suspect()
        if answered != self.database_answers:
            log.warning(
                "the database answers again; ready"
                if answered
                else "the database doesn't answer; not ready until it does"
            )
            self.database_answers = answered
            asyncio.get_running_loop().create_task(self._health())

    def _database_lost(self) -> None:
        """The database may have restarted: pooled connections that died with
        it go now, before a call is handed one. While it is known to be down,
        the probe does that once it answers."""
        if self.db.outage.down:
            return
        self.db.outage.suspect()
        task = asyncio.get_running_loop().create_task(self.db.drop_dead())
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _health(self) -> None:
        for server in self._grpc_servers:
            await server.serving(self.ready)

    async def _readyz(self) -> tuple[int, bytes, str]:
        if self.ready:
            return 200, b"ready\n", "text/plain"
        why = "draining" if self.draining else "the database doesn't answer"
        return 503, f"not ready: {why}\n".encode(), "text/plain"

    async def _jwks(self) -> tuple[int, bytes, str]:
        return 200, self.receipts.jwks(), "application/jwk-set+json"

    async def drain(self) -> None:
        """Says NOT_SERVING (and /readyz 503) at once, and keeps serving for
        drain_seconds so load balancers move away before streams end."""
        self.draining = True
        await self._health()
        if self.settings.drain_seconds:
            log.info("draining for %g s", self.settings.drain_seconds)
            await asyncio.sleep(self.settings.drain_seconds)

    def reload_tls(self) -> None:
        if self.tls is None:
            log.info("SIGHUP: no TLS certificate to reload")
            return
        self.tls.reload()

    # --- metrics -----------------------------------------------------------------------

    async def _metrics_page(self) -> tuple[int, bytes, str]:
        return 200, await self.metrics.scrape(), CONTENT_TYPE

    def _sample_metrics(self) -> None:
        m = self.metrics

        async def process() -> None:
            m.relay_sessions.set(sum(len(s.sessions) for s in self.gateway.streams))
            m.subscribers.set(self.comms.open_streams)
            m.delivery_lag.set(self.hub.lag())
            for name, pool in (("app", self.db.pool), ("maintenance", self.db.maintenance_pool)):
                stats = pool.get_stats()
                m.pool_in_use.labels(name).set(
                    stats.get("pool_size", 0) - stats.get("pool_available", 0)
                )
                m.pool_waiting.labels(name).set(stats.get("requests_waiting", 0))

        async def database() -> None:
            m.open_asks.set(await self.store.open_asks())
            pending, oldest = await self.webhooks.pending()
            m.webhook_pending.set(pending)
            m.webhook_oldest.set(oldest)

        m.samplers += [process, database]

    def _relay(self) -> Relay | None:
        """The SMTP relay mail goes through, when set."""
        s = self.settings
        if not s.smtp_host:
            return None
        return Relay(
            s.smtp_host,
            s.smtp_port,
            s.smtp_security,
            s.smtp_username,
            s.smtp_password,
            str(s.smtp_ca_file) if s.smtp_ca_file else None,
        )

    def _courier(self, reach: Reach) -> Courier | None:
        """The webhook courier, when this server has a webhook key."""
        settings = self.settings
        if self.webhooks.vault is None:
            log.info(
                "webhooks are off: no webhook key (set COMPASS_WEBHOOK_KEY or "
                "COMPASS_WEBHOOK_KEY_FILE)"
            )
            return None
        if not settings.webhook_courier:
            log.info("webhooks are sent by other processes: webhooks.courier is off")
            return None
        mailer = None
        relay = self._relay()
        if relay is not None:
            mailer = Mailer(
                relay,
                self.store,
                settings.public_url,
                # One mail, its link made and every answer of the relay, takes
                # at most an attempt's time.
                timeout=settings.webhook_timeout_seconds,
                preferences=self.push.preferences_of,
                reply_domain=settings.mail_reply_domain,
            )
        sender = Sender(
            reach,
            timeout=settings.webhook_timeout_seconds,
            response_bytes=settings.webhook_response_bytes,
            connections=settings.webhook_concurrency,
        )
        return Courier(
            self.webhooks,
            sender,
            Drafts(
                settings.public_url,
                self.receipts,
                MailDrafts(settings.public_url, self.receipts),
                PushDrafts(self.receipts, default=settings.notify_push),
                SlackDmDrafts(default=settings.notify_slack_dm),
            ),
            settings.server_id,
            mailer=mailer,
            pusher=Pusher(self.push, self.store, sender, settings.public_url),
            retry_schedule=schedule(settings.webhook_retry_schedule),
            concurrency=settings.webhook_concurrency,
            per_endpoint=settings.webhook_concurrency_per_endpoint,
            per_workspace=settings.webhook_concurrency_per_workspace,
            retention=datetime.timedelta(seconds=settings.webhook_retention_seconds),
            poll=settings.webhook_poll_seconds,
            slack=SlackOutbox(self.slack, self.slack_web, self.push.preferences_of),
        )

    async def stop(self, grace: float = 5.0) -> None:
        """Stops what started; after a failed start, only that much. A step
        that fails is logged and the rest still run, so the database and the
        ports are always let go; the first failure is raised at the end."""
        self.draining = True
        steps: list[Callable[[], Awaitable[object]]] = []
        # Streams end first, so the transports can drain without waiting on them;
        # relay sessions unbind first, so their agents go OFFLINE.
        for name, method in (
            ("hook_routes", "stop"),
            ("gateway", "close"),
            ("expiry", "stop"),
            ("courier", "stop"),
            ("mail_listener", "stop"),
            ("slack_routes", "stop"),
            ("slack_web", "close"),
            ("auth", "close"),
            ("heartbeat", "stop"),
            ("hub", "close"),
        ):
            if hasattr(self, name):
                steps.append(getattr(getattr(self, name), method))
        steps += [functools.partial(server.stop, grace) for server in self._grpc_servers]
        steps += [http.stop for http in getattr(self, "_http_servers", [])]
        if hasattr(self, "signin"):
            steps.append(self.signin.close)
        if hasattr(self, "db"):
            steps.append(self.db.close)
        if self.embedded is not None:
            steps.append(functools.partial(asyncio.to_thread, self.embedded.stop))
        if self._own_provider and self.tracer_provider is not None:
            steps.append(functools.partial(asyncio.to_thread, self.tracer_provider.shutdown))
        failed: BaseException | None = None
        for step in steps:
            name = getattr(step, "__qualname__", None) or repr(step)
            try:
                # A step stuck on a client or the database can't hold the stop.
                async with asyncio.timeout(grace + STOP_STEP_SECONDS):
                    await step()
            except TimeoutError:
                log.warning(
                    "stopping: %s did not finish within %g s; going on",
                    name,
                    grace + STOP_STEP_SECONDS,
                )
            except Exception as exc:
                log.exception("stopping: %s failed", name)
                failed = failed or exc
        if failed is not None:
            raise failed
