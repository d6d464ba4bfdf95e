"""N `compass-mcp` processes, each waiting in an `ask` call: what waiting costs
and how fast an answer reaches the waiting tool call.

    .venv/bin/python -m bench.mcp_wait [--database-url ADMIN_URL] [--n 50]
                                       [--idle-seconds 20] [--rounds 2]

It creates a throwaway database (`compass_bench_mcp`, dropped first and at
the end), starts `compass-server serve` on it, and makes one workspace with
a person, N agents, one channel holding them all, and a runner per agent.
This process then launches N `compass-mcp` over stdio with the SDK's own
client (one ClientSession each) and calls `ask` on every one. Once all N
asks are posted (each says so in its first progress message) it measures,
over a quiet window, the CPU of the server, of the N MCP processes, of this
client process and of PostgreSQL for the database; the transactions the
database committed and the server's connections by state; and the resident
memory of each process. Then the person answers the asks over gRPC one at a
time, and for each it records the time from RespondToAsk returning (the
answer committed) to the `ask` tool result arriving at the client, and from
sending RespondToAsk. Rounds repeat the asks and the answers; the idle
window is measured in the first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench.harness import default_database_url, machine_idle_now, percentile_ms
from bench.server import (
    Account,
    Provisioner,
    create_channel,
    postgres_cpu_s,
    process_cpu_s,
    server_process,
)
from compass.v1 import comms_pb2, comms_pb2_grpc
from compass_server.store import migrate

MCP = Path(sys.executable).with_name("compass-mcp")
POSTED = re.compile(r"Posted ask (\S+) in channel")
QUESTIONS = [
    {
        "question": "Ship the release today?",
        "header": "Release",
        "options": [{"label": "Yes"}, {"label": "No", "description": "wait for Monday"}],
    }
]


@dataclass
class Waiter:
    """One compass-mcp process and the ask it waits on."""

    session: ClientSession
    agent: Account
    ask_id: str = ""
    task: asyncio.Task[CallToolResult] | None = None
    result_at: float = 0.0

    def ask(self) -> None:
        self.ask_id = ""
        posted = asyncio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            found = POSTED.search(message or "")
            if found and not self.ask_id:
                self.ask_id = found.group(1)
                posted.set()

        async def call() -> CallToolResult:
            result = await self.session.call_tool(
                "ask", {"questions": QUESTIONS}, progress_callback=progress
            )
            self.result_at = time.perf_counter()
            return result

        self.posted = posted
        self.task = asyncio.ensure_future(call())


def _kib(path: str, key: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def rss_kib(pid: int) -> int:
    return _kib(f"/proc/{pid}/status", "VmRSS:")


def pss_kib(pid: int) -> int:
    """Proportional set size: shared pages (the interpreter, grpc, the SDK) count
    once across the processes that share them."""
    return _kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def mcp_pids() -> list[int]:
    """The compass-mcp processes this process launched."""
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == me and b"compass-mcp" in cmdline:
            found.append(int(entry.name))
    return found


async def db_activity(url: str, name: str) -> tuple[int, dict[str, int]]:
    """Transactions committed in the database so far, and its connections by state."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (name,)
        )
        row = await cur.fetchone()
        cur = await conn.execute(
            "SELECT coalesce(state, '?'), count(*) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid() GROUP BY 1",
            (name,),
        )
        states = {state: count for state, count in await cur.fetchall()}
    return (int(row[0]) if row else 0), states


