"""`compass-server serve --workers N`: N processes on the same ports, supervised
by the parent."""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import signal
import time
import urllib.request
from collections.abc import Iterator

import grpc
import pytest

from compass.v1 import agent_gateway_pb2 as gw
from compass.v1 import comms_pb2 as pb
from tests.procs import ServerProcess
from tests.relay_client import relay, runner_for
from tests.servers import GrpcClient
from tests.test_api_comms import GOOD, ask_pb
from tests.world import World

pytestmark = pytest.mark.timeout(180)

DRAIN = 2.0


@pytest.fixture
def workers(database_url: str) -> Iterator[ServerProcess]:
    server = ServerProcess(
        database_url,
        args=[
            "--workers",
            "2",
            "--metrics-listen",
            "127.0.0.1:0",
            "--drain-seconds",
            str(DRAIN),
            # Two workers' pools on a PostgreSQL other suites share.
            "--pool-size",
            "4",
        ],
    ).start()
    yield server
    if server.proc is not None:
        assert server.stop() == 0, "".join(server.log)


def numbered_ask(i: int) -> pb.Ask:
    # Asks alike from one agent in one channel are one ask (posting once).
    ask = ask_pb()
    ask.questions[0].question = f"Which database, number {i}?"
    return ask


def pids(server: ServerProcess) -> list[int]:
    return [int(p) for p in server.ready["pids"]]  # type: ignore[attr-defined]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A child that ended but was not yet reaped is a zombie, not alive.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def calls_served(metrics_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    counts = re.findall(r"^compass_rpc_duration_seconds_count\{[^}]*\} (\S+)$", text, re.M)
    return int(sum(float(c) for c in counts))


async def answer_over_new_connections(port: int, world: World, ask_ids: list[str]) -> None:
    for ask_id in ask_ids:
        client = GrpcClient(port)
        # A connection of its own, not one shared through gRPC's global pool.
        await client.channel.close()
        client.channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        try:
            await client.call(
                "RespondToAsk",
                pb.RespondToAskRequest(ask_id=ask_id, answers=GOOD),
                world.tokens[world.human.account_id],
            )
        finally:
            await client.close()


async def test_calls_spread_over_the_workers_and_answers_reach_the_agent(
    workers: ServerProcess, world: World
) -> None:
    assert workers.ready["workers"] == 2 and len(set(pids(workers))) == 2
    metrics_ports = workers.ready["metrics_ports"]
    assert isinstance(metrics_ports, list) and len(metrics_ports) == 2
    before = [calls_served(p) for p in metrics_ports]
    async with relay(workers.grpc_port, await runner_for(world)) as runner:
        await runner.bound("s1", world.agent)
        ask_ids = []
        for i in range(24):
            posted = await runner.ok(
                "s1",
                "post_ask",
                gw.PostAskRequest(channel_id=str(world.channel.channel_id), ask=numbered_ask(i)),
            )
            ask_ids.append(posted.ask_id)
        # Each answer on a connection of its own: the kernel spreads them.
        await answer_over_new_connections(workers.grpc_port, world, ask_ids)
        heard = []
        for _ in ask_ids:
            event = await runner.delivery("s1")
            heard.append(event.message_posted.message.blocks[0].ask_answer.ask_id)
        assert sorted(heard) == sorted(ask_ids)
        await runner.no_delivery("s1")
    served = [calls_served(p) - b for p, b in zip(metrics_ports, before, strict=True)]
    assert sum(served) >= len(ask_ids) and all(n > 0 for n in served), served


async def test_a_killed_worker_is_restarted_and_the_restart_logged(
    workers: ServerProcess, world: World
) -> None:
    first, second = pids(workers)
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 30
    line = ""
    while time.monotonic() < deadline and not line:
        line = next((x for x in workers.log if f"pid {first}" in x and "restart" in x), "")
        await asyncio.sleep(0.1)
    assert line, "".join(workers.log)
    metrics_ports = workers.ready["metrics_ports"]
    assert isinstance(metrics_ports, list)
    # The new worker takes the dead one's place, its metrics port too.
    deadline = time.monotonic() + 30
    while True:
        try:
            calls_served(metrics_ports[0])
            break
        except OSError:
            assert time.monotonic() < deadline, "".join(workers.log)
            await asyncio.sleep(0.2)
    assert alive(second)
    ask_ids = []
    async with relay(workers.grpc_port, await runner_for(world)) as runner:
        await runner.bound("s1", world.agent)
        for i in range(8):
            posted = await runner.ok(
                "s1",
                "post_ask",
                gw.PostAskRequest(channel_id=str(world.channel.channel_id), ask=numbered_ask(i)),
            )
            ask_ids.append(posted.ask_id)
        await answer_over_new_connections(workers.grpc_port, world, ask_ids)
        heard = [await runner.delivery("s1") for _ in ask_ids]
        assert sorted(e.message_posted.message.blocks[0].ask_answer.ask_id for e in heard) == (
            sorted(ask_ids)
        )


async def test_sigterm_ends_every_worker_within_the_drain_time(
    workers: ServerProcess, world: World
) -> None:
    children = pids(workers)
    assert workers.proc is not None
    async with relay(workers.grpc_port, await runner_for(world)) as runner:
        await runner.bound("s1", world.agent)
        started = time.monotonic()
        workers.proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(workers.proc.wait, 30)
        took = time.monotonic() - started
        ended = await asyncio.wait_for(runner.ended, 10)
    assert code == 0, "".join(workers.log)
    assert DRAIN <= took < DRAIN + 10, took
    assert ended.code in {"unavailable", "ok"}, ended
    assert not any(alive(pid) for pid in children)
    workers.stop()


def test_workers_takes_auto_and_refuses_nonsense() -> None:
    import subprocess

    from tests.procs import BIN

    checked = subprocess.run(
        [str(BIN / "compass-server"), "config", "check", "--workers", "auto"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert f"workers = {len(os.sched_getaffinity(0))}" in checked.stdout
    bad = subprocess.run(
        [str(BIN / "compass-server"), "config", "check", "--workers", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "workers" in bad.stderr


@pytest.mark.timeout(240)
def test_workers_on_the_embedded_postgres_start_it_once_and_stop_it_at_the_end(
    tmp_path: pathlib.Path,
) -> None:
    import json
    import subprocess

    from compass_server.receipts.keys import KEY_FOLDER
    from tests.procs import BIN

    data_dir = tmp_path / "compass-data"
    env = {k: v for k, v in os.environ.items() if k != "COMPASS_DATABASE_URL"}
    proc = subprocess.Popen(
        [
            BIN / "compass-server",
            "serve",
            "--workers",
            "2",
            "--pool-size",
            "4",
            "--data-dir",
            str(data_dir),
            "--grpc-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready = json.loads(line)
        assert ready["workers"] == 2
        # One PostgreSQL, the parent's: its postmaster is the parent's child.
        postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
        assert alive(postmaster)
        # The workers use the keys made for the embedded database.
        assert any((data_dir / KEY_FOLDER).iterdir())
        made = subprocess.run(
            [BIN / "compass-server", "admin", "create-workspace", "acme", "--data-dir", data_dir],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert made.returncode == 0, made.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        assert not alive(postmaster)
        assert not any(alive(int(p)) for p in ready["pids"])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
