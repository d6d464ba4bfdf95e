"""AgentGatewayService.Relay: one bidirectional stream per runner process,
carrying many agent sessions.

A stream reads frames in order (binds, unbinds and acks take effect before
the next frame is read), runs calls concurrently, and writes every outgoing
frame through one outbox, bounded in bytes, that the stream's generator
drains. Each bound session pulls its deliveries from the event log after the
agent's acked cursor, with at most `window` unacked in flight, and reads the
log no further ahead than that; a session whose window stays full past the
ack timeout is ended.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import sys
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from compass.v1 import agent_gateway_pb2 as gw
from compass_server.api import mapping as wire
from compass_server.api.errors import ApiError, Status, to_api_error
from compass_server.api.text import check_strings
from compass_server.events.hub import Budget, Closed, EventHub, Lane
from compass_server.events.reach import Reach
from compass_server.receipts import Receipts
from compass_server.relay.dispatch import Dispatcher, answer_bytes, error_result
from compass_server.store import InvalidArgument, NotFound, Store
from compass_server.store.errors import StoreError, quoted
from compass_server.store.ids import parse_id
from compass_server.store.inbox import InboxStore
from compass_server.store.types import (
    AccountKind,
    Actor,
    Ask,
    AskAnswerBlock,
    EndingKind,
    Event,
    EventKind,
    RunnerPrincipal,
    SessionBinding,
)
from compass_server.telemetry import traces

log = logging.getLogger(__name__)

# Unacked deliveries in flight per session: a runner that stops acking holds
# a cursor, not a growing buffer.
WINDOW = 256
# Calls running at once per stream; the next call frame waits for a slot.
MAX_CALLS = 64
# Frames written and not yet taken by the runner, per stream.
OUTBOX_BYTES = 4 << 20
# Answers of one stream's calls, running or waiting for the runner to read,
# counted at each arm's largest before the call runs: a runner that stops
# reading stops having its calls taken.
CALL_BYTES = 16 << 20
# Sessions one stream may bind, and streams one runner may open (per process).
SESSIONS_PER_STREAM = 100
STREAMS_PER_RUNNER = 8
# Binds in the database at once, by all streams of a process (at most the
# pool less 4): thousands of sessions binding together (a restart) leave the
# other calls connections of their own.
BINDS_AT_ONCE = 16
# A session whose window stays full this long with no ack is ended.
ACK_TIMEOUT_SECONDS = 120.0
# A delivery frame's bytes besides its event's payload.
FRAME_BYTES = 256
# What a frame waiting in an outbox holds besides its encoding: its queued
# entry, ~104 bytes as tracemalloc measures it.
ENTRY_BYTES = 120


Sent = Callable[[], None]


class Stalled(Exception):
    """The session's window stayed full past the ack timeout."""


class Session:
    """A runner-chosen session id bound to one agent on one stream."""

    def __init__(self, name: str, binding: SessionBinding, actor: Actor, window: int) -> None:
        self.name = name
        self.binding = binding
        self.actor = actor
        self.window = window
        self.in_flight: collections.deque[int] = collections.deque()
        self.last_sent = binding.acked_event_id
        # The furthest event the lane went past without it being the agent's.
        self.passed = binding.acked_event_id
        self._freed = asyncio.Event()
        self.deliveries: asyncio.Task[None] | None = None
        self.lane: Lane | None = None

    def free(self) -> int:
        return self.window - len(self.in_flight)

    async def room(self, ack_timeout: float) -> None:
        while len(self.in_flight) >= self.window:
            self._freed.clear()
            try:
                async with asyncio.timeout(ack_timeout):
                    await self._freed.wait()
            except TimeoutError:
                raise Stalled from None

    def sent(self, event_id: int) -> None:
        self.in_flight.append(event_id)
        self.last_sent = event_id

    def acked(self, event_id: int) -> None:
        while self.in_flight and self.in_flight[0] <= event_id:
            self.in_flight.popleft()
        self._freed.set()

    def went_past(self, event_id: int) -> None:
        self.passed = event_id

    def resumable(self) -> int:
        """Where the next binding of the agent may resume: past what the lane
        skipped, never past a delivery still waiting for its ack."""
        passed = self.passed
        if self.lane is not None:
            passed = max(passed, self.lane.passed())
        if self.in_flight:
            return min(passed, self.in_flight[0] - 1)
        return passed


