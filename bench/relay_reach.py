"""What relay sessions of one agent in many channels cost the server in memory.

    python -m bench.relay_reach [--database-url ADMIN_URL] [--sessions 200]
        [--channels 2000] [--rounds 2] [--tree DIR ...]

For each round and each code tree (every --tree, then this checkout,
alternated), a throwaway database of its own (`compass_bench_relay_reach`) and
a real `compass-server serve` run from that tree (its code first on
PYTHONPATH: the code before a change, say; the generated contract from the
same tree). One agent is a member of `--channels` channels (written straight
into the database) and of one channel with a person. A runner binds one
session of the agent, hears a message and acks it; the server's resident
memory then is the baseline. It then binds `--sessions` more sessions of the
same agent on the same stream (20 at a time), the person posts once, and the
bench waits until every session has that delivery (every lane bound and
waiting), lets the server settle, and reads its resident memory again.

Reported per run: RSS before and after, what the sessions grew it by, and
that per session; the peak (VmHWM) over the baseline; and the load average
and idle CPU when the run started (memory is far less sensitive to load than
time, but a busy machine is noted).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import psycopg

from bench.harness import default_database_url, machine_idle_now, resolve_loop, run_async
from bench.server import Provisioner, bearer, create_channel, server_process
from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2, comms_pb2_grpc

NAME = "compass_bench_relay_reach"
RELAY = "/compass.v1.AgentGatewayService/Relay"
WAIT_S = 120.0


def _kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


async def _settled_rss(pid: int, seconds: float = 6.0) -> int:
    """The server's RSS once it stops moving by more than 512 KiB in 0.5 s (KiB)."""
    last = _kib(pid, "VmRSS")
    for _ in range(int(seconds / 0.5)):
        await asyncio.sleep(0.5)
        now = _kib(pid, "VmRSS")
        if abs(now - last) < 512:
            break
        last = now
    return _kib(pid, "VmRSS")


class Runner:
    """One relay stream: frames sent in order, every hub frame kept by kind."""

    def __init__(self, target: str, token: str) -> None:
        self.channel = grpc.aio.insecure_channel(target)
        self.outgoing: asyncio.Queue[gw.RunnerFrame | None] = asyncio.Queue()
        self.bound: set[str] = set()
        self.refused: list[gw.SessionError] = []
        self.deliveries: dict[str, list[comms_pb2.Event]] = {}
        self.changed = asyncio.Event()

        async def frames() -> AsyncIterator[gw.RunnerFrame]:
            while (frame := await self.outgoing.get()) is not None:
                yield frame

        self.call = self.channel.stream_stream(
            RELAY,
            request_serializer=gw.RunnerFrame.SerializeToString,
            response_deserializer=gw.HubFrame.FromString,
        )(frames(), metadata=bearer(token))
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.call:
            kind = frame.WhichOneof("frame")
            if kind == "bound":
                self.bound.add(frame.bound.session_id)
            elif kind == "session_error":
                self.refused.append(frame.session_error)
            elif kind == "delivery":
                self.deliveries.setdefault(frame.delivery.session_id, []).append(
                    frame.delivery.event
                )
            self.changed.set()

    async def until(self, done: Callable[[], object]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not done():
                if self.refused:
                    raise RuntimeError(f"a session was refused: {self.refused[0]}")
                self.changed.clear()
                await self.changed.wait()

    def bind(self, session: str, agent_id: str) -> None:
        self.outgoing.put_nowait(
            gw.RunnerFrame(bind=gw.BindSession(session_id=session, agent_account_id=agent_id))
        )

    def ack(self, session: str, event_id: int) -> None:
        self.outgoing.put_nowait(
            gw.RunnerFrame(ack=gw.DeliveryAck(session_id=session, event_id=event_id))
        )

    async def close(self) -> None:
        self.outgoing.put_nowait(None)
        self.call.cancel()
        self.reader.cancel()
        await self.channel.close()


@dataclass
class Measured:
    tree: str
    round: int
    load: float
    idle: float
    before_kib: int
    after_kib: int
    peak_kib: int
    sessions: int

    @property
    def grown_mb(self) -> float:
        return (self.after_kib - self.before_kib) / 1024


async def _join_many(url: str, workspace_id: uuid.UUID, agent_id: str, n: int) -> None:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            """
            WITH c AS (
              INSERT INTO channels (id, workspace_id, name, topic, kind)
              SELECT gen_random_uuid(), %(ws)s, 'bulk-' || i, '', 'channel'
              FROM generate_series(1, %(n)s) i
              RETURNING id
            )
            INSERT INTO channel_members (channel_id, account_id, workspace_id)
            SELECT id, %(who)s, %(ws)s FROM c
            """,
            {"ws": workspace_id, "who": agent_id, "n": n},
        )


