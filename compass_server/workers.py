"""`serve --workers N`: N server processes on the same gRPC, HTTP and relay
ports (SO_REUSEPORT), started, restarted and drained by the parent.

The parent serves nothing itself. It holds each shared port bound (never
listening, so the kernel hands it no connection) for as long as it runs, so a
port chosen as 0 stays the workers' and nothing else takes it while a worker
restarts. It starts the embedded PostgreSQL once and hands its address to
every worker. Each worker is a whole server: they share work through the
database exactly as separate `serve` processes do.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

import psycopg

from compass_server import config
from compass_server.receipts.keys import KEY_FOLDER
from compass_server.startup import (
    StartupError,
    database_problem,
    listen_address,
    receipt_keys,
    webhook_vault,
)
from compass_server.store.db import migrate, redacted_url
from compass_server.store.embedded import EmbeddedPostgres
from compass_server.store.vault import KEY_FILE

log = logging.getLogger("compass_server")

# The hidden flag a worker is started with: the parent's pid.
WORKER_FLAG = "--worker-of"
# How long a worker may take to say it is ready.
START_SECONDS = 120.0
# After SIGTERM, how long past drain_seconds a worker may take to stop before it is killed.
STOP_GRACE_SECONDS = 15.0
# A worker that ends sooner than this after starting is restarted after a
# growing pause (up to the longest), not at once.
STEADY_SECONDS = 10.0
LONGEST_PAUSE_SECONDS = 30.0


def _joined(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def reserve(value: str, flag: str) -> tuple[socket.socket, str]:
    """A socket bound (not listening) with SO_REUSEPORT on the address, and
    the address with its port filled in."""
    host, port = listen_address(value, flag)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror:
        raise StartupError(
            f"can't listen on {_joined(host, port)} ({flag}): no such host"
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = "the address is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise StartupError(
            f"can't listen on {_joined(host, port)} ({flag}): {why}; stop what holds it or "
            f"pick another address with {flag}"
        ) from None
    return sock, _joined(host, sock.getsockname()[1])


def die_with_parent(parent: int) -> None:
    """A worker ends when its parent does, even one killed outright."""
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:
        raise SystemExit(0)


class Worker:
    """One slot: the process in it now, and the ports it keeps across restarts."""

    def __init__(self, index: int, metrics: str | None) -> None:
        self.index = index
        self.metrics = metrics
        self.proc: asyncio.subprocess.Process | None = None
        self.ready: dict[str, Any] = {}
        self.started = 0.0
        self.pause = 0.0


class Supervisor:
    def __init__(self, settings: config.Settings, argv: list[str]) -> None:
        self.settings = settings
        self.argv = argv
        self.env = dict(os.environ)
        self.flags: list[str] = []
        self.sockets: list[socket.socket] = []
        self.workers: list[Worker] = []
        self.stopping = asyncio.Event()
        self.embedded: EmbeddedPostgres | None = None

    async def run(self) -> None:
        """Serves until SIGTERM or SIGINT; StartupError when the ports, the
        database or a worker can't start."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self._forward, signal.SIGHUP)
        try:
            await self._prepare()
            await asyncio.gather(*(self._start(w) for w in self.workers))
            self._announce()
            keepers = [asyncio.create_task(self._keep(w)) for w in self.workers]
            await self.stopping.wait()
            log.info("stopping %d workers", len(self.workers))
            await self._stop_all()
            for keeper in keepers:
                keeper.cancel()
            await asyncio.gather(*keepers, return_exceptions=True)
            log.info("stopped")
        finally:
            await self._stop_all()
            for sock in self.sockets:
                sock.close()
            if self.embedded is not None:
                await asyncio.to_thread(self.embedded.stop)

    async def _prepare(self) -> None:
        s = self.settings
        listens = [
            ("--grpc-listen", s.grpc_listen),
            ("--http-listen", s.http_listen),
            ("--relay-listen", s.relay_listen),
        ]
        for flag, value in listens:
            if value:
                sock, at = reserve(value, flag)
                self.sockets.append(sock)
                self.flags += [flag, at]
        metrics: list[str | None] = [None] * s.workers
        if s.metrics_listen:
            host, port = listen_address(s.metrics_listen, "--metrics-listen")
            metrics = [_joined(host, port + i if port else 0) for i in range(s.workers)]
        self.workers = [Worker(i, metrics[i]) for i in range(s.workers)]
        url = s.database_url
        if not url:
            self.embedded = EmbeddedPostgres(s.data_dir)
            try:
                url = await asyncio.to_thread(self.embedded.start)
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise StartupError(
                    f"can't start the embedded PostgreSQL under {self.embedded.data_dir}: {first}"
                ) from exc
            # The workers see an external database; the keys the embedded one
            # would make for itself are made here and named to them.
            self.env["COMPASS_DATABASE_URL"] = url
            if not s.webhook_key and not s.webhook_key_file:
                webhook_vault(s, embedded=True)
                self.flags += ["--webhook-key-file", str(s.data_dir / KEY_FILE)]
            if s.receipt_keys_dir is None:
                receipt_keys(s, embedded=True)
                self.flags += ["--receipt-keys-dir", str(s.data_dir / KEY_FOLDER)]
        # Migrated once here rather than raced by every worker.
        try:
            await migrate(url)
        except psycopg.OperationalError as exc:
            raise database_problem(url, exc) from exc
        log.info(
            "starting %d workers on %s",
            s.workers,
            redacted_url(url) if s.database_url else "the embedded PostgreSQL",
        )

    def _command(self, w: Worker) -> list[str]:
        metrics = ["--metrics-listen", w.metrics] if w.metrics else []
        return [
            sys.executable,
            "-m",
            "compass_server.cli",
            *self.argv,
            "--workers",
            "1",
            WORKER_FLAG,
            str(os.getpid()),
            *self.flags,
            *metrics,
        ]

    async def _start(self, w: Worker) -> None:
        w.started = time.monotonic()
        w.proc = proc = await asyncio.create_subprocess_exec(
            *self._command(w),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            env=self.env,
        )
        assert proc.stdout is not None
        line = b""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(START_SECONDS):
                line = await proc.stdout.readline()
        if not line:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise StartupError(f"worker {w.index} did not start (its reason is logged above)")
        w.ready = json.loads(line)
        if w.metrics and "metrics_port" in w.ready:
            # A restart takes the same port, so a scraper's target stays put.
            host, _ = listen_address(w.metrics, "--metrics-listen")
            w.metrics = _joined(host, w.ready["metrics_port"])

    def _announce(self) -> None:
        first = self.workers[0].ready
        ready: dict[str, Any] = {
            key: first[key] for key in ("grpc_port", "http_port", "relay_port") if key in first
        }
        if self.settings.metrics_listen:
            ready["metrics_ports"] = [w.ready["metrics_port"] for w in self.workers]
        ready["workers"] = len(self.workers)
        ready["pids"] = [w.proc.pid for w in self.workers if w.proc is not None]
        print(json.dumps({**ready, "ready": True}), flush=True)

    async def _keep(self, w: Worker) -> None:
        """Restarts the worker whenever it ends, until the server stops."""
        while True:
            assert w.proc is not None
            pid = w.proc.pid
            code = await w.proc.wait()
            if self.stopping.is_set():
                return
            lived = time.monotonic() - w.started
            w.pause = (
                0.0
                if lived >= STEADY_SECONDS
                else min(max(w.pause * 2, 0.5), LONGEST_PAUSE_SECONDS)
            )
            log.warning(
                "worker %d (pid %d) ended with status %d after %.0f s; restarting it%s",
                w.index,
                pid,
                code,
                lived,
                f" in {w.pause:g} s" if w.pause else "",
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(w.pause):
                    await self.stopping.wait()
                return
            try:
                await self._start(w)
            except StartupError as exc:
                log.warning("%s", exc.message)
                continue
            assert w.proc is not None
            log.warning("worker %d restarted as pid %d", w.index, w.proc.pid)

    def _forward(self, sig: signal.Signals) -> None:
        for w in self.workers:
            if w.proc is not None and w.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    w.proc.send_signal(sig)

    async def _stop_all(self) -> None:
        """SIGTERM to each worker (each drains as a lone server would), then
        SIGKILL to any still running past the drain time and a grace."""
        running = [w.proc for w in self.workers if w.proc is not None and w.proc.returncode is None]
        if not running:
            return
        self._forward(signal.SIGTERM)
        limit = self.settings.drain_seconds + STOP_GRACE_SECONDS
        try:
            async with asyncio.timeout(limit):
                await asyncio.gather(*(p.wait() for p in running))
        except TimeoutError:
            for p in running:
                if p.returncode is None:
                    log.warning("worker pid %d did not stop within %g s; killing it", p.pid, limit)
                    with contextlib.suppress(ProcessLookupError):
                        p.kill()
            await asyncio.gather(*(p.wait() for p in running))
