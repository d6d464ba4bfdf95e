"""Where PostgreSQL's time goes in one ask lifecycle, statement by statement.

Not a row of `bench.run`: it starts a PostgreSQL cluster of its own (initdb
in a temporary directory, on a free loopback port) with
`shared_preload_libraries=pg_stat_statements`, `pg_stat_statements.track=all`
(statements inside functions too) and `track_functions=all`, which a shared
server can't be given without a restart. Against it, the real compass-server
(as `bench.run` starts it) runs the gRPC lifecycle (PostMessage of a
one-question ask by an agent, RespondToAsk by a person) from K workers, each
a fresh pair in one shared workspace, for a fixed number of lifecycles after
a warm-up; the counters are reset after the warm-up and read once the
database is idle (a server before migration 0043 numbered events after
commit). The ceiling's lifecycle
(bench/ceiling.py) then runs the same way for its CPU per lifecycle.

Everything is divided by the number of lifecycles. Statement times are wall
time inside the backend (`total_exec_time`), so at K>1 they include lock
waits; `CPU` is the cluster's processes' user+system time from /proc.

    python -m bench.pg_profile [--k 1,16] [--lifecycles 2000] [--top 25] [--posts-too]

`--posts-too` also measures posts of an ask alone (each a different ask, left
open), so a lifecycle less a post is the answer's share.

Needs PostgreSQL's `initdb`/`pg_ctl` on PATH (run as root it runs them as
the `postgres` user).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import psycopg
from psycopg_pool import AsyncConnectionPool

from bench import ceiling
from bench.harness import resolve_loop, run_async
from bench.server import (
    CLK_TCK,
    Server,
    Team,
    answer_request,
    ask_request,
    process_cpu_s,
    server_process,
)
from compass.v1 import comms_pb2_grpc

DBNAME = "compass_profile"
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.track_planning": "on",
    "pg_stat_statements.max": "10000",
    "track_functions": "all",
    "max_connections": "200",
}


def _as_postgres(argv: list[str]) -> list[str]:
    # initdb refuses to run as root.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Cluster:
    admin_url: str
    url: str
    postmaster: int


@contextlib.contextmanager
def own_cluster(keep: bool = False) -> Iterator[Cluster]:
    """A throwaway cluster with the statistics extensions loaded."""
    root = tempfile.mkdtemp(prefix="compass-pgprofile-")
    data = os.path.join(root, "data")
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        os.chown(root, pg.pw_uid, pg.pw_gid)
    port = _free_port()

    def run(argv: list[str]) -> None:
        subprocess.run(_as_postgres(argv), check=True, stdout=subprocess.DEVNULL)

    run(["initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"])
    opts = " ".join(f"-c {k}={v}" for k, v in SETTINGS.items())
    opts += f" -p {port} -k {root}"
    log = os.path.join(root, "log")
    run(["pg_ctl", "-D", data, "-l", log, "-o", opts, "-w", "start"])
    try:
        with open(os.path.join(data, "postmaster.pid")) as f:
            postmaster = int(f.readline())
        admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DBNAME}")
        url = f"postgresql://postgres@127.0.0.1:{port}/{DBNAME}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        print(f"  [own PostgreSQL pid={postmaster} port {port} in {root}]", file=sys.stderr)
        yield Cluster(admin, url, postmaster)
    finally:
        run(["pg_ctl", "-D", data, "-m", "fast", "-w", "stop"])
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def cluster_cpu_s(postmaster: int) -> float:
    """CPU seconds so far of the postmaster and its live children."""
    total = process_cpu_s(postmaster)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


RESET = "SELECT pg_stat_statements_reset(), pg_stat_reset()"

STATEMENTS = """
SELECT toplevel, calls, total_exec_time, rows, wal_bytes, plans, total_plan_time,
       regexp_replace(query, '\\s+', ' ', 'g')
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = current_database()
  AND query NOT LIKE '%%pg_stat_%%'
