"""Peak memory of many GetInboxItem reads of one long thread at once.

In its own throwaway database (`compass_bench_inbox_reads`), an agent writes
one thread of many large messages (more than a page); then N reads of its
first page (a full page, `inbox_read_bytes`) go out at once over gRPC (or
Connect JSON with --json), shared
among 1, then more accounts (`--accounts`), against a `compass-server serve`
process. Each run is measured twice: with the read budget off (budgets of
1 TiB, every read at once) and with the defaults. Reported: the server's
resident memory before the burst and its peak (VmHWM) during it, and how
many reads were answered and how many were refused.

    python -m bench.inbox_reads [--database-url ADMIN_URL] [--reads 48] [--messages 200]
        [--accounts 1,12,48] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections import Counter

import grpc
import httpx
import psycopg

from bench.harness import default_database_url, resolve_loop, run_async
from bench.server import Provisioner, bearer, server_process
from compass.v1 import inbox_pb2 as ib
from compass_server.inbox import rules
from compass_server.store import Database, migrate
from compass_server.store.admin import hash_token
from compass_server.store.inbox import InboxStore
from compass_server.store.types import AccountKind, Actor

NAME = "compass_bench_inbox_reads"
OFF = {
    "COMPASS_INBOX_READING_BYTES": str(1 << 40),
    "COMPASS_INBOX_READING_BYTES_PER_ACCOUNT": str(1 << 40),
}


def _kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


async def _thread(url: str, messages: int, readers: int) -> tuple[str, list[str]]:
    """One long thread; the tokens of the people who read it."""
    async with Provisioner(url) as p:
        ws = await p.workspace("bench")
        owner = await p.human(ws, "owner")
        agent = await p.agent(ws, "writer", owner)
        people = [owner] + [await p.human(ws, f"reader{i}") for i in range(readers - 1)]
    db = Database(url, min_size=1, max_size=2)
    await db.open()
    try:
        inbox = InboxStore(db)
        a = Actor(ws, uuid.UUID(agent.account_id), AccountKind.AGENT, hash_token(agent.token))
        o = Actor(ws, uuid.UUID(owner.account_id), AccountKind.HUMAN, hash_token(owner.token))
        item, _ = await inbox.post(a, "long", "A long thread", "start")
        for i in range(messages):
            await inbox.reply_as_agent(a, "long", f"{i} " + "x" * 30_000)
        for person in people[1:]:
            await inbox.grant(o, a.account_id, uuid.UUID(person.account_id))
    finally:
        await db.close()
    return str(item.item_id), [p.token for p in people]


async def _burst(
    url: str, item_id: str, tokens: list[str], reads: int, settings: dict[str, str], json: bool
) -> str:
    req = ib.GetInboxItemRequest(item_id=item_id, message_limit=200)
    async with (
        server_process(url, settings) as server,
        grpc.aio.insecure_channel(server.grpc_target) as channel,
        httpx.AsyncClient(base_url=server.http_url, timeout=60) as http,
    ):
        rpc = channel.unary_unary(
            "/compass.v1.InboxService/GetInboxItem",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=ib.GetInboxItemResponse.FromString,
        )
        body = {"itemId": item_id, "messageLimit": 200}

        async def read_one(token: str) -> str:
            if json:
                r = await http.post(
                    "/compass.v1.InboxService/GetInboxItem",
                    json=body,
                    headers={"authorization": f"Bearer {token}"},
                )
                return "ok" if r.status_code == 200 else str(r.json().get("code"))
            try:
                await rpc(req, metadata=bearer(token), timeout=60)
                return "ok"
            except grpc.aio.AioRpcError as exc:
                return str(exc.code().name).lower()

        warm = await rpc(req, metadata=bearer(tokens[0]), timeout=60)
        page_bytes = sum(len(m.message.SerializeToString()) for m in warm.thread)
        await read_one(tokens[0])
        rss = _kib(server.pid, "VmRSS")
        hwm_before = _kib(server.pid, "VmHWM")
        started = time.monotonic()
        outcomes = Counter(
            await asyncio.gather(*(read_one(tokens[i % len(tokens)]) for i in range(reads)))
        )
        took = time.monotonic() - started
        hwm = _kib(server.pid, "VmHWM")
    return (
        f"page {page_bytes / 2**20:.2f} MiB ({len(warm.thread)} messages); RSS before "
        f"{rss / 1024:.0f} MB, peak {max(hwm, hwm_before) / 1024:.0f} MB "
        f"(+{(hwm - rss) / 1024:.0f} MB); {dict(outcomes)} in {took:.1f} s"
    )


async def run(admin: str, reads: int, messages: int, accounts: list[int], json: bool) -> list[str]:
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{NAME}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=NAME)
    out = []
    try:
        await migrate(url)
        item_id, tokens = await _thread(url, messages, max(accounts))
        for n in accounts:
            for label, settings in (("budget off", OFF), ("defaults", {})):
                line = await _burst(url, item_id, tokens[:n], reads, settings, json)
                how = "Connect JSON" if json else "gRPC"
                out.append(f"{reads} reads over {how} from {n} account(s), {label}: {line}")
                print(out[-1], flush=True)
    finally:
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=default_database_url())
    parser.add_argument("--reads", type=int, default=48)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--accounts", default="1,12,48", help="readers sharing the reads, per run")
    parser.add_argument("--json", action="store_true", help="read over Connect JSON, not gRPC")
    args = parser.parse_args(argv)
    print(
        f"defaults: page {rules.MAX_THREAD_BYTES >> 20} MiB, reading {rules.READING_BYTES >> 20} "
        f"MiB, per account {rules.READING_BYTES_PER_ACCOUNT >> 20} MiB, wait "
        f"{rules.READ_WAIT_SECONDS:g} s",
        flush=True,
    )
    run_async(
        run(
            args.database_url,
            args.reads,
            args.messages,
            [int(n) for n in args.accounts.split(",")],
            args.json,
        ),
        resolve_loop("auto"),
    )


if __name__ == "__main__":
    main()
