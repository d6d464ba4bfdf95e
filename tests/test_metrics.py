"""/metrics: Prometheus text whose numbers move with the work."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from compass.v1 import comms_pb2 as pb
from tests.conftest import running_server
from tests.relay_client import relay, runner_for
from tests.servers import GrpcClient
from tests.world import World

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(port: int, path: str = "/metrics") -> Samples:
    async with httpx.AsyncClient() as http:
        reply = await http.get(f"http://127.0.0.1:{port}{path}", timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(reply.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def ask_block() -> pb.MessageBlock:
    return pb.MessageBlock(
        ask=pb.Ask(
            questions=[
                pb.AskQuestion(
                    question_id="go",
                    question="Ship it?",
                    options=[pb.AskOption(id="y", label="Yes")],
                )
            ]
        )
    )


async def test_numbers_move_with_the_work(server: Any, api_world: World) -> None:
    w = api_world
    human, agent = w.tokens[w.human.account_id], w.tokens[w.agent.account_id]
    client = GrpcClient(server.grpc_port)
    before = await scrape(server.http_port)
    post = "compass_rpc_duration_seconds_count"
    try:
        posted = await client.call(
            "PostMessage",
            pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=[ask_block()]),
            agent,
        )
        ask_id = posted.message.blocks[0].ask.ask_id
        with_open = await scrape(server.http_port)
        labels = {"transport": "grpc", "method": "CommsService/PostMessage", "status": "ok"}
        assert value(with_open, post, **labels) == value(before, post, **labels) + 1
        # Open asks are the database's: other tests' asks count too, so compare.
        assert value(with_open, "compass_open_asks") >= 1

        await client.call(
            "RespondToAsk",
            pb.RespondToAskRequest(
                ask_id=ask_id,
                answers=[pb.AskQuestionAnswer(question_id="go", chosen_option_ids=["y"])],
            ),
            human,
        )
        refused = {"transport": "grpc", "method": "CommsService/RespondToAsk"}
        try:
            await client.call("RespondToAsk", pb.RespondToAskRequest(ask_id=ask_id), human)
        except Exception:
            pass
        after = await scrape(server.http_port)
        assert value(after, "compass_asks_ended_total", kind="answered") == (
            value(before, "compass_asks_ended_total", kind="answered") + 1
        )
        assert (
            value(after, post, **refused, status="ok")
            == value(before, post, **refused, status="ok") + 1
        )
        assert (
            value(after, post, **refused, status="already_exists")
            + value(after, post, **refused, status="invalid_argument")
            >= 1
        )
        # Latency lands in buckets: the +Inf bucket counts every call.
        assert value(after, "compass_rpc_duration_seconds_bucket", **labels, le="+Inf") == value(
            after, post, **labels
        )

        # A Subscribe stream and a bound relay session show while they are open.
        stream = client.stream("Subscribe", pb.SubscribeRequest(), human)
        first = asyncio.ensure_future(anext(stream))
        async with relay(server.grpc_port, await runner_for(w)) as r:
            await r.bound("s1", w.agent)
            await asyncio.sleep(0.3)
            during = await scrape(server.http_port)
            assert value(during, "compass_subscribers") >= 1
            assert value(during, "compass_relay_sessions") >= 1
        first.cancel()
        await asyncio.sleep(0.3)
        assert value(await scrape(server.http_port), "compass_relay_sessions") < value(
            during, "compass_relay_sessions"
        )
        # The pools report themselves.
        assert ("compass_db_pool_in_use", (("pool", "app"),)) in during
        assert ("compass_db_pool_waiting", (("pool", "maintenance"),)) in during
    finally:
        await client.close()


async def test_a_stream_that_stops_reading_shows_as_delivery_lag(
    server: Any, api_world: World
) -> None:
    w = api_world
    human, agent = w.tokens[w.human.account_id], w.tokens[w.agent.account_id]
    client = GrpcClient(server.grpc_port)
    try:
        stream = client.stream("Subscribe", pb.SubscribeRequest(), human)
        first = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.3)
        big = [pb.MessageBlock(text=pb.TextBlock(text="x" * 30_000)) for _ in range(8)]
        # Post until the transport's windows (which gRPC grows on loopback)
        # are full and the stream falls behind: up to ~24 MB.
        lag = 0.0
        for _ in range(25):
            for _ in range(4):
                await client.call(
                    "PostMessage",
                    pb.PostMessageRequest(channel_id=str(w.channel.channel_id), blocks=big),
                    agent,
                )
            for _ in range(10):
                lag = value(await scrape(server.http_port), "compass_delivery_lag_events")
                if lag >= 1:
                    break
                await asyncio.sleep(0.1)
            if lag >= 1:
                break
        assert lag >= 1
        first.cancel()
    finally:
        await client.close()


async def test_metrics_on_a_port_of_their_own(database_url: str, tmp_path: pathlib.Path) -> None:
    async with running_server(database_url, tmp_path, metrics_listen="127.0.0.1:0") as srv:
        samples = await scrape(srv.metrics_port)
        assert ("compass_open_asks", ()) in samples
        async with httpx.AsyncClient() as http:
            # Not on the HTTP port then, and the metrics port serves no web page.
            gone = await http.get(f"http://127.0.0.1:{srv.http_port}/metrics", timeout=10)
            page = await http.get(f"http://127.0.0.1:{srv.metrics_port}/", timeout=10)
            ready = await http.get(f"http://127.0.0.1:{srv.metrics_port}/readyz", timeout=10)
        assert gone.status_code == 404 and page.status_code == 404
        assert ready.status_code == 200


async def test_webhook_deliveries_still_to_send_show_as_backlog(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    from compass.v1 import admin_pb2 as ad
    from compass_server.store.vault import new_key
    from tests.receiver import Receiver, Reply

    receiver = await Receiver(lambda _: Reply(503, b"down")).start()
    async with running_server(
        database_url,
        tmp_path,
        webhook_key=new_key(),
        webhook_allowed_networks="127.0.0.0/8",
        # A failed first attempt waits an hour for its retry: pending all test long.
        webhook_retry_schedule="1h",
        webhook_poll_seconds=0.1,
    ) as srv:
        client = GrpcClient(srv.grpc_port)
        try:
            w = await World.create(srv.store)
            before = value(await scrape(srv.http_port), "compass_webhook_deliveries_pending")
            made = await client.call(
                "CreateWebhook",
                ad.CreateWebhookRequest(url=receiver.url()),
                w.tokens[w.human.account_id],
            )
            await w.post_ask()
            await w.post_ask()
            await receiver.wait_for(2)
            await asyncio.sleep(1.0)
            samples = await scrape(srv.http_port)
            assert value(samples, "compass_webhook_deliveries_pending") == before + 2
            assert value(samples, "compass_webhook_oldest_pending_seconds") >= 1.0

            await client.call(
                "DeleteWebhook",
                ad.DeleteWebhookRequest(webhook_id=made.webhook.webhook_id),
                w.tokens[w.human.account_id],
            )
            after = await scrape(srv.http_port)
            assert value(after, "compass_webhook_deliveries_pending") == before
        finally:
            await client.close()
            await receiver.close()


async def test_with_no_courier_running_what_is_owed_still_shows(
    database_url: str, tmp_path: pathlib.Path
) -> None:
    """Deliveries are made by a courier from the log; with the courier off on
    every process, the events it would read are owed all the same, and the
    gauges and listings count them, so an alert can fire."""
    from compass.v1 import admin_pb2 as ad
    from compass_server.store.types import Answer
    from compass_server.store.vault import new_key

    async with running_server(
        database_url,
        tmp_path,
        webhook_key=new_key(),
        webhook_allowed_networks="127.0.0.0/8",
        webhook_courier=False,
    ) as srv:
        client = GrpcClient(srv.grpc_port)
        try:
            w = await World.create(srv.store)
            human = w.tokens[w.human.account_id]
            before = await scrape(srv.http_port)
            made = await client.call(
                "CreateWebhook", ad.CreateWebhookRequest(url="http://127.0.0.1:9/hook"), human
            )
            asks_only = await client.call(
                "CreateWebhook",
                ad.CreateWebhookRequest(
                    url="http://127.0.0.1:9/ended", event_types=["ask.answered"]
                ),
                human,
            )
            await w.post_text(w.human, "no ask, nothing owed")
            first = await w.post_ask()
            await w.post_ask()
            await w.store.answer_ask(
                w.human,
                first.blocks[0].ask_id,  # type: ignore[union-attr]
                [Answer("db", ("pg",)), Answer("langs", ("py",))],
            )
            await asyncio.sleep(1.0)
            samples = await scrape(srv.http_port)
            # Two asks posted and one answered: three to the first endpoint, the
            # answer alone to the second.
            assert (
                value(samples, "compass_webhook_deliveries_pending")
                == value(before, "compass_webhook_deliveries_pending") + 4
            )
            assert value(samples, "compass_webhook_oldest_pending_seconds") >= 1.0
            listed = await client.call("ListWebhooks", ad.ListWebhooksRequest(), human)
            pending = {h.webhook_id: h.pending_deliveries for h in listed.webhooks}
            assert pending == {made.webhook.webhook_id: 3, asks_only.webhook.webhook_id: 1}
            for hook in (made, asks_only):
                await client.call(
                    "DeleteWebhook",
                    ad.DeleteWebhookRequest(webhook_id=hook.webhook.webhook_id),
                    human,
                )
        finally:
            await client.close()
