"""How soon a server stops after SIGTERM while it is busy: the figure
tests/test_shutdown.py only bounds (generously, for a loaded machine).

    python -m bench.shutdown [--database-url ADMIN_URL] [--runs 12]

A throwaway database, dropped at the end. Each run starts a real
`compass-server serve` (drain 0.2 s), posts 40 asks whose deadlines come due
every few milliseconds, keeps three posters of ever sooner deadlines and
three Subscribe streams going, and sends SIGTERM at a random moment 0.2–0.4 s
in; the time from the signal to the process's exit is reported (p50, max),
drain included.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics

from bench.harness import default_database_url
from tests.conftest import migrated_database
from tests.test_ask_expiry import open_world
from tests.test_shutdown import DRAIN, stop_at_a_wake_up


async def main(args: argparse.Namespace) -> None:
    async with migrated_database(args.database_url) as url:
        db, w = await open_world(url)
        rng = random.Random(24)
        took = []
        try:
            for run in range(args.runs):
                took.append(await stop_at_a_wake_up(url, w, 0.2 + rng.random() * 0.2, run))
        finally:
            await db.close()
    took.sort()
    print(
        f"SIGTERM → exit over {args.runs} runs (drain {DRAIN:g} s included): "
        f"p50 {statistics.median(took):.2f} s, max {took[-1]:.2f} s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=default_database_url())
    parser.add_argument("--runs", type=int, default=12)
    asyncio.run(main(parser.parse_args()))