@contextlib.asynccontextmanager
async def bench_database(admin_url: str, name: str) -> AsyncIterator[str]:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{name}"'.encode())
    info = conninfo_to_dict(admin_url)
    info["dbname"] = name
    url = make_conninfo(**info)  # type: ignore[arg-type]
    try:
        await migrate(url)
        yield url
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def _ms(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return (
        f"p50 {percentile_ms(ordered, 50):.1f} ms, p99 {percentile_ms(ordered, 99):.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms (n={len(ordered)})"
    )


async def run(args: argparse.Namespace) -> None:
    name = "compass_bench_mcp"
    print(f"machine idle before: {await machine_idle_now(2.0):.0%}", file=sys.stderr)
    async with bench_database(args.database_url, name) as url, server_process(url) as server:
        async with Provisioner(url) as p:
            ws = await p.workspace("mcp-bench")
            ada = await p.human(ws, "ada")
            agents = [await p.agent(ws, f"agent{i}", ada) for i in range(args.n)]
            tokens = []
            for agent in agents:
                runner, token = await p.store.create_runner(ws, f"runner-{agent.account_id[:8]}")
                await p.store.assign_agent(ws, runner.runner_id, uuid.UUID(agent.account_id))
                tokens.append(token)
        channel = grpc.aio.insecure_channel(server.grpc_target)
        stub = comms_pb2_grpc.CommsServiceStub(channel)
        channel_id = await create_channel(stub, ada, "general", agents)

        async with contextlib.AsyncExitStack() as stack:
            started = time.perf_counter()
            waiters = []
            for agent, token in zip(agents, tokens, strict=True):
                env = {
                    **os.environ,
                    "COMPASS_URL": server.grpc_target,
                    "COMPASS_RUNNER_TOKEN": token,
                    "COMPASS_AGENT_ID": agent.account_id,
                    "COMPASS_CHANNEL_ID": channel_id,
                    "COMPASS_LOG_LEVEL": "WARNING",
                }
                params = StdioServerParameters(command=str(MCP), env=env)
                read, write = await stack.enter_async_context(stdio_client(params))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                waiters.append(Waiter(session, agent))
            print(
                f"{args.n} compass-mcp up in {time.perf_counter() - started:.1f}s",
                file=sys.stderr,
            )
            pids = mcp_pids()
            assert len(pids) == args.n, pids
            answer_to_result: list[float] = []
            send_to_result: list[float] = []
            idle: dict[str, Any] = {}
            for round_no in range(args.rounds):
                for waiter in waiters:
                    waiter.ask()
                await asyncio.wait_for(asyncio.gather(*(w.posted.wait() for w in waiters)), 120)
                if round_no == 0:
                    idle = await measure_idle(args.idle_seconds, server.pid, pids, url, name)
                for waiter in waiters:
                    sent = time.perf_counter()
                    await stub.RespondToAsk(
                        comms_pb2.RespondToAskRequest(
                            ask_id=waiter.ask_id,
                            answers=[
                                comms_pb2.AskQuestionAnswer(
                                    question_id="1", chosen_option_ids=["0"]
                                )
                            ],
                        ),
                        metadata=ada.metadata,
                    )
                    committed = time.perf_counter()
                    assert waiter.task is not None
                    result = await asyncio.wait_for(waiter.task, 30)
                    assert not result.is_error and "→ Yes" in str(result.content), result
                    answer_to_result.append(waiter.result_at - committed)
                    send_to_result.append(waiter.result_at - sent)
                    await asyncio.sleep(args.gap)
        await channel.close()

    report(args, idle, answer_to_result, send_to_result)


async def measure_idle(
    seconds: float, server_pid: int, pids: list[int], url: str, name: str
) -> dict[str, Any]:
    # The posts settle, and PostgreSQL's backends flush their statistics
    # (an idle backend does within 10 s).
    await asyncio.sleep(12.0)
    me = os.getpid()
    xacts_before, _ = await db_activity(url, name)
    cpu_before = (
        process_cpu_s(server_pid),
        [process_cpu_s(p) for p in pids],
        process_cpu_s(me),
        postgres_cpu_s({name}),
    )
    wall = time.perf_counter()
    idle_share = await machine_idle_now(seconds)
    wall = time.perf_counter() - wall
    cpu_after = (
        process_cpu_s(server_pid),
        [process_cpu_s(p) for p in pids],
        process_cpu_s(me),
        postgres_cpu_s({name}),
    )
    xacts_after, states = await db_activity(url, name)
    per_mcp = [(b - a) / wall for a, b in zip(cpu_before[1], cpu_after[1], strict=True)]
    rss = [rss_kib(p) / 1024 for p in pids]
    pss = [pss_kib(p) / 1024 for p in pids]
    return {
        "seconds": wall,
        "machine_idle": idle_share,
        "server_cpu": (cpu_after[0] - cpu_before[0]) / wall,
        "mcp_cpu_total": sum(per_mcp),
        "mcp_cpu_max": max(per_mcp),
        "client_cpu": (cpu_after[2] - cpu_before[2]) / wall,
        "pg_cpu": (cpu_after[3] - cpu_before[3]) / wall,
        # One of the two reads is the probe's own first transaction.
        "xacts": xacts_after - xacts_before - 1,
        "connections": states,
        "server_rss": rss_kib(server_pid) / 1024,
        "mcp_rss_median": statistics.median(rss),
        "mcp_rss_max": max(rss),
        "mcp_rss_total": sum(rss),
        "mcp_pss_median": statistics.median(pss),
        "mcp_pss_total": sum(pss),
    }


def report(
    args: argparse.Namespace,
    idle: dict[str, Any],
    answer_to_result: list[float],
    send_to_result: list[float],
) -> None:
    s = idle["seconds"]
    print(f"| {args.n} `compass-mcp`, each waiting in `ask`, over {s:.1f} s | |")
    print("| --- | --- |")
    print(f"| machine idle | {idle['machine_idle']:.0%} |")
    print(f"| compass-server CPU | {idle['server_cpu']:.2%} of a core |")
    print(
        f"| compass-mcp CPU, all {args.n} | {idle['mcp_cpu_total']:.2%} of a core "
        f"(busiest one {idle['mcp_cpu_max']:.2%}) |"
    )
    print(f"| PostgreSQL CPU (this database) | {idle['pg_cpu']:.2%} of a core |")
    print(f"| the MCP client process ({args.n} sessions) | {idle['client_cpu']:.2%} of a core |")
    print(f"| transactions committed in the window | {idle['xacts']} ({idle['xacts'] / s:.2f}/s) |")
    print(f"| server's database connections by state | {idle['connections']} |")
    print(
        f"| compass-mcp resident memory | median {idle['mcp_rss_median']:.0f} MiB, max "
        f"{idle['mcp_rss_max']:.0f} MiB, all {args.n} {idle['mcp_rss_total']:.0f} MiB |"
    )
    print(
        f"| compass-mcp proportional memory (PSS) | median {idle['mcp_pss_median']:.0f} MiB, "
        f"all {args.n} {idle['mcp_pss_total']:.0f} MiB |"
    )
    print(f"| compass-server resident memory | {idle['server_rss']:.0f} MiB |")
    print(f"| answer committed → `ask` result | {_ms(answer_to_result)} |")
    print(f"| RespondToAsk sent → `ask` result | {_ms(send_to_result)} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--database-url", default=default_database_url(), help="an admin URL")
    parser.add_argument("--n", type=int, default=50, help="compass-mcp processes")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between two answers")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