def hears(agent_id: uuid.UUID, reach: Reach) -> Callable[[Event], bool]:
    """What the agent's delivery lane carries: one signal per change someone
    else made. Messages by others in the channels it takes part in (as a
    member, or through an agent above it) since it took part (an answer to
    its ask arrives as the answer message), the other endings of its own
    asks (the ask's MessageUpdated: declined, withdrawn by its owner,
    expired), and changes others make to its inbox items (answers, replies,
    declines, closes, take-backs). What the agent did itself it learned from
    the call's result. `reach` grows as the log shows the agent's chain
    joining channels; a move of the agent or of an agent above it is let
    through for the lane to read its reach again, and never delivered."""

    def visible(event: Event) -> bool:
        if event.inbox is not None:
            return event.inbox.agent_id == agent_id and event.inbox.actor_id != agent_id
        if event.kind is EventKind.AGENT_MOVED:
            return reach.moved(event)
        if event.kind is EventKind.CHANNEL_CHANGED:
            reach.follow(event)
            return False
        message = event.message
        if message is None:
            return False
        if event.kind is EventKind.MESSAGE_UPDATED:
            # An ask's update is heard when someone else ended it some way
            # other than answering: the answer comes as the answer message,
            # and the agent's own withdrawal came back with its call.
            return message.author_id == agent_id and any(
                isinstance(b, Ask)
                and b.ending is not None
                and b.ending.kind is not EndingKind.ANSWERED
                and b.ending.actor_id != agent_id
                for b in message.blocks
            )
        return message.author_id != agent_id and reach.hears(event)

    return visible


def _stop(task: asyncio.Task[Any] | None) -> None:
    """Cancels the task, once: cancelled again while at the database, psycopg
    gives up cancelling its query and closes the pooled connection."""
    if task is not None and not task.done() and not task.cancelling():
        task.cancel()


