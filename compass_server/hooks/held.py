"""A harness's hook request, held until its ask ends.

The request posts one ask as the hook token's agent (the same store path
every post takes: a retry of a request still open finds the same ask, a
standing answer answers it at its post), then waits for the ask's ending on
the event hub, the harness's timeout, or the harness hanging up. At the
timeout (less a margin, so the answer arrives while the harness still
listens) the ask is withdrawn, unless another held request waits on it; a
person's answer racing that withdrawal wins or loses under the ask's row
lock, and the harness hears whichever ending stands. A harness that hangs
up withdraws its ask the same way. Held requests are bounded per token and
in all; past either the request is refused at once (429).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime
import json
import logging
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from compass_agentkit import harness as kit
from compass_server.api.errors import ApiError, Status, to_api_error
from compass_server.events.hub import Closed, EventHub, Lane
from compass_server.hooks import harness as h
from compass_server.hooks.policy import Rule
from compass_server.receipts import Receipts
from compass_server.store import Store
from compass_server.store.errors import StoreError
from compass_server.store.hooks import HookStore
from compass_server.store.types import (
    Actor,
    AlwaysOption,
    Ask,
    Event,
    EventKind,
    Message,
    SignIn,
    TextBlock,
)

log = logging.getLogger(__name__)

# Requests held at once by one server process, and by one hook token.
HELD_REQUESTS = 1_000
HELD_PER_TOKEN = 32
# How long before the harness's timeout a held request answers.
MARGIN_SECONDS = 5.0
# The longest a request may be held, whatever timeout it names.
LONGEST_HOLD_SECONDS = 86_400.0
# The harnesses' default hook timeout (Claude Code and Codex: 600 s).
DEFAULT_TIMEOUT_SECONDS = 600.0
# How long "Always allow this rule" stands.
ALWAYS_SECONDS = 7 * 86_400.0


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes
    ask_id: str = ""
    receipt: str = ""
    # Why the fallback was taken (or the request refused), in one line.
    reason: str = ""
    content_type: str = "application/json"


def refused(error: ApiError) -> Reply:
    body = json.dumps({"code": error.status.token, "message": error.message}).encode()
    return Reply(error.status.http, body, reason=error.message)


@dataclass
class _Channel:
    """A held request hears only its channel's events."""

    channel_id: uuid.UUID
    version: int = 0
    _keys: frozenset[uuid.UUID] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        self._keys = frozenset({self.channel_id})

    def keys(self) -> frozenset[uuid.UUID]:
        return self._keys


