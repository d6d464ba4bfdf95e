"""Run the Compass benchmark rows and print them side by side.

    python -m bench.run [--database-url URL] [--seconds N] [--k 1,16] [--rows a,b] [--rounds R]

The database URL (default $COMPASS_DATABASE_URL, else
postgresql://postgres@127.0.0.1:5432/postgres) is used only to create a
throwaway database (default `compass_bench`, dropped at the end); every row
works inside that one.

Rows run interleaved: for each round, for each K, every selected row in
registry order (the ceiling first), so a server row and the ceiling it is
compared with run seconds apart under the same machine conditions. With
--rounds > 1, the rounds of a (row, K) are pooled into one result.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench import ceiling, empty_grpc, fanout, peers, server_lifecycle, server_post, store_growth
from bench.harness import (
    BenchContext,
    LoadResult,
    Measure,
    Row,
    default_database_url,
    machine_idle_now,
    resolve_loop,
    run_async,
)

# ---------------------------------------------------------------------------
# THE REGISTRY OF ROWS
#
# Order matters: within each K, rows are measured in this order, and the
# ceiling goes first so every other row is compared against a ceiling measured
# moments earlier. A row is a `bench.harness.Row`:
#
#     Row(key="…", title="…", op="what one counted call is", open=opener)
#
# where `opener(ctx: BenchContext)` is an async context manager that sets the
# row up once (start a server subprocess against ctx.database_url, create its
# schema, …) and yields `measure(k) -> LoadResult`, which sets up what is per
# K (channels, pools, accounts for K callers) and returns `await ctx.load(call,
# k)`. See bench/ceiling.py and bench/empty_grpc.py, and bench/README.md.
#
# Rows with `open=None` are planned: they show as "pending" in the table until
# their module exists. A row with `ks` runs only at those K ("n/a" elsewhere);
# `vs_ceiling=False` drops its × ceiling (its op is not a lifecycle);
# `baseline` names a row its per-call latencies are compared with.
# ---------------------------------------------------------------------------

ROWS: tuple[Row, ...] = (
    ceiling.ROW,
    server_lifecycle.ROW,
    server_lifecycle.CONNECT_ROW,
    peers.LANGGRAPH_ROW,
    peers.A2A_ROW,
    server_post.ROW,
    empty_grpc.ROW,
    empty_grpc.PAIR_ROW,
    fanout.ROW_100,
    fanout.ROW_1000,
    store_growth.ROW_SMALL,
    store_growth.ROW_LARGE,
)

CEILING_KEY = ceiling.ROW.key

# Below this share of idle CPU before the run, the machine is called busy.
QUIET_IDLE = 0.9
# A window in which other processes used more than this share of the machine's
# CPU is disturbed: with --wait-quiet it is measured again (up to RETRIES times).
MAX_FOREIGN = 0.1
RETRIES = 3


# --------------------------------------------------------------------------- database


def bench_database_url(admin_url: str, dbname: str) -> str:
    """The admin URL pointed at another database (URL or key=value conninfo)."""
    if "://" in admin_url:
        parts = urlsplit(admin_url)
        return urlunsplit(parts._replace(path="/" + dbname))
    return make_conninfo(admin_url, dbname=dbname)


async def create_database(admin_url: str, dbname: str) -> None:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        await conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


async def drop_database(admin_url: str, dbname: str) -> None:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        name = sql.Identifier(dbname)
        await conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


async def server_version(url: str) -> str:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SHOW server_version")
        row = await cur.fetchone()
        return str(row[0]) if row else "?"


# --------------------------------------------------------------------------- machine


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "?"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "?"


def versions() -> str:
    found = []
    for dist in ("grpcio", "protobuf", "connectrpc", "pyqwest", "hypercorn", "psycopg", "uvloop"):
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def source_state() -> str:
    """The commit the server ran from, and whether its tree had local changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "compass_server", "agentkit"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + (" + uncommitted changes in compass_server/ or agentkit/" if dirty else "")