class Outbox:
    """Frames on their way to the runner, bounded by bytes: a writer waits for
    room before it builds its frame, so a waiting writer holds no frame. One
    frame always fits, and the end of the stream goes ahead of everything.
    A frame's `sent` runs once the runner's transport has taken it (or it
    was dropped). Frames wait encoded, counted at what they weigh: decoded,
    a frame of many small fields weighs ~12× its encoding."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._frames: collections.deque[tuple[bytes | None, int, Sent | None]] = collections.deque()
        self._changed = asyncio.Event()
        self.ended = False

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def put(
        self, size: int, build: Callable[[], gw.HubFrame | bytes], sent: Sent | None = None
    ) -> None:
        """Waits for `size` bytes of room (at least what the frame will
        weigh), then keeps the frame `build` makes, or the frame it encoded.
        Once the stream has ended the frame goes nowhere: nobody reads."""
        while self.bytes and self.bytes + size > self.max_bytes and not self.ended:
            await self._changed.wait()
        if self.ended:
            if sent is not None:
                sent()
            return
        frame = build()
        encoded = frame if isinstance(frame, bytes) else frame.SerializeToString()
        del frame
        held = sys.getsizeof(encoded) + ENTRY_BYTES
        self._frames.append((encoded, held, sent))
        self.bytes += held
        self._wake()

    async def get(self) -> tuple[gw.HubFrame | None, Sent | None]:
        while not self._frames:
            await self._changed.wait()
        encoded, held, sent = self._frames.popleft()
        self.bytes -= held
        self._wake()
        return (gw.HubFrame.FromString(encoded) if encoded is not None else None), sent

    def finish(self) -> None:
        """Ends the stream after what waits: the runner reads every frame
        already kept, and nothing is kept from now on."""
        if self.ended:
            return
        self.ended = True
        self._frames.append((None, 0, None))
        self._wake()

    def end(self) -> None:
        """Drops what waits (a finished stream's too) and ends the stream next."""
        self.ended = True
        dropped, self._frames = self._frames, collections.deque([(None, 0, None)])
        self.bytes = 0
        self._wake()
        for _, _, sent in dropped:
            if sent is not None:
                sent()


class RelayStream:
    def __init__(self, gateway: AgentGateway, runner: RunnerPrincipal) -> None:
        self.gateway = gateway
        self.runner = runner
        self.sessions: dict[str, Session] = {}
        self.outbox = Outbox(gateway.outbox_bytes)
        self.calls: set[asyncio.Task[None]] = set()
        self.slots = asyncio.Semaphore(MAX_CALLS)
        self.answers = Budget(gateway.call_bytes, gateway.call_bytes)
        self.failure: BaseException | None = None
        self.ended = False
        self._reader: asyncio.Task[None] | None = None

    # --- the stream's lifetime ------------------------------------------------

    async def run(self, frames: AsyncIterator[gw.RunnerFrame]) -> AsyncGenerator[gw.HubFrame]:
        self._reader = asyncio.get_running_loop().create_task(self._read(frames))
        try:
            while True:
                frame, sent = await self.outbox.get()
                if frame is None:
                    if self.failure is not None:
                        raise self.failure
                    return
                yield frame
                del frame
                if sent is not None:
                    sent()
        finally:
            self.ended = True
            self._stop_producers()
            self.outbox.end()

    def end(self, failure: BaseException | None) -> None:
        """Ends the stream from the server's side; pending frames are dropped."""
        if self.ended:
            return
        self.ended = True
        self.failure = failure
        self._stop_producers()
        self.outbox.end()

    def _stop_producers(self) -> None:
        _stop(self._reader)
        # A call the runner sent runs to its end, its result going nowhere:
        # cut off at the database, its pooled connection would be lost.
        for task in list(self.calls):
            self.gateway.keep(task)
        for session in self.sessions.values():
            _stop(session.deliveries)

    async def _read(self, frames: AsyncIterator[gw.RunnerFrame]) -> None:
        try:
            async for frame in frames:
                await self._handle(frame)
            # The runner half-closed: finish the calls it made, then end.
            while self.calls:
                await asyncio.gather(*self.calls, return_exceptions=True)
            self.outbox.finish()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # The transport failed underneath us; the runner will reconnect.
            log.info("relay stream of runner %s ended: %s", self.runner.runner_id, exc)
            self.end(None)

    async def send(self, frame: gw.HubFrame) -> None:
        await self.outbox.put(frame.ByteSize(), lambda: frame)

    async def unbind_all(self) -> None:
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            _stop(session.deliveries)
            # Logged where it failed; the next sessions still unbind.
            with contextlib.suppress(Exception):
                await self.gateway.unbind(session)

    # --- frames ---------------------------------------------------------------

    async def _handle(self, frame: gw.RunnerFrame) -> None:
        kind = frame.WhichOneof("frame")
        if kind == "call":
            await self._call(frame.call)
            return
        # The error names the session as the runner sent it.
        session_id = getattr(frame, kind).session_id if kind is not None else ""
        try:
            if kind is not None:
                check_strings(getattr(frame, kind), kind)
            if kind == "bind":
                await self._bind(frame.bind)
            elif kind == "unbind":
                await self._unbind(session_id)
            elif kind == "ack":
                await self._ack(frame.ack)
            else:
                raise InvalidArgument("a runner frame sets one of: bind, unbind, call, ack")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            err = to_api_error(exc)
            await self.send(
                gw.HubFrame(
                    session_error=gw.SessionError(
                        session_id=session_id,
                        error=gw.CommsCallError(code=err.status.token, message=err.message),
                    )
                )
            )

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise NotFound(f"no session {quoted(session_id)} is bound on this stream")
        return session

    async def _bind(self, bind: gw.BindSession) -> None:
        if not bind.session_id:
            raise InvalidArgument("session_id is required")
        if bind.session_id in self.sessions:
            raise ApiError(
                Status.ALREADY_EXISTS,
                f"session {quoted(bind.session_id)} is already bound on this stream",
            )
        if len(self.sessions) >= self.gateway.sessions_per_stream:
            raise ApiError(
                Status.RESOURCE_EXHAUSTED,
                f"this stream has {len(self.sessions)} sessions bound, the most it takes; "
                "unbind one or open another stream",
            )
        agent_id = parse_id(bind.agent_account_id, "agent_account_id")
        unassignments = self.gateway.unassignments
        binding = await self.gateway.bind(self.runner, agent_id)
        actor = Actor(
            self.runner.workspace_id,
            agent_id,
            AccountKind.AGENT,
            self.runner.credential,
            self.runner.runner_id,
        )
        session = Session(bind.session_id, binding, actor, self.gateway.window)
        self.sessions[session.name] = session
        await self.send(
            gw.HubFrame(
                bound=gw.SessionBound(
                    session_id=session.name,
                    agent_account_id=str(agent_id),
                    acked_event_id=binding.acked_event_id,
                )
            )
        )
        session.deliveries = asyncio.get_running_loop().create_task(self._deliver(session))
        if self.gateway.unassignments != unassignments:
            # An unassignment was heard while this bound: it may be this one's.
            await self.drop_unassigned()

    async def _unbind(self, session_id: str) -> None:
        session = self._session(session_id)
        del self.sessions[session_id]
        _stop(session.deliveries)
        await self.gateway.unbind(session)
        await self.send(gw.HubFrame(unbound=gw.SessionUnbound(session_id=session_id)))

    async def drop_agent(self, agent_id: uuid.UUID) -> None:
        """Ends this stream's sessions of an agent taken from its runner: the
        runner hears why (SessionError), then SessionUnbound."""
        for name, session in list(self.sessions.items()):
            if session.actor.account_id != agent_id or self.sessions.get(name) is not session:
                continue
            del self.sessions[name]
            _stop(session.deliveries)
            await self.gateway.unbind(session)
            if self.ended:
                continue
            await self.send(
                gw.HubFrame(
                    session_error=gw.SessionError(
                        session_id=name,
                        error=gw.CommsCallError(
                            code=Status.NOT_FOUND.token,
                            message=f"agent {agent_id} is no longer assigned to this runner",
                        ),
                    )
                )
            )
            await self.send(gw.HubFrame(unbound=gw.SessionUnbound(session_id=name)))

    async def drop_unassigned(self) -> None:
        """Ends the sessions of agents no longer assigned to this runner."""
        if not self.sessions:
            return
        assigned = {agent_id for agent_id, _ in await self.gateway.store.runner_agents(self.runner)}
        for agent_id in {s.actor.account_id for s in self.sessions.values()} - assigned:
            await self.drop_agent(agent_id)

    async def _ack(self, ack: gw.DeliveryAck) -> None:
        session = self._session(ack.session_id)
        if ack.event_id < 0:
            raise InvalidArgument("event_id can't be negative")
        if ack.event_id > session.last_sent:
            raise InvalidArgument(
                f"event {ack.event_id} is past the last delivery ({session.last_sent}) "
                f"of session {quoted(ack.session_id)}"
            )
        actor = session.actor
        await self.gateway.finish(
            self.gateway.store.ack_delivery(actor, actor.account_id, ack.event_id)
        )
        session.acked(ack.event_id)

    async def _call(self, call: gw.RelayCommsCallRequest) -> None:
        # Resolved now, in frame order: a call sent before an unbind still runs.
        session = self.sessions.get(call.session_id)
        held = answer_bytes(call.call.WhichOneof("call"))
        # Before the next frame is read: while the runner doesn't read its
        # answers, its further calls wait unread.
        await self.answers.take(self.runner.runner_id, held)
        try:
            await self.slots.acquire()
        except BaseException:
            self.answers.give(self.runner.runner_id, held)
            raise
        task = asyncio.get_running_loop().create_task(self._run_call(call, session, held))
        self.calls.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self.calls.discard(t)
            self.slots.release()

        task.add_done_callback(done)

    async def _run_call(
        self, call: gw.RelayCommsCallRequest, session: Session | None, held: int
    ) -> None:
        owner = self.runner.runner_id
        try:
            try:
                check_strings(call)
            except InvalidArgument as exc:
                result = error_result(to_api_error(exc))
            else:
                if session is None:
                    result = error_result(
                        ApiError(
                            Status.NOT_FOUND,
                            f"no session {quoted(call.session_id)} is bound on this stream",
                        )
                    )
                else:
                    result = await self.gateway.dispatcher.call(session.actor, call.call)
            frame = gw.HubFrame(
                result=gw.RelayCommsCallResult(
                    session_id=call.session_id, call_id=call.call_id, result=result
                )
            )
            del result
            # Held encoded from now on, at what it really weighs.
            encoded = frame.SerializeToString()
            del frame
            size = sys.getsizeof(encoded) + ENTRY_BYTES
            if size > held:
                self.answers.force(owner, size - held)
            else:
                self.answers.give(owner, held - size)
            held = size
            await self.outbox.put(size, lambda: encoded, lambda: self.answers.give(owner, size))
            held = 0
        finally:
            if held:
                self.answers.give(owner, held)

    # --- the delivery lane ----------------------------------------------------

    async def _deliver(self, session: Session) -> None:
        actor = session.actor
        stack = contextlib.AsyncExitStack()
        try:
            binding = session.binding
            reach = await Reach.of(self.gateway.hub.participations, actor, binding.participation)
            # The reach holds the account's shared copy; the session keeps none.
            session.binding = dataclasses.replace(binding, participation=None)
            del binding
            session.lane = lane = Lane(reach)
            # Closed as the session ends: its place in the log (and the lag it
            # shows) goes with it, not whenever a collection finds it.
            events = await stack.enter_async_context(
                contextlib.aclosing(
                    self.gateway.hub.stream(
                        actor,
                        session.binding.acked_event_id,
                        hears(actor.account_id, reach),
                        self.runner.runner_id,
                        room=session.free,
                        passed=session.went_past,
                        lane=lane,
                    )
                )
            )
            while True:
                # Room first: a session waiting on acks holds no event.
                await session.room(self.gateway.ack_timeout)
                event = await anext(events)
                if event.moved is not None:
                    await reach.reload()
                    continue
                session.sent(event.event_id)
                answered = await self._answer_receipts(session, event)

                def frame(event: Event = event, answered: dict[str, str] = answered) -> gw.HubFrame:
                    wired = wire.event_to_wire(
                        event, self.gateway.receipts.stamp(actor.workspace_id)
                    )
                    if answered:
                        told = (
                            wired.inbox_item_changed.message
                            if event.inbox is not None
                            else wired.message_posted.message
                        )
                        for block in told.blocks:
                            if block.HasField("ask_answer"):
                                block.ask_answer.receipt = answered.get(block.ask_answer.ask_id, "")
                    return gw.HubFrame(delivery=gw.Delivery(session_id=session.name, event=wired))

                if self.gateway.tracer is None:
                    await self.outbox.put(event.size + FRAME_BYTES, frame)
                else:
                    await self._traced_delivery(session, event, frame)
                del event, frame  # waiting on acks, the session holds no event
        except asyncio.CancelledError:
            raise
        except Stalled:
            await self._stalled(session)
        except Exception as exc:
            # The log can't be read (or the hub is closing): end the stream so
            # the runner reconnects and resumes from its acked cursor.
            self.end(exc)
        finally:
            await stack.aclose()

    async def _answer_receipts(self, session: Session, event: Event) -> dict[str, str]:
        """The receipts of the asks an answer message answered, by ask id,
        when the session's agent asked them: the answer reaches the agent
        that asked as this message (in a channel, or in its inbox item's
        change), and its receipt with it."""
        if not self.gateway.receipts.on:
            return {}
        if event.inbox is not None:
            return await self._inbox_answer_receipts(session, event)
        message = event.message
        if message is None:
            return {}
        out = {}
        for block in message.blocks:
            if not isinstance(block, AskAnswerBlock):
                continue
            try:
                asked_in, ask = await self.gateway.store.get_ask(session.actor, block.ask_id)
            except StoreError:
                continue  # the agent no longer sees it: the answer goes without
            if asked_in.author_id == session.actor.account_id:
                out[block.ask_id] = self.gateway.receipts.sign(
                    session.actor.workspace_id, asked_in.author_id, ask
                )
        return out

    async def _inbox_answer_receipts(self, session: Session, event: Event) -> dict[str, str]:
        change = event.inbox
        inbox = self.gateway.inbox
        if change is None or change.message is None or inbox is None:
            return {}
        out = {}
        for block in change.message.blocks:
            if not isinstance(block, AskAnswerBlock):
                continue
            try:
                asked = await inbox.ask_message(session.actor, block.ask_message_id)
            except StoreError:
                continue  # no longer the agent's to read: the answer goes without
            ask = asked.ask
            # Still this answer's ending (written in the answer message's
            # transaction, at its time), not a later one after a take-back.
            if (
                ask is not None
                and ask.ending is not None
                and ask.ending.at == change.message.created_at
                and asked.author_id == session.actor.account_id
            ):
                out[block.ask_id] = self.gateway.receipts.sign(
                    session.actor.workspace_id, asked.author_id, ask
                )
        return out

    async def _traced_delivery(
        self, session: Session, event: Event, frame: Callable[[], gw.HubFrame]
    ) -> None:
        """A delivery about an ask (its answer, or another ending) is a span in
        the trace the ask was posted in: the agent's turn hears back there."""
        posted_in = ""
        for block in event.message.blocks if event.message is not None else ():
            if isinstance(block, Ask) and block.trace:
                posted_in = block.trace
            elif isinstance(block, AskAnswerBlock):
                posted_in = await self.gateway.store.ask_trace(session.actor, block.ask_id)
        if not posted_in:
            await self.outbox.put(event.size + FRAME_BYTES, frame)
            return
        assert self.gateway.tracer is not None
        with self.gateway.tracer.start_as_current_span(
            "relay/deliver",
            context=traces.parent_context(None, posted_in),
            kind=SpanKind.PRODUCER,
            attributes={
                "compass.event_id": event.event_id,
                "compass.session": session.name,
                "compass.actor.id": str(session.actor.account_id),
            },
        ):
            await self.outbox.put(event.size + FRAME_BYTES, frame)

    async def _stalled(self, session: Session) -> None:
        if self.sessions.get(session.name) is not session:
            return
        del self.sessions[session.name]
        await self.gateway.unbind(session)
        seconds = self.gateway.ack_timeout
        await self.send(
            gw.HubFrame(
                session_error=gw.SessionError(
                    session_id=session.name,
                    error=gw.CommsCallError(
                        code=Status.RESOURCE_EXHAUSTED.token,
                        message=(
                            f"session {quoted(session.name)} had {session.window} deliveries "
                            f"unacked for {seconds:g} s and is unbound; bind again to resume "
                            "after its acked cursor"
                        ),
                    ),
                )
            )
        )


class AgentGateway:
    """The AgentGatewayService implementation; principal "runner"."""

    def __init__(
        self,
        store: Store,
        hub: EventHub,
        dispatcher: Dispatcher,
        server_id: uuid.UUID,
        *,
        window: int = WINDOW,
        outbox_bytes: int = OUTBOX_BYTES,
        call_bytes: int = CALL_BYTES,
        sessions_per_stream: int = SESSIONS_PER_STREAM,
        streams_per_runner: int = STREAMS_PER_RUNNER,
        ack_timeout: float = ACK_TIMEOUT_SECONDS,
        binds_at_once: int = BINDS_AT_ONCE,
        tracer: trace.Tracer | None = None,
        receipts: Receipts | None = None,
        inbox: InboxStore | None = None,
    ) -> None:
        self.store = store
        # Where an inbox answer's ask is read, for its receipt.
        self.inbox = inbox
        self._binds = asyncio.Semaphore(binds_at_once)
        # Deliveries of endings carry their receipts (empty without keys).
        self.receipts = receipts or Receipts(None, "")
        # Deliveries about asks are traced when set.
        self.tracer = tracer
        self.hub = hub
        self.dispatcher = dispatcher
        self.server_id = server_id
        self.window = window
        self.outbox_bytes = outbox_bytes
        self.call_bytes = call_bytes
        self.sessions_per_stream = sessions_per_stream
        self.streams_per_runner = streams_per_runner
        self.ack_timeout = ack_timeout
        self.streams: set[RelayStream] = set()
        self._per_runner: collections.Counter[uuid.UUID] = collections.Counter()
        self.closed = False
        self._cleanups: set[asyncio.Task[Any]] = set()
        # Unassignments heard so far: a bind that saw this move re-checks.
        self.unassignments = 0

    async def relay(
        self, runner: RunnerPrincipal, frames: AsyncIterator[gw.RunnerFrame]
    ) -> AsyncIterator[gw.HubFrame]:
        if self.closed:
            raise Closed
        if self._per_runner[runner.runner_id] >= self.streams_per_runner:
            raise ApiError(
                Status.RESOURCE_EXHAUSTED,
                f"this runner has {self.streams_per_runner} relay streams open on this server, "
                "the most it may; close one first",
            )
        stream = RelayStream(self, runner)
        self.streams.add(stream)
        self._per_runner[runner.runner_id] += 1
        try:
            async with contextlib.aclosing(stream.run(frames)) as hub_frames:
                async for frame in hub_frames:
                    yield frame
        finally:
            self.streams.discard(stream)
            self._per_runner[runner.runner_id] -= 1
            if not self._per_runner[runner.runner_id]:
                del self._per_runner[runner.runner_id]
            # Runs to the end even when the stream was cancelled by a disconnect.
            await self.finish(stream.unbind_all())

    async def bind(self, runner: RunnerPrincipal, agent_id: uuid.UUID) -> SessionBinding:
        async with self._binds:
            task = asyncio.get_running_loop().create_task(
                self.store.bind_session(runner, agent_id, self.server_id)
            )
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                # The stream went away mid-bind: a committed binding must not outlive it.
                task.add_done_callback(self._undo_bind)
                raise

    def _undo_bind(self, task: asyncio.Task[SessionBinding]) -> None:
        if not task.cancelled() and task.exception() is None:
            binding = task.result()
            self.keep(self.store.unbind_session(self.server_id, binding.session_id))

    async def unbind(self, session: Session) -> None:
        # A quiet agent in a busy workspace would otherwise read the same
        # events again at every bind (a restart binds every agent at once).
        resume = session.resumable()
        if resume > session.binding.acked_event_id:
            actor = session.actor
            with contextlib.suppress(Exception):
                await self.finish(self.store.ack_delivery(actor, actor.account_id, resume))
        await self.finish(self.store.unbind_session(self.server_id, session.binding.session_id))

    def keep(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        """Runs `work` to its end whoever stops waiting for it; closing the
        gateway waits for it."""
        task = asyncio.ensure_future(work)
        self._cleanups.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._cleanups.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("relay work its stream left behind failed: %s", task.exception())

    async def finish(self, work: Awaitable[Any]) -> None:
        """Awaits `work`, which runs to its end even if this wait is cancelled."""
        await asyncio.shield(self.keep(work))

    def on_access(self, payload: str | None) -> None:
        """A `compass_access` notification: an agent unassigned from a runner
        loses its sessions here. None: the listener reconnected and may have
        missed some, so every stream re-checks its agents."""
        if payload is None:
            self.unassignments += 1
            for stream in list(self.streams):
                self.keep(stream.drop_unassigned())
            return
        kind, _, value = payload.partition(":")
        if kind != "unassign":
            return
        try:
            runner_id, agent_id = (uuid.UUID(v) for v in value.split(":"))
        except ValueError:
            log.warning("ignoring a malformed access notification %r", payload)
            return
        self.unassignments += 1
        for stream in list(self.streams):
            if stream.runner.runner_id == runner_id:
                self.keep(stream.drop_agent(agent_id))

    def end_all(self, failure: BaseException) -> None:
        for stream in list(self.streams):
            stream.end(failure)

    async def close(self) -> None:
        """Ends every stream and unbinds its sessions, so its agents go OFFLINE."""
        self.closed = True
        streams = list(self.streams)
        self.end_all(Closed())
        # Every session at once: thousands unbound one by one outlast a
        # deploy's grace. Each agent's next bind resumes past what it skipped.
        cursors: dict[uuid.UUID, int] = {}
        for stream in streams:
            sessions, stream.sessions = list(stream.sessions.values()), {}
            for session in sessions:
                _stop(session.deliveries)
                resume = session.resumable()
                if resume > session.binding.acked_event_id:
                    agent_id = session.actor.account_id
                    cursors[agent_id] = max(cursors.get(agent_id, 0), resume)
        try:
            await self.finish(self.store.save_cursors(cursors))
        except Exception as exc:
            log.warning("saving %d delivery cursors at stop failed: %s", len(cursors), exc)
        try:
            await self.finish(self.store.end_server_sessions(self.server_id))
        except Exception as exc:
            # The server's row goes next, and its sessions with it.
            log.warning("ending this server's sessions at stop failed: %s", exc)
        while self._cleanups:
            await asyncio.gather(*self._cleanups, return_exceptions=True)
