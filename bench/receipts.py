"""What receipts and posting once cost.

1. Signing an ending's receipt (claims, canonical JSON, Ed25519 JWS), from
   cold and from the process's cache, and verifying one with the kit.
2. The ask lifecycle through the server's `Store` (post an ask, answer it),
   posting the way every surface now does (a client key and the ask's
   print, looked up under the author's lock: compass_posts_once) and the way
   a post with neither goes (straight to compass_post_message), alternated
   in the same run at each K; the answer's history entry is hash-chained in
   both.

    python -m bench.receipts --database-url ADMIN_URL [--k 1,16] [--seconds 5] [--rounds 2]

ADMIN_URL may create databases: the run migrates its own `compass_bench_receipts`
and drops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import pathlib
import statistics
import tempfile
import time
import uuid

import psycopg

from bench.harness import default_database_url, resolve_loop, run_async
from bench.store_lifecycle import ANSWER, ASK, _pair
from compass_agentkit.receipts import verify_receipt
from compass_server.receipts import Receipts
from compass_server.receipts.keys import ReceiptKeys, new_key_file
from compass_server.store import Database, Store, migrate
from compass_server.store.types import Actor, Ask, AskEnding, EndingKind, Surface

NAME = "compass_bench_receipts"


def signing(n: int = 2000) -> str:
    folder = pathlib.Path(tempfile.mkdtemp())
    new_key_file(folder)
    keys = ReceiptKeys.load(folder)
    at = datetime.datetime.now(datetime.UTC)
    asks = [
        dataclasses.replace(
            ASK,
            ask_id=f"ask_{i:032x}",
            ending=AskEnding(EndingKind.ANSWERED, at, uuid.uuid4(), "ada", Surface.WEB),
        )
        for i in range(n)
    ]
    ws, asker = uuid.uuid4(), uuid.uuid4()
    cold = Receipts(keys, "https://compass.example.com", cache_bytes=1)
    t0 = time.perf_counter()
    signed = [cold.sign(ws, asker, a) for a in asks]
    cold_us = (time.perf_counter() - t0) / n * 1e6
    warm = Receipts(keys, "https://compass.example.com")
    for a in asks:
        warm.sign(ws, asker, a)
    t0 = time.perf_counter()
    for a in asks:
        warm.sign(ws, asker, a)
    warm_us = (time.perf_counter() - t0) / n * 1e6
    jwks = keys.jwks()
    t0 = time.perf_counter()
    for receipt in signed[:1000]:
        verify_receipt(receipt, jwks)
    verify_us = (time.perf_counter() - t0) / 1000 * 1e6
    size = statistics.mean(len(r) for r in signed)
    return (
        f"sign {cold_us:.0f} µs from cold, {warm_us:.1f} µs from the cache; kit verify "
        f"{verify_us:.0f} µs; a receipt is {size:.0f} bytes"
    )


async def lifecycle(db: Database, k: int, seconds: float, once: bool) -> tuple[float, float]:
    """Lifecycles/s and the post's p50 in ms, K workers each its own pair."""
    store = Store(db)
    ws = (await store.create_workspace("bench")).workspace_id
    pairs = [await _pair(store, ws) for _ in range(k)]
    posts: list[float] = []
    done = 0
    start = time.perf_counter() + 0.5
    stop = start + seconds

    async def worker(person: Actor, asker: Actor, channel_id: uuid.UUID) -> None:
        nonlocal done
        n = 0
        while (t0 := time.perf_counter()) < stop:
            n += 1
            if once:
                posted = await store.post(asker, channel_id, [ASK], client_key=f"k{n}")
                message = posted.message
            else:
                message = await store.append_message(asker, channel_id, [ASK])
            t1 = time.perf_counter()
            block = message.blocks[0]
            assert isinstance(block, Ask)
            await store.answer_ask(person, block.ask_id, ANSWER)
            if t0 >= start:
                posts.append(t1 - t0)
                done += 1

    await asyncio.gather(*(worker(*p) for p in pairs))
    posts.sort()
    return done / seconds, posts[len(posts) // 2] * 1e3


async def lifecycles(admin: str, ks: list[int], seconds: float, rounds: int) -> list[str]:
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{NAME}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=NAME)
    out = []
    try:
        await migrate(url)
        db = Database(url, max_size=max(ks) + 4)
        await db.open()
        try:
            for k in ks:
                runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
                for _ in range(rounds):
                    for once in (False, True):
                        runs[once].append(await lifecycle(db, k, seconds, once))
                for once, label in ((False, "plain post"), (True, "keyed post + print")):
                    rates = [r for r, _ in runs[once]]
                    p50s = [p for _, p in runs[once]]
                    out.append(
                        f"K={k} {label}: {statistics.mean(rates):,.0f} lifecycles/s "
                        f"({', '.join(f'{r:,.0f}' for r in rates)}), post p50 "
                        f"{statistics.mean(p50s):.2f} ms"
                    )
        finally:
            await db.close()
    finally:
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", default=default_database_url())
    p.add_argument("--k", default="1,16")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    print(signing(), flush=True)
    ks = [int(x) for x in args.k.split(",")]
    lines = run_async(
        lifecycles(args.database_url, ks, args.seconds, args.rounds), resolve_loop(args.loop)
    )
    print("\n".join(lines), flush=True)
    print(json.dumps({"k": ks, "seconds": args.seconds, "rounds": args.rounds}))


if __name__ == "__main__":
    main()
