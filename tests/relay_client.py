"""A small runner for tests: one Relay stream over grpc.aio (or Connect), frames
routed to whoever waits for them."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import Message

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from compass_server.store.types import Actor
from tests.world import World

RELAY = "/compass.v1.AgentGatewayService/Relay"
# A call or delivery awaited: generous, for a loaded machine.
WAIT = 30.0


class StreamEnded(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class RelayClient:
    """Send frames, await the matching answer: bound/session_error per
    session, result per call_id, deliveries per session in arrival order."""

    def __init__(self, frames: AsyncIterator[gw.HubFrame], send: Any, close: Any) -> None:
        self._frames = frames
        self._send = send
        self._close = close
        self._ids = itertools.count(1)
        # grpc.aio takes one write at a time per call.
        self._writing = asyncio.Lock()
        self.results: dict[str, asyncio.Future[gw.CommsCallResult]] = {}
        self.session_frames: dict[str, asyncio.Queue[gw.HubFrame]] = defaultdict(asyncio.Queue)
        self.deliveries: dict[str, asyncio.Queue[pb.Event]] = defaultdict(asyncio.Queue)
        self.extra_results: list[gw.RelayCommsCallResult] = []
        self.ended: asyncio.Future[StreamEnded] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    def grpc(cls, port: int, token: str | None) -> RelayClient:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        metadata = [("authorization", f"Bearer {token}")] if token else []
        call = channel.stream_stream(
            RELAY,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=gw.HubFrame.FromString,
        )(metadata=metadata)

        async def frames() -> AsyncIterator[gw.HubFrame]:
            try:
                while True:
                    frame = await call.read()
                    if frame is grpc.aio.EOF:
                        return
                    yield frame
            except grpc.aio.AioRpcError as exc:
                raise StreamEnded(exc.code().name.lower(), exc.details() or "") from None

        async def close() -> None:
            call.cancel()
            await channel.close()

        return cls(frames(), call.write, close)

    @classmethod
    def connect(cls, port: int, token: str) -> RelayClient:
        from connectrpc.errors import ConnectError
        from pyqwest import Client, HTTPTransport, HTTPVersion

        from compass.v1 import agent_gateway_connect

        transport = HTTPTransport(http_version=HTTPVersion.HTTP2)
        client = agent_gateway_connect.AgentGatewayServiceClient(
            f"http://127.0.0.1:{port}", http_client=Client(transport)
        )
        outgoing: asyncio.Queue[gw.RunnerFrame | None] = asyncio.Queue()

        async def requests() -> AsyncIterator[gw.RunnerFrame]:
            while (frame := await outgoing.get()) is not None:
                yield frame

        async def frames() -> AsyncIterator[gw.HubFrame]:
            try:
                async for frame in client.relay(
                    requests(), headers={"authorization": f"Bearer {token}"}
                ):
                    yield frame
            except ConnectError as exc:
                raise StreamEnded(exc.code.value, exc.message) from None

        async def close() -> None:
            outgoing.put_nowait(None)
            await client.close()

        return cls(frames(), outgoing.put, close)

    async def _read(self) -> None:
        try:
            async for frame in self._frames:
                kind = frame.WhichOneof("frame")
                if kind == "result":
                    future = self.results.pop(frame.result.call_id, None)
                    if future is None or future.done():
                        self.extra_results.append(frame.result)
                    else:
                        future.set_result(frame.result.result)
                elif kind == "delivery":
                    self.deliveries[frame.delivery.session_id].put_nowait(frame.delivery.event)
                else:
                    session_id = getattr(frame, kind).session_id
                    self.session_frames[session_id].put_nowait(frame)
            self.ended.set_result(StreamEnded("ok", "the hub ended the stream"))
        except StreamEnded as exc:
            self.ended.set_result(exc)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        await self._close()

    # --- frames --------------------------------------------------------------

    async def send(self, frame: gw.RunnerFrame) -> None:
        async with self._writing:
            await self._send(frame)

    async def session_frame(self, session_id: str) -> gw.HubFrame:
        return await asyncio.wait_for(self.session_frames[session_id].get(), WAIT)

    async def bind(self, session_id: str, agent: Actor | str) -> gw.HubFrame:
        agent_id = agent if isinstance(agent, str) else str(agent.account_id)
        await self.send(
            gw.RunnerFrame(bind=gw.BindSession(session_id=session_id, agent_account_id=agent_id))
        )
        return await self.session_frame(session_id)

    async def bound(self, session_id: str, agent: Actor) -> gw.SessionBound:
        frame = await self.bind(session_id, agent)
        assert frame.WhichOneof("frame") == "bound", frame
        return frame.bound

    async def unbind(self, session_id: str) -> gw.HubFrame:
        await self.send(gw.RunnerFrame(unbind=gw.UnbindSession(session_id=session_id)))
        return await self.session_frame(session_id)

    async def ack(self, session_id: str, event_id: int) -> None:
        await self.send(
            gw.RunnerFrame(ack=gw.DeliveryAck(session_id=session_id, event_id=event_id))
        )

    def start_call(
        self, session_id: str, request: gw.CommsCallRequest
    ) -> asyncio.Future[gw.CommsCallResult]:
        """Sends one call; the future resolves with its result frame."""
        call_id = f"c{next(self._ids)}"
        future: asyncio.Future[gw.CommsCallResult] = asyncio.get_running_loop().create_future()
        self.results[call_id] = future
        frame = gw.RunnerFrame(
            call=gw.RelayCommsCallRequest(session_id=session_id, call_id=call_id, call=request)
        )
        sending = asyncio.ensure_future(self.send(frame))
        # Only a call given up on stops its write: cancelling a write that is
        # still going out cancels the whole stream.
        future.add_done_callback(lambda f: f.cancelled() and sending.cancel())
        return future

    async def call(self, session_id: str, arm: str, request: Message) -> gw.CommsCallResult:
        """One arm's call; the raw result (its arm, or `error`)."""
        call = gw.CommsCallRequest()
        getattr(call, arm).CopyFrom(request)
        return await asyncio.wait_for(self.start_call(session_id, call), WAIT)

    async def ok(self, session_id: str, arm: str, request: Message) -> Any:
        """The arm's response; fails the test on an in-band error."""
        result = await self.call(session_id, arm, request)
        assert result.WhichOneof("result") == arm, result
        return getattr(result, arm)

    async def delivery(self, session_id: str, wait: float = WAIT) -> pb.Event:
        return await asyncio.wait_for(self.deliveries[session_id].get(), wait)

    async def no_delivery(self, session_id: str, wait: float = 0.3) -> None:
        with contextlib.suppress(TimeoutError):
            event = await asyncio.wait_for(self.deliveries[session_id].get(), wait)
            raise AssertionError(f"unexpected delivery {event}")


async def runner_for(world: World, *agents: Actor) -> str:
    """A runner of the world's workspace with these agents assigned; its token."""
    runner, token = await world.store.create_runner(world.workspace_id, f"r-{uuid.uuid4().hex[:6]}")
    for agent in agents or (world.agent,):
        await world.store.assign_agent(world.workspace_id, runner.runner_id, agent.account_id)
    return token


@contextlib.asynccontextmanager
async def relay(port: int, token: str | None) -> AsyncIterator[RelayClient]:
    client = RelayClient.grpc(port, token)
    try:
        yield client
    finally:
        await client.close()
