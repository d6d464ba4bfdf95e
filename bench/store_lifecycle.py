"""The ask lifecycle straight through the server's `Store`, with no transport:
what the store (its Python and its SQL) costs, next to the server rows.

K workers, each its own agent, person and channel; all in one workspace, or
with `--per-pair` a workspace each (the two differ only by what the writes of a
workspace share: its event log). One op: `Store.append_message` with a
one-question ask by the agent, then `Store.answer_ask` by the person.

    python -m bench.store_lifecycle --database-url URL [--k 1,16] [--seconds 5] [--per-pair]

URL is a database it may migrate and write into (a throwaway one).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from bench.harness import default_database_url, resolve_loop, run_async
from compass_server.store import Database, Store
from compass_server.store.admin import hash_token
from compass_server.store.types import (
    AccountKind,
    Actor,
    Answer,
    Ask,
    AskOption,
    AskQuestion,
)

ASK = Ask(
    questions=(
        AskQuestion(
            question_id="q1",
            header="Deploy",
            question="Ship the release to production now?",
            options=(AskOption("yes", "Yes, ship it"), AskOption("no", "No, wait")),
            recommended=0,
        ),
    )
)
ANSWER = [Answer("q1", chosen_option_ids=("yes",))]


async def _pair(store: Store, workspace_id: uuid.UUID) -> tuple[Actor, Actor, uuid.UUID]:
    tag = uuid.uuid4().hex[:8]
    human, human_token = await store.create_account(workspace_id, f"h-{tag}", AccountKind.HUMAN)
    agent, agent_token = await store.create_account(
        workspace_id, f"a-{tag}", AccountKind.AGENT, human.account_id
    )
    person = Actor(workspace_id, human.account_id, AccountKind.HUMAN, hash_token(human_token))
    asker = Actor(workspace_id, agent.account_id, AccountKind.AGENT, hash_token(agent_token))
    channel = await store.create_channel(asker, f"c-{tag}", "", [human.account_id])
    return person, asker, channel.channel_id


async def measure(url: str, k: int, seconds: float, per_pair: bool) -> str:
    db = Database(url, max_size=k + 4)
    await db.open()
    try:
        store = Store(db)
        shared = (await store.create_workspace("bench")).workspace_id
        pairs = []
        for _ in range(k):
            ws = (await store.create_workspace("bench")).workspace_id if per_pair else shared
            pairs.append(await _pair(store, ws))
        latencies: list[float] = []
        start = time.perf_counter() + 1.0  # a second of warm-up
        stop = start + seconds

        async def worker(person: Actor, asker: Actor, channel_id: uuid.UUID) -> None:
            while (t0 := time.perf_counter()) < stop:
                posted = await store.append_message(asker, channel_id, [ASK])
                block = posted.blocks[0]
                assert isinstance(block, Ask)
                await store.answer_ask(person, block.ask_id, ANSWER)
                if t0 >= start:
                    latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker(*p) for p in pairs))
    finally:
        await db.close()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1e3
    p99 = latencies[int(len(latencies) * 0.99)] * 1e3
    where = "a workspace each" if per_pair else "one workspace"
    return (
        f"K={k} ({where}): {len(latencies) / seconds:,.0f} lifecycles/s, "
        f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", default=default_database_url())
    p.add_argument("--k", default="1,16")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--per-pair", action="store_true", help="a workspace per worker")
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    args = p.parse_args(argv)
    for k in (int(x) for x in args.k.split(",")):
        print(
            run_async(
                measure(args.database_url, k, args.seconds, args.per_pair), resolve_loop(args.loop)
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
