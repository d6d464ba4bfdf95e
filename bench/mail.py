"""Mail about asks: how fast a server mails, how long from an ask's commit to
its mail reaching the relay, and what mailing costs the write path.

    python -m bench.mail [--database-url ADMIN_URL] [--seconds 5] [--drain 500]
                          [--parts drain,latency,write]

Its own throwaway database (`compass_bench_email`, dropped at the end), a
real `compass-server serve` per phase, and an SMTP server on loopback
(aiosmtpd, tests/mailbox.py) in this process's threads.

1. Mails per second: N asks naming one person are committed while no server
   sends, then a server with the relay set drains them (one mail each); the
   rate is counted from the first arrival to the last.
2. Commit → mail: asks posted over gRPC at a steady 20 a second; each mail's
   arrival at the relay minus the moment its PostMessage returned.
3. The write path: the ask lifecycle (an agent posts a one-question ask naming
   a person, the person answers it: two mails), K = 1 and 16 closed-loop
   workers, with no email endpoint (off) and with one (on), one after the
   other in one run.
4. Every surface (part `surfaces`): the same lifecycle with nothing on, then
   with mail (the relay above), push (each person subscribed; a push service
   on loopback, tests/receiver.py) and Slack (an app connected, each channel
   mapped, each person linked with Slack direct messages on; the Slack
   stand-in of tests/slack_standin.py) all on, one after the other in one run. The
   deliveries made in the window are counted after it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import re
import sys
import time
import uuid
from typing import Any

import grpc
import psycopg

from bench.harness import LoadResult, percentile_ms, run_load
from bench.server import (
    Account,
    Provisioner,
    answer_request,
    ask_request,
    create_channel,
    server_process,
)
from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2, comms_pb2_grpc, preferences_pb2, preferences_pb2_grpc
from compass_server.api.admin import AdminApi
from compass_server.store.slack import SlackStore
from compass_server.store.types import Operator
from compass_server.store.vault import Vault, new_key, parse_key
from compass_server.store.webhooks import WebhookStore
from compass_server.webhooks.destination import Reach, networks
from tests.mailbox import Mailbox
from tests.pushservice import Browser, b64
from tests.receiver import Receiver, Reply
from tests.slack_standin import SECRET, TOKEN, SlackStandIn

DATABASE = "compass_bench_email"
KEY = new_key()
_ASK = re.compile(r"<ask\.([^.]+)\.")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class TimedMailbox(Mailbox):
    """Keeps when each mail arrived, by its ask id."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, float] = {}

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        at = time.monotonic()
        answer = await super().handle_DATA(server, session, envelope)
        m = _ASK.search(envelope.content.decode("latin-1"))
        if m is not None:
            self.arrived.setdefault(m.group(1), at)
        return answer


def env(box: Mailbox, on: bool = True) -> dict[str, str]:
    return {
        "COMPASS_WEBHOOK_KEY": KEY,
        "COMPASS_SMTP_HOST": "127.0.0.1" if on else "",
        "COMPASS_SMTP_PORT": str(box.port),
        "COMPASS_SMTP_SECURITY": "none",
    }


def named(channel: str, person: Account) -> comms_pb2.PostMessageRequest:
    """A one-question ask naming `person`, each its own (an agent asking the
    same thing again gets the open ask back)."""
    req = ask_request(channel)
    ask = req.blocks[0].ask
    ask.answerer_account_ids.append(person.account_id)
    ask.questions[0].question += f" ({uuid.uuid4().hex[:8]})"
    return req


async def pair(prov: Provisioner, ws: uuid.UUID, i: int, url: str) -> tuple[Account, Account]:
    human = await prov.human(ws, f"person-{i}")
    agent = await prov.agent(ws, f"agent-{i}", human)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            "UPDATE accounts SET email = %s WHERE id = %s",
            (f"person-{i}.{ws.hex[:8]}@example.test", human.account_id),
        )
    return agent, human


