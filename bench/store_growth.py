"""Store growth: the ask lifecycle, and above all the answer, with the store
already holding 10^3 or 10^6 messages.

Each row gets a database of its own (`<bench database>_store_<n>`, dropped at
the end) and a compass-server of its own on it, because the messages table is
shared by every workspace: its size is what is measured. The history is
seeded with SQL as the superuser (row-level security does not apply to it),
straight into the server's schema, in the same workspace and channel as the
measured agent and person, and shaped like real traffic. The history is
written by `store_authors` agents and as many people (default 2 + 2, the first
of each being the measured pair), in every block of ten rows:

* 6 text messages, by all of them in turn;
* 2 asks, by the agents in turn; the measured agent's are all answered (so its
  presence still turns WAITING and back on every lifecycle, as with an empty
  store), one in ten of the others' is still open;
* 2 ask_answer messages by the people, each answering the ask two rows back
  and naming its message (a text instead when that ask is open);

plus one `asks` row per ask. After each window the store is trimmed back to
the seeded history (so rounds and retries measure the same store), see `trim`.
With 2 + 2 authors the measured agent wrote a
quarter of the history (run C's WAITING search depended on that share: see
bench/RESULTS.md). The agents' open-ask counts are set to what the seeded asks
hold, as the store would have. Then VACUUM ANALYZE and a CHECKPOINT, so neither missing
statistics nor the load's dirty pages land in the windows. The event log is
not seeded: nothing on this path reads it.

One op is the gRPC lifecycle (PostMessage of a one-question ask by the agent,
RespondToAsk by the person); the per-call table carries the RespondToAsk
latency, the figure this row is about, with the 10^6 row compared against the
10^3 row. K=1 only.

Standalone:

    python -m bench.store_growth --database-url ADMIN_URL [--n 1000,1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Phases,
    Row,
    RowOpener,
    default_database_url,
    resolve_loop,
    run_async,
)
from bench.server import (
    Account,
    Provisioner,
    answer_request,
    ask_request,
    cpu_probe,
    create_channel,
    database_name,
    server_process,
)
from compass.v1 import comms_pb2_grpc

POST, ANSWER = "PostMessage", "RespondToAsk"
CHUNK = 100_000
AUTHORS = 2  # agents (and as many people) writing the history

# One statement per chunk [lo, hi] of the history; ids are md5-derived so an
# ask_answer can name its ask's message without a lookup. agents[1] and
# humans[1] are the measured agent and person; %(m)s = how many of each.
SEED_MESSAGES = """
INSERT INTO messages (id, workspace_id, channel_id, author_id, blocks, search_text, created_at)
SELECT md5('m' || i)::uuid, %(ws)s, %(ch)s,
  CASE
    WHEN kind = 'ask' THEN (%(agents)s::uuid[])[asker + 1]
    WHEN kind = 'answer' THEN (%(humans)s::uuid[])[i %% %(m)s + 1]
    ELSE (%(agents)s::uuid[] || %(humans)s::uuid[])[i %% (2 * %(m)s) + 1]
  END,
  CASE
    WHEN kind = 'ask' THEN jsonb_build_array(jsonb_build_object('kind', 'ask', 'ask',
      jsonb_build_object('ask_id', 'ask_' || md5('a' || i), 'questions', jsonb_build_array(
        jsonb_build_object('question_id', 'deploy', 'question', 'Ship build ' || i || '?',
          'header', 'Deploy', 'recommended', 0,
          'options', jsonb_build_array(
            jsonb_build_object('id', 'yes', 'label', 'Yes, ship it'),
            jsonb_build_object('id', 'no', 'label', 'No, wait')))
        || CASE WHEN open_ask THEN '{}'::jsonb
                ELSE jsonb_build_object('chosen_option_ids', jsonb_build_array('yes')) END))
      || CASE WHEN open_ask THEN '{}'::jsonb ELSE '{"answered": true}'::jsonb END))
    WHEN kind = 'answer' THEN jsonb_build_array(jsonb_build_object('kind', 'ask_answer',
      'ask_answer', jsonb_build_object('ask_id', 'ask_' || md5('a' || (i - 2)),
        'ask_message_id', md5('m' || (i - 2))::uuid::text,
        'questions', jsonb_build_array(jsonb_build_object('question_id', 'deploy',
          'question', 'Ship build ' || (i - 2) || '?', 'header', 'Deploy', 'recommended', 0,
          'options', jsonb_build_array(
            jsonb_build_object('id', 'yes', 'label', 'Yes, ship it'),
            jsonb_build_object('id', 'no', 'label', 'No, wait')),
          'chosen_option_ids', jsonb_build_array('yes'))))))
    ELSE jsonb_build_array(jsonb_build_object('kind', 'text', 'text', text))
  END,
  CASE WHEN kind = 'ask' THEN 'ship build ' || i || '?' WHEN kind = 'answer' THEN ''
       ELSE lower(text) END,
  now() - make_interval(secs => %(hi)s - i)
