"""The Connect protocol (JSON and binary, HTTP/1.1 and h2c) as one ASGI app,
with the web page's static files beside it, served by hypercorn."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import mimetypes
import pathlib
import re
import socket
import ssl
import struct
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import grpc
import hypercorn.asyncio.run
import hypercorn.asyncio.tcp_server
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from hypercorn.asyncio import serve
from hypercorn.config import Config

from compass_server.api import surface
from compass_server.api.auth import Authenticator
from compass_server.api.errors import ApiError, Status, to_api_error
from compass_server.api.text import check_strings
from compass_server.telemetry.calls import Observer
from compass_server.transport.binding import Method, ServiceBinding
from compass_server.transport.codecs import CODECS, COMPRESSIONS, Gzip
from compass_server.transport.cookies import SessionCookies
from compass_server.transport.grpc_server import MAX_MESSAGE_BYTES, _error
from compass_server.transport.headers import CONNECT_HEADERS, PAGE_HEADERS, with_headers
from compass_server.transport.limits import (
    COMPRESS_MIN_BYTES,
    DRAIN_BYTES,
    DRAIN_SECONDS,
    IDLE_SECONDS,
)

log = logging.getLogger(__name__)

ASGIApp = Callable[[dict[str, Any], Any, Any], Any]
STATIC = pathlib.Path(__file__).resolve().parents[1] / "web" / "static"
_STATIC_FILES = {p.relative_to(STATIC).as_posix(): p for p in STATIC.rglob("*") if p.is_file()}
# A picture's address: its bytes for a reader with a token (see api/inbox.py).
_FILE = re.compile(r"^/inbox/([^/]+)/files/([^/]+)$")


class Files(Protocol):
    def get(
        self, authorization: str | None, item_id: str, attachment_id: str
    ) -> Awaitable[tuple[str, bytes]]: ...


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


class _Answered(ConnectError):
    """An error the servicers answered, as opposed to one the framework
    raised while reading the request."""


def _connect_error(err: ApiError) -> ConnectError:
    return _Answered(Code[err.status.name], err.message)


BAD_HEADER = "a request header is not valid UTF-8"
_UNREADABLE = "the request could not be read as a Connect request"
# What the framework says of a request stream's framing, and what a client is told.
_FRAMING = {
    "protocol error: sent compressed message without compression support": (
        "a message of the request stream is flagged compressed, "
        "but the request names no compression (connect-content-encoding)"
    ),
    "protocol error: invalid envelope flags": (
        "an envelope of the request stream has flags Connect doesn't define"
    ),
}


# What decoding a request's bytes raises when they are not what they claim.
_UNREADABLE_ERRORS = (ValueError, TypeError, KeyError, IndexError, struct.error)


def _client_mistake(error: Exception | None) -> ConnectError | None:
    """The client's mistake the framework refused while reading a request,
    as invalid_argument with a fixed sentence: never `unknown` or `internal`,
    never the framework's or Python's own text."""
    if error is None or isinstance(error, _Answered):
        return None
    if isinstance(error, ConnectError):
        framing = error.message.startswith("protocol error")
        if error.code not in (Code.UNKNOWN, Code.INTERNAL) and not framing:
            return None
        message = _FRAMING.get(error.message)
        if message is None and error.message.startswith("protocol error: promised"):
            message = "the request stream ended inside a message"
        return ConnectError(Code.INVALID_ARGUMENT, message or _UNREADABLE)
    if not isinstance(error, _UNREADABLE_ERRORS):
        # Not the request's bytes: a send that timed out or a lost connection
        # ends the call as the router expects.
        return None
    log.info("refused a request the framework could not read", exc_info=error)
    return ConnectError(Code.INVALID_ARGUMENT, _UNREADABLE)


class _ClientMistakes:
    """A metadata interceptor: it ends every Connect call, so what the
    framework refused while reading a request reaches the client as
    `_client_mistake` says."""

    async def on_start(self, ctx: Any) -> None:
        return None

    async def on_end(self, token: None, ctx: Any, error: Exception | None) -> None:
        replaced = _client_mistake(error)
        if replaced is not None:
            raise replaced


def _endpoint(
    binding: ServiceBinding,
    method: Method,
    auth: Authenticator,
    observer: Observer,
    cookies: SessionCookies | None = None,
) -> Any:
    resolve = binding.resolver(auth)
    fn = getattr(binding.impl, method.attr)
    name = f"{binding.short_name}/{method.name}"

    def header(ctx: Any, name: str = "authorization") -> str | None:
        value = ctx.request_headers.get(name)
        return value if value is None else str(value)

    def credential(ctx: Any) -> str | None:
        # The header, else (from the server's own page only) the session cookie.
        if cookies is None:
            return header(ctx)
        return cookies.authorization(lambda n: header(ctx, n))

    def traced(ctx: Any) -> Any:
        return ctx.request_headers if observer.tracer is not None else None

    if not method.server_streaming:

        async def unary(request: Any, ctx: Any) -> Any:
            with observer.call("connect", name, headers=traced(ctx)) as call:
                try:
                    signed = await resolve(credential(ctx))
                    call.signed_in(signed.principal)
                    check_strings(request)
                    with surface.through(surface.of_connect(header(ctx, surface.HEADER))):
                        return await fn(binding.caller(signed), request)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    err = _error(exc)
                    call.status = err.status.token
            raise _connect_error(err) from None

        return unary

    async def stream(request: Any, ctx: Any) -> AsyncIterator[Any]:
        with observer.call("connect", name, headers=traced(ctx), attach=False) as call:
            try:
                signed = await resolve(credential(ctx))
                call.signed_in(signed.principal)
                if not method.client_streaming:
                    check_strings(request)
                with auth.guard(signed) as guard:
                    async for item in guard.watch(fn(binding.caller(signed), request)):
                        yield item
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                err = _error(exc)
                call.status = err.status.token
        raise _connect_error(err) from None

    return stream


class _Adapter:
    """Looks like a generated Connect service protocol; calls the binding."""

    def __init__(
        self,
        binding: ServiceBinding,
        auth: Authenticator,
        observer: Observer,
        cookies: SessionCookies | None = None,
    ) -> None:
        for method in binding.methods:
            setattr(self, method.attr, _endpoint(binding, method, auth, observer, cookies))


def connect_app(
    binding: ServiceBinding,
    auth: Authenticator,
    app_class: Any,
    observer: Observer,
    cookies: SessionCookies | None = None,
) -> ASGIApp:
    app: ASGIApp = app_class(
        service=_Adapter(binding, auth, observer, cookies),
        read_max_bytes=MAX_MESSAGE_BYTES,
        codecs=CODECS,
        compressions=COMPRESSIONS,
        interceptors=(_ClientMistakes(),),
    )
    return app


class RequestBody:
    """The request's body as the app reads it, so that an answer given before
    its end never wedges the connection.

    hypercorn hands the body to the app through a short queue and, once the
    answer's last byte is sent, puts the stream's end on that queue too; with
    the app no longer reading, the queue stays full and the connection's
    reader waits on it forever (its socket left in CLOSE-WAIT). So before an
    answer's last byte goes out, the rest of the body is read and dropped:
    first, when little is left, so the connection serves the next request;
    else beside it, with the answer marked `connection: close`."""

    def __init__(
        self,
        scope: dict[str, Any],
        receive: Any,
        drain_bytes: int,
        drain_seconds: float,
        background: set[asyncio.Task[None]],
    ) -> None:
        self._receive = receive
        self.done = False
        self.received = 0
        self.closing = False
        self.drain_bytes = drain_bytes
        self.drain_seconds = drain_seconds
        self.background = background
        self._draining: asyncio.Task[None] | None = None
        self.http1 = scope.get("http_version") in ("1.0", "1.1")
        self.length: int | None = None
        for name, value in scope.get("headers", ()):
            if name.lower() == b"content-length" and value.strip().isdigit():
                self.length = int(value)

    async def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.done = not message.get("more_body", False)
        elif message["type"] == "http.disconnect":
            self.done = True
        return message

    def _little_left(self) -> bool:
        return self.length is not None and self.length - self.received <= self.drain_bytes

    def sending(self, send: Any) -> Any:
        async def checked(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start" and not self.done and self.http1:
                if not self._little_left():
                    self.closing = True
                    message = {
                        **message,
                        "headers": [*message.get("headers", ()), (b"connection", b"close")],
                    }
            elif kind == "http.response.body" and not message.get("more_body", False):
                if not self.done and self.http1 and not self.closing:
                    await self._drain_within()
                self.finish()
            await send(message)

        return checked

    async def _drain(self) -> None:
        while not self.done:
            await self.receive()

    async def _drain_within(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.drain_seconds):
                await self._drain()

    def finish(self) -> None:
        """The app is done with the body: what hypercorn still puts is taken
        and dropped beside the answer's end, within the drain time."""
        if self.done or self._draining is not None:
            return
        task = asyncio.get_running_loop().create_task(self._drain_within())
        self._draining = task
        self.background.add(task)
        task.add_done_callback(_forget(self.background))


