"""The one-ask link page on a slow phone: bytes transferred and first paint.

    python -m bench.link_page [--database-url ADMIN_URL] [--runs 3]
                              [--latency-ms 150] [--down-kbps 1600] [--up-kbps 750] [--cpu 4]

An in-process server on loopback (its own throwaway database, dropped at the
end; without --database-url an embedded PostgreSQL under .venv), one ask
(an intro and three questions, with descriptions and a preview) and its
link; Debian's Chromium at 390×844 with the network throttled through CDP
(Network.emulateNetworkConditions: by default the "Slow 4G" of Chrome's
DevTools, 150 ms, 1.6 Mbit/s down, 750 kbit/s up) and the CPU slowed 4×.
Each run is a fresh browser context (nothing cached). Reported per run:
bytes transferred (every response's encoded length, headers included, from
Network.loadingFinished), the requests made, first paint and first
contentful paint (the Paint Timing API), and when the ask's form was drawn
(its Submit button in the page).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import pathlib
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from compass_server.store.embedded import EmbeddedPostgres
from tests.browser import ARGS, CHROMIUM, PHONE
from tests.conftest import migrated_database, running_server
from tests.test_link_page import billing_ask, posted
from tests.world import World

ROOT = pathlib.Path(__file__).resolve().parents[1]


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def admin_url(given: str | None) -> AsyncIterator[str]:
    if given:
        yield given
        return
    embedded = EmbeddedPostgres(ROOT / ".venv" / "compass-bench-pg")
    url = await asyncio.to_thread(embedded.start)
    try:
        yield url
    finally:
        await asyncio.to_thread(embedded.stop)


async def one_load(browser: Any, base: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    context = await browser.new_context(base_url=base, viewport=PHONE)
    try:
        tab = await context.new_page()
        cdp = await context.new_cdp_session(tab)
        await cdp.send("Network.enable")
        await cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        await cdp.send(
            "Network.emulateNetworkConditions",
            {
                "offline": False,
                "latency": args.latency_ms,
                "downloadThroughput": args.down_kbps * 1000 / 8,
                "uploadThroughput": args.up_kbps * 1000 / 8,
            },
        )
        await cdp.send("Emulation.setCPUThrottlingRate", {"rate": args.cpu})
        sizes: dict[str, float] = {}
        cdp.on(
            "Network.loadingFinished",
            lambda e: sizes.__setitem__(e["requestId"], e["encodedDataLength"]),
        )
        await tab.goto(path, wait_until="load")
        await tab.get_by_role("button", name="Submit answers").wait_for()
        timing = await tab.evaluate(
            """() => {
                 const paint = Object.fromEntries(
                   performance.getEntriesByType("paint").map((p) => [p.name, p.startTime]));
                 const nav = performance.getEntriesByType("navigation")[0];
                 return { fp: paint["first-paint"], fcp: paint["first-contentful-paint"],
                          drawn: performance.now(), load: nav.loadEventEnd };
               }"""
        )
        # The form's moment is when it was found, so at most the poll's late.
        return {"bytes": sum(sizes.values()), "requests": len(sizes), **timing}
    finally:
        await context.close()


async def main(args: argparse.Namespace) -> None:
    from playwright.async_api import async_playwright

    rows = []
    async with admin_url(args.database_url) as admin, migrated_database(admin) as url:
        with tempfile.TemporaryDirectory() as data:
            async with running_server(url, pathlib.Path(data)) as srv:
                w = await World.create(srv.store)
                ask_id = await posted(w, billing_ask(w.human))
                link = await w.store.mint_ask_link(w.workspace_id, ask_id, w.human.account_id)
                base = f"http://127.0.0.1:{srv.http_port}"
                async with async_playwright() as pw:
                    browser = await pw.chromium.launch(
                        executable_path=str(CHROMIUM), headless=True, args=ARGS
                    )
                    for n in range(args.runs):
                        got = await one_load(browser, base, f"/a/{link.secret}", args)
                        log(f"run {n + 1}: {got}")
                        rows.append(got)
                    await browser.close()
    med = {
        k: statistics.median(r[k] for r in rows)
        for k in ("bytes", "requests", "fp", "fcp", "drawn", "load")
    }
    print(
        f"network {args.latency_ms} ms, {args.down_kbps} kbit/s down, {args.up_kbps} kbit/s up; "
        f"CPU {args.cpu}x slower; {args.runs} cold loads, medians\n"
    )
    print(
        "| bytes transferred | requests | first paint | first contentful paint "
        "| ask drawn | load event |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    print(
        f"| {med['bytes'] / 1024:.1f} KiB | {med['requests']:.0f} | {med['fp']:.0f} ms | "
        f"{med['fcp']:.0f} ms | {med['drawn']:.0f} ms | {med['load']:.0f} ms |"
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default=os.environ.get("COMPASS_TEST_DATABASE_URL"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--latency-ms", type=float, default=150)
    p.add_argument("--down-kbps", type=float, default=1600)
    p.add_argument("--up-kbps", type=float, default=750)
    p.add_argument("--cpu", type=float, default=4)
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
