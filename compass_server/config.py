"""Every setting of the server, defined once.

Each field of `Settings` is one setting: its name, type and default are the
field's; its TOML key, help text and value kind are its metadata. From that
one definition come the TOML file's validation, the environment variables
(`COMPASS_<NAME>`), the flags (`--<name>`), `compass-server config check` and
the settings table in docs/operating.md. A value comes from the file, then the
environment, then a flag, each overriding the one before.
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import math
import os
import pathlib
import tomllib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from compass_server.api.auth import CACHE_SECONDS, CACHE_SIZE
from compass_server.api.comms import STREAMS_PER_ACCOUNT, WIRE_CACHE_BYTES
from compass_server.events.hub import (
    PAGE_BYTES,
    REPLAY_BYTES,
    REPLAY_BYTES_PER_TOKEN,
    REPLAY_READS,
    WINDOW_BYTES,
)
from compass_server.hooks.held import (
    ALWAYS_SECONDS,
    HELD_PER_TOKEN,
    HELD_REQUESTS,
    LONGEST_HOLD_SECONDS,
    MARGIN_SECONDS,
)
from compass_server.inbox import rules
from compass_server.receipts import RECEIPT_CACHE_BYTES
from compass_server.relay.gateway import (
    ACK_TIMEOUT_SECONDS,
    BINDS_AT_ONCE,
    CALL_BYTES,
    OUTBOX_BYTES,
    SESSIONS_PER_STREAM,
    STREAMS_PER_RUNNER,
    WINDOW,
)
from compass_server.signin.oidc import (
    ATTEMPT_SECONDS,
    CLOCK_SKEW_SECONDS,
    HTTP_TIMEOUT_SECONDS,
    JWKS_REFETCH_SECONDS,
    SESSION_IDLE,
    SESSION_MAX,
)
from compass_server.signin.providers import Provider, ProviderError, providers
from compass_server.slack.settings import (
    SLACK_API_URL,
    SLACK_CODE_SECONDS,
    SLACK_LINK_SECONDS,
    SLACK_REQUEST_BYTES,
)
from compass_server.store.asks import ASK_CACHE_BYTES
from compass_server.store.blocks import follow_up_default
from compass_server.store.channels import CHANNELS_PER_ACCOUNT
from compass_server.store.coalesce import WRITE_BATCH
from compass_server.store.db import CONNECTIONS_PER_TOKEN, redacted_url
from compass_server.store.links import LINK_LIFETIME
from compass_server.store.outage import PROBE_SECONDS, WAIT_SECONDS
from compass_server.store.standing import STANDING_ANSWER_MAX, STANDING_ANSWERS_PER_PERSON
from compass_server.transport import tls
from compass_server.transport.limits import (
    COMPRESS_MIN_BYTES,
    DRAIN_BYTES,
    DRAIN_SECONDS,
    IDLE_SECONDS,
)
from compass_server.webhooks.courier import POLL_SECONDS, RETRY_SCHEDULE, schedule
from compass_server.webhooks.destination import networks

# A bare port listens here: listening beyond loopback is only ever typed.
LOOPBACK = "127.0.0.1"
DEFAULT_GRPC_LISTEN = f"{LOOPBACK}:50051"
DEFAULT_HTTP_LISTEN = f"{LOOPBACK}:8080"
# The page's address as the links in webhooks and chat cards give it.
DEFAULT_PUBLIC_URL = f"http://{DEFAULT_HTTP_LISTEN}"
CONFIG_ENV = "COMPASS_CONFIG"


class ConfigError(Exception):
    """A setting that can't be used, in one line naming where it came from."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- kinds of value ------------------------------------------------------------------