def machine_lines(
    started: dt.datetime,
    source: str,
    pg_version: str,
    loop_name: str,
    server_loop: str,
    idle: float,
) -> list[str]:
    return [
        f"date: {started.strftime('%Y-%m-%d %H:%M UTC')}; server source: {source}",
        f"cpus: {len(os.sched_getaffinity(0))} (nproc), model: {cpu_model()}",
        f"PostgreSQL {pg_version}; Python {platform.python_version()}; {versions()}",
        f"client loop {loop_name}; empty-gRPC server loop {server_loop}; compass-server runs "
        "on uvloop when it imports",
        f"machine idle just before the run: {idle:.0%}"
        + ("" if not idle < QUIET_IDLE else "  <-- BUSY: something else is using the CPUs"),
    ]


# --------------------------------------------------------------------------- running


@dataclass
class Cell:
    results: list[LoadResult] = field(default_factory=list)
    error: str = ""
    disturbed: int = 0  # results kept although others used > MAX_FOREIGN of the machine

    def merged(self) -> LoadResult | None:
        return LoadResult.merge(self.results) if self.results else None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def wait_until_quiet(max_wait_s: float) -> float:
    """Wait (up to max_wait_s) until three 2-second samples in a row see the
    machine at least QUIET_IDLE idle; returns the last sample."""
    deadline = time.monotonic() + max_wait_s
    streak, idle, last_log = 0, math.nan, 0.0
    while True:
        idle = await machine_idle_now(2.0)
        streak = streak + 1 if idle >= QUIET_IDLE else 0
        if streak >= 3 or time.monotonic() >= deadline:
            return idle
        if time.monotonic() - last_log > 60:
            last_log = time.monotonic()
            log(f"waiting for a quiet machine: {idle:.0%} idle (need {QUIET_IDLE:.0%} three times)")


async def run_rows(
    ctx: BenchContext, rows: list[Row], ks: list[int], rounds: int, quiet_wait_s: float = 0.0
) -> dict[tuple[str, int], Cell]:
    cells: dict[tuple[str, int], Cell] = {(r.key, k): Cell() for r in rows for k in ks}
    measures: dict[str, Measure] = {}
    async with AsyncExitStack() as stack:
        for row in rows:
            if row.open is None:
                continue
            try:
                measures[row.key] = await stack.enter_async_context(row.open(ctx))
            except Exception as exc:  # keep the other rows running
                log(f"{row.key}: setup failed: {exc!r}")
                for k in ks:
                    cells[(row.key, k)].error = f"setup failed: {type(exc).__name__}"
        for rnd in range(1, rounds + 1):
            if quiet_wait_s > 0:
                idle = await wait_until_quiet(quiet_wait_s)
                log(f"[round {rnd}/{rounds}] starting with the machine {idle:.0%} idle")
            for k in ks:
                for row in rows:
                    measure = measures.get(row.key)
                    cell = cells[(row.key, k)]
                    if measure is None or cell.error or not runs_at(row, k):
                        continue
                    tag = f"[round {rnd}/{rounds}] {row.key:<16}"
                    try:
                        result = await measure(k)
                        # A window someone else's work disturbed is measured again, once the
                        # machine is quiet (only when waiting for quiet was asked for).
                        for _ in range(RETRIES if quiet_wait_s > 0 else 0):
                            if not result.foreign_cpu_share > MAX_FOREIGN:
                                break
                            log(f"{tag} {result.summary()}  <-- disturbed, measuring again")
                            await wait_until_quiet(quiet_wait_s)
                            result = await measure(k)
                    except Exception as exc:
                        log(f"{tag} failed: {exc!r}")
                        cell.error = f"failed: {type(exc).__name__}"
                        continue
                    cell.results.append(result)
                    if result.foreign_cpu_share > MAX_FOREIGN:
                        cell.disturbed += 1
                    log(f"{tag} {result.summary()}")
    return cells


# --------------------------------------------------------------------------- table


def runs_at(row: Row, k: int) -> bool:
    return row.ks is None or k in row.ks