async def mail_endpoint(prov: Provisioner, ws: uuid.UUID) -> None:
    store = prov.store
    api = AdminApi(
        store.admin,
        webhooks=WebhookStore(store.db, store.admin, Vault(parse_key(KEY, "key"))),
        reach=Reach(networks("127.0.0.0/8")),
    )
    await api.create_webhook(
        Operator(ws),
        ad.CreateWebhookRequest(url="mailto:compass@example.test", kind=ad.WEBHOOK_KIND_EMAIL),
    )


async def drain(url: str, box: TimedMailbox, n: int) -> str:
    async with Provisioner(url) as prov:
        ws = await prov.workspace("drain")
        agent, human = await pair(prov, ws, 0, url)
        await mail_endpoint(prov, ws)
    asks: list[str] = []
    async with server_process(url, env(box, on=False)) as off:
        async with grpc.aio.insecure_channel(off.grpc_target) as ch:
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channel = await create_channel(stub, agent, "general", [human])
            for _ in range(n):
                posted = await stub.PostMessage(named(channel, human), metadata=agent.metadata)
                asks.append(posted.message.blocks[0].ask.ask_id)
    async with server_process(url, env(box)):
        for _ in range(6000):
            if all(a in box.arrived for a in asks):
                break
            await asyncio.sleep(0.05)
    times = sorted(box.arrived[a] for a in asks if a in box.arrived)
    span = times[-1] - times[0]
    return f"| {n} asks | {len(times)} mails | {span:.2f} s | {(len(times) - 1) / span:,.0f}/s |"


async def latency(url: str, box: TimedMailbox, seconds: float) -> str:
    async with Provisioner(url) as prov:
        ws = await prov.workspace("latency")
        agent, human = await pair(prov, ws, 0, url)
        await mail_endpoint(prov, ws)
    committed: dict[str, float] = {}
    async with server_process(url, env(box)) as on:
        async with grpc.aio.insecure_channel(on.grpc_target) as ch:
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channel = await create_channel(stub, agent, "general", [human])
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                tick = time.monotonic()
                posted = await stub.PostMessage(named(channel, human), metadata=agent.metadata)
                committed[posted.message.blocks[0].ask.ask_id] = time.monotonic()
                await asyncio.sleep(max(0.0, 0.05 - (time.monotonic() - tick)))
        for _ in range(600):
            if all(a in box.arrived for a in committed):
                break
            await asyncio.sleep(0.05)
    lat = sorted(box.arrived[a] - committed[a] for a in committed if a in box.arrived)
    return (
        f"| {len(committed)} asks, {len(lat)} mails | {percentile_ms(lat, 50):.1f} ms "
        f"| {percentile_ms(lat, 99):.1f} ms | {lat[-1] * 1000:.1f} ms |"
    )


async def lifecycle(url: str, box: Mailbox, on: bool, k: int, seconds: float) -> LoadResult:
    async with Provisioner(url) as prov:
        ws = await prov.workspace(f"{'on' if on else 'off'} {k}")
        pairs = [await pair(prov, ws, i, url) for i in range(k)]
        if on:
            await mail_endpoint(prov, ws)
    async with server_process(url, env(box, on)) as server:
        async with grpc.aio.insecure_channel(server.grpc_target) as ch:
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channels = [
                await create_channel(stub, a, f"desk-{i}", [h]) for i, (a, h) in enumerate(pairs)
            ]

            async def call(i: int) -> None:
                agent, human = pairs[i]
                posted = await stub.PostMessage(named(channels[i], human), metadata=agent.metadata)
                await stub.RespondToAsk(answer_request(posted), metadata=human.metadata)

            return await run_load(call, concurrency=k, seconds=seconds, warmup=1.0)


def surfaces_env(box: Mailbox, slack: SlackStandIn, on: bool) -> dict[str, str]:
    return {
        **env(box, on),
        "COMPASS_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "COMPASS_SLACK_API_URL": slack.api_url,
        "COMPASS_PUBLIC_URL": "https://compass.example.test",
    }


