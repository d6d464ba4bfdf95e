"""A runner's end of AgentGatewayService.Relay: one grpc.aio stream carrying
many agent sessions.

    relay = Relay("127.0.0.1:50051", runner_token)
    await relay.start()
    session = await relay.bind(agent_id, on_delivery)
    result = await relay.call(session.session_id, CommsCallRequest(...))
    ...
    await relay.close()

Calls: each gets a call id and a future resolved by the one result frame the
hub echoes for it. A call made while the stream is down waits for it, up to
the call timeout; a call in flight when the stream drops fails with
CallUnavailable, because it may or may not have run (calls are never resent).

Deliveries: each session has one worker that hands events to its handler in
order and acks each after the handler returns, so an event is acked only once
the agent has had it. A delivery the hub resends (it was in hand, unacked,
when the stream dropped) is acked again but not handed over twice: within one
Relay each event reaches the handler exactly once.

Drops: the relay reconnects with exponential backoff and jitter, rebinds every
session under the same session id, and the hub resumes each agent's deliveries
after its acked cursor. A bind the hub refuses as `unavailable` (its database
busy or restarting) is sent again with the same backoff, on that stream,
until it is bound. A refused sign-in (bad token) is final, not retried;
so is never reaching the hub at all within `connect_seconds` of start (a
wrong address), when that is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb

__all__ = [
    "Backoff",
    "BoundSession",
    "CallUnavailable",
    "DeliveryHandler",
    "Refused",
    "Relay",
    "RelayError",
    "tls_credentials",
]

log = logging.getLogger(__name__)

RELAY_METHOD = "/compass.v1.AgentGatewayService/Relay"
# Retrying can't fix these: the token or the server is wrong.
FINAL_CODES = frozenset(
    {
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)

# A bind refused with one of these is sent again after a backoff: the hub or
# its database is busy or restarting, and the session is still wanted.
RETRY_BIND_CODES = frozenset({"unavailable", "deadline_exceeded", "aborted"})

UNBIND_SECONDS = 10.0
# How long the commands try for a first connection before giving up.
CONNECT_SECONDS = 30.0
# The largest frame the server takes (its request limit): a bigger call is
# refused here, since the server would end the whole stream, every session's.
MAX_CALL_FRAME_BYTES = 8 << 20
# The largest frame taken from the hub. The server bounds a page of messages
# near gRPC's 4 MiB default, and a frame over it would end the stream, every
# session's: keep a wide margin.
MAX_RECEIVE_BYTES = 64 << 20

DeliveryHandler = Callable[[pb.Event], Awaitable[None]]
Caller = Callable[[gw.CommsCallRequest], Awaitable[gw.CommsCallResult]]


def tls_credentials(
    ca_cert: str | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
) -> grpc.ChannelCredentials:
    """TLS to the hub: trusting the CA certificates in `ca_cert` (PEM; default:
    the system's), and presenting a client certificate and its key when the
    hub's relay listener requires one."""
    if (client_cert is None) != (client_key is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")

    def read(path: str | None) -> bytes | None:
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise ValueError(f"can't read {path}: {exc.strerror}") from None

    return grpc.ssl_channel_credentials(
        root_certificates=read(ca_cert),
        private_key=read(client_key),
        certificate_chain=read(client_cert),
    )


class RelayError(Exception):
    """A relay failure, as a status token (`unavailable`, …) and a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class CallUnavailable(RelayError):
    """No result came back: the stream was down or dropped, or time ran out."""

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message)


class Refused(RelayError):
    """The hub refused the stream or a bind; retrying would not help."""


@dataclass
class Backoff:
    """Exponential delays with jitter: the n-th delay is drawn from
    [cap·(1-jitter), cap] where cap = min(maximum, initial·factor^n)."""

    initial: float = 0.25
    factor: float = 2.0
    maximum: float = 8.0
    jitter: float = 0.5
    _attempt: int = field(default=0, repr=False)

    def next(self) -> float:
        cap = min(self.maximum, self.initial * self.factor**self._attempt)
        self._attempt += 1
        return cap * (1.0 - self.jitter * random.random())

    def reset(self) -> None:
        self._attempt = 0


@dataclass(frozen=True, slots=True)
class BoundSession:
    session_id: str
    agent_id: str
    # Deliveries resumed after this event (the agent's acked cursor).
    acked_event_id: int


class _Session:
    def __init__(self, session_id: str, agent_id: str, handler: DeliveryHandler) -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.handler = handler
        self.queue: asyncio.Queue[tuple[int, pb.Event] | None] = asyncio.Queue()
        # The newest event handed to the handler, or acked before this bind.
        self.handled = 0
        self.first_bound: asyncio.Future[BoundSession] = asyncio.get_running_loop().create_future()
        self.stopping = False
        self.worker: asyncio.Task[None] | None = None
        # Binds refused for now, tried again with this backoff.
        self.backoff: Backoff | None = None
        self.retry: asyncio.Task[None] | None = None


class _Stream:
    """One connection's stream: writes one at a time, calls by id."""

    def __init__(self, generation: int, channel: Any, call: Any) -> None:
        self.generation = generation
        self.channel = channel
        self.call = call
        self.lock = asyncio.Lock()
        self.calls: dict[str, asyncio.Future[gw.CommsCallResult]] = {}
        self.binding: set[str] = set()  # bind sent, no answer yet
        self.bound: set[str] = set()
        self.unbinding: dict[str, asyncio.Future[None]] = {}
        self.reached = False
        self.writes_done = False

    async def write(self, frame: gw.RunnerFrame) -> None:
        async with self.lock:
            if self.writes_done:
                raise CallUnavailable("the relay stream is closing")
            try:
                await self.call.write(frame)
            except Exception as exc:
                raise CallUnavailable(f"the relay stream dropped ({exc})") from None

    async def done_writing(self) -> None:
        async with self.lock:
            if not self.writes_done:
                self.writes_done = True
                with contextlib.suppress(Exception):
                    await self.call.done_writing()

    def fail_pending(self, error: RelayError) -> None:
        futures: list[asyncio.Future[Any]] = [*self.calls.values(), *self.unbinding.values()]
        for future in futures:
            if not future.done():
                future.set_exception(error)
        self.calls.clear()
        self.unbinding.clear()


class Relay:
    def __init__(
        self,
        address: str,
        token: str,
        *,
        backoff: Backoff | None = None,
        call_timeout: float = 60.0,
        on_lost: Callable[[str, RelayError], None] | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        connect_seconds: float | None = None,
    ) -> None:
        self.address = address
        self.token = token
        # TLS to the hub (see tls_credentials); None: plain text.
        self.credentials = credentials
        self.backoff = backoff or Backoff()
        self.call_timeout = call_timeout
        # Give up when no connection reached the hub within this long of
        # start (None or 0: keep trying); later drops are always retried.
        self.connect_seconds = connect_seconds
        self._reached = asyncio.Event()
        self._attempts = 0
        self._last_reason = ""
        # Told when a session could not be rebound after a drop (say its agent
        # was unassigned meanwhile); the session is gone from the relay.
        self.on_lost = on_lost
        # Streams that reached the hub (the first is 1; each reconnect adds one).
        self.connections = 0
        self._sessions: dict[str, _Session] = {}
        self._stream: _Stream | None = None
        self._generation = 0
        self._live = asyncio.Event()
        self._closing = asyncio.Event()
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self.failure: RelayError | None = None
        self._failed = asyncio.Event()

    # --- lifetime ---------------------------------------------------------------

    async def start(self) -> None:
        """Starts connecting in the background; binds and calls wait for it."""
        if self._task is None:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._run())
            if self.connect_seconds:
                watch = self._give_up_unless_reached(self.connect_seconds)
                self._watchdog = loop.create_task(watch)

    async def _give_up_unless_reached(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._reached.wait()
            return
        if self._closing.is_set() or self.failure is not None or self._task is None:
            return
        tries = f"{self._attempts} attempt{'s' if self._attempts != 1 else ''}"
        last = f"; the last: {self._last_reason}" if self._last_reason else ""
        error = RelayError(
            "unavailable",
            f"no connection to the Compass server at {self.address} within {seconds:g}s "
            f"({tries}{last})",
        )
        log.error("giving up: %s", error.message)
        self._task.cancel()
        self.failure = error
        self._failed.set()
        self._fail_sessions(error)

    async def wait_failed(self) -> RelayError:
        """Returns when the relay stopped for good (a refused sign-in)."""
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    async def close(self, grace: float = 5.0) -> None:
        """Lets handlers in hand finish and ack, unbinds by ending the stream."""
        if self._closing.is_set():
            return
        self._closing.set()
        if self._watchdog is not None:
            self._watchdog.cancel()
        workers = []
        for session in self._sessions.values():
            session.stopping = True
            session.queue.put_nowait(None)
            if session.retry is not None:
                session.retry.cancel()
            if session.worker is not None:
                workers.append(session.worker)
        if workers:
            await asyncio.wait(workers, timeout=grace)
        stream = self._stream
        if stream is not None:
            # The hub reads our acks, then the end of the stream, then ends its side.
            await stream.done_writing()
        if self._task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                async with asyncio.timeout(grace):
                    await asyncio.shield(self._task)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for worker in workers:
            worker.cancel()
        self._fail_sessions(RelayError("cancelled", "the relay is closed"))

    # --- sessions ---------------------------------------------------------------

    async def bind(
        self, agent_id: str, on_delivery: DeliveryHandler, *, session_id: str | None = None
    ) -> BoundSession:
        """Binds a session to an agent assigned to this runner and returns once
        the hub confirms; Refused when it won't (the agent is not assigned)."""
        session_id = session_id or uuid.uuid4().hex
        if session_id in self._sessions:
            raise ValueError(f"session {session_id!r} is already bound on this relay")
        self._check_open()
        session = _Session(session_id, agent_id, on_delivery)
        self._sessions[session_id] = session
        session.worker = asyncio.get_running_loop().create_task(self._work(session))
        stream = self._stream
        if stream is not None and self._live.is_set():
            # Unsent because the stream just dropped: the next stream binds it.
            with contextlib.suppress(RelayError):
                await self._send_bind(stream, session)
        try:
            return await session.first_bound
        except BaseException:
            self._drop(session)
            raise

    async def unbind(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        self._drop(session)
        stream = self._stream
        # A bind still unanswered is unbound too: the hub reads frames in order.
        if stream is None or not ({session_id} & (stream.bound | stream.binding)):
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stream.unbinding[session_id] = done
        # Not confirmed in time or the stream dropped: the hub unbinds at stream end.
        with contextlib.suppress(RelayError, TimeoutError):
            await stream.write(gw.RunnerFrame(unbind=gw.UnbindSession(session_id=session_id)))
            async with asyncio.timeout(UNBIND_SECONDS):
                await done

    def _drop(self, session: _Session) -> None:
        if self._sessions.get(session.session_id) is session:
            del self._sessions[session.session_id]
        session.stopping = True
        session.queue.put_nowait(None)
        if session.retry is not None:
            session.retry.cancel()

    # --- calls ------------------------------------------------------------------

    async def call(
        self, session_id: str, request: gw.CommsCallRequest, *, seconds: float | None = None
    ) -> gw.CommsCallResult:
        """The call's one result: its arm, or the in-band error. Waits at most
        `seconds` (default: the relay's call_timeout), stream outage included."""
        limit = self.call_timeout if seconds is None else seconds
        try:
            async with asyncio.timeout(limit):
                stream = await self._live_stream()
                call_id = f"c{next(self._ids)}"
                future: asyncio.Future[gw.CommsCallResult] = (
                    asyncio.get_running_loop().create_future()
                )
                frame = gw.RunnerFrame(
                    call=gw.RelayCommsCallRequest(
                        session_id=session_id, call_id=call_id, call=request
                    )
                )
                size = frame.ByteSize()
                if size > MAX_CALL_FRAME_BYTES:
                    raise RelayError(
                        "resource_exhausted",
                        f"this call is {size} bytes; the limit is {MAX_CALL_FRAME_BYTES}: "
                        "nothing was sent",
                    )
                stream.calls[call_id] = future
                try:
                    await stream.write(frame)
                    return await future
                finally:
                    stream.calls.pop(call_id, None)
        except TimeoutError:
            raise CallUnavailable(
                f"no result within {limit:g}s (the hub is unreachable or slow); "
                "the call may or may not have run"
            ) from None

    def caller(self, session_id: str) -> Caller:
        """`call` bound to one session: what the comms tools take."""

        async def call(request: gw.CommsCallRequest) -> gw.CommsCallResult:
            return await self.call(session_id, request)

        return call

    def _check_open(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closing.is_set():
            raise RelayError("cancelled", "the relay is closed")

    async def _live_stream(self) -> _Stream:
        while True:
            self._check_open()
            stream = self._stream
            if stream is not None and self._live.is_set():
                return stream
            live = asyncio.ensure_future(self._live.wait())
            ended = asyncio.ensure_future(self._failed.wait())
            closing = asyncio.ensure_future(self._closing.wait())
            try:
                await asyncio.wait([live, ended, closing], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in (live, ended, closing):
                    waiter.cancel()

    # --- deliveries -------------------------------------------------------------

    async def _work(self, session: _Session) -> None:
        while True:
            item = await session.queue.get()
            if item is None or session.stopping:
                return
            generation, event = item
            if generation != self._generation:
                continue  # from a stream that is gone; the hub resends it
            if event.event_id > session.handled:
                try:
                    await session.handler(event)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # Acked anyway: one event the agent can't handle must not wedge its lane.
                    log.exception(
                        "session %s: the agent failed on event %d",
                        session.session_id,
                        event.event_id,
                    )
                session.handled = max(session.handled, event.event_id)
                log.info("session %s handled event %d", session.session_id, event.event_id)
            else:
                log.info(
                    "session %s: event %d came again after a reconnect; acked, not handed over",
                    session.session_id,
                    event.event_id,
                )
            await self._ack(generation, session, event.event_id)

    async def _ack(self, generation: int, session: _Session, event_id: int) -> None:
        stream = self._stream
        # An event from an older stream is not acked: the hub resends it and
        # the resend is acked instead, without reaching the handler again.
        if stream is None or stream.generation != generation:
            return
        if session.session_id not in stream.bound:
            return
        with contextlib.suppress(RelayError):
            await stream.write(
                gw.RunnerFrame(ack=gw.DeliveryAck(session_id=session.session_id, event_id=event_id))
            )

    # --- the connection ---------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing.is_set():
            try:
                reason = await self._connect_once()
            except Refused as refused:
                log.error("the hub refused this runner: %s", refused)
                self.failure = refused
                self._failed.set()
                self._fail_sessions(refused)
                return
            if self._closing.is_set():
                return
            self._last_reason = reason
            delay = self.backoff.next()
            log.warning("relay stream ended (%s); reconnecting in %.2fs", reason, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._closing.wait()

    async def _connect_once(self) -> str:
        self._generation += 1
        self._attempts += 1
        options = [("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)]
        channel = (
            grpc.aio.secure_channel(self.address, self.credentials, options=options)
            if self.credentials is not None
            else grpc.aio.insecure_channel(self.address, options=options)
        )
        call = channel.stream_stream(
            RELAY_METHOD,
            request_serializer=gw.RunnerFrame.SerializeToString,
            response_deserializer=gw.HubFrame.FromString,
        )(metadata=[("authorization", f"Bearer {self.token}")])
        stream = _Stream(self._generation, channel, call)
        self._stream = stream
        reason = "the hub ended the stream"
        # Reached once the connection is up, even before the hub says anything.
        ready = asyncio.ensure_future(channel.channel_ready())
        ready.add_done_callback(self._on_ready)
        try:
            for session in list(self._sessions.values()):
                # A failed write means a failed stream: the read below says why.
                with contextlib.suppress(RelayError):
                    await self._send_bind(stream, session)
            self._live.set()
            while True:
                frame = await call.read()
                if frame is grpc.aio.EOF:
                    break
                if not stream.reached:
                    stream.reached = True
                    self._reached.set()
                    self.connections += 1
                    self.backoff.reset()
                self._route(stream, frame)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            token = code.name.lower()
            if code in FINAL_CODES:
                raise Refused(token, exc.details() or "") from None
            reason = f"{token}: {exc.details() or ''}"
        except Exception as exc:
            # Anything else is this stream's end too, never the reconnect loop's.
            reason = f"{type(exc).__name__}: {exc}"
        finally:
            ready.cancel()
            self._live.clear()
            self._stream = None
            stream.fail_pending(
                CallUnavailable("the relay stream dropped; the call may or may not have run")
            )
            call.cancel()
            await channel.close()
        return reason

    def _on_ready(self, ready: asyncio.Future[None]) -> None:
        if not ready.cancelled() and ready.exception() is None:
            self._reached.set()

    async def _send_bind(self, stream: _Stream, session: _Session) -> None:
        sid = session.session_id
        if sid in stream.binding or sid in stream.bound:
            return
        stream.binding.add(sid)
        await stream.write(
            gw.RunnerFrame(bind=gw.BindSession(session_id=sid, agent_account_id=session.agent_id))
        )

    def _route(self, stream: _Stream, frame: gw.HubFrame) -> None:
        kind = frame.WhichOneof("frame")
        if kind == "result":
            future = stream.calls.pop(frame.result.call_id, None)
            if future is not None and not future.done():
                future.set_result(frame.result.result)
        elif kind == "delivery":
            session = self._sessions.get(frame.delivery.session_id)
            if session is not None:
                session.queue.put_nowait((stream.generation, frame.delivery.event))
        elif kind == "bound":
            self._bound(stream, frame.bound)
        elif kind == "session_error":
            self._session_error(stream, frame.session_error)
        elif kind == "unbound":
            stream.bound.discard(frame.unbound.session_id)
            stream.binding.discard(frame.unbound.session_id)
            done = stream.unbinding.pop(frame.unbound.session_id, None)
            if done is not None and not done.done():
                done.set_result(None)

    def _bound(self, stream: _Stream, bound: gw.SessionBound) -> None:
        sid = bound.session_id
        stream.binding.discard(sid)
        stream.bound.add(sid)
        session = self._sessions.get(sid)
        if session is None:
            return
        session.handled = max(session.handled, bound.acked_event_id)
        session.backoff = None
        log.info(
            "bound session %s for agent %s; deliveries resume after event %d",
            sid,
            bound.agent_account_id,
            bound.acked_event_id,
        )
        if not session.first_bound.done():
            session.first_bound.set_result(
                BoundSession(sid, bound.agent_account_id, bound.acked_event_id)
            )

    def _session_error(self, stream: _Stream, err: gw.SessionError) -> None:
        sid = err.session_id
        error = Refused(err.error.code, err.error.message)
        session = self._sessions.get(sid)
        if sid not in stream.binding or session is None:
            # An ack or unbind the hub refused; the session carries on.
            log.warning("session %s: the hub refused a frame: %s", sid, error)
            return
        stream.binding.discard(sid)
        if error.code in RETRY_BIND_CODES:
            self._bind_later(stream, session, error)
            return
        self._drop(session)
        if not session.first_bound.done():
            session.first_bound.set_exception(error)
            return
        log.error("session %s could not be rebound: %s", sid, error)
        if self.on_lost is not None:
            self.on_lost(sid, error)

    def _bind_later(self, stream: _Stream, session: _Session, error: RelayError) -> None:
        if session.backoff is None:
            b = self.backoff
            session.backoff = Backoff(b.initial, b.factor, b.maximum, b.jitter)
        delay = session.backoff.next()
        log.warning(
            "session %s: the hub refused the bind for now (%s); binding again in %.2fs",
            session.session_id,
            error,
            delay,
        )

        async def again() -> None:
            await asyncio.sleep(delay)
            # A stream that dropped meanwhile: the next one binds every session.
            if self._stream is stream and self._sessions.get(session.session_id) is session:
                with contextlib.suppress(RelayError):
                    await self._send_bind(stream, session)

        session.retry = asyncio.get_running_loop().create_task(again())

    def _fail_sessions(self, error: RelayError) -> None:
        for session in list(self._sessions.values()):
            if not session.first_bound.done():
                session.first_bound.set_exception(error)
                # Retrieved here so an abandoned bind doesn't log "never retrieved".
                session.first_bound.exception()