ORDER BY total_exec_time DESC
"""

FUNCTIONS = """
SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions
ORDER BY self_time DESC
"""

WAL = "SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal"


@dataclass
class Profile:
    label: str
    k: int
    lifecycles: int
    seconds: float
    pg_cpu_s: float
    server_cpu_s: float
    statements: list[tuple[Any, ...]]
    functions: list[tuple[Any, ...]]
    wal: tuple[Any, ...]


async def _read(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        statements = await (await conn.execute(STATEMENTS)).fetchall()
        functions = await (await conn.execute(FUNCTIONS)).fetchall()
        wal = await (await conn.execute(WAL)).fetchone()
    return statements, functions, wal or ()


async def _reset(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(RESET)
        await conn.execute("SELECT pg_stat_reset_shared('wal')")


async def _quiet(url: str) -> None:
    """Until no other backend of the database is running a statement."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(100):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND state = 'active' AND pid <> pg_backend_pid()"
            )
            row = await cur.fetchone()
            if row is not None and row[0] == 0:
                return
            await asyncio.sleep(0.05)


@asynccontextmanager
async def _measured(
    cluster: Cluster, label: str, k: int, lifecycles: int, server_pid: int | None
) -> AsyncIterator[list[Profile]]:
    """Resets the counters on entry; on exit reads them into the yielded list."""
    out: list[Profile] = []
    await _quiet(cluster.url)
    await _reset(cluster.url)
    cpu0 = cluster_cpu_s(cluster.postmaster)
    srv0 = process_cpu_s(server_pid) if server_pid else 0.0
    t0 = time.perf_counter()
    yield out
    seconds = time.perf_counter() - t0
    await asyncio.sleep(0.5)  # a server before 0043 numbers events after commit
    await _quiet(cluster.url)
    cpu = cluster_cpu_s(cluster.postmaster) - cpu0
    srv = process_cpu_s(server_pid) - srv0 if server_pid else 0.0
    statements, functions, wal = await _read(cluster.url)
    out.append(Profile(label, k, lifecycles, seconds, cpu, srv, statements, functions, wal))


