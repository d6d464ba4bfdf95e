"""Webhooks end to end: an admin registers an endpoint, asks and inbox items
change, and a real receiver on loopback gets each change signed per the
Standard Webhooks spec (checked with the reference library, not our code),
retried on failure with the same webhook-id, cut off when it hangs, and
stopped by 410 Gone; every attempt is visible over the admin API."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from google.protobuf import duration_pb2
from standardwebhooks.webhooks import Webhook as Verifier
from standardwebhooks.webhooks import WebhookVerificationError

from compass.v1 import admin_pb2 as ad
from compass.v1 import comms_pb2 as pb
from compass_agentkit.receipts import fetch_jwks, verify_receipt
from compass_server.api.admin import AdminApi
from compass_server.store.inbox import AnswerOutcome
from compass_server.store.types import (
    AccountKind,
    Answer,
    Ask,
    AskOption,
    AskQuestion,
    Operator,
)
from compass_server.store.vault import Vault, new_key, parse_key
from compass_server.store.webhooks import WebhookStore
from compass_server.webhooks.destination import Reach, networks
from compass_server.webhooks.sender import Sender
from tests.conftest import running_server
from tests.receiver import Received, Receiver, Reply
from tests.servers import CallError, GrpcClient
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

PUBLIC_URL = "https://compass.example.test"
TIMEOUT = 1.5
KEY = new_key()


@pytest.fixture(scope="module")
async def hooks(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    """A server whose courier sends webhooks, on loopback, quickly."""
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("hooks"),
        public_url=PUBLIC_URL,
        webhook_key=KEY,
        webhook_allowed_networks="127.0.0.0/8",
        webhook_retry_schedule="0.3s,0.3s,0.3s",
        webhook_timeout_seconds=TIMEOUT,
        webhook_poll_seconds=0.1,
        webhook_concurrency=8,
        webhook_concurrency_per_endpoint=2,
        expiry_interval_seconds=0.5,
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
async def rpc(hooks: Any) -> AsyncIterator[GrpcClient]:
    c = GrpcClient(hooks.grpc_port)
    yield c
    await c.close()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = await Receiver().start()
    yield r
    await r.close()


@pytest.fixture
async def w(hooks: Any) -> AsyncIterator[World]:
    world = await World.create(hooks.store)
    yield world
    # Endpoints of a finished test stop, so the courier leaves them be.
    async with await psycopg.AsyncConnection.connect(hooks.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def tok(w: World, who: Any = None) -> str:
    return w.tokens[(who or w.human).account_id]


async def create(
    rpc: GrpcClient,
    w: World,
    url: str,
    *,
    kind: int = ad.WEBHOOK_KIND_STANDARD,
    types: tuple[str, ...] = (),
) -> ad.CreateWebhookResponse:
    made = await rpc.call(
        "CreateWebhook", ad.CreateWebhookRequest(url=url, kind=kind, event_types=types), tok(w)
    )
    return made  # type: ignore[no-any-return]


def verified(secret: str, r: Received) -> dict[str, Any]:
    """The payload, once the reference library verified its signature."""
    return Verifier(secret).verify(r.body, r.headers)  # type: ignore[no-any-return]


def ask_id_of(message: Any) -> str:
    return next(b.ask_id for b in message.blocks if isinstance(b, Ask))


def yes_no(question_id: str = "go") -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id=question_id,
                question="Ship it?",
                options=(AskOption("y", "Yes", "today"), AskOption("n", "No")),
            ),
        )
    )


async def deliveries(rpc: GrpcClient, w: World, webhook_id: str, *states: int) -> list[Any]:
    page = await rpc.call(
        "ListWebhookDeliveries",
        ad.ListWebhookDeliveriesRequest(webhook_id=webhook_id, states=states, page_size=200),
        tok(w),
    )
    return list(page.deliveries)


async def settled(rpc: GrpcClient, w: World, delivery_id: str, wait: float = 20.0) -> Any:
    """The delivery and its attempts once it is delivered or failed."""
    for _ in range(int(wait / 0.1)):
        got = await rpc.call(
            "GetWebhookDelivery", ad.GetWebhookDeliveryRequest(delivery_id=delivery_id), tok(w)
        )
        if got.delivery.state != ad.WEBHOOK_DELIVERY_STATE_PENDING:
            return got
        await asyncio.sleep(0.1)
    raise AssertionError(f"delivery {delivery_id} is still pending")


# --- what arrives -------------------------------------------------------------------


async def test_an_ask_and_every_ending_arrive_signed_with_what_a_receiver_needs(
    hooks: Any, rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    made = await create(rpc, w, receiver.url())
    assert made.secret.startswith("whsec_")
    store = w.store
    answered = await w.post_ask()
    declined = await w.post_ask()
    by_owner = await w.post_ask()
    by_agent = await w.post_ask()
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.5)
    expiring = await w.post_ask(
        w.agent,
        Ask(questions=yes_no().questions, deadline=due, answerer_ids=(w.human.account_id,)),
    )
    await store.answer_ask(
        w.human,
        ask_id_of(answered),
        [Answer("db", ("pg",)), Answer("langs", ("py", "go"), "and Rust")],
    )
    await store.decline_ask(w.human, ask_id_of(declined), "not this sprint")
    await store.withdraw_ask(w.human, ask_id_of(by_owner))
    await store.cancel_ask(w.agent, ask_id_of(by_agent))

    got = await receiver.wait_for(10)
    payloads = [verified(made.secret, r) for r in got]
    assert all(r.headers["content-type"] == "application/json" for r in got)
    assert len({r.webhook_id for r in got}) == 10
    by_type: dict[str, list[dict[str, Any]]] = {}
    for p in payloads:
        by_type.setdefault(p["type"], []).append(p["data"])
    assert {t: len(v) for t, v in by_type.items()} == {
        "ask.posted": 5,
        "ask.answered": 1,
        "ask.declined": 1,
        "ask.withdrawn": 2,
        "ask.expired": 1,
    }
    posted = {d["ask"]["ask_id"]: d for d in by_type["ask.posted"]}
    first = posted[ask_id_of(answered)]
    assert first["ask"]["state"] == "open"
    assert first["ask"]["url"] == f"{PUBLIC_URL}/#/ask/{ask_id_of(answered)}"
    assert first["channel"] == {
        "channel_id": str(w.channel.channel_id),
        "name": "general",
        "kind": "channel",
    }
    assert first["asker"] == {"account_id": str(w.agent.account_id), "handle": "scout"}
    assert first["workspace_id"] == str(w.workspace_id)
    db = first["ask"]["questions"][0]
    assert (db["question_id"], db["question"], db["header"], db["recommended"]) == (
        "db",
        "Which database?",
        "Storage",
        0,
    )
    assert [o["label"] for o in db["options"]] == ["PostgreSQL", "MySQL"]
    assert first["ask"]["questions"][1]["allow_multiple"] is True
    assert posted[ask_id_of(expiring)]["ask"]["answerers"] == [
        {"account_id": str(w.human.account_id), "handle": "ada"}
    ]
    assert posted[ask_id_of(expiring)]["ask"]["deadline"].endswith("Z")

    (done,) = by_type["ask.answered"]
    assert done["ask"]["state"] == "answered"
    assert done["ask"]["ending"]["by"]["handle"] == "ada"
    langs = done["ask"]["questions"][1]["answer"]
    assert langs == {
        "chosen_option_ids": ["py", "go"],
        "chosen_labels": ["Python", "Go"],
        "custom_text": "and Rust",
        "timed_out": False,
    }
    # The sequence orders what a receiver hears about one ask.
    assert done["sequence"] > first["sequence"]
    (no,) = by_type["ask.declined"]
    assert (no["ask"]["state"], no["ask"]["ending"]["reason"]) == ("declined", "not this sprint")
    withdrawn = {d["ask"]["state"]: d for d in by_type["ask.withdrawn"]}
    assert withdrawn["withdrawn_by_owner"]["ask"]["ending"]["by"]["handle"] == "ada"
    assert withdrawn["withdrawn_by_agent"]["ask"]["ending"]["by"]["handle"] == "scout"
    (gone,) = by_type["ask.expired"]
    assert gone["ask"]["state"] == "expired"
    assert gone["ask"]["ending"]["by"] is None
    assert gone["ask"]["questions"][0]["answer"]["timed_out"] is True
    # A payload's timestamp is when the change happened, not when it was sent.
    assert all(p["timestamp"].endswith("Z") for p in payloads)


async def test_inbox_items_opened_answered_and_closed(
    hooks: Any, rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    made = await create(rpc, w, receiver.url())
    inbox = hooks.inbox
    item, _ = await inbox.post(w.agent, "deploy", "Deploy to prod?", "Shall I?", yes_no())
    result = await inbox.answer(w.human, item.item_id, [Answer("go", ("y",))], "key-1")
    assert result.outcome is AnswerOutcome.TAKEN
    await inbox.post(w.agent, "deploy", "", "And the DB migration?", yes_no("db"))
    await inbox.decline(w.human, item.item_id, "after the freeze")
    await inbox.reopen(w.human, item.item_id)
    await inbox.close_as_agent(w.agent, "deploy", "done by hand")
    await inbox.post(w.agent, "note", "FYI", "A note asks nothing")
    ping, _ = await inbox.post(w.agent, "ping", "Still there?", "", yes_no())
    await inbox.close(w.human, ping.item_id)

    got = await receiver.wait_for(8)
    # Ordering is not promised; the sequence says what came first.
    seen = sorted((verified(made.secret, r) for r in got), key=lambda p: p["data"]["sequence"])
    types = [p["type"] for p in seen]
    assert types == [
        "inbox.item.opened",
        "inbox.item.answered",
        "inbox.item.opened",
        "inbox.item.closed",
        "inbox.item.opened",
        "inbox.item.closed",
        "inbox.item.opened",
        "inbox.item.closed",
    ]
    opened, answer, again, declined, reopened, closed, _, dropped = (p["data"] for p in seen)
    assert opened["item"]["title"] == "Deploy to prod?"
    assert opened["item"]["url"] == f"{PUBLIC_URL}/#/inbox/{item.item_id}"
    assert opened["agent"]["handle"] == "scout" and opened["actor"]["handle"] == "scout"
    assert opened["ask"]["state"] == "open"
    assert opened["ask"]["questions"][0]["options"][0] == {
        "id": "y",
        "label": "Yes",
        "description": "today",
    }
    assert answer["actor"]["handle"] == "ada" and answer["ask"]["state"] == "answered"
    assert answer["ask"]["questions"][0]["answer"]["chosen_labels"] == ["Yes"]
    assert again["item"]["revision"] > opened["item"]["revision"]
    assert declined["ask"]["state"] == "declined"
    assert declined["ask"]["ending"]["reason"] == "after the freeze"
    assert reopened["ask"]["ask_id"] == again["ask"]["ask_id"]
    assert closed["ask"]["state"] == "withdrawn_by_agent"
    assert closed["ask"]["ending"]["reason"] == "done by hand"
    assert dropped["ask"]["state"] == "withdrawn_by_person"
    assert dropped["ask"]["ending"]["by"]["handle"] == "ada"
    # A close's ending is the ask's own, with its receipt.
    keys = await asyncio.to_thread(fetch_jwks, f"http://127.0.0.1:{hooks.http_port}")
    for data, kind in (
        (declined, "declined"),
        (closed, "withdrawn_by_agent"),
        (dropped, "withdrawn_by_person"),
    ):
        proof = verify_receipt(data["ask"]["ending"]["receipt"], keys)
        assert (proof.ending, proof.ask_id) == (kind, data["ask"]["ask_id"])
    assert all(p["data"]["sequence"] > 0 for p in seen)
    await asyncio.sleep(0.5)
    assert len(receiver.received) == 8, "the note made a delivery"


async def test_an_endpoint_takes_only_the_types_it_names(
    hooks: Any, rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    made = await create(rpc, w, receiver.url(), types=("ask.answered",))
    assert list(made.webhook.event_types) == ["ask.answered"]
    for _ in range(3):
        await w.post_ask()
    m = await w.post_ask(w.agent, yes_no())
    await w.store.answer_ask(w.human, ask_id_of(m), [Answer("go", ("y",))])
    (r,) = await receiver.wait_for(1)
    assert verified(made.secret, r)["type"] == "ask.answered"
    await asyncio.sleep(0.5)
    assert len(receiver.received) == 1


async def test_event_types_and_kinds_are_checked(rpc: GrpcClient, w: World) -> None:
    with pytest.raises(CallError) as bad:
        await create(rpc, w, "http://127.0.0.1:9/x", types=("ask.posted", "ask.exploded"))
    assert bad.value.code == "invalid_argument"
    assert "ask.exploded" in bad.value.message and "ask.answered" in bad.value.message
    with pytest.raises(CallError) as kind:
        await create(rpc, w, "http://127.0.0.1:9/x", kind=7)
    assert kind.value.code == "invalid_argument"


# --- failures, retries and what an admin sees ------------------------------------------


async def test_a_retry_keeps_its_webhook_id_and_every_attempt_is_recorded(
    rpc: GrpcClient, w: World
) -> None:
    calls = 0

    def flaky(_: Received) -> Reply:
        nonlocal calls
        calls += 1
        return Reply(500, b"try later") if calls <= 2 else Reply(200, b"ok")

    receiver = await Receiver(flaky).start()
    try:
        made = await create(rpc, w, receiver.url())
        await w.post_ask()
        got = await receiver.wait_for(3)
    finally:
        await receiver.close()
    assert len({r.webhook_id for r in got}) == 1
    assert len({r.body for r in got}) == 1
    # Exponential backoff with jitter: 0.3 s ± a fifth between attempts.
    assert got[1].at - got[0].at >= 0.2 and got[2].at - got[1].at >= 0.2
    for r in got:
        verified(made.secret, r)
    (delivery,) = await deliveries(rpc, w, made.webhook.webhook_id)
    assert delivery.delivery_id == got[0].webhook_id
    done = await settled(rpc, w, delivery.delivery_id)
    assert done.delivery.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED
    assert done.delivery.attempts == 3
    assert [a.status_code for a in done.attempts] == [500, 500, 200]
    assert [a.attempt for a in done.attempts] == [1, 2, 3]
    assert done.attempts[0].error == f"127.0.0.1:{receiver.port} answered HTTP 500"
    assert done.attempts[0].response == "try later"
    assert done.attempts[2].error == ""
    assert all(a.latency.ToTimedelta() > datetime.timedelta(0) for a in done.attempts)
    assert json.loads(done.body)["type"] == "ask.posted"


async def test_a_spent_schedule_fails_the_delivery_and_it_can_be_redelivered(
    rpc: GrpcClient, w: World
) -> None:
    answers = [Reply(503)] * 4 + [Reply(204, b"")]
    receiver = await Receiver(lambda _: answers.pop(0)).start()
    try:
        made = await create(rpc, w, receiver.url())
        await w.post_ask()
        await receiver.wait_for(4)
        (delivery,) = await deliveries(rpc, w, made.webhook.webhook_id)
        failed = await settled(rpc, w, delivery.delivery_id)
        assert failed.delivery.state == ad.WEBHOOK_DELIVERY_STATE_FAILED
        assert failed.delivery.attempts == 4  # the first and three retries
        assert failed.delivery.last_status_code == 503
        listed = await deliveries(rpc, w, made.webhook.webhook_id, ad.WEBHOOK_DELIVERY_STATE_FAILED)
        assert [d.delivery_id for d in listed] == [delivery.delivery_id]
        (hook,) = (await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w))).webhooks
        assert (hook.failed_deliveries, hook.pending_deliveries) == (1, 0)

        again = await rpc.call(
            "RedeliverWebhookDelivery",
            ad.RedeliverWebhookDeliveryRequest(delivery_id=delivery.delivery_id),
            tok(w),
        )
        assert again.delivery.state == ad.WEBHOOK_DELIVERY_STATE_PENDING
        got = await receiver.wait_for(5)
    finally:
        await receiver.close()
    assert got[4].webhook_id == delivery.delivery_id and got[4].body == got[0].body
    done = await settled(rpc, w, delivery.delivery_id)
    assert done.delivery.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED
    assert [a.status_code for a in done.attempts] == [503] * 4 + [204]


async def test_410_gone_disables_the_endpoint_until_an_admin_enables_it(
    rpc: GrpcClient, w: World
) -> None:
    gone = True
    receiver = await Receiver(lambda _: Reply(410, b"gone") if gone else Reply()).start()
    try:
        made = await create(rpc, w, receiver.url())
        hook_id = made.webhook.webhook_id
        await w.post_ask()
        await receiver.wait_for(1)
        (delivery,) = await deliveries(rpc, w, hook_id)
        done = await settled(rpc, w, delivery.delivery_id)
        assert done.delivery.state == ad.WEBHOOK_DELIVERY_STATE_FAILED
        assert done.delivery.attempts == 1
        (hook,) = (await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w))).webhooks
        assert not hook.enabled
        assert hook.disabled_reason == "the receiver answered 410 Gone"
        # Disabled, it gets nothing: not now, and not later.
        await w.post_ask()
        await asyncio.sleep(0.8)
        assert len(await deliveries(rpc, w, hook_id)) == 1
        gone = False
        on = await rpc.call("EnableWebhook", ad.EnableWebhookRequest(webhook_id=hook_id), tok(w))
        assert on.webhook.enabled and on.webhook.disabled_reason == ""
        m = await w.post_ask()
        got = await receiver.wait_for(2)
    finally:
        await receiver.close()
    second = verified(made.secret, got[1])["data"]
    assert second["ask"]["ask_id"] == ask_id_of(m)
    assert len(await deliveries(rpc, w, hook_id)) == 2


async def test_an_admin_disables_and_deletes_an_endpoint(
    rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    made = await create(rpc, w, receiver.url())
    hook_id = made.webhook.webhook_id
    off = await rpc.call("DisableWebhook", ad.DisableWebhookRequest(webhook_id=hook_id), tok(w))
    assert not off.webhook.enabled and off.webhook.disabled_reason == "disabled by an admin"
    again = await rpc.call("DisableWebhook", ad.DisableWebhookRequest(webhook_id=hook_id), tok(w))
    assert again.webhook.disabled_at == off.webhook.disabled_at
    await w.post_ask()
    await asyncio.sleep(0.5)
    assert receiver.received == []
    await rpc.call("DeleteWebhook", ad.DeleteWebhookRequest(webhook_id=hook_id), tok(w))
    listed = await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w))
    assert list(listed.webhooks) == []
    with pytest.raises(CallError) as gone:
        await rpc.call("DeleteWebhook", ad.DeleteWebhookRequest(webhook_id=hook_id), tok(w))
    assert gone.value.code == "not_found"


async def test_a_hanging_receiver_is_cut_off_and_holds_up_no_other(
    rpc: GrpcClient, w: World
) -> None:
    stuck = await Receiver(lambda _: Reply(hang=True)).start()
    fine = await Receiver().start()
    try:
        slow = await create(rpc, w, stuck.url())
        quick = await create(rpc, w, fine.url())
        for _ in range(6):
            await w.post_ask()
        # The healthy endpoint gets all six while the other's attempts hang.
        got = await fine.wait_for(6, wait=TIMEOUT * 2)
        assert len({r.webhook_id for r in got}) == 6
        await stuck.wait_for(2)
        # Per endpoint, at most 2 attempts at once (the server's setting).
        await asyncio.sleep(TIMEOUT + 0.5)
        assert stuck.max_in_flight <= 2
        hung = await deliveries(rpc, w, slow.webhook.webhook_id)
        attempted = [d for d in hung if d.attempts >= 1 and d.last_error]
        assert attempted, "no attempt at the hanging endpoint was cut off"
        assert attempted[0].last_error == (
            f"no response from 127.0.0.1:{stuck.port} within {TIMEOUT:g} s"
        )
        assert quick.webhook.webhook_id != slow.webhook.webhook_id
    finally:
        await stuck.close()
        await fine.close()


async def test_a_response_that_never_ends_is_read_no_further_than_the_limit(
    rpc: GrpcClient, w: World
) -> None:
    receiver = await Receiver(lambda _: Reply(endless=True)).start()
    try:
        made = await create(rpc, w, receiver.url())
        await w.post_ask()
        await receiver.wait_for(1)
        (delivery,) = await deliveries(rpc, w, made.webhook.webhook_id)
        done = await settled(rpc, w, delivery.delivery_id, wait=TIMEOUT * 4)
    finally:
        await receiver.close()
    (attempt,) = done.attempts
    assert attempt.status_code == 200 and attempt.error == ""
    assert attempt.response == "x" * 1000
    assert attempt.latency.ToTimedelta() < datetime.timedelta(seconds=TIMEOUT)


async def test_a_rotated_secret_signs_beside_the_old_one_for_its_grace(
    rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    made = await create(rpc, w, receiver.url())
    grace = duration_pb2.Duration(seconds=2)
    rotated = await rpc.call(
        "RotateWebhookSecret",
        ad.RotateWebhookSecretRequest(webhook_id=made.webhook.webhook_id, grace=grace),
        tok(w),
    )
    assert rotated.secret != made.secret and rotated.secret.startswith("whsec_")
    assert rotated.webhook.HasField("previous_secret_until")
    await w.post_ask()
    (during,) = await receiver.wait_for(1)
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    verified(made.secret, during)
    verified(rotated.secret, during)
    await asyncio.sleep(2.2)
    await w.post_ask()
    after = (await receiver.wait_for(2))[1]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    verified(rotated.secret, after)
    with pytest.raises(WebhookVerificationError):
        verified(made.secret, after)
    listed = await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w))
    assert not listed.webhooks[0].HasField("previous_secret_until")


# --- who may, and what is kept -----------------------------------------------------------


async def test_only_admins_manage_webhooks_and_only_their_own_workspace(
    hooks: Any, rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    made = await create(rpc, w, receiver.url("/hooks/compass/s3cr3t-part?token=abc"))
    assert made.webhook.url == f"http://127.0.0.1:{receiver.port}/hooks/…"
    for who in (w.agent, w.other_human):
        with pytest.raises(CallError) as denied:
            # A member can't probe the network through the URL check either.
            await rpc.call(
                "CreateWebhook", ad.CreateWebhookRequest(url="http://10.0.0.1/"), tok(w, who)
            )
        assert denied.value.code == "permission_denied"
        with pytest.raises(CallError) as listing:
            await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w, who))
        assert listing.value.code == "permission_denied"
    other = await World.create(hooks.store)
    hook_id = made.webhook.webhook_id
    for method, request in (
        ("DisableWebhook", ad.DisableWebhookRequest(webhook_id=hook_id)),
        ("RotateWebhookSecret", ad.RotateWebhookSecretRequest(webhook_id=hook_id)),
        ("ListWebhookDeliveries", ad.ListWebhookDeliveriesRequest(webhook_id=hook_id)),
        ("DeleteWebhook", ad.DeleteWebhookRequest(webhook_id=hook_id)),
    ):
        with pytest.raises(CallError) as hidden:
            await rpc.call(method, request, tok(other))
        assert hidden.value.code == "not_found", method
    listed = await rpc.call("ListWebhooks", ad.ListWebhooksRequest(), tok(w))
    assert [h.webhook_id for h in listed.webhooks] == [hook_id]


async def test_a_dump_shows_neither_the_secret_nor_the_url(
    hooks: Any, rpc: GrpcClient, receiver: Receiver, w: World
) -> None:
    path = "/services/T000/B000/XXXXSECRETPATHXXXX"
    made = await create(rpc, w, receiver.url(path), kind=ad.WEBHOOK_KIND_SLACK)
    rotated = await rpc.call(
        "RotateWebhookSecret",
        ad.RotateWebhookSecretRequest(webhook_id=made.webhook.webhook_id),
        tok(w),
    )
    async with await psycopg.AsyncConnection.connect(hooks.database_url) as conn:
        cur = await conn.execute(
            "SELECT row_to_json(e)::text FROM webhook_endpoints e WHERE id = %s",
            (uuid.UUID(made.webhook.webhook_id),),
        )
        row = await cur.fetchone()
    assert row is not None
    dumped = row[0]
    for secret in (made.secret, rotated.secret):
        assert secret not in dumped and secret.removeprefix("whsec_") not in dumped
    assert "SECRETPATH" not in dumped and "T000" not in dumped
    # And a sealed value opens only with the key, only for its own endpoint.
    vault = Vault(parse_key(KEY, "key"))
    async with await psycopg.AsyncConnection.connect(hooks.database_url) as conn:
        sealed = await (
            await conn.execute(
                "SELECT url_sealed FROM webhook_endpoints WHERE id = %s",
                (uuid.UUID(made.webhook.webhook_id),),
            )
        ).fetchone()
    assert sealed is not None
    assert vault.open(sealed[0], uuid.UUID(made.webhook.webhook_id)) == receiver.url(path)
    with pytest.raises(Exception, match="doesn't open"):
        vault.open(sealed[0], uuid.uuid4())
    with pytest.raises(Exception, match="not the one"):
        Vault(parse_key(new_key(), "key")).open(sealed[0], uuid.UUID(made.webhook.webhook_id))


async def test_without_a_key_a_server_keeps_no_webhook(w: World) -> None:
    api = AdminApi(w.store.admin, webhooks=WebhookStore(w.store.db, w.store.admin, None))
    with pytest.raises(Exception) as refused:
        await api.create_webhook(
            Operator(w.workspace_id), ad.CreateWebhookRequest(url="https://example.com/x")
        )
    assert "COMPASS_WEBHOOK_KEY" in str(refused.value)
    assert type(refused.value).__name__ == "FailedPrecondition"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:9/x", "127.0.0.1 is not a public address"),
        ("http://10.1.2.3/x", "10.1.2.3 is not a public address"),
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is not a public address"),
        ("http://[::1]:8080/x", "::1 is not a public address"),
        ("http://[::ffff:192.168.0.1]/x", "is not a public address"),
        ("http://100.64.0.1/x", "100.64.0.1 is not a public address"),
        ("http://0.0.0.0/x", "0.0.0.0 is not a public address"),
        ("http://localhost:9/x", "localhost resolves to"),
        ("ftp://example.com/x", "starts with https:// or http://"),
        ("https://user:pw@example.com/x", "carries no user or password"),
        ("https://example.com/x#frag", "no #fragment"),
        ("https://exa mple.com/x", "space or a control character"),
        ("https:///nohost", "has no host"),
        ("https://example.com/" + "x" * 2000, "at most 2000 characters"),
    ],
)
async def test_a_url_to_a_private_or_odd_place_is_refused(w: World, url: str, why: str) -> None:
    api = AdminApi(
        w.store.admin,
        webhooks=WebhookStore(w.store.db, w.store.admin, Vault(parse_key(KEY, "k"))),
        reach=Reach(),
    )
    with pytest.raises(Exception) as refused:
        await api.create_webhook(Operator(w.workspace_id), ad.CreateWebhookRequest(url=url))
    assert type(refused.value).__name__ == "InvalidArgument"
    assert why in str(refused.value)


async def test_every_attempt_checks_the_address_it_connects_to(receiver: Receiver) -> None:
    body, headers = b"{}", {"webhook-id": "msg_1"}
    deadline = asyncio.get_running_loop().time()
    public_only = Sender(Reach(), timeout=1.0, response_bytes=64, connections=2)
    lab = Sender(Reach(networks("127.0.0.0/8")), timeout=1.0, response_bytes=64, connections=2)
    try:
        import time

        deadline = time.monotonic() + 1.0
        refused = await public_only.post(receiver.url(), headers, body, deadline)
        by_name = await public_only.post(
            f"http://localhost:{receiver.port}/x", headers, body, deadline
        )
        assert not refused.delivered and refused.status_code is None
        assert refused.error.startswith("refused: 127.0.0.1 is not a public address")
        assert by_name.error.startswith("refused: localhost resolves to 127.0.0.1")
        assert receiver.received == []
        # Allowed, a name is resolved and checked now, and sent to that address
        # with its own name as the Host.
        ok = await lab.post(
            f"http://localhost:{receiver.port}/x", headers, body, time.monotonic() + 1.0
        )
        assert ok.delivered and ok.status_code == 200
        (got,) = receiver.received
        assert got.headers["host"] == f"localhost:{receiver.port}"
    finally:
        await public_only.close()
        await lab.close()


async def test_get_ask_message_finds_an_asks_channel(hooks: Any, rpc: GrpcClient, w: World) -> None:
    m = await w.post_ask()
    got = await rpc.call(
        "GetAskMessage", pb.GetAskMessageRequest(ask_id=ask_id_of(m)), tok(w, w.human)
    )
    assert got.message.channel_id == str(w.channel.channel_id)
    assert got.message.message_id == str(m.message_id)
    outsider = await w.add_account("eve", AccountKind.HUMAN)
    with pytest.raises(CallError) as hidden:
        await rpc.call(
            "GetAskMessage", pb.GetAskMessageRequest(ask_id=ask_id_of(m)), tok(w, outsider)
        )
    assert hidden.value.code == "not_found"
    with pytest.raises(CallError) as blank:
        await rpc.call("GetAskMessage", pb.GetAskMessageRequest(ask_id=""), tok(w))
    assert blank.value.code == "invalid_argument"
    assert two_question_ask().questions[0].question_id == "db"
