"""Push about asks: how fast a server pushes, and how long from an ask's
commit to its push reaching the push service.

    python -m bench.push [--database-url ADMIN_URL] [--seconds 5] [--drain 300]
                          [--parts drain,latency]

Its own throwaway database (`compass_bench_push`, dropped at the end), a
real `compass-server serve` per phase, and a push service on loopback
(tests/receiver.py) in this process, which decrypts each push (RFC 8291)
after the run to learn its ask.

1. Pushes per second: N asks naming one person (one subscription) are
   committed while no server sends, then a server drains them (each push
   encrypted for the subscription and VAPID-signed); the rate is counted from
   the first arrival to the last.
2. Commit → push: asks posted over gRPC at a steady 20 a second; each push's
   arrival at the push service minus the moment its PostMessage returned.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from typing import Any

import grpc
import psycopg

from bench.harness import percentile_ms
from bench.server import (
    Account,
    Provisioner,
    ask_request,
    create_channel,
    server_process,
)
from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2, comms_pb2_grpc, preferences_pb2, preferences_pb2_grpc
from compass_server.api.admin import AdminApi
from compass_server.store.types import Operator
from compass_server.store.vault import Vault, new_key, parse_key
from compass_server.store.webhooks import WebhookStore
from compass_server.webhooks.destination import Reach, networks
from tests.pushservice import Browser, b64
from tests.receiver import Received, Receiver, Reply

DATABASE = "compass_bench_push"
KEY = new_key()


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def env() -> dict[str, str]:
    return {"COMPASS_WEBHOOK_KEY": KEY, "COMPASS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}


def named(channel: str, person: Account) -> comms_pb2.PostMessageRequest:
    req = ask_request(channel)
    ask = req.blocks[0].ask
    ask.answerer_account_ids.append(person.account_id)
    ask.questions[0].question += f" ({uuid.uuid4().hex[:8]})"
    return req


async def push_endpoint(prov: Provisioner, ws: uuid.UUID) -> None:
    store = prov.store
    api = AdminApi(
        store.admin,
        webhooks=WebhookStore(store.db, store.admin, Vault(parse_key(KEY, "key"))),
        reach=Reach(networks("127.0.0.0/8")),
    )
    await api.create_webhook(
        Operator(ws),
        ad.CreateWebhookRequest(url="mailto:push@example.test", kind=ad.WEBHOOK_KIND_PUSH),
    )


async def setup(url: str, name: str, service: Receiver) -> tuple[Account, Account, Browser]:
    async with Provisioner(url) as prov:
        ws = await prov.workspace(name)
        human = await prov.human(ws, "person")
        agent = await prov.agent(ws, "agent", human)
        await push_endpoint(prov, ws)
    return agent, human, Browser.new(service.url(f"/push/{name}"))


async def subscribe(ch: Any, human: Account, browser: Browser) -> None:
    prefs = preferences_pb2_grpc.PreferencesServiceStub(ch)
    await prefs.AddPushSubscription(
        preferences_pb2.AddPushSubscriptionRequest(
            endpoint=browser.endpoint, p256dh=browser.p256dh, auth=b64(browser.auth)
        ),
        metadata=human.metadata,
    )


def arrivals(got: list[Received], browser: Browser) -> dict[str, float]:
    """ask id → when its push arrived (decrypted now, after the run)."""
    out: dict[str, float] = {}
    for r in got:
        try:
            tag = browser.decrypt(r.body)["tag"]
        except Exception:
            continue  # another run's subscription
        out.setdefault(tag.removeprefix("ask-"), r.at)
    return out


async def drain(url: str, service: Receiver, n: int) -> str:
    agent, human, browser = await setup(url, "drain", service)
    asks: list[str] = []
    off = {**env(), "COMPASS_WEBHOOK_COURIER": "false"}
    async with server_process(url, off) as server:
        async with grpc.aio.insecure_channel(server.grpc_target) as ch:
            await subscribe(ch, human, browser)
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channel = await create_channel(stub, agent, "general", [human])
            for _ in range(n):
                posted = await stub.PostMessage(named(channel, human), metadata=agent.metadata)
                asks.append(posted.message.blocks[0].ask.ask_id)
    service.received.clear()
    async with server_process(url, env()):
        for _ in range(6000):
            if len(service.received) >= n:
                break
            await asyncio.sleep(0.05)
    got = arrivals(service.received, browser)
    times = sorted(got[a] for a in asks if a in got)
    span = times[-1] - times[0]
    return f"| {n} asks | {len(times)} pushes | {span:.2f} s | {(len(times) - 1) / span:,.0f}/s |"


async def latency(url: str, service: Receiver, seconds: float) -> str:
    agent, human, browser = await setup(url, "latency", service)
    committed: dict[str, float] = {}
    service.received.clear()
    async with server_process(url, env()) as server:
        async with grpc.aio.insecure_channel(server.grpc_target) as ch:
            await subscribe(ch, human, browser)
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channel = await create_channel(stub, agent, "general", [human])
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                tick = time.monotonic()
                posted = await stub.PostMessage(named(channel, human), metadata=agent.metadata)
                committed[posted.message.blocks[0].ask.ask_id] = time.monotonic()
                await asyncio.sleep(max(0.0, 0.05 - (time.monotonic() - tick)))
        for _ in range(600):
            if len(service.received) >= len(committed):
                break
            await asyncio.sleep(0.05)
    got = arrivals(service.received, browser)
    lat = sorted(got[a] - committed[a] for a in committed if a in got)
    return (
        f"| {len(committed)} asks, {len(lat)} pushes | {percentile_ms(lat, 50):.1f} ms "
        f"| {percentile_ms(lat, 99):.1f} ms | {lat[-1] * 1000:.1f} ms |"
    )


async def main(args: argparse.Namespace) -> None:
    admin = args.database_url
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{DATABASE}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=DATABASE)
    service = await Receiver(lambda _: Reply(status=201, body=b"")).start()
    try:
        if "drain" in args.parts:
            print("### Pushes per second (a backlog drained)\n")
            print("| made | pushed | first → last arrival | pushes/s |\n| --- | --- | --- | --- |")
            row = await drain(url, service, args.drain)
            log(row)
            print(row)
        if "latency" in args.parts:
            print("\n### Commit → push at the push service (20 asks a second)\n")
            print("| sent | p50 | p99 | max |\n| --- | --- | --- | --- |")
            row = await latency(url, service, args.seconds)
            log(row)
            print(row)
    finally:
        await service.close()
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'.encode())


def cli() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--drain", type=int, default=300, help="asks of the drain")
    p.add_argument("--parts", default="drain,latency")
    asyncio.run(main(p.parse_args()))


if __name__ == "__main__":
    cli()