def admin_api(prov: Provisioner) -> AdminApi:
    store = prov.store
    vault = Vault(parse_key(KEY, "key"))
    return AdminApi(
        store.admin,
        webhooks=WebhookStore(store.db, store.admin, vault),
        reach=Reach(networks("127.0.0.0/8")),
        slack=SlackStore(store.db, store.admin, vault),
    )


async def every_surface(
    url: str,
    box: Mailbox,
    push: Receiver,
    slack: SlackStandIn,
    on: bool,
    k: int,
    seconds: float,
) -> tuple[LoadResult, dict[str, str]]:
    """The lifecycle with no surface, or with mail, push and Slack on; and
    each surface's deliveries: made / sent (the rest found the ask ended
    before their turn, and were not sent)."""
    tag = f"{'on' if on else 'off'}-{k}-{uuid.uuid4().hex[:6]}"
    async with Provisioner(url) as prov:
        ws = await prov.workspace(f"surfaces {tag}")
        pairs = [await pair(prov, ws, i, url) for i in range(k)]
        if on:
            api = admin_api(prov)
            await mail_endpoint(prov, ws)
            await api.create_webhook(
                Operator(ws),
                ad.CreateWebhookRequest(url="mailto:push@example.test", kind=ad.WEBHOOK_KIND_PUSH),
            )
    async with server_process(url, surfaces_env(box, slack, on)) as server:
        async with grpc.aio.insecure_channel(server.grpc_target) as ch:
            stub = comms_pb2_grpc.CommsServiceStub(ch)
            channels = [
                await create_channel(stub, a, f"desk-{i}", [h]) for i, (a, h) in enumerate(pairs)
            ]
            if on:
                prefs = preferences_pb2_grpc.PreferencesServiceStub(ch)
                for i, (_, human) in enumerate(pairs):
                    browser = Browser.new(push.url(f"/push/{tag}/{i}"))
                    await prefs.AddPushSubscription(
                        preferences_pb2.AddPushSubscriptionRequest(
                            endpoint=browser.endpoint, p256dh=browser.p256dh, auth=b64(browser.auth)
                        ),
                        metadata=human.metadata,
                    )
                async with Provisioner(url) as prov:
                    api = admin_api(prov)
                    team = f"T{tag.upper().replace('-', '')}"
                    app = await api.connect_slack_app(
                        Operator(ws),
                        ad.ConnectSlackAppRequest(
                            team_id=team,
                            bot_token=TOKEN,
                            signing_secret=SECRET,
                        ),
                    )
                    for i, channel in enumerate(channels):
                        await api.map_slack_channel(
                            Operator(ws),
                            ad.MapSlackChannelRequest(
                                app_id=app.app.app_id, channel_id=channel, slack_channel=f"C{i}"
                            ),
                        )
                    slack_store = SlackStore(
                        prov.db, prov.store.admin, Vault(parse_key(KEY, "key"))
                    )
                    for i, (_, human) in enumerate(pairs):
                        code = await slack_store.link_code(
                            ws, team, f"U{i}", datetime.timedelta(minutes=5)
                        )
                        await slack_store.redeem_code(
                            Operator(ws), uuid.UUID(human.account_id), code
                        )
                        await prefs.SetNotificationPreferences(
                            preferences_pb2.SetNotificationPreferencesRequest(
                                preferences=preferences_pb2.NotificationPreferences(
                                    page=True,
                                    push=True,
                                    email=preferences_pb2.MAIL_PREFERENCE_NAMED,
                                    time_zone="UTC",
                                    slack_dm=True,
                                )
                            ),
                            metadata=human.metadata,
                        )

            async def call(i: int) -> None:
                agent, human = pairs[i]
                posted = await stub.PostMessage(named(channels[i], human), metadata=agent.metadata)
                await stub.RespondToAsk(answer_request(posted), metadata=human.metadata)

            result = await run_load(call, concurrency=k, seconds=seconds, warmup=1.0)
            # What the window made, delivered after it (the courier catches up).
            await asyncio.sleep(min(30.0, 2 * seconds))
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT CASE WHEN d.dedupe_key LIKE 'slack.dm.%%' THEN 'slack_dm' ELSE e.kind END, "
            "count(*), count(*) FILTER (WHERE d.state = 'delivered') "
            "FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id "
            "WHERE d.workspace_id = %s GROUP BY 1",
            (ws,),
        )
        got = {kind: f"{made}/{sent}" for kind, made, sent in await cur.fetchall()}
    return result, got