def _span(seconds: float) -> str:
    if seconds % 86_400 == 0:
        days = int(seconds // 86_400)
        return f"{days} day" + "s" * (days != 1)
    if seconds % 3_600 == 0:
        hours = int(seconds // 3_600)
        return f"{hours} hour" + "s" * (hours != 1)
    return f"{seconds:g} s"


class HookAsks:
    def __init__(
        self,
        store: Store,
        hooks: HookStore,
        hub: EventHub,
        receipts: Receipts,
        *,
        held_requests: int = HELD_REQUESTS,
        held_per_token: int = HELD_PER_TOKEN,
        margin_seconds: float = MARGIN_SECONDS,
        longest_hold_seconds: float = LONGEST_HOLD_SECONDS,
        always_seconds: float = ALWAYS_SECONDS,
    ) -> None:
        self.store = store
        self.hooks = hooks
        self.hub = hub
        self.receipts = receipts
        self.held_requests = held_requests
        self.held_per_token = held_per_token
        self.margin_seconds = margin_seconds
        self.longest_hold_seconds = longest_hold_seconds
        self.always_seconds = always_seconds
        self._held: collections.Counter[uuid.UUID] = collections.Counter()
        self.stopping = asyncio.Event()

    @property
    def held(self) -> int:
        return sum(self._held.values())

    async def handle(
        self,
        sign_in: SignIn,
        harness: str,
        body: object,
        hook_seconds: float,
        fallback: str,
        gone: asyncio.Event,
    ) -> Reply | None:
        """The reply to one hook request; None when the harness hung up first."""
        try:
            request = h.parse(harness, body)
        except h.BadRequest as exc:
            return refused(ApiError(Status.INVALID_ARGUMENT, str(exc)))
        actor = sign_in.principal
        if not isinstance(actor, Actor):
            return refused(ApiError(Status.PERMISSION_DENIED, "a runner token posts no hook asks"))
        try:
            hook = await self.hooks.hook_of(actor, sign_in.token_id)
            if request.event == h.NOTIFY:
                await self.store.append_message(
                    actor,
                    hook.channel_id,
                    [TextBlock(h.note_text(request))],
                )
                return Reply(200, b"")
            rule = hook.policy.rule_for(request.tool_name, request.subject)
            if not rule.ask:
                return Reply(200, kit.no_decision(request.harness))
            token = sign_in.token_id
            if self._held[token] >= self.held_per_token:
                return refused(
                    ApiError(
                        Status.RESOURCE_EXHAUSTED,
                        f"this hook token has {self.held_per_token} requests waiting on answers, "
                        "the most it may; answer or end one first",
                    )
                )
            if self.held >= self.held_requests:
                return refused(
                    ApiError(
                        Status.RESOURCE_EXHAUSTED,
                        f"this server holds {self.held_requests} hook requests waiting on "
                        "answers, the most it may; try again shortly",
                    )
                )
            self._held[token] += 1
            try:
                return await self._ask(
                    actor, hook.channel_id, request, rule, hook_seconds, fallback, gone
                )
            finally:
                self._held[token] -= 1
                if not self._held[token]:
                    del self._held[token]
        except h.BadRequest as exc:
            return refused(ApiError(Status.INVALID_ARGUMENT, str(exc)))
        except (StoreError, ApiError) as exc:
            error = to_api_error(exc)
            if error.status in (Status.UNAUTHENTICATED, Status.PERMISSION_DENIED):
                return refused(error)
            if error.status is Status.INTERNAL:
                raise
            why = f"Compass can't take this request: {error.message}"
            return Reply(
                200, kit.fallback(request.harness, request.event, fallback, why), reason=why
            )

    async def _ask(
        self,
        actor: Actor,
        channel_id: uuid.UUID,
        request: h.Request,
        rule: Rule,
        hook_seconds: float,
        fallback: str,
        gone: asyncio.Event,
    ) -> Reply | None:
        bounds = self.store.deadline_bounds
        wanted = datetime.timedelta(seconds=hook_seconds)
        deadline = min(max(wanted, bounds.shortest), bounds.longest)
        always_for = min(self.always_seconds, self.store.standing_longest.total_seconds())
        agent = await self._handle_of(actor)
        blocks = h.ask_blocks(request, rule, agent, _span(always_for))
        ask = blocks[-1]
        assert isinstance(ask, Ask)
        blocks[-1] = dataclasses.replace(ask, timeout=deadline)
        always = (
            AlwaysOption(h.DECISION, h.ALWAYS, always_for)
            if rule.always_allow and not request.questions
            else None
        )
        cursor = await self.hub.current(actor)
        posted = await self.store.post(actor, channel_id, blocks, always=always)
        message = posted.message
        asked = next(b for b in message.blocks if isinstance(b, Ask))
        ask_id = asked.ask_id
        if not asked.is_open:
            return self._decided(actor, message, asked, request, fallback)
        await self.hooks.hold(actor, ask_id)
        held_for = max(1.0, min(hook_seconds, self.longest_hold_seconds) - self.margin_seconds)
        waiting = asyncio.ensure_future(self._ending(actor, message, ask_id, cursor))
        stop = asyncio.ensure_future(self.stopping.wait())
        hung_up = asyncio.ensure_future(gone.wait())
        try:
            done, _ = await asyncio.wait(
                {waiting, stop, hung_up}, timeout=held_for, return_when=asyncio.FIRST_COMPLETED
            )
            if waiting in done and waiting.exception() is None:
                await self._let_go(actor, ask_id, withdraw=False)
                return self._decided(actor, message, waiting.result(), request, fallback)
        finally:
            for task in (waiting, stop, hung_up):
                task.cancel()
            for task in (waiting, stop, hung_up):
                with contextlib.suppress(asyncio.CancelledError, Closed, Exception):
                    await task
        # The harness gave up, or is about to, or this server is stopping:
        # withdraw the ask unless another held request still waits on it.
        ended = await self._let_go(actor, ask_id, withdraw=True)
        if gone.is_set():
            return None
        if ended is None or ended.ending is None:
            why = "another held request still waits on this ask"
            return Reply(
                200, kit.fallback(request.harness, request.event, fallback, why), ask_id, reason=why
            )
        if ended.ending.kind.value == "withdrawn_by_agent":
            why = (
                "Compass is stopping; nobody answered in time"
                if self.stopping.is_set() or (waiting.done() and not waiting.cancelled())
                else f"nobody answered within the hook's {hook_seconds:g} s"
            )
            return Reply(
                200,
                kit.fallback(request.harness, request.event, fallback, why),
                ask_id,
                self.receipts.sign(actor.workspace_id, actor.account_id, ended),
                why,
            )
        return self._decided(actor, message, ended, request, fallback)

    async def _handle_of(self, actor: Actor) -> str:
        found = await self.store.get_accounts(actor, [actor.account_id])
        return found[0].handle if found else str(actor.account_id)

    def _decided(
        self, actor: Actor, message: Message, ask: Ask, request: h.Request, fallback: str
    ) -> Reply:
        body, why = h.decided(request, ask, fallback)
        receipt = self.receipts.sign(actor.workspace_id, message.author_id, ask)
        return Reply(200, body, ask.ask_id, receipt, why)

    async def _ending(self, actor: Actor, message: Message, ask_id: str, cursor: int) -> Ask:
        """The ask once it has ended, heard on the hub from `cursor` (before the post)."""
        message_id = message.message_id

        def visible(event: Event) -> bool:
            return (
                event.kind is EventKind.MESSAGE_UPDATED
                and event.message is not None
                and event.message.message_id == message_id
            )

        lane = Lane(_Channel(message.channel_id))
        events = self.hub.stream(actor, cursor, visible, actor.account_id, lane=lane)
        async with contextlib.aclosing(events):
            async for event in events:
                assert event.message is not None
                ask = event.message.ask(ask_id)
                if ask is not None and not ask.is_open:
                    return ask
        raise Closed

    async def _let_go(self, actor: Actor, ask_id: str, *, withdraw: bool) -> Ask | None:
        """Stops holding the ask; the last holder to go withdraws it when
        `withdraw`. Returns the ask as it then stands (None when others
        still hold it)."""
        try:
            left = await _shielded(self.hooks.release(actor, ask_id))
            if not withdraw:
                return None
            if left > 0:
                return None
            try:
                await _shielded(self.store.cancel_ask(actor, ask_id))
            except StoreError as exc:
                if to_api_error(exc).status is not Status.ALREADY_EXISTS:
                    raise
            _, ask = await _shielded(self.store.get_ask(actor, ask_id))
            return ask
        except StoreError as exc:
            log.warning("a held hook request couldn't let go of ask %s: %s", ask_id, exc)
            return None


T = TypeVar("T")


async def _shielded(work: Awaitable[T]) -> T:
    """Runs to its end even when the request's task is cancelled (the
    harness hung up): a withdrawal is never left half done."""
    return await asyncio.shield(asyncio.ensure_future(work))
