"""What follow-up steps cost.

1. A backlog: N open asks whose reminder came due while no server ran,
   taken by one process's sweeps (batches of EXPIRY_BATCH): steps per second.
2. Lateness: asks posted at a steady rate with a reminder 0.5 s after the
   post, one expiry loop running (woken by the NOTIFY of each post): how
   long after its due time each step was taken (the step's `at` minus its
   due time), p50 and p99.

    python -m bench.follow_ups --database-url ADMIN_URL [--backlog 2000] [--rate 20] [--seconds 10]

ADMIN_URL may create databases: the run migrates its own
`compass_bench_follow_ups` and drops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import json
import time

import psycopg

from bench.harness import default_database_url, resolve_loop, run_async
from bench.store_lifecycle import ASK, _pair
from compass_server.asks import Expiry
from compass_server.store import Database, Store, migrate
from compass_server.store.blocks import DeadlineBounds
from compass_server.store.types import Ask, FollowUp

NAME = "compass_bench_follow_ups"
SHORT = DeadlineBounds(datetime.timedelta(milliseconds=1), datetime.timedelta(days=30))


def _ask(remind: float) -> Ask:
    return dataclasses.replace(
        ASK, follow_up=FollowUp(remind_after=datetime.timedelta(seconds=remind), remind_times=1)
    )


async def backlog(store: Store, n: int) -> str:
    ws = (await store.create_workspace("bench")).workspace_id
    _, asker, channel = await _pair(store, ws)
    for _ in range(n):
        await store.append_message(asker, channel, [_ask(0.001)])
    await asyncio.sleep(0.2)
    t0 = time.perf_counter()
    taken = 0
    while (got := await store.take_follow_ups()) > 0:
        taken += got
    took = time.perf_counter() - t0
    return f"backlog: {taken:,} steps in {took:.2f} s = {taken / took:,.0f} steps/s (one process)"


async def lateness(store: Store, rate: float, seconds: float) -> str:
    ws = (await store.create_workspace("bench")).workspace_id
    _, asker, channel = await _pair(store, ws)
    expiry = Expiry(store, interval=30.0)
    await expiry.start()
    posted: list[tuple[str, datetime.datetime]] = []
    try:
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            m = await store.append_message(asker, channel, [_ask(0.5)])
            block = m.blocks[0]
            assert isinstance(block, Ask) and m.created_at is not None
            posted.append((block.ask_id, m.created_at + datetime.timedelta(seconds=0.5)))
            await asyncio.sleep(1 / rate)
        await asyncio.sleep(2.0)
    finally:
        await expiry.stop()
    late = []
    for ask_id, due in posted:
        _, ask_state = await store.get_ask(asker, ask_id)
        if ask_state.follow_up_steps:
            late.append((ask_state.follow_up_steps[0].at - due).total_seconds() * 1e3)
    late.sort()
    missing = len(posted) - len(late)
    return (
        f"lateness at {rate:g} asks/s for {seconds:g} s: {len(late)} steps, due → taken "
        f"p50 {late[len(late) // 2]:.1f} ms, p99 {late[int(len(late) * 0.99) - 1]:.1f} ms, "
        f"max {late[-1]:.1f} ms; {missing} not taken"
    )


async def run(admin: str, n: int, rate: float, seconds: float) -> list[str]:
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{NAME}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=NAME)
    try:
        await migrate(url)
        db = Database(url, max_size=6)
        await db.open()
        try:
            store = Store(db, deadline_bounds=SHORT)
            return [await backlog(store, n), await lateness(store, rate, seconds)]
        finally:
            await db.close()
    finally:
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)'.encode())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", default=default_database_url())
    p.add_argument("--backlog", type=int, default=2000)
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    lines = run_async(
        run(args.database_url, args.backlog, args.rate, args.seconds), resolve_loop(args.loop)
    )
    print("\n".join(lines), flush=True)
    print(json.dumps(vars(args)))


if __name__ == "__main__":
    main()
