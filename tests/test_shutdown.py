"""A shutdown always ends: SIGTERM at the moment a loop wakes (a deadline
comes due, a deadline is posted) still stops the process within its drain."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import random
import signal
import time

import psycopg
import pytest

from compass.v1 import comms_pb2 as pb
from compass_server.asks import Expiry
from compass_server.store import Database, Store
from tests.conftest import ROOT
from tests.procs import ServerProcess
from tests.servers import CallError, GrpcClient
from tests.test_ask_expiry import fresh_database_url, open_world  # noqa: F401  (fixture)
from tests.test_ask_expiry import post_through as post
from tests.world import World

# Six servers started and stopped: room for a loaded machine.
pytestmark = pytest.mark.timeout(300)

DRAIN = 0.2
# What stopping may take after the drain (streams end, pools close) on a
# loaded machine: the point is that it ends; bench.shutdown measures how soon.
STOP = 30.0
RUNS = 6


async def test_sigterm_at_a_wake_up_always_stops_the_process(
    fresh_database_url: str,  # noqa: F811
) -> None:
    url = fresh_database_url
    db, w = await open_world(url)
    rng = random.Random(24)
    try:
        for run in range(RUNS):
            await stop_at_a_wake_up(url, w, 0.2 + rng.random() * 0.2, run)
    finally:
        await db.close()


async def stop_at_a_wake_up(url: str, w: World, after: float, run: int) -> float:
    """SIGTERM `after` seconds into a burst of deadlines and streams: the
    seconds from the signal to the process's exit."""
    env = {
        "COMPASS_ASK_DEADLINE_MIN_SECONDS": "0.01",
        "COMPASS_DRAIN_SECONDS": str(DRAIN),
        "COMPASS_LOG_LEVEL": "INFO",
    }
    server = ServerProcess(url, env=env).start()
    client = GrpcClient(server.grpc_port)

    async def sooner_and_sooner() -> None:
        # Each post a deadline sooner than any before: every loop that knows
        # of deadlines wakes for it.
        n = 0
        with contextlib.suppress(CallError):
            while True:
                n += 1
                await post(client, w, 30 - n * 0.01)

    async def listen() -> None:
        # Streams wake at every event.
        with contextlib.suppress(CallError):
            async for _ in client.stream(
                "Subscribe", pb.SubscribeRequest(), w.tokens[w.human.account_id]
            ):
                pass

    try:
        # Deadlines every few milliseconds: the expiry loops wake as they come due.
        await asyncio.gather(*(post(client, w, 0.2 + i * 0.005) for i in range(40)))
        busy = asyncio.gather(
            *(sooner_and_sooner() for _ in range(3)), *(listen() for _ in range(3))
        )
        await asyncio.sleep(after)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = await asyncio.to_thread(_wait, server, DRAIN + STOP)
        took = time.monotonic() - started
        busy.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await busy
        assert code is not None, f"run {run}: still running {took:.1f} s after SIGTERM\n" + "".join(
            server.log
        )
        assert server.stop() == 0, "".join(server.log)
        return took
    finally:
        await client.close()
        if server.proc is not None:
            server.kill9()


def _wait(server: ServerProcess, seconds: float) -> int | None:
    assert server.proc is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        code = server.proc.poll()
        if code is not None:
            return code
        time.sleep(0.01)
    return None


def test_no_loop_waits_with_wait_for() -> None:
    """On Python 3.11 `asyncio.wait_for` returns the result and drops a
    cancellation that lands as what it waits on completes: a loop waiting that
    way can outlive its stop. Server and kit wait with `asyncio.timeout`."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("compass_server", "agentkit/compass_agentkit")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "gen" not in path.relative_to(ROOT).parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "wait_for(" in line and not line.lstrip().startswith("#")
    ]
    assert found == [], found


async def test_stopping_the_expiry_loop_as_it_wakes_ends_it(db: Database) -> None:
    """The wake and the stop in the same turn of the event loop."""
    store = Store(db)
    for turns in range(6):
        expiry = Expiry(store, interval=30)
        await expiry.start()
        await asyncio.sleep(0.05)  # asleep until the interval
        expiry.posted(datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1))
        for _ in range(turns):
            await asyncio.sleep(0)
        stopping = asyncio.ensure_future(expiry.stop())
        done, _ = await asyncio.wait({stopping}, timeout=2)
        assert done, f"the expiry loop swallowed its cancellation {turns} turns after waking"


async def test_sigterm_ends_the_process_while_a_call_waits_on_a_row_lock(
    fresh_database_url: str,  # noqa: F811
) -> None:
    """A call stuck in the database (its row locked by someone who never lets
    go) holds neither the transports nor the pool's close past the stop."""
    url = fresh_database_url
    db, w = await open_world(url)
    env = {"COMPASS_DRAIN_SECONDS": str(DRAIN), "COMPASS_LOG_LEVEL": "INFO"}
    server = ServerProcess(url, env=env).start()
    client = GrpcClient(server.grpc_port)
    lock = await psycopg.AsyncConnection.connect(url)
    try:
        ask_id = await post(client, w, 600)
        (ask, _) = await w.store.get_ask(w.human, ask_id)
        await lock.execute("SELECT 1 FROM messages WHERE id = %s FOR UPDATE", (ask.message_id,))
        answering = asyncio.ensure_future(
            client.call(
                "RespondToAsk",
                pb.RespondToAskRequest(
                    ask_id=ask_id,
                    answers=[pb.AskQuestionAnswer(question_id="q", chosen_option_ids=["y"])],
                ),
                w.tokens[w.human.account_id],
            )
        )
        await asyncio.sleep(0.5)
        assert not answering.done()
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = await asyncio.to_thread(_wait, server, DRAIN + 15)
        took = time.monotonic() - started
        assert code is not None, f"still running {took:.1f} s after SIGTERM\n" + "".join(server.log)
        assert server.stop() == 0, "".join(server.log)
        with contextlib.suppress(CallError):
            await answering
    finally:
        await lock.close()
        await client.close()
        if server.proc is not None:
            server.kill9()
        await db.close()