def _ms(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def _ratio(res: Cell, ceil: Cell | None) -> str:
    """Median over rounds of (row ops/s ÷ ceiling ops/s of the same round): each
    pair was measured seconds apart, so the ratio survives a disturbed round."""
    if ceil is None or not ceil.results or not res.results:
        return "—"
    if len(res.results) == len(ceil.results):
        ratios = [
            r.calls_per_s / c.calls_per_s
            for r, c in zip(res.results, ceil.results, strict=True)
            if c.calls_per_s > 0
        ]
        return f"{statistics.median(ratios):.2f}" if ratios else "—"
    a, b = LoadResult.merge(res.results), LoadResult.merge(ceil.results)
    return f"{a.calls_per_s / b.calls_per_s:.2f}" if b.calls_per_s > 0 else "—"


def _ops(cell: Cell) -> str:
    """ops/s of one round, or the median of the rounds with their range."""
    rates = [r.calls_per_s for r in cell.results]
    if len(rates) == 1:
        return _rate(rates[0])
    return f"{_rate(statistics.median(rates))} [{_rate(min(rates))}–{_rate(max(rates))}]"


def _rate(x: float) -> str:
    return f"{x:,.1f}" if x < 10 else f"{x:,.0f}"


def markdown(lines: list[list[str]]) -> list[str]:
    """A Markdown table: first line the header, first column left-aligned."""
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]

    def fmt(cols: list[str]) -> str:
        padded = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cols, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    sep = (
        "|"
        + "|".join(("-" * (w + 1) + ":") if i else "-" * (w + 2) for i, w in enumerate(widths))
        + "|"
    )
    return [fmt(lines[0]), sep, *(fmt(r) for r in lines[1:])]


def _us(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:,.0f}"


def _times(a: float, b: float) -> str:
    return "—" if math.isnan(a) or math.isnan(b) or b == 0 else f"{a / b:.2f}"


def render_table(rows: list[Row], ks: list[int], cells: dict[tuple[str, int], Cell]) -> str:
    head = ["row"]
    for k in ks:
        head += [f"K={k} ops/s", "p50 ms", "p99 ms", "× ceiling", "client µs/op", "idle"]
    lines = [head]
    for row in rows:
        line = [row.title]
        for k in ks:
            cell = cells[(row.key, k)]
            res = cell.merged()
            if row.open is None:
                line += ["pending", "", "", "", "", ""]
            elif not runs_at(row, k):
                line += ["n/a", "", "", "", "", ""]
            elif res is None:
                line += [cell.error or "—", "", "", "", "", ""]
            else:
                errs = f" ({res.errors} err)" if res.errors else ""
                errs += " †" if cell.disturbed else ""
                line += [
                    _ops(cell) + errs,
                    _ms(res.p50_ms),
                    _ms(res.p99_ms),
                    _ratio(cell, cells.get((CEILING_KEY, k))) if row.vs_ceiling else "—",
                    f"{res.client_cpu_us_per_call:.0f}",
                    "—" if math.isnan(res.machine_idle) else f"{res.machine_idle:.0%}",
                ]
        lines.append(line)
    out = markdown(lines)
    out.append("")
    out.append(
        "ops/s: completed ops per second (with several rounds: the median round, [min–max]); "
        "p50/p99: over all rounds' ops; × ceiling: ops/s over the ceiling's at the same K "
        "(median of per-round ratios); client µs/op: CPU of the load-generating process per "
        "op; idle: whole-machine idle CPU share during the window (near 0% = CPU-bound); "
        "n/a: the row runs at other K only; †: a window kept although other work used "
        f"more than {MAX_FOREIGN:.0%} of the machine in it."
    )
    out += ["", *render_calls(rows, ks, cells), "", *render_cpu(rows, ks, cells)]
    out += render_floors(ks, cells)
    out.append("")
    out.append("one op is:")
    out += [f"- {row.title}: {row.op}" for row in rows]
    return "\n".join(out)