FROM (
  SELECT i, asker,
    CASE
      WHEN r IN (6, 7) THEN 'ask'
      -- an answer follows the ask two rows back, unless that one is still open
      WHEN r IN (8, 9) AND NOT prev_open THEN 'answer'
      ELSE 'text'
    END AS kind,
    r IN (6, 7) AND asker > 0 AND (i / 10) %% 10 = 0 AS open_ask,
    'Build ' || i || ' passed; ' || (i %% 97) || ' tests changed, deploy window opens at '
      || (i %% 24) || ':00.' AS text
  FROM (
    SELECT i, i %% 10 AS r,
      ((i / 10) * 2 + i %% 2) %% %(m)s AS asker,
      r2 IN (6, 7) AND ((j / 10) * 2 + j %% 2) %% %(m)s > 0 AND (j / 10) %% 10 = 0 AS prev_open
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i,
      LATERAL (SELECT i - 2 AS j, (i - 2) %% 10 AS r2) AS back
  ) s
) t
ORDER BY i
"""

SEED_ASKS = """
INSERT INTO asks (ask_id, workspace_id, message_id)
SELECT 'ask_' || md5('a' || i), %(ws)s, md5('m' || i)::uuid
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i
WHERE i %% 10 IN (6, 7)
"""

# What the store keeps for every agent as it writes: its open-ask count, and
# WAITING while that is above zero (the seed writes rows past the store).
SEED_OPEN_ASKS = """
UPDATE accounts a SET open_asks = o.n,
  presence_state = CASE WHEN o.n > 0 THEN 'waiting' ELSE a.presence_state END
FROM (
  SELECT m.author_id, count(*) AS n FROM messages m, jsonb_array_elements(m.blocks) AS b(block)
  WHERE m.author_id = ANY(%(agents)s) AND block ->> 'kind' = 'ask'
    AND NOT coalesce((block -> 'ask' ->> 'answered')::boolean, false)
    AND NOT coalesce((block -> 'ask' ->> 'cancelled')::boolean, false)
  GROUP BY m.author_id
) o
WHERE a.id = o.author_id
"""


def url_for_database(url: str, dbname: str) -> str:
    if "://" in url:
        return urlunsplit(urlsplit(url)._replace(path="/" + dbname))
    return make_conninfo(url, dbname=dbname)


async def _admin(url: str, *statements: sql.Composed | str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for statement in statements:
            await conn.execute(statement)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def seed(
    url: str,
    n: int,
    ws: uuid.UUID,
    channel_id: str,
    agents: Sequence[Account],
    humans: Sequence[Account],
) -> None:
    """n messages of history by these authors (agents[0] and humans[0] are the
    measured pair; see the module doc), then VACUUM ANALYZE and CHECKPOINT."""
    started = time.perf_counter()
    params: dict[str, Any] = {
        "ws": ws,
        "ch": uuid.UUID(channel_id),
        "agents": [uuid.UUID(a.account_id) for a in agents],
        "humans": [uuid.UUID(h.account_id) for h in humans],
        "m": len(agents),
    }
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SET synchronous_commit = off")
        for lo in range(1, n + 1, CHUNK):
            hi = min(n, lo + CHUNK - 1)
            async with conn.transaction():
                await conn.execute(SEED_MESSAGES, {**params, "lo": lo, "hi": hi})
                await conn.execute(SEED_ASKS, {**params, "lo": lo, "hi": hi})
            if n > CHUNK:
                took = time.perf_counter() - started
                log(f"  [store {n:,}: seeded {hi:,} messages, {took:.0f} s]")
        await conn.execute(SEED_OPEN_ASKS, params)
        await conn.execute("VACUUM ANALYZE")
        await conn.execute("CHECKPOINT")
        cur = await conn.execute(
            "SELECT count(*), pg_size_pretty(pg_total_relation_size('messages')) FROM messages"
        )
        row = await cur.fetchone()
    assert row is not None
    log(
        f"  [store {n:,}: {row[0]:,} messages ({row[1]} with indexes) "
        f"in {time.perf_counter() - started:.1f} s]"
    )


async def _scalar(url: str, query: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        row = await (await conn.execute(query)).fetchone()
    return int(row[0]) if row else 0


async def message_count(url: str) -> int:
    return await _scalar(url, "SELECT count(*) FROM messages")


async def last_position(url: str) -> int:
    """The newest message's position (positions only grow)."""
    return await _scalar(url, "SELECT coalesce(max(position), 0) FROM messages")


