"""The harnesses' hook endpoints: POST /hooks/claude-code and /hooks/codex.

Claude Code's `http` hooks post here directly; `compass-hook` (the agent
kit) posts here for harnesses that only run commands. The request is the
harness's hook JSON, signed in with a hook token
(`authorization: Bearer cph_…`); the query names the hook's own timeout in
seconds (`timeout`, default 600, the harnesses' default) and what to do when
nobody decides (`fallback=ask`, the harness's own prompt, or `deny`). The
response is the harness's decision in its own JSON, held until the ask
ends or the timeout draws near (see compass_server/hooks/held.py), with
`compass-ask`, `compass-receipt` and, for a fallback, `compass-reason`
headers. Bad input is a 4xx with `{"code", "message"}`, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import urllib.parse
import uuid
from typing import Any

from compass_agentkit import harness as kit
from compass_server.api.auth import Authenticator
from compass_server.api.errors import ApiError, Status
from compass_server.api.text import check_text
from compass_server.hooks import harness as h
from compass_server.hooks.held import DEFAULT_TIMEOUT_SECONDS, HookAsks, Reply, refused
from compass_server.store.errors import InvalidArgument
from compass_server.store.types import SignIn
from compass_server.transport.cookies import header_getter
from compass_server.transport.people_http import BodyRefused, Send, read_body

log = logging.getLogger(__name__)

PREFIX = "/hooks/"
# The largest hook request read; more is refused with 413.
REQUEST_BYTES = 1 << 20
# JSON nested deeper than this is refused (a hook's input is a few levels).
MAX_DEPTH = 64


def _walk(value: object) -> None:
    """Every string of the body takes free text's rule (api/text.py), and
    nesting stays within MAX_DEPTH; InvalidArgument names the place."""
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidArgument(f"the body is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            check_text(item, where or "the body")
        elif isinstance(item, dict):
            for key, inner in item.items():
                check_text(key, f"a key in {where or 'the body'}")
                stack.append((inner, f"{where}.{key[:40]}" if where else key[:40], depth + 1))
        elif isinstance(item, list):
            stack += [(inner, f"{where}[{i}]", depth + 1) for i, inner in enumerate(item)]


def _query(scope: dict[str, Any], longest: float) -> tuple[float, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    try:
        query = urllib.parse.parse_qs(raw, strict_parsing=bool(raw), max_num_fields=10)
    except ValueError:
        raise InvalidArgument("the query is not name=value pairs") from None
    unknown = sorted(set(query) - {"timeout", "fallback"})
    if unknown:
        raise InvalidArgument(
            f"no query parameter {unknown[0][:40]!r} (it takes timeout, fallback)"
        )
    timeout = DEFAULT_TIMEOUT_SECONDS
    if "timeout" in query:
        try:
            timeout = float(query["timeout"][-1])
        except ValueError:
            timeout = math.nan
        if not (1 <= timeout <= longest):
            raise InvalidArgument(
                f"timeout is the hook's timeout in seconds, 1 to {longest:g} "
                "(the same number as the hook's own timeout setting)"
            )
    fallback = query.get("fallback", [kit.FALLBACK_ASK])[-1]
    if fallback not in kit.FALLBACKS:
        raise InvalidArgument("fallback is ask (the harness's own prompt) or deny")
    return timeout, fallback


def _header(text: str) -> bytes:
    """A one-line header value: non-ASCII and controls percent-encoded."""
    return urllib.parse.quote(
        " ".join(text.split())[:1000], safe=" !\"#$&'()*+,-./:;<=>?@[]^_`{|}~"
    ).encode()


class HookRoutes:
    """The ASGI app the router hands /hooks/… to."""

    def __init__(
        self, auth: Authenticator, asks: HookAsks, *, request_bytes: int = REQUEST_BYTES
    ) -> None:
        self.auth = auth
        self.asks = asks
        self.request_bytes = request_bytes

    async def stop(self) -> None:
        """Held requests answer their fallback now, withdrawing their asks."""
        self.asks.stopping.set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        try:
            reply = await self._serve(scope, receive)
        except Exception:
            incident = uuid.uuid4().hex[:12]
            log.exception("a hook request failed (incident %s)", incident)
            reply = refused(ApiError(Status.INTERNAL, f"internal error (incident {incident})"))
        if reply is not None:
            await _respond(send, reply)

    async def _serve(self, scope: dict[str, Any], receive: Any) -> Reply | None:
        harness = scope["path"][len(PREFIX) :]
        if harness not in kit.HARNESSES:
            return refused(
                ApiError(
                    Status.NOT_FOUND,
                    "no such hook endpoint; there are /hooks/claude-code and /hooks/codex",
                )
            )
        if scope["method"] != "POST":
            return Reply(
                405,
                json.dumps({"code": "method_not_allowed", "message": "hooks are POSTed"}).encode(),
                reason="hooks are POSTed",
            )
        try:
            timeout, fallback = _query(scope, self.asks.longest_hold_seconds)
        except InvalidArgument as exc:
            return refused(ApiError(Status.INVALID_ARGUMENT, exc.message))
        get = header_getter(scope.get("headers", ()))
        sign_in: SignIn | None = None
        outage: ApiError | None = None
        try:
            sign_in = await self.auth.sign_in(get("authorization"), hook=True)
        except ApiError as exc:
            if exc.status is not Status.UNAVAILABLE:
                return refused(exc)
            # Compass can't check the token now: the harness's fallback, as
            # for any outage (it decides nothing a person would have).
            outage = exc
        try:
            raw = await read_body(receive, self.request_bytes)
        except BodyRefused as exc:
            status = Status.RESOURCE_EXHAUSTED if exc.status == 413 else Status.INVALID_ARGUMENT
            reply = refused(ApiError(status, exc.why))
            return Reply(exc.status, reply.body, reason=exc.why)
        try:
            body = json.loads(raw.decode("utf-8"))
            _walk(body)
        except UnicodeDecodeError:
            return refused(ApiError(Status.INVALID_ARGUMENT, "the body is not UTF-8"))
        except RecursionError:
            return refused(
                ApiError(
                    Status.INVALID_ARGUMENT, f"the body is nested deeper than {MAX_DEPTH} levels"
                )
            )
        except json.JSONDecodeError as exc:
            return refused(ApiError(Status.INVALID_ARGUMENT, f"the body is not JSON: {exc.msg}"))
        except InvalidArgument as exc:
            return refused(ApiError(Status.INVALID_ARGUMENT, exc.message))
        if sign_in is None:
            assert outage is not None
            try:
                request = h.parse(harness, body)
            except h.BadRequest as exc:
                return refused(ApiError(Status.INVALID_ARGUMENT, str(exc)))
            why = f"Compass can't take this request: {outage.message}"
            return Reply(200, kit.fallback(harness, request.event, fallback, why), reason=why)
        gone = asyncio.Event()
        watching = asyncio.get_running_loop().create_task(_watch(receive, gone))
        try:
            return await self.asks.handle(sign_in, harness, body, timeout, fallback, gone)
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching


async def _watch(receive: Any, gone: asyncio.Event) -> None:
    """Sets `gone` when the client hangs up."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def _respond(send: Send, reply: Reply) -> None:
    headers = [
        (b"content-type", reply.content_type.encode()),
        (b"content-length", str(len(reply.body)).encode()),
        (b"cache-control", b"no-store"),
        (b"x-content-type-options", b"nosniff"),
    ]
    if reply.ask_id:
        headers.append((b"compass-ask", reply.ask_id.encode()))
    if reply.receipt:
        headers.append((b"compass-receipt", reply.receipt.encode()))
    if reply.reason:
        headers.append((b"compass-reason", _header(reply.reason)))
    with contextlib.suppress(Exception):
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