async def _server_at(
    cluster: Cluster, server: Server, team: Team, k: int, per_k: int, posts_only: bool
) -> Profile:
    pairs = await team.fresh(k)
    posts = [ask_request(p.channel_id) for p in pairs]
    n = max(1, per_k // k)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = comms_pb2_grpc.CommsServiceStub(channel)

        async def worker(i: int, count: int) -> None:
            pair = pairs[i]
            for j in range(count):
                if posts_only:
                    # An identical open ask is posted once: each must differ.
                    post = ask_request(pair.channel_id)
                    post.blocks[0].ask.questions[0].question += f" ({i}.{j}.{time.monotonic()})"
                    await stub.PostMessage(post, metadata=pair.agent.metadata)
                    continue
                posted = await stub.PostMessage(posts[i], metadata=pair.agent.metadata)
                await stub.RespondToAsk(answer_request(posted), metadata=pair.human.metadata)

        await asyncio.gather(*(worker(i, max(5, n // 10)) for i in range(k)))
        label = "PostMessage (ask) only" if posts_only else "lifecycle_grpc"
        async with _measured(cluster, label, k, n * k, server.pid) as got:
            await asyncio.gather(*(worker(i, n) for i in range(k)))
    return got[0]


async def profile_server(
    cluster: Cluster, ks: list[int], per_k: int, posts_too: bool
) -> list[Profile]:
    async with server_process(cluster.url) as server:
        team = Team(server, "profile")
        out = [await _server_at(cluster, server, team, k, per_k, False) for k in ks]
        if posts_too:
            out += [await _server_at(cluster, server, team, k, per_k, True) for k in ks]
        return out


async def _ceiling_at(cluster: Cluster, k: int, per_k: int) -> Profile:
    n = max(1, per_k // k)
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
        cluster.url, min_size=k, max_size=k, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    conns = [await pool.getconn() for _ in range(k)]
    try:

        async def worker(i: int, count: int) -> None:
            for _ in range(count):
                await ceiling.lifecycle(conns[i])

        await asyncio.gather(*(worker(i, max(5, n // 10)) for i in range(k)))
        async with _measured(cluster, "ceiling", k, n * k, None) as got:
            await asyncio.gather(*(worker(i, n) for i in range(k)))
        return got[0]
    finally:
        for c in conns:
            await pool.putconn(c)
        await pool.close()


async def profile_ceiling(cluster: Cluster, ks: list[int], per_k: int) -> list[Profile]:
    async with await psycopg.AsyncConnection.connect(cluster.url, autocommit=True) as conn:
        await conn.execute(f"DROP SCHEMA IF EXISTS {ceiling.SCHEMA} CASCADE")
        await conn.execute(ceiling.DDL)
    return [await _ceiling_at(cluster, k, per_k) for k in ks]


def _short(query: str, width: int = 110) -> str:
    q = query.replace("|", "\\|")
    return q if len(q) <= width else q[: width - 1] + "…"


def render(p: Profile, top: int, ceiling_cpu_us: float | None) -> str:
    n = p.lifecycles
    lines = [
        f"### {p.label}, K={p.k}: {n} lifecycles in {p.seconds:.1f} s ({n / p.seconds:,.0f}/s)",
        "",
    ]
    cpu_us = p.pg_cpu_s / n * 1e6
    vs = f" ({cpu_us / ceiling_cpu_us:.1f} × the ceiling's)" if ceiling_cpu_us else ""
    lines.append(f"- PostgreSQL CPU per lifecycle (whole cluster): {cpu_us:,.0f} µs{vs}")
    if p.server_cpu_s:
        lines.append(f"- compass-server CPU per lifecycle: {p.server_cpu_s / n * 1e6:,.0f} µs")
    if p.wal:
        records, fpi, wal_bytes = p.wal
        lines.append(
            f"- WAL per lifecycle: {records / n:.1f} records, {fpi / n:.2f} full pages, "
            f"{int(wal_bytes) / n:,.0f} bytes"
        )
    top_level = [s for s in p.statements if s[0]]
    calls = sum(s[1] for s in top_level)
    exec_ms = sum(s[2] for s in top_level)
    nested = sum(s[1] for s in p.statements if not s[0])
    planning_ms = sum(s[6] for s in p.statements)
    lines.append(
        f"- top-level statements per lifecycle: {calls / n:.2f} "
        f"(their time inside PostgreSQL: {exec_ms * 1e3 / n:,.0f} µs); "
        f"statements run inside functions and triggers: {nested / n:.1f}; "
        f"planning, all statements: {planning_ms * 1e3 / n:,.0f} µs"
    )
    lines += [
        "",
        "| level | calls / lifecycle | µs / lifecycle | µs / call | rows / call "
        "| WAL bytes / lifecycle | plans / lifecycle | planning µs / lifecycle | statement |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for toplevel, c, total_ms, rows, wal_b, plans, plan_ms, query in p.statements[:top]:
        if c == 0:
            continue
        lines.append(
            f"| {'top' if toplevel else 'nested'} | {c / n:.2f} | {total_ms * 1e3 / n:,.0f} "
            f"| {total_ms * 1e3 / c:,.1f} | {rows / c:.1f} | {int(wal_b) / n:,.0f} "
            f"| {plans / n:.2f} | {plan_ms * 1e3 / n:,.0f} | `{_short(query)}` |"
        )
    if p.functions:
        lines += [
            "",
            "| function | calls / lifecycle | self µs / lifecycle | total µs / lifecycle |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, c, total_ms, self_ms in p.functions[:top]:
            lines.append(
                f"| `{name}` | {c / n:.2f} | {self_ms * 1e3 / n:,.0f} | {total_ms * 1e3 / n:,.0f} |"
            )
    return "\n".join(lines)


async def amain(args: argparse.Namespace) -> None:
    ks = [int(x) for x in args.k.split(",")]
    with own_cluster(args.keep_cluster) as cluster:
        ceil = await profile_ceiling(cluster, ks, args.lifecycles)
        server = await profile_server(cluster, ks, args.lifecycles, args.posts_too)
    ceiling_cpu = {p.k: p.pg_cpu_s / p.lifecycles * 1e6 for p in ceil}
    for p in server:
        print(render(p, args.top, ceiling_cpu.get(p.k)), end="\n\n")
    for p in ceil:
        print(render(p, min(args.top, 8), None), end="\n\n")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--k", default="1,16")
    p.add_argument("--lifecycles", type=int, default=2000, help="per K, after a warm-up")
    p.add_argument("--top", type=int, default=25, help="statements and functions shown")
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument(
        "--posts-too",
        action="store_true",
        help="also posts of an ask alone (a lifecycle less these is the answer's share)",
    )
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    run_async(amain(args), resolve_loop(args.loop))


if __name__ == "__main__":
    main()