async def main(args: argparse.Namespace) -> None:
    admin = args.database_url
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'.encode())
        await conn.execute(f'CREATE DATABASE "{DATABASE}"'.encode())
    url = psycopg.conninfo.make_conninfo(admin, dbname=DATABASE)
    box = TimedMailbox()
    box.start()
    try:
        if "drain" in args.parts:
            print("### Mails per second (a backlog drained)\n")
            print("| made | mailed | first → last arrival | mails/s |\n| --- | --- | --- | --- |")
            row = await drain(url, box, args.drain)
            log(row)
            print(row)
        if "latency" in args.parts:
            print("\n### Commit → mail at the relay (20 asks a second)\n")
            print("| sent | p50 | p99 | max |\n| --- | --- | --- | --- |")
            row = await latency(url, box, args.seconds)
            log(row)
            print(row)
        if "write" in args.parts:
            print("\n### The ask lifecycle (post naming a person, answer), mail off and on\n")
            print("| K | off: lifecycles/s, p50, p99 | on: lifecycles/s, p50, p99 | on / off |")
            print("| --- | --- | --- | --- |")
            for k in (1, 16):
                off = await lifecycle(url, box, False, k, args.seconds)
                on = await lifecycle(url, box, True, k, args.seconds)
                row = (
                    f"| {k} | {off.calls_per_s:,.0f}/s, {off.p50_ms:.1f} ms, {off.p99_ms:.1f} ms "
                    f"| {on.calls_per_s:,.0f}/s, {on.p50_ms:.1f} ms, {on.p99_ms:.1f} ms "
                    f"| {on.calls_per_s / off.calls_per_s:.2f} |"
                )
                log(row)
                print(row)
        if "surfaces" in args.parts:
            await surfaces(url, box, args.seconds)
        print(f"\nrelay: {len(box.mail)} mails")
    finally:
        box.stop()
        async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)'.encode())


SURFACES = ("email", "push", "slack_app", "slack_dm")


async def surfaces(url: str, box: Mailbox, seconds: float) -> None:
    push = await Receiver(lambda _: Reply(status=201, body=b"")).start()
    slack = await SlackStandIn().start()
    try:
        print("\n### The ask lifecycle with every surface off and on (mail, push, Slack)\n")
        print(
            "| K | off: lifecycles/s, p50, p99 | on: lifecycles/s, p50, p99 | on / off "
            "| on: deliveries made/sent (mail, push, Slack channel, Slack DM) |"
        )
        print("| --- | --- | --- | --- | --- |")
        for k in (1, 16):
            off, _ = await every_surface(url, box, push, slack, False, k, seconds)
            on, got = await every_surface(url, box, push, slack, True, k, seconds)
            row = (
                f"| {k} | {off.calls_per_s:,.0f}/s, {off.p50_ms:.1f} ms, {off.p99_ms:.1f} ms "
                f"| {on.calls_per_s:,.0f}/s, {on.p50_ms:.1f} ms, {on.p99_ms:.1f} ms "
                f"| {on.calls_per_s / off.calls_per_s:.2f} "
                f"| {', '.join(got.get(s, '0/0') for s in SURFACES)} |"
            )
            log(row)
            print(row)
    finally:
        await push.close()
        await slack.close()


def cli() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--drain", type=int, default=500, help="asks of the drain")
    p.add_argument("--parts", default="drain,latency,write")
    asyncio.run(main(p.parse_args()))


if __name__ == "__main__":
    cli()
