"""A webhook receiver on loopback: a real HTTP/1.1 server (h11 over asyncio
streams) that records what arrives and answers as a test tells it to: a
status, a body, after a delay, never, or a body that never ends."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import h11


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    # Never answer: hold the connection until the client gives up.
    hang: bool = False
    # Answer 200 and then send body bytes forever.
    endless: bool = False
    content_type: str = "text/plain"
    headers: tuple[tuple[str, str], ...] = ()


Answer = Callable[[Received], Reply | Awaitable[Reply]]


class Receiver:
    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or (lambda _: Reply())
        self.port = 0
        self.received: list[Received] = []
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        # Requests under way per webhook-id, and the most seen at once.
        self.by_id: collections.Counter[str] = collections.Counter()
        self.max_same_id = 0
        self._arrived = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Receiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        if self._server is not None:
            await self._server.wait_closed()

    async def wait_for(
        self, n: int, wait: float = 20.0, where: Callable[[Received], bool] | None = None
    ) -> list[Received]:
        """The first `n` requests (that `where` admits) once they arrived."""

        def matching() -> list[Received]:
            return [r for r in self.received if where is None or where(r)]

        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(matching()) >= n), wait)
        return matching()[:n]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._request(conn, reader)
                if request is None:
                    return
                await self._respond(conn, reader, writer, request)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (OSError, h11.ProtocolError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> Received | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and conn.their_state is h11.IDLE:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return Received(
                    head.target.decode(),
                    {k.decode().lower(): v.decode() for k, v in head.headers},
                    bytes(body),
                )
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _respond(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: Received,
    ) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.by_id[request.webhook_id] += 1
        self.max_same_id = max(self.max_same_id, self.by_id[request.webhook_id])
        try:
            async with self._arrived:
                self.received.append(request)
                self._arrived.notify_all()
            reply = self.answer(request)
            if not isinstance(reply, Reply):
                reply = await reply
            if reply.hang:
                # Until the client gives up and closes the connection.
                while await reader.read(65536):
                    pass
                return
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.endless:
                writer.write(
                    conn.send(
                        h11.Response(status_code=200, headers=[("content-type", "text/plain")])
                    )
                    or b""
                )
                chunk = b"x" * 65536
                while True:
                    writer.write(conn.send(h11.Data(data=chunk)) or b"")
                    await writer.drain()
            headers = [
                ("content-type", reply.content_type),
                ("content-length", str(len(reply.body))),
                *reply.headers,
            ]
            writer.write(conn.send(h11.Response(status_code=reply.status, headers=headers)) or b"")
            writer.write(conn.send(h11.Data(data=reply.body)) or b"")
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            with contextlib.suppress(OSError):
                await writer.drain()
        finally:
            self.in_flight -= 1
            self.by_id[request.webhook_id] -= 1
