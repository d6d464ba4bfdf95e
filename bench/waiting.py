"""W agents waiting on open asks at once: what a waiting agent and a watching
person cost the server, how fast an answer reaches the one agent it is for,
and how long a restart takes to bind every session again.

    .venv/bin/python -m bench.waiting [--database-url ADMIN_URL] [--w 1000]
                                      [--per-stream 50 | --single] [--subscribers N]
                                      [--idle-seconds 60] [--answers 500] [--rate 50]
                                      [--subscribe-over grpc|connect]
                                      [--no-restart] [--tree DIR]

It creates a throwaway database (`compass_bench_waiting`, dropped first and
at the end), starts `compass-server serve` on it, and makes W pairs (a person,
their agent, a channel of the two) and runners: one runner per
`--per-stream` agents, each holding one relay stream with a session per
agent, as a runner hosting many agents does; `--single` gives every agent a
runner and a stream of its own, as `compass-mcp` does. Each agent posts one
ask over its session and waits. W/10 of the people (or `--subscribers`)
hold the page's stream (Subscribe) open, over gRPC or (`--subscribe-over
connect`) over Connect on the HTTP port, as the page holds it.

It records the server's resident memory before the sessions, once they
wait and once the subscribers are open (per session and per subscriber);
PostgreSQL's connections for the database while they wait; the CPU of the
server and of PostgreSQL over an idle window; then answers asks at a steady
`--rate` and records, for each, send → the delivery frame on that agent's
lane, and the answer committed (RespondToAsk returned) → that frame, and
→ the first event on the person's page stream (Subscribe) showing the ask
answered, with how many events the subscribers got per answer. Last
it stops the server (SIGTERM, as a deploy does) and starts it again on the
same ports while the runners reconnect with the agent kit's own backoff, and
answers more asks as soon as the new server takes calls: recovery is the
time from the old server's exit until every session is bound again and
every one of those answers reached its lane.

This process runs every stream; on a small machine it competes with the
server for the cores (its own CPU is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import os
import signal
import sys
import time
import uuid
from typing import Any

import grpc
import psycopg
from connectrpc.errors import ConnectError

from bench.harness import default_database_url, machine_idle_now, percentile_ms
from bench.mcp_wait import bench_database, db_activity, rss_kib
from bench.server import (
    QUESTION_ID,
    REPO_ROOT,
    Pair,
    Provisioner,
    _server_argv,
    ask_request,
    postgres_cpu_s,
    process_cpu_s,
)
from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_connect, comms_pb2, comms_pb2_grpc
from compass_agentkit.relay import Backoff

RELAY = "/compass.v1.AgentGatewayService/Relay"
DB_NAME = "compass_bench_waiting"
# A connection of its own per stream, as separate runners would have.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class ServerProc:
    """`compass-server serve`, restartable on the ports it first took."""

    def __init__(self, url: str, extra: list[str], tree: str | None = None) -> None:
        self.url = url
        self.extra = extra
        self.tree = tree
        self.grpc_port = 0
        self.http_port = 0
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> float:
        started = time.perf_counter()
        env = {**os.environ, "COMPASS_LOG_LEVEL": os.environ.get("COMPASS_LOG_LEVEL", "WARNING")}
        if self.tree:
            env["PYTHONPATH"] = os.pathsep.join([self.tree, os.path.join(self.tree, "gen")])
        self.proc = await asyncio.create_subprocess_exec(
            *_server_argv(),
            "serve",
            "--database-url",
            self.url,
            "--grpc-listen",
            f"127.0.0.1:{self.grpc_port}",
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
            *self.extra,
            cwd=REPO_ROOT,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        ready = json.loads(await asyncio.wait_for(self.proc.stdout.readline(), 120))
        self.grpc_port, self.http_port = ready["grpc_port"], ready["http_port"]
        return time.perf_counter() - started

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.proc.wait(), 60)


class Lanes:
    """Where each agent's deliveries land, and when."""

    def __init__(self) -> None:
        self.ask_of: dict[str, str] = {}  # ask_id -> agent
        self.heard: dict[str, float] = {}  # ask_id -> when its answer reached the lane
        self.waiters: dict[str, asyncio.Future[float]] = {}
        self.bound: dict[str, float] = {}  # agent -> when last bound
        self.deliveries = 0
        self.twice = 0
        self.bind_errors: dict[str, int] = {}
        self.dropped = 0
        self.seen: dict[str, set[int]] = {}

    def delivered(self, agent: str, event: comms_pb2.Event) -> None:
        self.deliveries += 1
        seen = self.seen.setdefault(agent, set())
        if event.event_id in seen:
            self.twice += 1
        seen.add(event.event_id)
        if event.WhichOneof("kind") != "message_posted":
            return
        block = event.message_posted.message.blocks[0]
        if block.WhichOneof("block") != "ask_answer":
            return
        ask_id = block.ask_answer.ask_id
        now = time.perf_counter()
        self.heard.setdefault(ask_id, now)
        waiter = self.waiters.pop(ask_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)

    def wait_for(self, ask_id: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if ask_id in self.heard:
            future.set_result(self.heard[ask_id])
        else:
            self.waiters[ask_id] = future
        return future


class RelayStream:
    """One runner's relay stream with a session per agent; it reconnects with
    the kit's backoff and binds every session again, as the kit does."""

    def __init__(self, server: ServerProc, token: str, pairs: list[Pair], lanes: Lanes) -> None:
        self.server = server
        self.token = token
        self.pairs = {f"s-{p.agent.account_id}": p for p in pairs}
        self.lanes = lanes
        self.results: dict[str, asyncio.Future[gw.CommsCallResult]] = {}
        self.ids = 0
        self.all_bound = asyncio.Event()
        self.bound: set[str] = set()
        self.closing = False
        self.task: asyncio.Task[None] | None = None
        self.queue: asyncio.Queue[gw.RunnerFrame] = asyncio.Queue()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        backoff = Backoff()
        while not self.closing:
            self.bound.clear()
            self.all_bound.clear()
            self.queue = asyncio.Queue()
            for session, pair in self.pairs.items():
                self.queue.put_nowait(
                    gw.RunnerFrame(
                        bind=gw.BindSession(
                            session_id=session, agent_account_id=pair.agent.account_id
                        )
                    )
                )
            try:
                async with grpc.aio.insecure_channel(
                    self.server.target, options=OWN_CONNECTION
                ) as channel:
                    call = channel.stream_stream(
                        RELAY,
                        request_serializer=lambda m: m.SerializeToString(),
                        response_deserializer=gw.HubFrame.FromString,
                    )(metadata=(("authorization", f"Bearer {self.token}"),))
                    writer = asyncio.get_running_loop().create_task(self._write(call))
                    try:
                        async for frame in call:
                            if self._handle(frame):
                                backoff.reset()
                    finally:
                        writer.cancel()
            except grpc.aio.AioRpcError as exc:
                if not self.closing:
                    log(f"a relay stream ended: {exc.code().name}: {exc.details()}")
            for future in self.results.values():
                if not future.done():
                    future.set_exception(ConnectionError("stream ended"))
            self.results.clear()
            if not self.closing:
                await asyncio.sleep(backoff.next())

    async def _write(self, call: Any) -> None:
        while True:
            await call.write(await self.queue.get())

    def _handle(self, frame: gw.HubFrame) -> bool:
        kind = frame.WhichOneof("frame")
        if kind == "delivery":
            session = frame.delivery.session_id
            self.lanes.delivered(self.pairs[session].agent.account_id, frame.delivery.event)
            self.queue.put_nowait(
                gw.RunnerFrame(
                    ack=gw.DeliveryAck(session_id=session, event_id=frame.delivery.event.event_id)
                )
            )
        elif kind == "result":
            future = self.results.pop(frame.result.call_id, None)
            if future is not None and not future.done():
                future.set_result(frame.result.result)
        elif kind == "bound":
            self.bound.add(frame.bound.session_id)
            self.lanes.bound[self.pairs[frame.bound.session_id].agent.account_id] = (
                time.perf_counter()
            )
            if len(self.bound) == len(self.pairs):
                self.all_bound.set()
            return True
        elif kind == "session_error":
            err = frame.session_error
            self.lanes.bind_errors[err.error.code] = (
                self.lanes.bind_errors.get(err.error.code, 0) + 1
            )
            if err.session_id in self.pairs and err.session_id not in self.bound:
                # Bound again after a pause, as a runner should after a refusal it may outlive.
                pair = self.pairs[err.session_id]
                frame_again = gw.RunnerFrame(
                    bind=gw.BindSession(
                        session_id=err.session_id, agent_account_id=pair.agent.account_id
                    )
                )
                asyncio.get_running_loop().call_later(
                    Backoff().next() * 4, lambda: self.queue.put_nowait(frame_again)
                )
        return False

    async def post_ask(self, session: str) -> str:
        """Posts the agent's ask; after a dropped stream, again once it is
        bound (alike asks from one agent in one channel are one ask)."""
        for _ in range(10):
            await self.all_bound.wait()
            try:
                return await self._post_ask(session)
            except (ConnectionError, TimeoutError):
                self.lanes.dropped += 1
        raise RuntimeError("post_ask failed ten times")

    async def _post_ask(self, session: str) -> str:
        pair = self.pairs[session]
        self.ids += 1
        call_id = f"c{self.ids}"
        future: asyncio.Future[gw.CommsCallResult] = asyncio.get_running_loop().create_future()
        self.results[call_id] = future
        ask = ask_request(pair.channel_id).blocks[0].ask
        self.queue.put_nowait(
            gw.RunnerFrame(
                call=gw.RelayCommsCallRequest(
                    session_id=session,
                    call_id=call_id,
                    call=gw.CommsCallRequest(
                        post_ask=gw.PostAskRequest(channel_id=pair.channel_id, ask=ask)
                    ),
                )
            )
        )
        result = await asyncio.wait_for(future, 180)
        if result.WhichOneof("result") != "post_ask":
            raise RuntimeError(f"post_ask failed: {result}")
        self.lanes.ask_of[result.post_ask.ask_id] = pair.agent.account_id
        return str(result.post_ask.ask_id)

    async def close(self) -> None:
        self.closing = True
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


async def provision(url: str, w: int) -> tuple[list[Pair], uuid.UUID]:
    from bench.server import Account

    async with Provisioner(url) as prov:
        ws = await prov.workspace("waiting")

        async def one(i: int) -> tuple[Account, Account]:
            human = await prov.human(ws, f"person-{i}")
            return await prov.agent(ws, f"agent-{i}", human), human

        made = []
        for start in range(0, w, 50):
            made += await asyncio.gather(*(one(i) for i in range(start, min(w, start + 50))))
    return [Pair(a, h, "") for a, h in made], ws


async def make_channels(server: ServerProc, pairs: list[Pair]) -> list[Pair]:
    from bench.server import create_channel

    out: list[Pair] = []
    async with grpc.aio.insecure_channel(server.target) as channel:
        stub = comms_pb2_grpc.CommsServiceStub(channel)

        async def one(i: int, p: Pair) -> Pair:
            return Pair(
                p.agent, p.human, await create_channel(stub, p.agent, f"desk-{i}", [p.human])
            )

        for start in range(0, len(pairs), 50):
            out += await asyncio.gather(
                *(one(i, p) for i, p in enumerate(pairs[start : start + 50], start))
            )
    return out


async def make_runners(
    url: str, ws: uuid.UUID, pairs: list[Pair], per: int
) -> list[tuple[str, list[Pair]]]:
    out = []
    async with Provisioner(url) as prov:
        for start in range(0, len(pairs), per):
            group = pairs[start : start + per]
            runner, token = await prov.store.create_runner(ws, f"runner-{start}")
            for p in group:
                await prov.store.assign_agent(ws, runner.runner_id, uuid.UUID(p.agent.account_id))
            out.append((token, group))
    return out


def _seen(event: Any, got: list[int], answered: dict[str, float], ready: list[int]) -> None:
    got[0] += 1
    if event.WhichOneof("kind") == "ready":
        ready[0] += 1
    if event.WhichOneof("kind") == "message_updated":
        for block in event.message_updated.message.blocks:
            if block.WhichOneof("block") == "ask" and block.ask.answered:
                answered.setdefault(block.ask.ask_id, time.perf_counter())


async def subscribe(
    server: ServerProc,
    human_token: str,
    stop: asyncio.Event,
    got: list[int],
    answered: dict[str, float],
    ready: list[int],
    over: str = "grpc",
) -> None:
    """The page's stream: counts its events, and notes when it first shows
    each ask answered. Over gRPC, or over Connect on the HTTP port as the
    page itself holds it (HTTP/1.1, a connection each)."""
    if over == "connect":
        client = comms_connect.CommsServiceClient(f"http://127.0.0.1:{server.http_port}")
        try:
            with contextlib.suppress(ConnectError, asyncio.CancelledError):
                async for event in client.subscribe(
                    comms_pb2.SubscribeRequest(),
                    headers={"authorization": f"Bearer {human_token}"},
                ):
                    _seen(event, got, answered, ready)
                    if stop.is_set():
                        break
        finally:
            await client.close()
        return
    async with grpc.aio.insecure_channel(server.target, options=OWN_CONNECTION) as channel:
        stub = comms_pb2_grpc.CommsServiceStub(channel)
        call = stub.Subscribe(
            comms_pb2.SubscribeRequest(), metadata=(("authorization", f"Bearer {human_token}"),)
        )
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            async for event in call:
                _seen(event, got, answered, ready)
                if stop.is_set():
                    break


async def settled_rss(pid: int) -> int:
    await asyncio.sleep(3)
    return rss_kib(pid)


async def answer_at_rate(
    server: ServerProc,
    lanes: Lanes,
    asks: list[tuple[str, str]],
    rate: float,
    *,
    retry: bool = False,
    committed_at: dict[str, float] | None = None,
) -> tuple[list[float], list[float], int]:
    """Answers each (ask_id, person's token) at `rate` a second; the
    latencies send → lane and committed → lane, and the answers that failed."""
    sent_to_lane: list[float] = []
    commit_to_lane: list[float] = []
    failed = 0
    channels = [grpc.aio.insecure_channel(server.target, options=OWN_CONNECTION) for _ in range(4)]
    stubs = [comms_pb2_grpc.CommsServiceStub(c) for c in channels]

    async def one(i: int, ask_id: str, token: str) -> None:
        nonlocal failed
        request = comms_pb2.RespondToAskRequest(
            ask_id=ask_id,
            answers=[
                comms_pb2.AskQuestionAnswer(question_id=QUESTION_ID, chosen_option_ids=["yes"])
            ],
        )
        heard = lanes.wait_for(ask_id)
        sent = time.perf_counter()
        while True:
            try:
                await stubs[i % 4].RespondToAsk(
                    request, metadata=(("authorization", f"Bearer {token}"),), timeout=30
                )
                break
            except grpc.aio.AioRpcError as exc:
                if retry and exc.code() == grpc.StatusCode.UNAVAILABLE:
                    await asyncio.sleep(0.05)
                    continue
                failed += 1
                FAILED_CODES[f"{exc.code().name}: {exc.details()}"[:160]] += 1
                return
        committed = time.perf_counter()
        if committed_at is not None:
            committed_at[ask_id] = committed
        at = await asyncio.wait_for(heard, 120)
        sent_to_lane.append(at - sent)
        commit_to_lane.append(max(0.0, at - committed))

    start = time.perf_counter()
    tasks = []
    for i, (ask_id, token) in enumerate(asks):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(i, ask_id, token)))
    await asyncio.gather(*tasks)
    for c in channels:
        await c.close()
    return sorted(sent_to_lane), sorted(commit_to_lane), failed


