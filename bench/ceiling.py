"""The ceiling: the minimal ask lifecycle straight through psycopg.

One lifecycle is what the server must at least do to post an ask and answer it:

1. post: one INSERT of a message row whose JSONB `blocks` column holds one ask
   block, in autocommit (one round trip);
2. answer: one transaction (BEGIN; SELECT … FOR UPDATE of that row; a check in
   Python that the ask is still open; UPDATE setting the ask's `answered`;
   COMMIT: four round trips).

No server, no gRPC, no events, no answer message, no presence: every server
row is measured against this. K workers run concurrently, each holding its own
connection from a psycopg_pool `AsyncConnectionPool` of size K for the whole
run (no per-call checkout, so pool overhead is not in the ceiling).

The row creates its table in its own schema (`bench_ceiling`) and drops the
schema afterwards. Standalone:

    python -m bench.ceiling --database-url URL [--seconds 5] [--k 1,16]
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Row,
    default_database_url,
    resolve_loop,
    run_async,
)
from bench.server import cpu_probe

SCHEMA = "bench_ceiling"

DDL = f"""
CREATE SCHEMA {SCHEMA};
CREATE TABLE {SCHEMA}.messages (
    message_id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel_id        text        NOT NULL,
    author_account_id text        NOT NULL,
    blocks            jsonb       NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
"""

INSERT_ASK = f"""
INSERT INTO {SCHEMA}.messages (channel_id, author_account_id, blocks)
VALUES (%s, %s, %s)
RETURNING message_id
"""

LOCK_ASK = f"SELECT blocks FROM {SCHEMA}.messages WHERE message_id = %s FOR UPDATE"

ANSWER_ASK = f"""
UPDATE {SCHEMA}.messages
SET blocks = jsonb_set(blocks, '{{0,ask,answered}}', 'true')
WHERE message_id = %s
"""


def ask_blocks() -> list[dict[str, Any]]:
    """One ask block shaped like compass.v1.MessageBlock{ask} in JSON."""
    return [
        {
            "ask": {
                "ask_id": uuid.uuid4().hex,
                "questions": [
                    {
                        "question_id": "deploy",
                        "header": "Deploy",
                        "question": "Ship the release to production now?",
                        "options": [
                            {"id": "yes", "label": "Yes, ship it"},
                            {"id": "no", "label": "No, wait"},
                        ],
                        "allow_multiple": False,
                        "recommended": 0,
                    }
                ],
                "answered": False,
                "cancelled": False,
            }
        }
    ]


async def lifecycle(conn: psycopg.AsyncConnection[Any]) -> None:
    """Post one ask (autocommit INSERT) and answer it (locked transaction)."""
    cur = await conn.execute(INSERT_ASK, ("bench-channel", "bench-agent", Jsonb(ask_blocks())))
    row = await cur.fetchone()
    assert row is not None
    message_id = row[0]
    async with conn.transaction():
        cur = await conn.execute(LOCK_ASK, (message_id,))
        locked = await cur.fetchone()
        assert locked is not None
        ask = locked[0][0]["ask"]
        if ask["answered"] or ask["cancelled"]:
            raise RuntimeError(f"ask of message {message_id} is no longer open")
        await conn.execute(ANSWER_ASK, (message_id,))


async def _exec_admin(database_url: str, sql: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql)


@asynccontextmanager
async def open_ceiling(ctx: BenchContext) -> AsyncIterator[Measure]:
    """Create the schema and table, yield a per-K measure, drop the schema."""
    await _exec_admin(ctx.database_url, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    await _exec_admin(ctx.database_url, DDL)

    async def measure(k: int) -> LoadResult:
        # Same starting state for every K and round.
        await _exec_admin(ctx.database_url, f"TRUNCATE {SCHEMA}.messages")
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            ctx.database_url,
            min_size=k,
            max_size=k,
            kwargs={"autocommit": True},
            open=False,
        )
        await pool.open(wait=True)
        conns: list[psycopg.AsyncConnection[Any]] = []
        try:
            for _ in range(k):
                conns.append(await pool.getconn())

            async def call(i: int) -> None:
                await lifecycle(conns[i])

            return await ctx.load(call, k, cpu=cpu_probe(ctx.database_url))
        finally:
            for conn in conns:
                await pool.putconn(conn)
            await pool.close()

    try:
        yield measure
    finally:
        await _exec_admin(ctx.database_url, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


ROW = Row(
    key="ceiling",
    title="ceiling: psycopg ask lifecycle",
    op="lifecycle: INSERT ask; BEGIN, SELECT FOR UPDATE, UPDATE answered, COMMIT",
    open=open_ceiling,
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default=default_database_url())
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--k", default="1,16", help="comma-separated concurrencies")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    loop_name = resolve_loop(args.loop)
    ctx = BenchContext(args.database_url, args.seconds, args.warmup, loop_name)

    async def go() -> None:
        async with open_ceiling(ctx) as measure:
            for k in (int(x) for x in args.k.split(",")):
                print(f"ceiling {(await measure(k)).summary()}", flush=True)

    run_async(go(), loop_name)


if __name__ == "__main__":
    main()