def render_calls(rows: list[Row], ks: list[int], cells: dict[tuple[str, int], Cell]) -> list[str]:
    """Per call within an op (rows whose ops return Phases)."""
    head = ["row", "call"]
    for k in ks:
        head += [f"K={k} calls/s", "p50 ms", "p99 ms", "p50 / p99 × baseline"]
    lines = [head]
    merged = {key: cell.merged() for key, cell in cells.items()}
    for row in rows:
        names = list(
            dict.fromkeys(
                n for k in ks if (r := merged[(row.key, k)]) is not None for n in r.phases
            )
        )
        for name in names:
            line = [row.title, name]
            for k in ks:
                res = merged[(row.key, k)]
                if res is None or name not in res.phases:
                    line += ["—", "", "", ""]
                    continue
                base = merged.get((row.baseline, k)) if row.baseline else None
                compare = "—"
                if base is not None and name in base.phases:
                    compare = (
                        _times(
                            res.phase_percentile_ms(name, 50), base.phase_percentile_ms(name, 50)
                        )
                        + " / "
                        + _times(
                            res.phase_percentile_ms(name, 99), base.phase_percentile_ms(name, 99)
                        )
                    )
                line += [
                    _rate(len(res.phases[name]) / res.seconds),
                    _ms(res.phase_percentile_ms(name, 50)),
                    _ms(res.phase_percentile_ms(name, 99)),
                    compare,
                ]
            lines.append(line)
    if len(lines) == 1:
        return []
    return [
        "Per call (the parts of one op, over the same ops as above):",
        "",
        *markdown(lines),
    ]


def render_cpu(rows: list[Row], ks: list[int], cells: dict[tuple[str, int], Cell]) -> list[str]:
    """CPU per op of the client, the server process(es) and PostgreSQL."""
    merged = {key: cell.merged() for key, cell in cells.items()}
    names = list(dict.fromkeys(n for r in merged.values() if r is not None for n in r.other_cpu_s))
    head = ["row"]
    for k in ks:
        head += [f"K={k} client µs/op", *(f"{n} µs/op" for n in names), "foreign"]
    lines = [head]
    for row in rows:
        if not any(merged[(row.key, k)] is not None for k in ks):
            continue
        line = [row.title]
        for k in ks:
            res = merged[(row.key, k)]
            if res is None:
                line += ["—"] * (2 + len(names))
                continue
            line += [_us(res.client_cpu_us_per_call)]
            line += [_us(res.other_cpu_us_per_call(n)) for n in names]
            foreign = res.foreign_cpu_share
            line += ["—" if math.isnan(foreign) else f"{foreign:.0%}"]
        lines.append(line)
    return [
        "CPU per op (from /proc over each window; pg = the postmaster, its WAL writer and "
        "other auxiliaries, and the backends of the benchmark's databases; foreign = share "
        "of the machine's CPU used by anything else during the windows, ~0 on a quiet "
        "machine):",
        "",
        *markdown(lines),
    ]