# Why answers failed, by status and message.
FAILED_CODES: collections.Counter[str] = collections.Counter()


def _ms(values: list[float]) -> str:
    if not values:
        return "none"
    values = sorted(values)
    return (
        f"p50 {percentile_ms(values, 50):.1f} ms, p99 {percentile_ms(values, 99):.1f} ms, "
        f"max {values[-1] * 1000:.1f} ms (n={len(values)})"
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    w = args.w
    per = 1 if args.single else args.per_stream
    subscribers = w // 10 if args.subscribers is None else args.subscribers
    results: dict[str, Any] = {
        "w": w,
        "per_stream": per,
        "subscribers": subscribers,
        "subscribe_over": args.subscribe_over,
    }
    results["machine_idle_before"] = await machine_idle_now(2.0)
    log(f"machine idle before: {results['machine_idle_before']:.0%}")
    extra = [
        "--relay-sessions-per-stream",
        str(max(per, 1)),
        "--relay-streams-per-runner",
        "8",
        "--subscribe-streams-per-account",
        "16",
    ]
    async with bench_database(args.database_url, DB_NAME) as url:
        server = ServerProc(url, extra, args.tree)
        await server.start()
        try:
            t = time.perf_counter()
            pairs, ws = await provision(url, w)
            pairs = await make_channels(server, pairs)
            runners = await make_runners(url, ws, pairs, per)
            # Statistics as autovacuum keeps them: this database grew from
            # nothing within the minute, faster than its next analyze.
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute("ANALYZE")
            log(
                f"provisioned {w} pairs and {len(runners)} runners "
                f"in {time.perf_counter() - t:.0f} s"
            )
            gc.collect()
            rss0 = await settled_rss(server.pid)
            lanes = Lanes()
            streams = [RelayStream(server, token, group, lanes) for token, group in runners]
            t = time.perf_counter()
            for s in streams:
                s.start()
            await asyncio.wait_for(asyncio.gather(*(s.all_bound.wait() for s in streams)), 600)
            results["bind_all_s"] = time.perf_counter() - t
            log(f"{w} sessions bound in {results['bind_all_s']:.1f} s over {len(streams)} streams")
            ask_by_agent: dict[str, str] = {}
            t = time.perf_counter()
            for s in streams:
                for start in range(0, len(s.pairs), 50):
                    sessions = list(s.pairs)[start : start + 50]
                    ids = await asyncio.gather(*(s.post_ask(x) for x in sessions))
                    for session, ask_id in zip(sessions, ids, strict=True):
                        ask_by_agent[s.pairs[session].agent.account_id] = ask_id
            log(f"{w} asks posted in {time.perf_counter() - t:.1f} s; all waiting")
            rss1 = await settled_rss(server.pid)
            stop_subs = asyncio.Event()
            sub_events = [0]
            sub_ready = [0]
            page_answered: dict[str, float] = {}
            t = time.perf_counter()
            sub_tasks = [
                asyncio.ensure_future(
                    subscribe(
                        server,
                        p.human.token,
                        stop_subs,
                        sub_events,
                        page_answered,
                        sub_ready,
                        args.subscribe_over,
                    )
                )
                for p in pairs[:subscribers]
            ]
            # Every stream open (its ready frame read) before memory and the idle window.
            for _ in range(1200):
                if sub_ready[0] >= subscribers:
                    break
                await asyncio.sleep(0.1)
            results["subscribers_ready_s"] = time.perf_counter() - t
            took_s = results["subscribers_ready_s"]
            log(f"{sub_ready[0]} of {subscribers} subscribers ready in {took_s:.1f} s")
            rss2 = await settled_rss(server.pid)
            results["rss_kib"] = {"before": rss0, "waiting": rss1, "subscribed": rss2}
            results["kib_per_session"] = (rss1 - rss0) / w
            results["kib_per_subscriber"] = (rss2 - rss1) / max(subscribers, 1)
            log(
                f"server RSS {rss0} → {rss1} KiB waiting → {rss2} KiB with {subscribers} "
                f"subscribers: {results['kib_per_session']:.1f} KiB per waiting session, "
                f"{results['kib_per_subscriber']:.1f} KiB per subscriber"
            )
            # Idle: everyone waits, nothing happens but heartbeats and liveness.
            commits0, states = await db_activity(args.database_url, DB_NAME)
            cpu0 = process_cpu_s(server.pid)
            pg0 = postgres_cpu_s([DB_NAME])
            me0 = time.process_time()
            await asyncio.sleep(args.idle_seconds)
            cpu = process_cpu_s(server.pid) - cpu0
            pg = postgres_cpu_s([DB_NAME]) - pg0
            me = time.process_time() - me0
            commits1, states = await db_activity(args.database_url, DB_NAME)
            results["idle"] = {
                "seconds": args.idle_seconds,
                "server_core_pct": 100 * cpu / args.idle_seconds,
                "server_core_pct_per_1000": 100 * cpu / args.idle_seconds * 1000 / w,
                "postgres_core_pct": 100 * pg / args.idle_seconds,
                "bench_client_core_pct": 100 * me / args.idle_seconds,
                "commits_per_s": (commits1 - commits0) / args.idle_seconds,
                "db_connections": states,
            }
            log(f"idle: {json.dumps(results['idle'])}")
            # A steady rate of answers, each to one agent among W.
            n = min(args.answers, w)
            order = [(ask_by_agent[p.agent.account_id], p.human.token) for p in pairs[:n]]
            cpu0 = process_cpu_s(server.pid)
            pg0 = postgres_cpu_s([DB_NAME])
            events0 = sub_events[0]
            answers_committed: dict[str, float] = {}
            t = time.perf_counter()
            sent, committed, failed = await answer_at_rate(
                server, lanes, order, args.rate, committed_at=answers_committed
            )
            took = time.perf_counter() - t
            server_cpu = process_cpu_s(server.pid) - cpu0
            pg_cpu = postgres_cpu_s([DB_NAME]) - pg0
            # The page of each answered ask's person, when it subscribes.
            watched = {ask_by_agent[p.agent.account_id] for p in pairs[: min(n, subscribers)]}
            watched &= set(answers_committed)
            for _ in range(300):  # 30 s at most
                if watched <= set(page_answered):
                    break
                await asyncio.sleep(0.1)
            to_page = [
                max(0.0, page_answered[a] - answers_committed[a])
                for a in watched
                if a in page_answered
            ]
            results["answers"] = {
                "n": n,
                "rate": args.rate,
                "send_to_lane": _ms(sent),
                "commit_to_lane": _ms(committed),
                "failed": failed,
                "commit_to_page": _ms(to_page),
                "page_missed": len(watched) - len(to_page),
                "subscriber_events_per_answer": (sub_events[0] - events0) / n,
                "server_cpu_ms_per_answer": 1000 * server_cpu / n,
                "postgres_cpu_ms_per_answer": 1000 * pg_cpu / n,
                "seconds": took,
            }
            log(f"answers: {json.dumps(results['answers'])}")
            results["deliveries_twice_on_a_lane_before_restart"] = lanes.twice
            if args.restart:
                # Asks still open; the server restarts under them.
                left = [p for p in pairs[n:]]
                asks = [(ask_by_agent[p.agent.account_id], p.human.token) for p in left]
                k = min(len(asks), 100)
                stop_subs.set()
                t0 = time.perf_counter()
                await server.stop()
                down = time.perf_counter()
                start_s = await server.start()
                log(f"server stopped in {down - t0:.1f} s, started again in {start_s:.1f} s")
                committed_at: dict[str, float] = {}
                answering = asyncio.ensure_future(
                    answer_at_rate(
                        server, lanes, asks[:k], args.rate, retry=True, committed_at=committed_at
                    )
                )
                await asyncio.wait_for(asyncio.gather(*(s.all_bound.wait() for s in streams)), 600)
                bound_at = time.perf_counter()
                sent, committed, failed = await answering
                done_at = max([bound_at, *(lanes.heard.get(a, 0.0) for a, _ in asks[:k])])
                results["restart"] = {
                    "stop_s": down - t0,
                    "start_s": start_s,
                    "all_bound_after_exit_s": bound_at - down,
                    "answers_meanwhile": k,
                    "answers_failed": failed,
                    "answers_delivered": sum(1 for a, _ in asks[:k] if a in lanes.heard),
                    "recovered_after_exit_s": done_at - down,
                    "send_to_lane": _ms(sent),
                }
                # Where an answer given meanwhile waited: for its call, for its
                # agent's rebind, or after both, for its lane's first read.
                answered = [(a, lanes.ask_of[a]) for a, _ in asks[:k] if a in committed_at]
                results["restart"]["answer_committed_after_exit"] = _ms(
                    [committed_at[a] - down for a, _ in answered]
                )
                results["restart"]["its_agent_bound_after_exit"] = _ms(
                    [lanes.bound[g] - down for _, g in answered if g in lanes.bound]
                )
                results["restart"]["heard_after_both"] = _ms(
                    [
                        max(0.0, lanes.heard[a] - max(committed_at[a], lanes.bound[g]))
                        for a, g in answered
                        if a in lanes.heard and g in lanes.bound
                    ]
                )
                log(f"restart: {json.dumps(results['restart'])}")
            # After a restart, deliveries whose acks the old server never stored come again.
            results["deliveries_twice_on_a_lane"] = lanes.twice
            results["session_errors_by_code"] = lanes.bind_errors
            results["answers_failed_by_status"] = dict(FAILED_CODES)
            results["calls_lost_to_dropped_streams"] = lanes.dropped
            for s in streams:
                await s.close()
            stop_subs.set()
            for task in sub_tasks:
                task.cancel()
            await asyncio.gather(*sub_tasks, return_exceptions=True)
        finally:
            await server.stop()
    return results


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.waiting", description=__doc__.split("\n")[0])
    p.add_argument("--database-url", default=default_database_url())
    p.add_argument("--w", type=int, default=1000, help="agents waiting (default 1000)")
    p.add_argument("--per-stream", type=int, default=50, help="sessions per relay stream")
    p.add_argument("--single", action="store_true", help="one session per stream (compass-mcp)")
    p.add_argument(
        "--subscribers",
        type=int,
        metavar="N",
        help="people holding the page's stream open (default W/10)",
    )
    p.add_argument(
        "--subscribe-over",
        choices=("grpc", "connect"),
        default="grpc",
        help="the subscribers' protocol: gRPC, or Connect as the page holds it",
    )
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument("--answers", type=int, default=500)
    p.add_argument("--rate", type=float, default=50.0, help="answers a second")
    p.add_argument("--no-restart", dest="restart", action="store_false")
    p.add_argument(
        "--tree",
        metavar="DIR",
        help="serve the code of this checkout (first on PYTHONPATH): the code before a change",
    )
    args = p.parse_args(argv)
    results = asyncio.run(run(args))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