class Kind(abc.ABC):
    """How a setting's value is read from TOML and from text (the environment
    and flags), and written back as TOML."""

    what = "a value"
    # What its flag takes, in its --help.
    metavar = "VALUE"

    @abc.abstractmethod
    def from_toml(self, value: object) -> Any:
        """The value, or ValueError when the TOML value isn't one."""

    def from_text(self, text: str) -> Any:
        return self.from_toml(text)

    def to_toml(self, value: Any) -> str:
        return _quoted(str(value))

    def shown(self, value: Any) -> Any:
        return value


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Count(Kind):
    metavar = "N"

    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum
        self.what = f"a whole number of at least {minimum}"

    def from_toml(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            raise ValueError
        return value

    def from_text(self, text: str) -> int:
        return self.from_toml(int(text.strip().replace("_", "")))

    def to_toml(self, value: Any) -> str:
        return str(value)


class Seconds(Kind):
    metavar = "SECONDS"

    def __init__(self, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero
        self.what = "a number of seconds" + (" (0 or more)" if allow_zero else " above 0")

    def from_toml(self, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        seconds = float(value)
        if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not self.allow_zero):
            raise ValueError
        return seconds

    def from_text(self, text: str) -> float:
        return self.from_toml(float(text))

    def to_toml(self, value: Any) -> str:
        return repr(float(value))


class Fraction(Kind):
    what = "a number from 0 to 1"
    metavar = "RATIO"

    def from_toml(self, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError
        return float(value)

    def from_text(self, text: str) -> float:
        return self.from_toml(float(text))

    def to_toml(self, value: Any) -> str:
        return repr(float(value))


class Switch(Kind):
    what = "true or false"
    _TEXT: ClassVar[dict[str, bool]] = {"true": True, "1": True, "yes": True, "on": True}
    _TEXT.update({"false": False, "0": False, "no": False, "off": False})

    def from_toml(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise ValueError
        return value

    def from_text(self, text: str) -> bool:
        return self._TEXT[text.strip().lower()]

    def to_toml(self, value: Any) -> str:
        return "true" if value else "false"


class Workers(Count):
    """A number of processes, or "auto" for one per core this process may use."""

    metavar = "N|auto"
    what = 'a whole number of at least 1, or "auto"'

    def __init__(self) -> None:
        super().__init__(1)
        self.what = Workers.what

    def from_toml(self, value: object) -> int:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return len(os.sched_getaffinity(0))
        return super().from_toml(value)

    def from_text(self, text: str) -> int:
        if text.strip().lower() == "auto":
            return self.from_toml("auto")
        return super().from_text(text)


class Choice(Kind):
    def __init__(self, *options: str, fold: Callable[[str], str] = str.lower) -> None:
        self.options = options
        self.fold = fold
        self.what = "one of " + ", ".join(options)
        self.metavar = "|".join(options)

    def from_toml(self, value: object) -> str:
        if not isinstance(value, str) or self.fold(value) not in self.options:
            raise ValueError
        return self.fold(value)


class Text(Kind):
    """A string; "" means unset (None) when optional."""

    def __init__(
        self, what: str = "a string", optional: bool = False, metavar: str = "TEXT"
    ) -> None:
        self.what = what
        self.optional = optional
        self.metavar = metavar

    def from_toml(self, value: object) -> str | None:
        if not isinstance(value, str) or "\x00" in value:
            raise ValueError
        return value if value or not self.optional else None

    def to_toml(self, value: Any) -> str:
        return _quoted("" if value is None else str(value))


class Path(Text):
    def __init__(self, optional: bool = False, metavar: str = "FILE") -> None:
        super().__init__("a path", optional, metavar)

    def from_toml(self, value: object) -> Any:
        text = super().from_toml(value)
        if not text:
            if self.optional:
                return None
            raise ValueError
        return pathlib.Path(text)


class Address(Text):
    """[HOST:]PORT; "" means off when optional."""

    def __init__(self, optional: bool = False) -> None:
        what = "[HOST:]PORT" + (' or "" for none' if optional else "")
        super().__init__(what, optional, "[HOST:]PORT")

    def from_toml(self, value: object) -> str | None:
        text = super().from_toml(value)
        if text is not None:
            listen_address(text)
        return text


class DatabaseUrl(Text):
    def __init__(self) -> None:
        super().__init__("a PostgreSQL URL", optional=True, metavar="URL")

    def from_toml(self, value: object) -> str | None:
        text = super().from_toml(value)
        if text is not None:
            import psycopg

            # postgresql://… or key=value pairs, as libpq reads them.
            try:
                psycopg.conninfo.conninfo_to_dict(text)
            except psycopg.Error:
                raise ValueError from None
        return text

    def shown(self, value: Any) -> Any:
        return value if value is None else redacted_url(value)


class Checked(Text):
    """A string a parser accepts (its ValueError refuses it)."""

    def __init__(self, what: str, parse: Callable[[str], object], metavar: str) -> None:
        super().__init__(what, metavar=metavar)
        self.parse = parse

    def from_toml(self, value: object) -> str | None:
        text = super().from_toml(value)
        if text is not None:
            self.parse(text)
        return text


def quiet_hours(text: str) -> tuple[str, str]:
    """ "HH:MM-HH:MM" as its two ends; "" as none."""
    from compass_server.notify.preferences import minutes
    from compass_server.store.errors import InvalidArgument

    if not text.strip():
        return "", ""
    start, sep, end = text.partition("-")
    try:
        a, b = minutes(start, "start"), minutes(end, "end")
    except InvalidArgument:
        raise ValueError(text) from None
    if not sep or a is None or b is None or a == b:
        raise ValueError(text)
    return start.strip(), end.strip()


def _time_zone(text: str) -> None:
    from compass_server.notify.preferences import zone
    from compass_server.store.errors import InvalidArgument

    try:
        zone(text)
    except InvalidArgument:
        raise ValueError(text) from None


def _http_url(text: str) -> None:
    if not text.startswith(("http://", "https://")):
        raise ValueError


class Secret(Text):
    def __init__(self, what: str, metavar: str) -> None:
        super().__init__(what, optional=True, metavar=metavar)

    def shown(self, value: Any) -> Any:
        return "***" if value else value


class Providers(Kind):
    """OpenID providers: an array of tables in TOML, a JSON list as text."""

    what = "a list of providers"
    metavar = "JSON"

    def from_toml(self, value: object) -> Any:
        return providers(value)

    def to_toml(self, value: Any) -> str:
        return "[" + ", ".join(_inline(p) for p in value) + "]"

    def shown(self, value: Any) -> Any:
        return tuple(p.shown() for p in value)


def _inline(table: Any) -> str:
    if not isinstance(table, dict):
        table = table.shown()
    parts = []
    for key, value in table.items():
        if isinstance(value, list):
            shown = "[" + ", ".join(_quoted(str(v)) for v in value) + "]"
        else:
            shown = _quoted(str(value))
        parts.append(f"{key} = {shown}")
    return "{ " + ", ".join(parts) + " }"


def listen_address(value: str) -> tuple[str, int]:
    """(host, port) from PORT, HOST:PORT or [V6]:PORT; a bare port or an empty
    host means 127.0.0.1. ValueError when it is neither."""
    host, _, port = value.strip().rpartition(":")
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{value!r} is not a PORT or HOST:PORT")
    return host or LOOPBACK, int(port)


# --- the settings --------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    name: str
    section: str
    kind: Kind
    help: str
    default: Any

    @property
    def key(self) -> str:
        """The key in the TOML file: `section.leaf`, or the name at the top."""
        if not self.section:
            return self.name
        return f"{self.section}.{self.leaf}"

    @property
    def leaf(self) -> str:
        prefix = _PREFIX.get(self.section, "")
        return self.name.removeprefix(prefix) if prefix else self.name

    @property
    def env(self) -> str:
        return "COMPASS_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


# The TOML leaf drops its section's prefix: [database] url is database_url.
_PREFIX = {
    "database": "database_",
    "log": "log_",
    "tls": "tls_",
    "tracing": "tracing_",
    "webhooks": "webhook_",
    "signin": "signin_",
    "receipts": "receipt_",
    "smtp": "smtp_",
    "slack": "slack_",
    "notify": "notify_",
    "hooks": "hooks_",
    "mail": "mail_",
}
SECTIONS = (
    "",
    "database",
    "log",
    "tls",
    "tracing",
    "webhooks",
    "smtp",
    "mail",
    "notify",
    "signin",
    "receipts",
    "slack",
    "hooks",
    "limits",
)


def _s(default: Any, section: str, kind: Kind, help: str) -> Any:
    return field(default=default, metadata={"setting": (section, kind, help)})


@dataclass
class Settings:
    """How the server runs. Every limit it enforces on clients is one of these
    (the limits table in docs/database.md lists them)."""

    # --- where it listens and keeps its data ---
    grpc_listen: str = _s(
        DEFAULT_GRPC_LISTEN,
        "",
        Address(),
        "gRPC (with health and reflection); a bare port is on 127.0.0.1",
    )
    http_listen: str = _s(
        DEFAULT_HTTP_LISTEN,
        "",
        Address(),
        "Connect, the web page, /healthz, /readyz and /metrics; a bare port is on 127.0.0.1",
    )
    relay_listen: str | None = _s(
        None,
        "",
        Address(optional=True),
        "a gRPC listener for the runners' relay alone; when set, the relay is served only "
        "there (with tls.client_ca, only to runners with a client certificate)",
    )
    metrics_listen: str | None = _s(
        None,
        "",
        Address(optional=True),
        "a listener of its own for /metrics, /healthz and /readyz; when set, the HTTP port "
        "serves no /metrics",
    )
    data_dir: pathlib.Path = _s(
        pathlib.Path(".compass"),
        "",
        Path(metavar="DIR"),
        "where the embedded PostgreSQL keeps its data",
    )
    event_loop: str = _s("uvloop", "", Choice("uvloop", "asyncio"), "the event loop")
    workers: int = _s(
        1,
        "",
        Workers(),
        "server processes sharing the gRPC, HTTP and relay ports (SO_REUSEPORT), supervised "
        "by serve; auto: one per core. With more than one, metrics_listen gives each worker "
        "a port of its own",
    )
    expiry_interval_seconds: float = _s(
        30.0, "", Seconds(), "the longest the expiry loop sleeps between sweeps"
    )
    drain_seconds: float = _s(
        0.0,
        "",
        Seconds(allow_zero=True),
        "after SIGTERM, how long health reports NOT_SERVING (and /readyz 503) while calls "
        "are still served, before streams end",
    )
    # --- the database ---
    database_url: str | None = _s(
        None,
        "database",
        DatabaseUrl(),
        "PostgreSQL to use; empty: the embedded one under data_dir",
    )
    pool_size: int = _s(20, "database", Count(2), "connections the request pool may open")
    database_connections_per_token: int = _s(
        CONNECTIONS_PER_TOKEN,
        "database",
        Count(),
        "connections of that pool one token (a runner's for all its sessions) holds at once",
    )
    database_wait_seconds: float = _s(
        WAIT_SECONDS,
        "database",
        Seconds(),
        "the longest one transaction waits on the database (for a connection, a lock or an "
        "answer, connecting included); past it the call fails UNAVAILABLE",
    )
    database_probe_seconds: float = _s(
        PROBE_SECONDS,
        "database",
        Seconds(),
        "how long a check that the database answers waits; while checks fail, calls fail "
        "UNAVAILABLE at once, and the check runs again this often",
    )
    # --- logs ---
    log_level: str = _s(
        "INFO",
        "log",
        Choice("DEBUG", "INFO", "WARNING", "ERROR", fold=str.upper),
        "the least severe level logged (admin commands log WARNING unless this is set)",
    )
    log_format: str = _s(
        "text", "log", Choice("text", "json"), "text lines, or one JSON object per line"
    )
    log_access: bool = _s(True, "log", Switch(), "one INFO line per call")
    # --- TLS ---
    tls_cert: pathlib.Path | None = _s(
        None,
        "tls",
        Path(optional=True),
        "PEM certificate chain for every port; reloaded on SIGHUP",
    )
    tls_key: pathlib.Path | None = _s(
        None, "tls", Path(optional=True), "PEM private key of tls.cert; reloaded on SIGHUP"
    )
    tls_client_ca: pathlib.Path | None = _s(
        None,
        "tls",
        Path(optional=True),
        "PEM CA certificates the relay listener requires runners' client certificates to "
        "chain to (needs relay_listen)",
    )
    # --- traces ---
    tracing_otlp_endpoint: str | None = _s(
        None,
        "tracing",
        Text("an OTLP/gRPC URL", optional=True, metavar="URL"),
        "where spans are exported over OTLP/gRPC (http://collector:4317); empty: no traces",
    )
    tracing_otlp_headers: str | None = _s(
        None,
        "tracing",
        Secret("key=value pairs joined by commas", "KEY=VALUE,…"),
        "headers sent with every export, key=value,key=value (masked when shown)",
    )
    tracing_otlp_insecure: bool = _s(
        False, "tracing", Switch(), "export without TLS to an http:// endpoint"
    )
    tracing_service_name: str = _s(
        "compass-server", "tracing", Text(metavar="NAME"), "the service.name of this server's spans"
    )
    tracing_sample_ratio: float = _s(
        1.0,
        "tracing",
        Fraction(),
        "the share of new traces recorded (a caller's sampled trace is always continued)",
    )
    # --- limits ---
    slow_stream_seconds: float = _s(
        30.0, "limits", Seconds(), "how long a stream may wait on a client that doesn't read"
    )
    subscribe_streams_per_account: int = _s(
        STREAMS_PER_ACCOUNT, "limits", Count(), "Subscribe streams one account holds open"
    )
    relay_streams_per_runner: int = _s(
        STREAMS_PER_RUNNER, "limits", Count(), "relay streams one runner holds open"
    )
    relay_sessions_per_stream: int = _s(
        SESSIONS_PER_STREAM, "limits", Count(), "sessions bound on one relay stream"
    )
    relay_binds_at_once: int = _s(
        BINDS_AT_ONCE,
        "limits",
        Count(),
        "sessions being bound in the database at once by all relay streams (at most "
        "database.pool_size less 4); the rest wait, so a reconnecting crowd never takes every "
        "pooled connection from the other calls",
    )
    relay_window: int = _s(WINDOW, "limits", Count(), "deliveries a session has unacked")
    relay_outbox_bytes: int = _s(
        OUTBOX_BYTES, "limits", Count(), "frames a relay stream has waiting for its runner"
    )
    relay_call_bytes: int = _s(
        CALL_BYTES,
        "limits",
        Count(),
        "answers of a relay stream's calls, running or unread, at each kind's largest",
    )
    relay_ack_timeout_seconds: float = _s(
        ACK_TIMEOUT_SECONDS,
        "limits",
        Seconds(),
        "how long a session's window may stay full with no ack",
    )
    event_window_bytes: int = _s(
        WINDOW_BYTES, "limits", Count(), "the shared window of recent events per workspace"
    )
    replay_page_bytes: int = _s(PAGE_BYTES, "limits", Count(), "one read of the log")
    replay_bytes: int = _s(
        REPLAY_BYTES, "limits", Count(), "pages of the log held by all streams at once"
    )
    replay_bytes_per_token: int = _s(
        REPLAY_BYTES_PER_TOKEN, "limits", Count(), "the part of those one account or runner holds"
    )
    replay_reads: int = _s(
        REPLAY_READS,
        "limits",
        Count(),
        "pages of the log read from the database at once by all streams (at most half of "
        "database.pool_size); the rest wait, so streams catching up never take every pooled "
        "connection from the writes",
    )
    http_drain_bytes: int = _s(
        DRAIN_BYTES,
        "limits",
        Count(0),
        "the rest of a body read and dropped after an early HTTP/1.1 answer",
    )
    http_drain_seconds: float = _s(
        DRAIN_SECONDS, "limits", Seconds(), "how long that rest is read for"
    )
    http_idle_seconds: float = _s(
        IDLE_SECONDS,
        "limits",
        Seconds(),
        "how long an idle HTTP connection is kept for its next request (longer than "
        "clients keep theirs, so none sends on a connection being closed)",
    )
    connect_compress_min_bytes: int = _s(
        COMPRESS_MIN_BYTES,
        "limits",
        Count(0),
        "the smallest Connect unary answer sent gzipped to a client that accepts gzip",
    )
    ask_cache_bytes: int = _s(
        ASK_CACHE_BYTES, "limits", Count(), "asks' content kept to check answers"
    )
    write_batch: int = _s(
        WRITE_BATCH,
        "limits",
        Count(),
        "posts (or ask endings) that waited while one was at the database, sent together as "
        "one statement; 1 sends each alone",
    )
    wire_cache_bytes: int = _s(
        WIRE_CACHE_BYTES, "limits", Count(), "events kept encoded for a workspace's subscribers"
    )
    ask_deadline_min_seconds: float = _s(
        60.0, "limits", Seconds(), "how soon after its post an ask's deadline may be"
    )
    ask_deadline_max_seconds: float = _s(
        30 * 86_400.0, "limits", Seconds(), "how late after its post an ask's deadline may be"
    )
    ask_follow_up_default: str = _s(
        "",
        "limits",
        Checked(
            "a follow-up policy like remind=30m,times=2,escalate=4h,owner",
            follow_up_default,
            "POLICY",
        ),
        "the follow-up of every channel ask posted without one; empty: none",
    )
    standing_answer_max_seconds: float = _s(
        STANDING_ANSWER_MAX.total_seconds(),
        "limits",
        Seconds(),
        "the longest a standing answer may stand (the shortest is a minute)",
    )
    standing_answers_per_person: int = _s(
        STANDING_ANSWERS_PER_PERSON,
        "limits",
        Count(),
        "standing answers one person may have in force at once",
    )
    inbox_read_bytes: int = _s(
        rules.MAX_THREAD_BYTES,
        "limits",
        Count(),
        "one page of a GetInboxItem thread, in messages as stored (a page holds one at least)",
    )
    inbox_reading_bytes: int = _s(
        rules.READING_BYTES,
        "limits",
        Count(),
        "pages of threads all GetInboxItem calls of a process hold at once",
    )
    inbox_reading_bytes_per_account: int = _s(
        rules.READING_BYTES_PER_ACCOUNT, "limits", Count(), "the part of those one account holds"
    )
    inbox_read_wait_seconds: float = _s(
        rules.READ_WAIT_SECONDS,
        "limits",
        Seconds(),
        "how long a GetInboxItem waits for its page's bytes before RESOURCE_EXHAUSTED",
    )
    channels_per_account: int = _s(
        CHANNELS_PER_ACCOUNT, "limits", Count(), "channels one account may be a member of"
    )
    auth_cache_seconds: float = _s(
        CACHE_SECONDS, "limits", Seconds(), "how long a process trusts a sign-in it looked up"
    )
    auth_cache_size: int = _s(CACHE_SIZE, "limits", Count(), "sign-ins a process keeps")
    receipt_cache_bytes: int = _s(
        RECEIPT_CACHE_BYTES, "limits", Count(), "ended asks' receipts kept signed"
    )
    public_url: str = _s(
        DEFAULT_PUBLIC_URL,
        "",
        Checked("an http:// or https:// URL", _http_url, "URL"),
        "where people open the page: the base of every link a webhook or chat card carries",
    )
    webhook_key: str | None = _s(
        None,
        "webhooks",
        Secret("32 bytes in URL-safe base64", "KEY"),
        "the key webhook URLs and secrets are sealed with; without it (or a key file) "
        "webhooks are off, except on the embedded database, which makes one",
    )
    webhook_key_file: pathlib.Path | None = _s(
        None, "webhooks", Path(optional=True), "a file holding that key"
    )
    webhook_courier: bool = _s(
        True,
        "webhooks",
        Switch(),
        "send webhook deliveries from this process; off, its changes are still recorded "
        "for the servers that have it on to send",
    )
    webhook_allowed_networks: str = _s(
        "",
        "webhooks",
        Checked("networks joined by commas (10.0.0.0/8,::1)", networks, "NETWORK,…"),
        "private, loopback or link-local networks webhooks may reach besides public addresses",
    )
    webhook_retry_schedule: str = _s(
        RETRY_SCHEDULE,
        "webhooks",
        Checked("waits joined by commas (5s,5m,2h)", schedule, "WAIT,…"),
        "waits between a delivery's failed attempts; past the last, it has failed",
    )
    webhook_timeout_seconds: float = _s(
        10.0, "webhooks", Seconds(), "how long one attempt may take, connecting included"
    )
    webhook_concurrency: int = _s(16, "webhooks", Count(), "attempts this server makes at once")
    webhook_concurrency_per_endpoint: int = _s(
        4, "webhooks", Count(), "attempts at once to one endpoint"
    )
    webhook_concurrency_per_workspace: int = _s(
        8, "webhooks", Count(), "attempts at once for one workspace's endpoints"
    )
    webhook_response_bytes: int = _s(
        4096, "webhooks", Count(0), "the part of a receiver's answer read and recorded"
    )
    webhook_retention_seconds: float = _s(
        7 * 86_400.0, "webhooks", Seconds(), "how long finished deliveries are kept"
    )
    webhook_poll_seconds: float = _s(
        POLL_SECONDS, "webhooks", Seconds(), "how often the courier looks for retries coming due"
    )
    # --- mail to people about their asks (an email webhook endpoint's relay) ---
    smtp_host: str | None = _s(
        None,
        "smtp",
        Text("a host name or address", optional=True, metavar="HOST"),
        "the SMTP relay email endpoints send through; empty: this server sends no mail",
    )
    smtp_port: int = _s(587, "smtp", Count(1), "the relay's port (587 STARTTLS, 465 TLS)")
    smtp_security: str = _s(
        "starttls",
        "smtp",
        Choice("starttls", "tls", "none"),
        "STARTTLS after connecting, TLS from the first byte, or none (a relay on loopback)",
    )
    smtp_username: str | None = _s(
        None, "smtp", Text(optional=True, metavar="NAME"), "the relay's user name; empty: no AUTH"
    )
    smtp_password: str | None = _s(
        None, "smtp", Secret("a password", "PASSWORD"), "the relay's password (masked when shown)"
    )
    smtp_ca_file: pathlib.Path | None = _s(
        None, "smtp", Path(optional=True), "CA certificates to verify the relay by"
    )
    # --- replies to mails about asks ---
    mail_reply_domain: str | None = _s(
        None,
        "mail",
        Text("a domain", optional=True, metavar="HOST"),
        "the domain of the reply address each mail about an ask carries (ask+TOKEN@DOMAIN), "
        "whose mail reaches mail.listen or the inbound webhook; empty: mails carry none",
    )
    mail_listen: str | None = _s(
        None,
        "mail",
        Address(optional=True),
        "an SMTP listener of this server's own that takes replies to mails about asks "
        "(needs workers = 1; offers STARTTLS with tls.cert when that is set); empty: none",
    )
    mail_inbound_secret: str | None = _s(
        None,
        "mail",
        Secret("a secret", "KEY"),
        "what the inbound-mail webhook (POST /mail/inbound) must carry, as ?key= or "
        "authorization (Bearer, or Basic's password); empty: the webhook is off "
        "(masked when shown)",
    )
    mail_inbound_bytes: int = _s(
        1 << 20,
        "limits",
        Count(),
        "the largest reply mail taken by mail.listen (552) or the inbound webhook (413)",
    )
    # --- how people are told: the defaults of what each chooses ---
    notify_page: bool = _s(
        True,
        "notify",
        Switch(),
        "default of each person's choice: their open page shows a notification for an ask for them",
    )
    notify_push: bool = _s(
        True,
        "notify",
        Switch(),
        "default: push to the browsers a person subscribed (needs a push endpoint)",
    )
    notify_slack_dm: bool = _s(
        False,
        "notify",
        Switch(),
        "default: a direct message from the workspace's Slack app, for a person linked to it",
    )
    notify_quiet_hours: str = _s(
        "",
        "notify",
        Checked("HH:MM-HH:MM, or empty for none", quiet_hours, "HH:MM-HH:MM"),
        "default quiet hours, when nothing but an urgent notification is sent; empty: none",
    )
    notify_time_zone: str = _s(
        "UTC",
        "notify",
        Checked("an IANA time zone", _time_zone, "ZONE"),
        "default time zone of a person's quiet hours",
    )
    notify_push_subscriptions: int = _s(
        10, "notify", Count(1), "the most push subscriptions (browsers) one person keeps"
    )
    # --- people's sign-in ---
    signin_providers: tuple[Provider, ...] = _s(
        (),
        "signin",
        Providers(),
        "OpenID providers people sign in through, each a [[signin.providers]] table (a JSON "
        "list in the environment or a flag): see docs/signin.md",
    )
    signin_session_idle_seconds: float = _s(
        SESSION_IDLE.total_seconds(),
        "signin",
        Seconds(),
        "a browser session ends when unused this long (an open page's live stream is use)",
    )
    signin_session_max_seconds: float = _s(
        SESSION_MAX.total_seconds(),
        "signin",
        Seconds(),
        "a browser session ends this long after sign-in whatever its use",
    )
    signin_link_max_seconds: float = _s(
        LINK_LIFETIME.total_seconds(),
        "signin",
        Seconds(),
        "the longest a link to one ask opens it (it also ends being answerable with the ask)",
    )
    signin_attempt_seconds: float = _s(
        ATTEMPT_SECONDS, "signin", Seconds(), "how long a sign-in may take at the provider"
    )
    signin_http_timeout_seconds: float = _s(
        HTTP_TIMEOUT_SECONDS,
        "signin",
        Seconds(),
        "how long one request to a provider (discovery, keys, token) may take",
    )
    signin_clock_skew_seconds: float = _s(
        CLOCK_SKEW_SECONDS,
        "signin",
        Seconds(allow_zero=True),
        "how far a provider's clock may be off when an ID token's times are checked",
    )
    signin_jwks_refetch_seconds: float = _s(
        JWKS_REFETCH_SECONDS,
        "signin",
        Seconds(allow_zero=True),
        "the soonest a provider's keys are fetched again for an ID token signed by a key "
        "not seen before (a key rotation)",
    )
    # --- receipts ---
    slack_api_url: str = _s(
        SLACK_API_URL,
        "slack",
        Checked("an http:// or https:// URL", _http_url, "URL"),
        "the Slack Web API the Slack app calls (a stand-in's address in tests)",
    )
    slack_link_seconds: float = _s(
        SLACK_LINK_SECONDS,
        "slack",
        Seconds(),
        "how long the link that connects a Slack user to their Compass account opens",
    )
    slack_code_seconds: float = _s(
        SLACK_CODE_SECONDS,
        "slack",
        Seconds(),
        "how long a person's one-time code (shown on the page, typed in Slack) links their "
        "Slack account",
    )
    slack_request_bytes: int = _s(
        SLACK_REQUEST_BYTES,
        "limits",
        Count(),
        "the largest request Slack's interactivity endpoint reads; more is refused with 413",
    )
    hooks_request_bytes: int = _s(
        1 << 20,
        "hooks",
        Count(),
        "the largest hook request (Claude Code's, Codex's) read; more is refused with 413",
    )
    hooks_held_requests: int = _s(
        HELD_REQUESTS,
        "hooks",
        Count(),
        "hook requests this server holds open at once waiting on answers; past it, 429",
    )
    hooks_held_per_token: int = _s(
        HELD_PER_TOKEN,
        "hooks",
        Count(),
        "hook requests one hook token holds open at once; past it, 429",
    )
    hooks_margin_seconds: float = _s(
        MARGIN_SECONDS,
        "hooks",
        Seconds(allow_zero=True),
        "how long before the hook's own timeout a held request answers (and withdraws its ask)",
    )
    hooks_longest_hold_seconds: float = _s(
        LONGEST_HOLD_SECONDS,
        "hooks",
        Seconds(),
        "the longest timeout a hook request may name (its query's timeout)",
    )
    hooks_always_allow_seconds: float = _s(
        ALWAYS_SECONDS,
        "hooks",
        Seconds(),
        'how long an "Always allow this rule" answer stands (at most the longest standing answer)',
    )
    receipt_keys_dir: pathlib.Path | None = _s(
        None,
        "receipts",
        Path(optional=True, metavar="DIR"),
        "the folder of Ed25519 keys every ask's ending is signed with, the same on every "
        "server (see docs/receipts.md); empty: on the embedded database a folder under "
        "data_dir made on first use, otherwise receipts are off",
    )
    # Not a setting: this process's id among the servers sharing the database.
    server_id: uuid.UUID = field(default_factory=uuid.uuid4)


def _settings() -> tuple[Setting, ...]:
    out = []
    for f in dataclasses.fields(Settings):
        if "setting" in f.metadata:
            section, kind, help = f.metadata["setting"]
            out.append(Setting(f.name, section, kind, help, f.default))
    return tuple(out)


SETTINGS = _settings()
BY_NAME = {s.name: s for s in SETTINGS}
BY_KEY = {s.key: s for s in SETTINGS}


@dataclass(frozen=True)
class Retired:
    """A setting there is no more: still taken from a file, the environment
    or a flag, with a warning saying why it does nothing, and ignored."""

    name: str
    section: str
    why: str

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name.removeprefix(_PREFIX.get(self.section, ''))}"

    @property
    def env(self) -> str:
        return "COMPASS_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


RETIRED = (
    Retired(
        "signin_attempts_max",
        "signin",
        "a sign-in under way is kept by the browser that started it, so there is no "
        "count of them to cap",
    ),
)
RETIRED_BY_KEY = {r.key: r for r in RETIRED}


# --- loading ---------------------------------------------------------------------------


@dataclass
class Loaded:
    settings: Settings
    # Setting name → where its value came from: "default", the file, COMPASS_X or --x.
    sources: dict[str, str]
    path: pathlib.Path | None
    # One line per retired setting given: logged at start, printed by config check.
    warnings: list[str] = field(default_factory=list)


def _retired(where: str, r: Retired) -> str:
    return f"{where} is no longer a setting: {r.why}; it is ignored (remove it)"


def _bad(where: str, s: Setting, raw: object, exc: Exception | None = None) -> ConfigError:
    if isinstance(exc, ProviderError):
        # It names the provider and the key itself, never a secret.
        return ConfigError(f"{where}: {exc}")
    shown = "***" if isinstance(s.kind, Secret) else raw
    if isinstance(shown, str):
        shown = _quoted(shown[:64])
    return ConfigError(f"{where} must be {s.kind.what}, not {shown}")


def _from_file(path: pathlib.Path, warnings: list[str]) -> dict[str, tuple[Setting, object]]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"can't read the configuration file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    found: dict[str, tuple[Setting, object]] = {}
    sections = [s for s in SECTIONS if s]
    for key, value in doc.items():
        if isinstance(value, dict):
            if key not in sections:
                near = difflib.get_close_matches(key, sections, 1)
                hint = f" (did you mean [{near[0]}]?)" if near else ""
                raise ConfigError(
                    f"{path}: unknown section [{key}]{hint}; sections: " + ", ".join(sections)
                )
            items = [(f"{key}.{leaf}", v) for leaf, v in value.items()]
        else:
            items = [(key, value)]
        for dotted, v in items:
            s = BY_KEY.get(dotted)
            retired = RETIRED_BY_KEY.get(dotted)
            if s is None and retired is not None:
                warnings.append(_retired(f"{path}: {dotted}", retired))
                continue
            if s is None:
                near = difflib.get_close_matches(dotted, list(BY_KEY), 1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ConfigError(f"{path}: unknown setting {dotted}{hint}")
            found[s.name] = (s, v)
    return found


def load(
    *,
    path: pathlib.Path | str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> Loaded:
    """The effective settings: defaults, then the file, then the environment,
    then flags (a name → a string, or a bool for switches; None: not given).
    ConfigError names the first value that can't be used."""
    env = os.environ if env is None else env
    flags = flags or {}
    if path is None and env.get(CONFIG_ENV):
        path = env[CONFIG_ENV]
    file = pathlib.Path(path) if path else None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {s.name: "default" for s in SETTINGS}
    warnings: list[str] = []
    if file is not None:
        for name, (s, raw) in _from_file(file, warnings).items():
            try:
                values[name] = s.kind.from_toml(raw)
            except (ValueError, TypeError) as exc:
                raise _bad(f"{file}: {s.key}", s, raw, exc) from None
            sources[name] = str(file)
    for s in SETTINGS:
        raw = env.get(s.env)
        if raw is not None:
            try:
                values[s.name] = s.kind.from_text(raw)
            except (ValueError, TypeError, KeyError) as exc:
                raise _bad(s.env, s, raw, exc) from None
            sources[s.name] = s.env
        given = flags.get(s.name)
        if given is not None:
            try:
                values[s.name] = given if isinstance(given, bool) else s.kind.from_text(str(given))
            except (ValueError, TypeError, KeyError) as exc:
                raise _bad(s.flag, s, given, exc) from None
            sources[s.name] = s.flag
    for r in RETIRED:
        if env.get(r.env) is not None:
            warnings.append(_retired(r.env, r))
        if flags.get(r.name) is not None:
            warnings.append(_retired(r.flag, r))
    settings = Settings(**values)
    _check_together(settings, sources)
    return Loaded(settings, sources, file, warnings)


def _named(name: str, sources: Mapping[str, str] | None) -> str:
    """A setting's key and where its value came from: `tls.cert (from --tls-cert)`."""
    where = sources.get(name, "default") if sources else "default"
    return BY_NAME[name].key + ("" if where == "default" else f" (from {where})")


def _check_together(s: Settings, sources: Mapping[str, str]) -> None:
    """Settings that only work with others, and the TLS files themselves."""
    if (s.tls_cert is None) != (s.tls_key is None):
        given, missing = ("tls_cert", "tls.key") if s.tls_key is None else ("tls_key", "tls.cert")
        raise ConfigError(
            f"TLS takes a certificate and its key: {_named(given, sources)} is set, "
            f"{missing} is not"
        )
    if s.tls_client_ca is not None and (s.relay_listen is None or s.tls_cert is None):
        raise ConfigError(
            "tls.client_ca asks runners for client certificates on the relay listener: "
            "set relay_listen, tls.cert and tls.key too"
        )
    if s.tls_cert is not None and s.tls_key is not None:
        check_tls_files(s.tls_cert, s.tls_key, s.tls_client_ca, sources)
    if s.mail_listen is not None and not s.mail_reply_domain:
        raise ConfigError("mail.listen takes replies to reply addresses: set mail.reply_domain too")
    if s.mail_listen is not None and s.workers != 1:
        raise ConfigError("mail.listen is one SMTP listener: it needs workers = 1")
    if s.replay_bytes_per_token > s.replay_bytes:
        raise ConfigError("limits.replay_bytes_per_token can't be more than limits.replay_bytes")


def check_tls_files(
    cert: pathlib.Path,
    key: pathlib.Path,
    client_ca: pathlib.Path | None = None,
    sources: Mapping[str, str] | None = None,
) -> None:
    """ConfigError unless the certificate and key load as a pair (and the CA
    file as certificates), naming each setting and where it came from."""
    try:
        tls.check_files(cert, key, client_ca, lambda name: _named(name, sources))
    except tls.TlsFileError as exc:
        raise ConfigError(exc.message) from None


# --- showing ---------------------------------------------------------------------------


def effective_toml(loaded: Loaded) -> str:
    """The effective configuration as TOML, secrets masked, each value with
    where it came from."""
    lines = ["# compass-server: the effective configuration"]
    for section in SECTIONS:
        rows = [s for s in SETTINGS if s.section == section]
        if section:
            lines += ["", f"[{section}]"]
        for s in rows:
            value = s.kind.shown(getattr(loaded.settings, s.name))
            lines.append(f"{s.leaf} = {s.kind.to_toml(value)}  # {loaded.sources[s.name]}")
    return "\n".join(lines) + "\n"


def default_text(s: Setting) -> str:
    if s.default is None or s.default == ():
        return "—"
    if isinstance(s.default, pathlib.Path) and not s.default.is_absolute():
        return f"./{s.default}"
    if isinstance(s.default, bool):
        return "true" if s.default else "false"
    if isinstance(s.default, int) and s.default >= 1 << 20 and s.default % (1 << 20) == 0:
        return f"{s.default >> 20} MiB"
    if isinstance(s.default, int) and s.default >= 1 << 10 and s.default % (1 << 10) == 0:
        return f"{s.default >> 10} KiB"
    if isinstance(s.default, float) and s.default.is_integer():
        return f"{int(s.default):,}"
    if isinstance(s.default, int):
        return f"{s.default:,}"
    return f"{s.default}"


def markdown_table() -> str:
    """The settings table of docs/operating.md."""
    rows = [
        "| key in the file | environment | flag | default | what |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS:
        rows.append(f"| `{s.key}` | `{s.env}` | `{s.flag}` | {default_text(s)} | {s.help} |")
    return "\n".join(rows) + "\n"
