"""A Connect call answered before its body is read (too large, wrong content
type) never wedges its HTTP/1.1 connection: the client gets the answer, and
the connection is either ready for the next request or closed, never left
half-open on the server."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from compass_server.store import Store
from compass_server.transport.connect_app import DRAIN_BYTES
from compass_server.transport.grpc_server import MAX_MESSAGE_BYTES
from tests.procs import ServerProcess
from tests.world import World

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def served(database_url: str) -> Any:
    """A real `compass-server serve` (uvloop, as run in production): the
    wedge showed there, not always on the plain asyncio loop."""
    server = ServerProcess(database_url).start()
    yield server
    assert server.stop() == 0


PATH = "/compass.v1.CommsService/ListChannels"


def server_sockets(port: int, state: str = "08") -> int:
    """Sockets of this host with local port `port` in a TCP state (08: CLOSE-WAIT)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == state:
                count += 1
    return count


def head(token: str, content_type: str, length: int) -> bytes:
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: t\r\nContent-Type: {content_type}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response, its body read whole (by length or chunks)."""
    buf = bytearray()

    def need(n: int) -> None:
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed mid-response: {bytes(buf[:200])!r}")
            buf.extend(chunk)

    def line() -> bytes:
        while b"\r\n" not in buf:
            need(len(buf) + 1)
        end = buf.index(b"\r\n")
        out = bytes(buf[:end])
        del buf[: end + 2]
        return out

    status = int(line().split()[1])
    headers: dict[str, str] = {}
    while header := line():
        name, _, value = header.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = bytearray()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while size := int(line().split(b";")[0], 16):
            need(size + 2)
            body.extend(buf[:size])
            del buf[: size + 2]
        while line():
            pass
    else:
        length = int(headers.get("content-length", "0"))
        need(length)
        body.extend(buf[:length])
    return status, headers, bytes(body)


def send_all(sock: socket.socket, data: bytes) -> None:
    """Sends what the server takes; it may close before taking all."""
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def early_reply(port: int, token: str, content_type: str, size: int) -> str:
    """One oversized or mistyped post, then a good request on the same
    connection: "reused" when that is answered, "closed" when the server
    closed the connection after its answer. Fails on a hang."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    try:
        sock.sendall(head(token, content_type, size))
        # The body goes on being sent beside the reads below.
        threading.Thread(target=send_all, args=(sock, b"x" * size), daemon=True).start()
        status, headers, body = read_response(sock)
        assert status in (413, 415, 429), (status, body)
        time.sleep(0.2)
        closing = headers.get("connection", "").lower() == "close"
        if closing:
            sock.settimeout(15)
            while sock.recv(65536):
                pass
            return "closed"
        sock.sendall(head(token, "application/json", 2) + b"{}")
        status, _, body = read_response(sock)
        assert status == 200, (status, body)
        return "reused"
    finally:
        sock.close()


@pytest.mark.parametrize(
    ("content_type", "size", "outcome"),
    [
        # Past the request limit: the rest is more than the drain takes.
        ("application/json", MAX_MESSAGE_BYTES + 4 * DRAIN_BYTES, "closed"),
        ("application/json", MAX_MESSAGE_BYTES + DRAIN_BYTES // 2, "reused"),
        # A content type refused before any of the body is read.
        ("text/plain", 3 * DRAIN_BYTES, "closed"),
        ("text/plain", DRAIN_BYTES // 2, "reused"),
    ],
)
async def test_an_early_reply_leaves_no_wedged_connection(
    served: Any, store: Store, content_type: str, size: int, outcome: str
) -> None:
    w = await World.create(store)
    token = w.tokens[w.human.account_id]
    port = served.http_port
    for _ in range(3):
        got = await asyncio.to_thread(early_reply, port, token, content_type, size)
        assert got == outcome
    # Every server-side socket of those connections is gone, none half-open.
    for _ in range(50):
        if not server_sockets(port):
            break
        await asyncio.sleep(0.2)
    assert server_sockets(port) == 0


async def test_httpx_gets_its_answer_and_the_next_call_goes_through(
    served: Any, store: Store
) -> None:
    w = await World.create(store)
    headers = {
        "content-type": "application/json",
        "authorization": f"Bearer {w.tokens[w.human.account_id]}",
    }
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{served.http_port}", timeout=10
    ) as http:
        for _ in range(3):
            started = time.monotonic()
            res = await http.post(
                "/compass.v1.CommsService/PostMessage",
                content=b"x" * (MAX_MESSAGE_BYTES + 1_000_000),
                headers=headers,
            )
            assert res.status_code == 429, res.text
            assert res.json()["code"] == "resource_exhausted"
            ok = await http.post(PATH, content=b"{}", headers=headers)
            assert ok.status_code == 200, ok.text
            assert time.monotonic() - started < 5


def request_after_idle(port: int, token: str, idle: float) -> str:
    """A request, `idle` seconds of quiet, then another on the same
    connection: "reused" when that one is answered, "closed" when the server
    closed the connection in the quiet."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    try:
        sock.sendall(head(token, "application/json", 2) + b"{}")
        assert read_response(sock)[0] == 200
        time.sleep(idle)
        try:
            sock.sendall(head(token, "application/json", 2) + b"{}")
            return "reused" if read_response(sock)[0] == 200 else "refused"
        except (ConnectionError, OSError):
            return "closed"
    finally:
        sock.close()


async def test_an_idle_connection_outlives_a_clients_pause(served: Any, store: Store) -> None:
    """A client's pool keeps an idle connection for longer than a few seconds
    (hyper and Go: 90 s): a server closing it sooner races the client's next
    request, which then fails though it was never refused."""
    w = await World.create(store)
    token = w.tokens[w.human.account_id]
    got = await asyncio.to_thread(request_after_idle, served.http_port, token, 7.0)
    assert got == "reused"


async def test_an_idle_connection_is_closed_after_its_setting(
    database_url: str, store: Store
) -> None:
    w = await World.create(store)
    token = w.tokens[w.human.account_id]
    server = ServerProcess(database_url, args=["--http-idle-seconds", "1"]).start()
    try:
        got = await asyncio.to_thread(request_after_idle, server.http_port, token, 3.0)
        assert got == "closed"
    finally:
        assert server.stop() == 0


async def test_a_connection_its_client_closed_is_let_go_at_once(served: Any, store: Store) -> None:
    """Idle connections are kept long for their clients, not for clients
    that have gone: one closed by its client is closed on the server too."""
    w = await World.create(store)
    token = w.tokens[w.human.account_id]

    def one_request() -> None:
        with socket.create_connection(("127.0.0.1", served.http_port), timeout=15) as sock:
            sock.sendall(head(token, "application/json", 2) + b"{}")
            assert read_response(sock)[0] == 200

    for _ in range(5):
        await asyncio.to_thread(one_request)
    for _ in range(20):
        if not server_sockets(served.http_port):
            break
        await asyncio.sleep(0.1)
    assert server_sockets(served.http_port) == 0
