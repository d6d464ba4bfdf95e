"""Health: gRPC health and /readyz say SERVING only while the database answers
and the server isn't draining; /healthz says the process is alive."""

from __future__ import annotations

import asyncio
import json
import pathlib
import signal
import time
from collections.abc import Callable

import grpc
import httpx
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import running_server
from tests.servers import serve_process
from tests.tcp_proxy import TcpProxy

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def health(port: int, service: str = "") -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        return int(reply.status)


async def until(check: Callable[[], object], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.1)


def proxied(url: str, port: int) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["host"], info["port"] = "127.0.0.1", str(port)
    return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]


async def test_not_serving_while_the_database_is_away(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    host, port = str(info.get("host") or "/tmp"), str(info.get("port") or 5432)
    proxy = await TcpProxy(f"{host}/.s.PGSQL.{port}" if host.startswith("/") else int(port)).start()
    try:
        async with running_server(proxied(database_url, proxy.port), tmp_path) as srv:
            srv.heartbeat.every = 0.2
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}") as http:
                assert await health(srv.grpc_port) == SERVING
                assert await health(srv.grpc_port, "compass.v1.CommsService") == SERVING
                assert (await http.get("/readyz")).status_code == 200

                await proxy.cut()
                await until(lambda: _is(srv, NOT_SERVING))
                assert await health(srv.grpc_port) == NOT_SERVING
                assert await health(srv.grpc_port, "compass.v1.CommsService") == NOT_SERVING
                ready = await http.get("/readyz")
                assert ready.status_code == 503 and "database" in ready.text
                # Alive all the same: nothing to restart.
                assert (await http.get("/healthz")).status_code == 200

                await proxy.restore()
                await until(lambda: _is(srv, SERVING))
                assert (await http.get("/readyz")).status_code == 200
    finally:
        await proxy.close()


async def _is(srv: object, status: int) -> bool:
    return await health(srv.grpc_port) == status  # type: ignore[attr-defined]


def test_sigterm_drains_not_serving_then_stops(database_url: str) -> None:
    proc = serve_process(database_url, COMPASS_DRAIN_SECONDS="3", COMPASS_LOG_LEVEL="WARNING")
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        grpc_port, http_port = ready["grpc_port"], ready["http_port"]
        assert asyncio.run(health(grpc_port)) == SERVING
        assert httpx.get(f"http://127.0.0.1:{http_port}/readyz", timeout=10).status_code == 200
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        # Draining: still answering, but saying not to send more.
        assert asyncio.run(health(grpc_port)) == NOT_SERVING
        drained = httpx.get(f"http://127.0.0.1:{http_port}/readyz", timeout=10)
        assert drained.status_code == 503 and "draining" in drained.text
        assert httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=10).status_code == 200
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