def _forget(tasks: set[asyncio.Task[None]]) -> Any:
    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a drain that ran out of time is no news

    return done


# A page answered by the server itself (/readyz, /metrics): status, body, type.
Page = Callable[[], Awaitable[tuple[int, bytes, str]]]


class Router:
    """Routes Connect paths to their service apps, the server's own pages
    (/healthz, /readyz, /metrics) to theirs, and everything else to the web
    page's files (unless `static` is off: a metrics-only listener)."""

    def __init__(
        self,
        apps: dict[str, ASGIApp],
        slow_stream_seconds: float = 30.0,
        drain_bytes: int = DRAIN_BYTES,
        drain_seconds: float = DRAIN_SECONDS,
        files: Files | None = None,
        pages: dict[str, Page] | None = None,
        static: bool = True,
        compress_min_bytes: int = COMPRESS_MIN_BYTES,
        methods: dict[str, list[str]] | None = None,
        routes: dict[str, ASGIApp] | None = None,
    ) -> None:
        self.apps = {f"/{name}/": app for name, app in apps.items()}
        # Service → its method names, for the error a misspelt path gets.
        self.methods = methods or {}
        # Path prefixes served by an app of their own: sign-in and one-ask links.
        self.routes = routes or {}
        self.compress_min_bytes = compress_min_bytes
        self.files = files
        self.pages = pages or {}
        self.static = static
        self.slow_stream_seconds = slow_stream_seconds
        self.drain_bytes = drain_bytes
        self.drain_seconds = drain_seconds
        self._draining: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = RequestBody(scope, receive, self.drain_bytes, self.drain_seconds, self._draining)
        try:
            await self._route(scope, body.receive, body.sending(send))
        finally:
            body.finish()

    async def _route(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path: str = scope["path"]
        for prefix, app in self.apps.items():
            if path.startswith(prefix):
                send = with_headers(send, CONNECT_HEADERS, replace=True)
                if not _utf8_headers(scope):
                    await _connect_refusal(send, 400, BAD_HEADER)
                    return
                if _grpc_without_trailers(scope):
                    await _grpc_refusal(send, GRPC_NEEDS_HTTP2)
                    return
                send = _explained(self._timed(send), scope, self.methods)
                if _unary(scope):
                    scope, gzip_accepted = _without_gzip(scope)
                    if gzip_accepted:
                        send = _compressed_past(self.compress_min_bytes, send)
                try:
                    await app(scope, receive, send)
                except TimeoutError:
                    # Returning mid-body makes hypercorn close the connection.
                    log.info("closed a stalled stream on %s", path)
                return
        send = with_headers(send, PAGE_HEADERS)
        for prefix, route in self.routes.items():
            if path.startswith(prefix):
                if path.startswith(_COMPRESSED_PAGES):
                    scope, send = self._gzipped(scope, send)
                await route(scope, receive, send)
                return
        file = _FILE.match(path)
        if file is not None and self.files is not None:
            await self._file(scope, send, file.group(1), file.group(2))
            return
        page = self.pages.get(path)
        if page is not None and scope["method"] in ("GET", "HEAD"):
            status, body, kind = await page()
            await _plain(send, status, body if scope["method"] == "GET" else b"", kind)
            return
        wrong = _CONNECT_PATH.match(path)
        if wrong is not None:
            near = difflib.get_close_matches(wrong.group(1), list(self.methods), 1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            await _connect_refusal(send, 404, f"there is no service {wrong.group(1)}{hint}")
            return
        if path == "/healthz" or self.static:
            scope, send = self._gzipped(scope, send)
            await _static(scope, send)
            return
        await _plain(send, 404, b"not found\n")

    def _gzipped(self, scope: dict[str, Any], send: Any) -> tuple[dict[str, Any], Any]:
        """The page's files and a link's page, gzipped where the browser takes
        it: what a phone on a slow network waits for."""
        scope, gzip_accepted = _without_gzip(scope)
        return scope, _compressed_past(self.compress_min_bytes, send) if gzip_accepted else send

    async def _file(self, scope: dict[str, Any], send: Any, item: str, attachment: str) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, b"method not allowed\n")
            return
        assert self.files is not None
        try:
            kind, data = await self.files.get(_header(scope, b"authorization"), item, attachment)
        except Exception as exc:
            error = to_api_error(exc)
            await _plain(
                send, error.status.http, f"{error.status.token}: {error.message}\n".encode()
            )
            return
        await _plain(send, 200, data if scope["method"] == "GET" else b"", kind)

    def _timed(self, send: Any) -> Any:
        """A client that stops reading holds a send (hypercorn waits for the
        socket to drain); past the limit the response fails and the connection
        closes, so a stalled stream can't pin server memory."""

        async def timed(message: dict[str, Any]) -> None:
            async with asyncio.timeout(self.slow_stream_seconds):
                await send(message)

        return timed


# A Connect call's path, /package.Service/Method, as the page's files never are.
_CONNECT_PATH = re.compile(r"^/([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)/([A-Za-z_]\w*)$")
# Bare answers of the Connect app to a request it can't take, and the code
# the client gets for each instead (the HTTP status stays).
_REFUSED = {
    400: Status.INVALID_ARGUMENT,
    404: Status.UNIMPLEMENTED,
    405: Status.UNIMPLEMENTED,
    415: Status.INVALID_ARGUMENT,
}

# The bare answers `_explained` says more of.
_BARE = (404, 405, 415)


GRPC_NEEDS_HTTP2 = (
    "gRPC needs HTTP/2 (its status travels in trailers); this request came over "
    "HTTP/1.1: use h2c, or Connect or gRPC-Web over HTTP/1.1"
)


def _grpc_without_trailers(scope: dict[str, Any]) -> bool:
    """A gRPC call (not gRPC-Web) on a connection that can't carry trailers."""
    kind = (_header(scope, b"content-type") or "").strip().lower()
    return (
        kind.startswith("application/grpc")
        and not kind.startswith("application/grpc-web")
        and "http.response.trailers" not in scope.get("extensions", {})
    )


async def _grpc_refusal(send: Any, message: str) -> None:
    """A gRPC trailers-only answer: the status in the headers."""
    headers = [
        (b"content-type", b"application/grpc"),
        (b"grpc-status", str(grpc.StatusCode.UNIMPLEMENTED.value[0]).encode()),
        (b"grpc-message", urllib.parse.quote(message, safe=" ").encode()),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _utf8_headers(scope: dict[str, Any]) -> bool:
    """Whether every header's name and value is UTF-8, as the Connect
    framework reads them."""
    try:
        for name, value in scope.get("headers", ()):
            bytes(name).decode("utf-8")
            bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _explained(send: Any, scope: dict[str, Any], methods: dict[str, list[str]]) -> Any:
    """Sends the Connect app's answer, but a bare 404, 405 or 415 (no body)
    as a Connect error saying what to send instead."""
    held: dict[str, Any] | None = None

    async def explaining(message: dict[str, Any]) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and message["status"] in _BARE:
            held = message
            return
        if held is None:
            await send(message)
            return
        start, held = held, None
        if message.get("body") or message.get("more_body"):
            await send(start)
            await send(message)
            return
        await _connect_refusal(send, start["status"], _what_to_send(start, scope, methods))

    return explaining


def _what_to_send(
    start: dict[str, Any], scope: dict[str, Any], methods: dict[str, list[str]]
) -> str:
    path: str = scope["path"]
    service, _, method = path.strip("/").partition("/")
    if start["status"] == 404:
        near = difflib.get_close_matches(method, methods.get(service, []), 1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        return f"{service} has no method {method}{hint}"
    if start["status"] == 405:
        return (
            f"{service}/{method} takes POST, not {scope['method']}: send the request message "
            "as the body, with Content-Type: application/json"
        )
    sent = (_header(scope, b"content-type") or "").strip()
    return (
        f"{service}/{method} takes Content-Type: application/json (Connect JSON) or "
        f"application/proto (binary protobuf); this request has {sent or 'none'}"
    )


async def _connect_refusal(send: Any, status: int, message: str) -> None:
    body = json.dumps({"code": _REFUSED[status].token, "message": message}).encode()
    await _plain(send, status, body, "application/json", allow=b"POST" if status == 405 else None)


def _unary(scope: dict[str, Any]) -> bool:
    """A Connect unary call: a GET, or a POST of plain JSON or protobuf (the
    streaming protocols' content types carry a `+`)."""
    if scope["method"] == "GET":
        return True
    kind = (_header(scope, b"content-type") or "").strip().lower()
    return kind.startswith(("application/json", "application/proto"))


def _without_gzip(scope: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The scope as the app sees it, with gzip no longer accepted, and whether
    the client accepted it: the answer is compressed here, past a size."""
    accepted = False
    headers = []
    for name, value in scope.get("headers", ()):
        if name.lower() == b"accept-encoding":
            kept = []
            for token in bytes(value).split(b","):
                coding, _, params = token.strip().partition(b";")
                if coding.strip().lower() == b"gzip":
                    accepted = accepted or params.replace(b" ", b"") not in (b"q=0", b"q=0.0")
                else:
                    kept.append(token.strip())
            value = b", ".join(kept)
        headers.append((name, value))
    return {**scope, "headers": headers}, accepted


_GZIP = Gzip()
# Server-made pages answered gzipped, past the same size as Connect's answers.
_COMPRESSED_PAGES = ("/a/",)


def _compressed_past(min_bytes: int, send: Any) -> Any:
    """Sends a unary answer gzipped when it succeeded and is at least
    `min_bytes` long; anything else as the app wrote it."""
    start: dict[str, Any] | None = None
    parts: list[bytes] = []

    async def compressing(message: dict[str, Any]) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        parts.append(bytes(message.get("body", b"")))
        if message.get("more_body", False):
            return
        body = b"".join(parts)
        parts.clear()
        headers = list(start.get("headers", ()))
        encoding = next((v for k, v in headers if k.lower() == b"content-encoding"), b"identity")
        if start["status"] == 200 and len(body) >= min_bytes and encoding == b"identity":
            body = _GZIP.compress(body)
            headers = [
                (k, v)
                for k, v in headers
                if k.lower() not in (b"content-encoding", b"content-length")
            ]
            headers.append((b"content-encoding", b"gzip"))
            headers.append((b"content-length", str(len(body)).encode()))
        head, start = {**start, "headers": headers}, None
        await send(head)
        await send({**message, "body": body})

    return compressing


async def _plain(
    send: Any,
    status: int,
    body: bytes,
    content_type: str = "text/plain",
    allow: bytes | None = None,
) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
    ]
    if allow is not None:
        headers.append((b"allow", allow))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _static(scope: dict[str, Any], send: Any) -> None:
    if scope["method"] not in ("GET", "HEAD"):
        await _plain(send, 405, b"method not allowed\n")
        return
    path = scope["path"]
    if path == "/healthz":
        await _plain(send, 200, b"ok\n")
        return
    name = "index.html" if path in ("", "/") else path.lstrip("/")
    # Only the files the page ships: a request's path never reaches the file system.
    target = _STATIC_FILES.get(name)
    if target is None:
        await _plain(send, 404, b"not found\n")
        return
    body = target.read_bytes()
    kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind == "application/javascript":
        kind += "; charset=utf-8"
    await _plain(send, 200, body if scope["method"] == "GET" else b"", kind)


class _TCPServer(hypercorn.asyncio.tcp_server.TCPServer):
    """hypercorn's connection, closed as soon as its client has closed it:
    hypercorn waits out the keep-alive timer of an idle connection whose
    client is gone, holding its socket (in CLOSE-WAIT) all that time."""

    async def _read_data(self) -> None:
        await super()._read_data()
        await self.idle_task.stop()


hypercorn.asyncio.run.TCPServer = _TCPServer  # type: ignore[attr-defined]


class _Config(Config):
    """hypercorn's configuration with our SSL context, which a TLS reload
    updates in place (hypercorn would build its own from the files)."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        super().__init__()
        self.context = context

    @property
    def ssl_enabled(self) -> bool:
        return self.context is not None

    def create_ssl_context(self) -> ssl.SSLContext | None:
        return self.context


class HttpServer:
    def __init__(
        self,
        app: ASGIApp,
        context: ssl.SSLContext | None = None,
        *,
        reuse_port: bool = False,
        idle_seconds: float = IDLE_SECONDS,
    ) -> None:
        self.app = app
        self.context = context
        self.reuse_port = reuse_port
        self.idle_seconds = idle_seconds
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self, listen: str) -> int:
        host, _, port = listen.rpartition(":")
        sock = socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self.reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host.strip("[]"), int(port)))
        sock.listen(1024)
        sock.set_inheritable(True)
        self._sock = sock
        self.port = sock.getsockname()[1]
        config = _Config(self.context)
        config.bind = [f"fd://{sock.fileno()}"]
        # Its default of 1000 sends GOAWAY and fails in-flight HTTP/2 calls.
        config.keep_alive_max_requests = 2**31 - 1
        config.keep_alive_timeout = self.idle_seconds
        config.graceful_timeout = 5.0
        config.accesslog = None
        config.errorlog = "-"
        config.loglevel = "WARNING"
        self._task = asyncio.get_running_loop().create_task(
            serve(self.app, config, shutdown_trigger=self._stop.wait, mode="asgi")  # type: ignore[arg-type]
        )
        await asyncio.sleep(0)
        return self.port

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        # hypercorn closes the listening socket it was handed; make sure.
        with contextlib.suppress(OSError):
            self._sock.close()


def apps_for(
    bindings: Sequence[tuple[ServiceBinding, Any]],
    auth: Authenticator,
    slow_stream_seconds: float = 30.0,
    drain_bytes: int = DRAIN_BYTES,
    drain_seconds: float = DRAIN_SECONDS,
    files: Files | None = None,
    observer: Observer | None = None,
    pages: dict[str, Page] | None = None,
    compress_min_bytes: int = COMPRESS_MIN_BYTES,
    cookies: SessionCookies | None = None,
    routes: dict[str, ASGIApp] | None = None,
) -> Router:
    observer = observer or Observer(access=False)
    return Router(
        {b.full_name: connect_app(b, auth, cls, observer, cookies) for b, cls in bindings},
        slow_stream_seconds,
        drain_bytes,
        drain_seconds,
        files,
        pages,
        compress_min_bytes=compress_min_bytes,
        methods={b.full_name: [m.name for m in b.methods] for b, _ in bindings},
        routes=routes,
    )