async def measure(
    admin: str, tree: str | None, round_: int, sessions: int, channels: int
) -> Measured:
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{NAME}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=NAME)
    settings = {"COMPASS_RELAY_SESSIONS_PER_STREAM": str(sessions + 1)}
    if tree:
        settings["PYTHONPATH"] = os.pathsep.join([tree, os.path.join(tree, "gen")])
    load = os.getloadavg()[0]
    idle = await machine_idle_now(2.0)
    try:
        async with server_process(url, settings) as server:
            async with Provisioner(url) as p:
                ws = await p.workspace("reach")
                person = await p.human(ws, "ada")
                agent = await p.agent(ws, "scout", person)
                runner, token = await p.store.create_runner(ws, "laptop")
                await p.store.assign_agent(ws, runner.runner_id, uuid.UUID(agent.account_id))
            await _join_many(url, ws, agent.account_id, channels)
            async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                stub = comms_pb2_grpc.CommsServiceStub(channel)
                general = await create_channel(stub, person, "general", [agent])

                async def say(text: str) -> None:
                    await stub.PostMessage(
                        comms_pb2.PostMessageRequest(
                            channel_id=general,
                            blocks=[comms_pb2.MessageBlock(text=comms_pb2.TextBlock(text=text))],
                        ),
                        metadata=person.metadata,
                    )

                relay = Runner(server.grpc_target, token)
                try:
                    relay.bind("first", agent.account_id)
                    await relay.until(lambda: "first" in relay.bound)
                    await say("warm")
                    await relay.until(lambda: relay.deliveries.get("first"))
                    relay.ack("first", relay.deliveries["first"][-1].event_id)
                    await asyncio.sleep(1.0)
                    before = await _settled_rss(server.pid)
                    peak_before = _kib(server.pid, "VmHWM")
                    names = [f"s{i}" for i in range(sessions)]
                    for start in range(0, sessions, 20):
                        batch = names[start : start + 20]
                        for name in batch:
                            relay.bind(name, agent.account_id)
                        await relay.until(functools.partial(relay.bound.issuperset, batch))
                    await say("all here")
                    await relay.until(lambda: all(relay.deliveries.get(n) for n in names))
                    after = await _settled_rss(server.pid)
                    peak = _kib(server.pid, "VmHWM")
                finally:
                    await relay.close()
    finally:
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
    return Measured(
        tree or "this checkout",
        round_,
        load,
        idle,
        before,
        after,
        max(peak, peak_before) - before,
        sessions,
    )


async def run(admin: str, sessions: int, channels: int, rounds: int, trees: list[str]) -> None:
    runs = []
    order: list[str | None] = [*trees, None]
    for round_ in range(1, rounds + 1):
        for tree in order:
            print(f"  [round {round_}, {tree or 'this checkout'}]", file=sys.stderr, flush=True)
            started = time.monotonic()
            m = await measure(admin, tree, round_, sessions, channels)
            runs.append(m)
            print(
                f"  {m.tree}: +{m.grown_mb:.1f} MB in {time.monotonic() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"{sessions} relay sessions of one agent in {channels} channels (+1 with a person), "
        "one stream"
    )
    print()
    print(
        "| tree | round | load (1 min) | idle | RSS before | RSS after | grown | per session "
        "| peak over before |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in runs:
        print(
            f"| {m.tree} | {m.round} | {m.load:.1f} | {m.idle:.0%} | {m.before_kib / 1024:.0f} MB "
            f"| {m.after_kib / 1024:.0f} MB | {m.grown_mb:+.1f} MB "
            f"| {m.grown_mb * 1024 / m.sessions:.0f} KB | {m.peak_kib / 1024:+.1f} MB |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=default_database_url())
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--channels", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        help="another checkout whose server is measured too (before this one, each round)",
    )
    args = parser.parse_args(argv)
    run_async(
        run(args.database_url, args.sessions, args.channels, args.rounds, args.tree),
        resolve_loop("auto"),
    )


if __name__ == "__main__":
    main()