def render_floors(ks: list[int], cells: dict[tuple[str, int], Cell]) -> list[str]:
    """The best lifecycle ratio a gRPC server could reach here if it did nothing
    but the ceiling's SQL: from the empty pair and the ceiling of this run."""
    lines = []
    for k in ks:
        pair = cells.get((empty_grpc.PAIR_ROW.key, k))
        ceil = cells.get((CEILING_KEY, k))
        p = pair.merged() if pair else None
        c = ceil.merged() if ceil else None
        if p is None or c is None or c.calls_per_s <= 0:
            continue
        if k == 1:
            # One caller: the two calls and the ceiling's SQL, one after the other.
            rate = 1000.0 / (p.percentile_ms(50) + c.percentile_ms(50))
            how = (
                f"two empty calls in a row (p50 {p.percentile_ms(50):.2f} ms) plus the "
                f"ceiling's SQL (p50 {c.percentile_ms(50):.2f} ms)"
            )
        else:
            # Many callers: CPU-bound, so the CPU of both on every core.
            cpu_us = (
                p.client_cpu_us_per_call
                + p.other_cpu_us_per_call("server")
                + c.client_cpu_us_per_call
                + c.other_cpu_us_per_call("pg")
            )
            if math.isnan(cpu_us) or cpu_us <= 0:
                continue
            rate = (os.cpu_count() or 1) * 1e6 / cpu_us
            how = (
                f"{cpu_us:,.0f} µs of CPU (the empty pair's and the ceiling's) "
                f"on {os.cpu_count()} CPUs"
            )
        lines.append(
            f"- K={k}: at most {_rate(rate)} lifecycles/s = {rate / c.calls_per_s:.2f} × "
            f"ceiling: {how}"
        )
    if not lines:
        return []
    return [
        "",
        "Floor: a gRPC server doing nothing but the ceiling's SQL could reach",
        *lines,
    ]


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default=default_database_url(), help="admin URL")
    p.add_argument("--bench-database", default="compass_bench", help="throwaway database name")
    p.add_argument("--keep-database", action="store_true", help="do not drop it at the end")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per (row, K)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per (row, K)")
    p.add_argument("--k", default="1,16", help="comma-separated concurrencies (default 1,16)")
    p.add_argument("--rounds", type=int, default=1, help="repeat the interleaved sweep")
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="MINUTES",
        help="before the run and each round, wait up to this long for a quiet machine",
    )
    keys = ", ".join(r.key for r in ROWS)
    p.add_argument(
        "--rows",
        default="",
        help=f"comma-separated row keys (default all; the ceiling is always added): {keys}",
    )
    p.add_argument(
        "--no-ceiling", action="store_true", help="leave the ceiling out (no × ceiling column)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a row knob, e.g. fanout_streams_per_process=250 (repeatable)",
    )
    p.add_argument("--loop", choices=("auto", "uvloop", "asyncio"), default="auto")
    p.add_argument(
        "--server-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="event loop of server subprocesses the bench starts",
    )
    return p.parse_args(argv)


def select_rows(spec: str, with_ceiling: bool = True) -> list[Row]:
    """Rows named in spec (all if empty), in registry order; the ceiling is
    always added unless with_ceiling is false, so ratios are always at hand."""
    if not spec:
        wanted = [r.key for r in ROWS]
    else:
        wanted = [s.strip() for s in spec.split(",") if s.strip()]
    if with_ceiling and CEILING_KEY not in wanted:
        wanted.append(CEILING_KEY)
    if not with_ceiling:
        wanted = [w for w in wanted if w != CEILING_KEY]
    known = {r.key: r for r in ROWS}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"unknown rows: {', '.join(unknown)} (known: {', '.join(known)})")
    return [r for r in ROWS if r.key in wanted]  # registry order, ceiling first


async def amain(args: argparse.Namespace, loop_name: str) -> int:
    rows = select_rows(args.rows, with_ceiling=not args.no_ceiling)
    ks = [int(x) for x in args.k.split(",")]
    url = bench_database_url(args.database_url, args.bench_database)
    server_loop = resolve_loop(args.server_loop)
    ctx = BenchContext(
        database_url=url,
        seconds=args.seconds,
        warmup=args.warmup,
        loop_name=loop_name,
        extra={"server_loop": server_loop, **dict(kv.split("=", 1) for kv in args.set)},
    )
    started = dt.datetime.now(dt.UTC)
    pg = await server_version(args.database_url)
    source = source_state()
    if args.wait_quiet > 0:
        idle = await wait_until_quiet(args.wait_quiet * 60)
    else:
        idle = await machine_idle_now(2.0)
    if idle < QUIET_IDLE:
        log(f"warning: the machine is only {idle:.0%} idle before the run; numbers will be low")
    await create_database(args.database_url, args.bench_database)
    log(f"benchmark database {args.bench_database} created; {args.seconds:g} s per row and K")
    try:
        cells = await run_rows(ctx, rows, ks, args.rounds, args.wait_quiet * 60)
    finally:
        if not args.keep_database:
            await drop_database(args.database_url, args.bench_database)
    print("\n".join(machine_lines(started, source, pg, loop_name, server_loop, idle)))
    print(
        f"{args.seconds:g} s measured + {args.warmup:g} s warmup per row and K, "
        f"{args.rounds} round(s)"
    )
    print()
    print(render_table(rows, ks, cells))
    failed = any(c.error for c in cells.values())
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    loop_name = resolve_loop(args.loop)
    sys.exit(run_async(amain(args, loop_name), loop_name))


if __name__ == "__main__":
    main()
