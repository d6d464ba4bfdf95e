"""What proving compass_writer's workspace from its credential costs: the
ask lifecycle through `Store` (post an ask, answer it) with the workspace's
policy reading the credential under compass_writer (migration 0029), against
the same with it reading `compass.writer_workspace` (what 0019 did, and what
any statement of compass_writer could set), alternated round by round in one
throwaway database. PostgreSQL's own count and time of its functions
(`track_functions = all`) say how often the workspace was proven and what the
write functions cost per lifecycle.

    python -m bench.writer_scope [--database-url ADMIN_URL] [--n 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import psycopg

from bench.harness import default_database_url
from bench.store_lifecycle import ANSWER, ASK, _pair
from compass_server.store import Database, Store
from compass_server.store.types import Ask

BENCH_DB = "compass_bench_writer_scope"
CLAIMED = """
CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE current_user
    WHEN 'compass_maintenance'
      THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    WHEN 'compass_writer'
      THEN nullif(pg_catalog.current_setting('compass.writer_workspace', true), '')::uuid
    ELSE public.compass_credential_workspace()
  END
$$;
CREATE OR REPLACE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  ws uuid;
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  PERFORM set_config('compass.actor', coalesce(actor::text, ''), true);
  ws := compass_credential_workspace();
  PERFORM set_config('compass.writer_workspace', coalesce(ws::text, ''), true);
  RETURN ws;
END
$$;
"""
PROVEN = """
CREATE OR REPLACE FUNCTION compass_workspace() RETURNS uuid
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_user = 'compass_maintenance'
    THEN nullif(pg_catalog.current_setting('compass.operator_workspace', true), '')::uuid
    ELSE public.compass_credential_workspace()
  END
$$;
CREATE OR REPLACE FUNCTION compass_writer_scope(cred bytea, actor uuid) RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('compass.credential', encode(cred, 'hex'), true);
  PERFORM set_config('compass.actor', coalesce(actor::text, ''), true);
  RETURN compass_credential_workspace();
END
$$;
"""
WATCHED = ("compass_credential_workspace", "compass_posts_once", "compass_answer_ask")


async def _functions(url: str) -> dict[str, tuple[int, float]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        rows = await (
            await conn.execute(
                "SELECT funcname, calls, total_time FROM pg_stat_user_functions"
                " WHERE funcname = ANY(%s)",
                (list(WATCHED),),
            )
        ).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


async def _round(url: str, store: Store, pair: Any, n: int) -> tuple[float, dict[str, Any]]:
    person, asker, channel_id = pair
    await asyncio.sleep(0.6)  # the backends' function counts reach the stats
    before = await _functions(url)
    t0 = time.perf_counter()
    for _ in range(n):
        posted = await store.append_message(asker, channel_id, [ASK])
        block = posted.blocks[0]
        assert isinstance(block, Ask)
        await store.answer_ask(person, block.ask_id, ANSWER)
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(0.6)
    after = await _functions(url)
    per = {
        f: (
            (after.get(f, (0, 0.0))[0] - before.get(f, (0, 0.0))[0]) / n,
            (after.get(f, (0, 0.0))[1] - before.get(f, (0, 0.0))[1]) / n,
        )
        for f in WATCHED
    }
    return elapsed / n, per


async def measure(admin_url: str, n: int, rounds: int) -> str:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        await conn.execute(f"CREATE DATABASE {BENCH_DB}")
        await conn.execute(f"ALTER DATABASE {BENCH_DB} SET track_functions = 'all'")
    url = psycopg.conninfo.make_conninfo(admin_url, dbname=BENCH_DB)
    results: dict[str, list[tuple[float, dict[str, Any]]]] = {"proven": [], "claimed": []}
    db = Database(url, max_size=4)
    await db.open()
    try:
        store = Store(db)
        ws = (await store.create_workspace("bench")).workspace_id
        pair = await _pair(store, ws)
        await _round(url, store, pair, 50)  # warm-up
        for _ in range(rounds):
            for name, sql in (("claimed", CLAIMED), ("proven", PROVEN)):
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(sql)
                results[name].append(await _round(url, store, pair, n))
    finally:
        await db.close()
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    lines = [
        "| writer's workspace | lifecycle (ms, per round) | proofs per lifecycle "
        "| proving (ms per lifecycle) | post + answer functions (ms per lifecycle) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, rows in results.items():
        times = ", ".join(f"{t * 1e3:.2f}" for t, _ in rows)
        proofs = sum(p["compass_credential_workspace"][0] for _, p in rows) / len(rows)
        proving = sum(p["compass_credential_workspace"][1] for _, p in rows) / len(rows)
        writes = sum(
            p["compass_posts_once"][1] + p["compass_answer_ask"][1] for _, p in rows
        ) / len(rows)
        label = "from the credential (0029)" if name == "proven" else "from the setting (0019)"
        lines.append(f"| {label} | {times} | {proofs:.1f} | {proving:.3f} | {writes:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", default=default_database_url())
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    print(asyncio.run(measure(args.database_url, args.n, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