async def trim(url: str, seeded_up_to: int) -> None:
    """Back to the seeded store: what the windows wrote goes (messages past the
    seeded history, their asks and their records, the event log, which was never seeded), and a
    VACUUM clears the dead rows a scan would still read. The statistics stay
    those of the seeded store (no ANALYZE). Every window's asks are answered
    by then, so the agents' presence is as it was."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        async with conn.transaction():
            await conn.execute(
                "DELETE FROM ask_history h USING asks a, messages m"
                " WHERE h.ask_id = a.ask_id AND m.id = a.message_id AND m.position > %s",
                (seeded_up_to,),
            )
            await conn.execute(
                "DELETE FROM asks a USING messages m WHERE m.id = a.message_id AND m.position > %s",
                (seeded_up_to,),
            )
            await conn.execute("DELETE FROM messages WHERE position > %s", (seeded_up_to,))
            await conn.execute("DELETE FROM events")
        await conn.execute("VACUUM messages, asks, ask_history, events")


def open_store(n: int) -> RowOpener:
    @asynccontextmanager
    async def open_row(ctx: BenchContext) -> AsyncIterator[Measure]:
        authors = int(ctx.extra.get("store_authors", AUTHORS))
        dbname = f"{database_name(ctx.database_url)}_store_{n}"
        url = url_for_database(ctx.database_url, dbname)
        name = sql.Identifier(dbname)
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name)
        await _admin(ctx.database_url, drop, sql.SQL("CREATE DATABASE {}").format(name))
        try:
            async with server_process(url) as server:
                async with Provisioner(url) as prov:
                    ws = await prov.workspace(f"bench store {n}")
                    humans = [await prov.human(ws, f"person-{j}") for j in range(authors)]
                    agents = [await prov.agent(ws, f"agent-{j}", h) for j, h in enumerate(humans)]
                agent, human = agents[0], humans[0]
                async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                    stub = comms_pb2_grpc.CommsServiceStub(channel)
                    channel_id = await create_channel(stub, agent, "release", agents + humans)
                await seed(url, n, ws, channel_id, agents, humans)
                seeded = await last_position(url)
                probe = cpu_probe(url, server.pid)
                post = ask_request(channel_id)

                async def measure(k: int) -> LoadResult:
                    if k != 1:
                        raise ValueError("store growth measures one caller (K=1)")
                    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                        stub = comms_pb2_grpc.CommsServiceStub(channel)
                        clock = time.perf_counter

                        async def call(i: int) -> Phases:
                            t0 = clock()
                            posted = await stub.PostMessage(post, metadata=agent.metadata)
                            t1 = clock()
                            await stub.RespondToAsk(answer_request(posted), metadata=human.metadata)
                            return Phases({POST: t1 - t0, ANSWER: clock() - t1})

                        result = await ctx.load(call, k, cpu=probe)
                    grown = await message_count(url)
                    await trim(url, seeded)
                    log(f"  [store {n:,}: {grown:,} messages after the window, trimmed to {n:,}]")
                    return result

                yield measure
        finally:
            await _admin(ctx.database_url, drop)

    return open_row


def _label(n: int) -> str:
    return f"10^{len(str(n)) - 1}" if str(n).strip("0") == "1" else f"{n:,}"


def row(n: int, baseline: str | None = None) -> Row:
    return Row(
        key=f"store_{n}",
        title=f"store growth: {_label(n)} messages",
        op=f"the gRPC lifecycle (K=1) in a database seeded with {n:,} messages of history in the "
        "same workspace and channel (text, asks, answers); the figure is RespondToAsk's latency",
        open=open_store(n),
        ks=(1,),
        baseline=baseline,
    )


ROW_SMALL = row(1_000)
ROW_LARGE = row(1_000_000, baseline=ROW_SMALL.key)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default=default_database_url(), help="an admin URL")
    p.add_argument("--n", default="1000,1000000", help="history sizes")
    p.add_argument("--authors", type=int, default=AUTHORS, help="agents (and people) writing it")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    loop_name = resolve_loop(args.loop)
    extra = {"store_authors": str(args.authors)}
    ctx = BenchContext(args.database_url, args.seconds, args.warmup, loop_name, extra)

    async def go() -> None:
        for n in (int(x) for x in args.n.split(",")):
            async with open_store(n)(ctx) as measure:
                print(f"store_{n} {(await measure(1)).summary()}", flush=True)

    run_async(go(), loop_name)


if __name__ == "__main__":
    main()
