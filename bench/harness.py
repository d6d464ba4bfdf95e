"""A small async load harness, shared by every benchmark row.

`run_load` runs one async callable from K concurrent workers for a warmup and
then a fixed measurement window, and returns a `LoadResult` with the latency of
every call that completed inside the window.

Throughput counts completions inside the window (calls started during the
warmup that finish inside the window count; calls still running when the
window closes do not), so in steady state it is unbiased.

This module also holds the types a row is built from (`BenchContext`, `Row`);
`bench/run.py` keeps the registry of rows.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

# One call of the thing being measured. The argument is the worker index,
# 0 <= i < concurrency, so a row can give each worker its own resources
# (a connection, an account, …) without locking. A call that returns `Phases`
# also has the latency of each of its parts kept.
Call = Callable[[int], Awaitable[object]]


class Phases(dict[str, float]):
    """Seconds spent in each named part of one op (e.g. {"PostMessage": …,
    "RespondToAsk": …}). Return one from a call to have every part's latency
    kept, for the same ops (those completed inside the window) as the op's."""


# Cumulative CPU seconds of processes other than this one (a server, PostgreSQL),
# by name; sampled at the edges of the window like the client's own CPU.
CpuProbe = Callable[[], Mapping[str, float]]


def percentile_ms(sorted_s: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted seconds, q in (0, 100], in milliseconds."""
    if not sorted_s:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(sorted_s)))
    return sorted_s[rank - 1] * 1000.0


@dataclass(frozen=True)
class LoadResult:
    """What one `run_load` measured."""

    concurrency: int
    seconds: float  # length of the measurement window (summed over merged runs)
    latencies_s: tuple[float, ...]  # sorted, one per call completed in the window
    errors: int = 0  # calls that raised inside the window (only if tolerated)
    client_cpu_s: float = 0.0  # CPU time of this process during the window
    # Whole-machine CPU shares during the window, from /proc/stat (nan if unknown):
    # idle near 0 means CPU-bound; steal is time the hypervisor gave to others.
    machine_idle: float = math.nan
    machine_steal: float = math.nan
    # Per part of an op (see `Phases`): sorted seconds, one per op in the window.
    phases: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    # CPU seconds other processes spent during the window, by name (see CpuProbe).
    other_cpu_s: Mapping[str, float] = field(default_factory=dict)
    # time.perf_counter() at the window's start and end (None once merged), for
    # rows that keep their own per-op records and must pick the window's.
    window: tuple[float, float] | None = None

    @property
    def calls(self) -> int:
        return len(self.latencies_s)

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        """Nearest-rank percentile, q in (0, 100], in milliseconds."""
        return percentile_ms(self.latencies_s, q)

    def phase_percentile_ms(self, name: str, q: float) -> float:
        """The same for one part of the op (nan if the op has no such part)."""
        return percentile_ms(self.phases.get(name, ()), q)

    @property
    def p50_ms(self) -> float:
        return self.percentile_ms(50)

    @property
    def p99_ms(self) -> float:
        return self.percentile_ms(99)

    @property
    def client_cpu_us_per_call(self) -> float:
        """Client-process CPU per completed call (µs): what the load generator costs."""
        return self.client_cpu_s / self.calls * 1e6 if self.calls else math.nan

    @property
    def foreign_cpu_share(self) -> float:
        """Share of the machine's CPU during the window that neither this process
        nor a probed one used: someone else's work (a test suite, a build), or
        an unprobed process. Near 0 on a quiet machine."""
        if math.isnan(self.machine_idle) or self.seconds <= 0:
            return math.nan
        ours = self.client_cpu_s + sum(self.other_cpu_s.values())
        capacity = (os.cpu_count() or 1) * self.seconds
        return max(0.0, 1.0 - self.machine_idle - self.machine_steal - ours / capacity)

    def other_cpu_us_per_call(self, name: str) -> float:
        """CPU of a probed process (e.g. "server", "pg") per completed call (µs)."""
        if not self.calls or name not in self.other_cpu_s:
            return math.nan
        return self.other_cpu_s[name] / self.calls * 1e6

    @staticmethod
    def merge(results: Sequence[LoadResult]) -> LoadResult:
        """Pool several runs at the same K (e.g. rounds) into one result."""
        if not results:
            raise ValueError("nothing to merge")
        ks = {r.concurrency for r in results}
        if len(ks) != 1:
            raise ValueError(f"cannot merge different concurrencies: {sorted(ks)}")
        total = sum(r.seconds for r in results)
        names = list(dict.fromkeys(n for r in results for n in r.phases))
        phases = {n: tuple(sorted(x for r in results for x in r.phases.get(n, ()))) for n in names}
        cpu_names = list(dict.fromkeys(n for r in results for n in r.other_cpu_s))
        other = {n: sum(r.other_cpu_s.get(n, math.nan) for r in results) for n in cpu_names}
        return LoadResult(
            concurrency=results[0].concurrency,
            seconds=total,
            latencies_s=tuple(sorted(x for r in results for x in r.latencies_s)),
            errors=sum(r.errors for r in results),
            client_cpu_s=sum(r.client_cpu_s for r in results),
            machine_idle=sum(r.machine_idle * r.seconds for r in results) / total,
            machine_steal=sum(r.machine_steal * r.seconds for r in results) / total,
            phases=phases,
            other_cpu_s=other,
        )

    def summary(self) -> str:
        others = "".join(
            f", {n} CPU {self.other_cpu_us_per_call(n):.0f} µs/call" for n in self.other_cpu_s
        )
        phases = "".join(
            f"; {n} p50 {self.phase_percentile_ms(n, 50):.3f} p99 "
            f"{self.phase_percentile_ms(n, 99):.3f} ms"
            for n in self.phases
        )
        return (
            f"K={self.concurrency:<3} {self.calls_per_s:9.1f} calls/s  "
            f"p50 {self.p50_ms:7.3f} ms  p99 {self.p99_ms:7.3f} ms  "
            f"({self.calls} calls, {self.errors} errors, "
            f"client CPU {self.client_cpu_us_per_call:.0f} µs/call{others}, "
            f"machine idle {self.machine_idle:.0%} steal {self.machine_steal:.0%} "
            f"foreign {self.foreign_cpu_share:.0%}){phases}"
        )


def proc_stat_cpu() -> tuple[int, int, int] | None:
    """(total, idle + iowait, steal) jiffies of all CPUs, or None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    ticks += [0] * (8 - len(ticks))
    return sum(ticks), ticks[3] + ticks[4], ticks[7]


async def run_load(
    call: Call,
    *,
    concurrency: int,
    seconds: float,
    warmup: float = 1.0,
    tolerate_errors: bool = False,
    cpu: CpuProbe | None = None,
) -> LoadResult:
    """Run `call(i)` from `concurrency` workers (i = worker index), each awaiting
    its previous call before starting the next (a closed loop), for `warmup`
    seconds unmeasured and then `seconds` measured.

    An exception from `call` aborts the run and propagates, unless
    `tolerate_errors` is set: then it is counted in `errors` and the worker
    carries on. `cpu`, if given, is sampled at the window's edges.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if seconds <= 0 or warmup < 0:
        raise ValueError("seconds must be > 0 and warmup >= 0")

    clock = time.perf_counter
    start = clock()
    measure_from = start + warmup
    until = measure_from + seconds
    per_worker: list[list[float]] = [[] for _ in range(concurrency)]
    per_phase: dict[str, list[float]] = {}
    errors = [0] * concurrency
    cpu_marks: dict[str, float] = {}
    stat_marks: dict[str, tuple[int, int, int] | None] = {}
    other_marks: dict[str, Mapping[str, float]] = {}

    async def worker(i: int) -> None:
        lat = per_worker[i]
        while True:
            t0 = clock()
            if t0 >= until:
                return
            try:
                result = await call(i)
            except Exception:
                if not tolerate_errors:
                    raise
                t1 = clock()
                if measure_from <= t1 <= until:
                    errors[i] += 1
                continue
            t1 = clock()
            if measure_from <= t1 <= until:
                lat.append(t1 - t0)
                if isinstance(result, Phases):
                    for name, secs in result.items():
                        per_phase.setdefault(name, []).append(secs)

    async def cpu_clock() -> None:
        await asyncio.sleep(max(0.0, measure_from - clock()))
        cpu_marks["from"] = time.process_time()
        stat_marks["from"] = proc_stat_cpu()
        if cpu is not None:
            other_marks["from"] = cpu()
        await asyncio.sleep(max(0.0, until - clock()))
        cpu_marks["until"] = time.process_time()
        stat_marks["until"] = proc_stat_cpu()
        if cpu is not None:
            other_marks["until"] = cpu()

    async with asyncio.TaskGroup() as tg:
        tg.create_task(cpu_clock())
        for i in range(concurrency):
            tg.create_task(worker(i))

    idle = steal = math.nan
    a, b = stat_marks.get("from"), stat_marks.get("until")
    if a is not None and b is not None and b[0] > a[0]:
        idle = (b[1] - a[1]) / (b[0] - a[0])
        steal = (b[2] - a[2]) / (b[0] - a[0])
    return LoadResult(
        concurrency=concurrency,
        seconds=seconds,
        latencies_s=tuple(sorted(x for lat in per_worker for x in lat)),
        errors=sum(errors),
        client_cpu_s=cpu_marks.get("until", 0.0) - cpu_marks.get("from", 0.0),
        machine_idle=idle,
        machine_steal=steal,
        phases={n: tuple(sorted(v)) for n, v in per_phase.items()},
        other_cpu_s=cpu_delta(other_marks.get("from", {}), other_marks.get("until", {})),
        window=(measure_from, until),
    )


def cpu_delta(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    return {n: b[n] - a[n] for n in a if n in b}


FALLBACK_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def default_database_url() -> str:
    """$COMPASS_DATABASE_URL, else the local PostgreSQL (trust auth)."""
    return os.environ.get("COMPASS_DATABASE_URL") or FALLBACK_DATABASE_URL


async def machine_idle_now(seconds: float = 1.0) -> float:
    """Share of all CPUs idle over the next `seconds` (nan off Linux): run before
    a benchmark to see whether something else is using the machine."""
    a = proc_stat_cpu()
    await asyncio.sleep(seconds)
    b = proc_stat_cpu()
    if a is None or b is None or b[0] <= a[0]:
        return math.nan
    return (b[1] - a[1]) / (b[0] - a[0])


def resolve_loop(name: str = "auto") -> str:
    """ "auto" → "uvloop" if it imports, else "asyncio"; otherwise checked as given."""
    if name not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"unknown event loop {name!r}")
    if name == "asyncio":
        return name
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if name == "uvloop":
            raise
        return "asyncio"
    return "uvloop"


def run_async(main: Coroutine[Any, Any, T], loop: str) -> T:
    """asyncio.run on the named loop ("uvloop" or "asyncio", see resolve_loop)."""
    if loop == "uvloop":
        import uvloop

        result: T = uvloop.run(main)
        return result
    return asyncio.run(main)


# ---------------------------------------------------------------------------
# What a row is made of. The registry itself lives in bench/run.py.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchContext:
    """Everything a row may need, fixed for one `bench.run` invocation."""

    database_url: str  # the throwaway benchmark database (created and dropped by run.py)
    seconds: float  # measurement window per (row, K)
    warmup: float  # unmeasured warmup per (row, K)
    loop_name: str  # event loop of this (client) process: "uvloop" or "asyncio"
    extra: dict[str, str] = field(default_factory=dict)  # free-form knobs for future rows

    async def load(
        self,
        call: Call,
        concurrency: int,
        *,
        tolerate_errors: bool = False,
        cpu: CpuProbe | None = None,
    ) -> LoadResult:
        """`run_load` with this run's window and warmup."""
        return await run_load(
            call,
            concurrency=concurrency,
            seconds=self.seconds,
            warmup=self.warmup,
            tolerate_errors=tolerate_errors,
            cpu=cpu,
        )


# Measure one K: set up what is per-K (a pool of K connections, a channel, …),
# call `ctx.load(...)`, tear it down, return the result.
Measure = Callable[[int], Awaitable[LoadResult]]

# Open a row once per invocation (start a server process, create tables, …)
# and yield its `Measure`; run.py calls that for every K, interleaved with the
# other rows, then closes the context (stop processes, drop tables).
RowOpener = Callable[[BenchContext], AbstractAsyncContextManager[Measure]]


@dataclass(frozen=True)
class Row:
    key: str  # short id for --rows, e.g. "ceiling"
    title: str  # shown in the table
    op: str  # what one counted call is, e.g. "ask lifecycle (post + answer)"
    open: RowOpener | None  # None: planned, not measurable yet (shown as pending)
    # Only at these K (None: every K of the run); other columns show "n/a".
    ks: tuple[int, ...] | None = None
    # False when an op is not a lifecycle (e.g. one delivery): no × ceiling.
    vs_ceiling: bool = True
    # Key of a row whose per-call latencies this row's are compared with.
    baseline: str | None = None
