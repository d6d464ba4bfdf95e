"""Mail about asks, end to end: an admin adds an email endpoint, an agent
asks, and a real SMTP server on loopback (aiosmtpd) gets one mail per person
the ask is for, in text and HTML, with the link that opens the ask for them;
a single-select ask's options open it with that option chosen (a GET never
answers); the ending follows in the same thread. Delivery is the webhooks':
an outage is retried with the same Message-ID and every attempt is listed."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass_server.store.types import Ask, AskOption, AskQuestion, EndingKind
from compass_server.store.vault import new_key
from tests.browser import new_tab
from tests.conftest import running_server
from tests.mailbox import Mailbox, parts
from tests.servers import CallError, GrpcClient
from tests.test_admin_cli import cli as admin_cli
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

KEY = new_key()
SENDER = "mailto:compass@example.test"
ADA = "ada@example.test"
GRACE = "grace@example.test"


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox().start()
    yield box
    box.stop()


@pytest.fixture(scope="module")
async def mailing(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, mailbox: Mailbox
) -> AsyncIterator[Any]:
    """A server whose courier mails through the loopback SMTP server."""
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("mail"),
        webhook_key=KEY,
        webhook_retry_schedule="0.3s,0.3s,0.3s",
        webhook_timeout_seconds=3.0,
        webhook_poll_seconds=0.1,
        smtp_host="127.0.0.1",
        smtp_port=mailbox.port,
        smtp_security="none",
    ) as srv:
        # Links the mail carries point at this server's page.
        srv.courier.mailer.public_url = f"http://127.0.0.1:{srv.http_port}"
        yield srv


@pytest.fixture(scope="module")
async def rpc(mailing: Any) -> AsyncIterator[GrpcClient]:
    c = GrpcClient(mailing.grpc_port)
    yield c
    await c.close()


@pytest.fixture
async def w(mailing: Any) -> AsyncIterator[World]:
    world = await World.create(mailing.store)
    tag = world.workspace_id.hex[:8]
    world.emails = {  # type: ignore[attr-defined]
        world.human.account_id: f"ada.{tag}@example.test",
        world.other_human.account_id: f"grace.{tag}@example.test",
    }
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        for account, address in world.emails.items():  # type: ignore[attr-defined]
            await conn.execute("UPDATE accounts SET email = %s WHERE id = %s", (address, account))
    yield world
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def mail_of(w: World, who: Any) -> str:
    return w.emails[who.account_id]  # type: ignore[attr-defined,no-any-return]


def tok(w: World) -> str:
    return w.tokens[w.human.account_id]


async def email_endpoint(rpc: GrpcClient, w: World) -> ad.Webhook:
    made = await rpc.call(
        "CreateWebhook", ad.CreateWebhookRequest(url=SENDER, kind=ad.WEBHOOK_KIND_EMAIL), tok(w)
    )
    return made.webhook


def ship_it(*people: Any) -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id="go",
                question="Ship it?",
                header="Release",
                options=(AskOption("y", "Yes"), AskOption("n", "No")),
            ),
        ),
        answerer_ids=tuple(p.account_id for p in people),
    )


async def post(w: World, ask: Ask) -> str:
    m = await w.post_ask(w.agent, ask)
    block = m.blocks[0]
    assert isinstance(block, Ask)
    return block.ask_id


def links(text: str) -> list[str]:
    return re.findall(r"https?://\S+/a/[A-Za-z0-9_\-]+(?:\?choose=\w+)?", text)


async def test_a_named_answerer_gets_one_mail_and_the_ending_in_its_thread(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    hook = await email_endpoint(rpc, w)
    assert hook.kind == ad.WEBHOOK_KIND_EMAIL and hook.url == SENDER
    ask_id = await post(w, ship_it(w.human))
    [first] = await mailbox.wait_for(mail_of(w, w.human))
    assert first["From"] == "compass@example.test"
    assert first["Subject"] == "scout asks: Release"
    assert first["Auto-Submitted"] == "auto-generated"
    assert first["Message-ID"].startswith(f"<ask.{ask_id}.{w.human.account_id}@")
    text, html = parts(first)
    assert "Ship it?" in text and "Ship it?" in html
    # One link per option, each opening the ask with it chosen, and the ask's own.
    found = links(text)
    assert [u.rsplit("?", 1)[-1] for u in found[:2]] == ["choose=y", "choose=n"]
    plain = found[-1]
    assert "?" not in plain and all(u.startswith(plain) for u in found)
    assert f'href="{found[0]}"' in html.replace("&amp;", "&")
    # Nobody the ask doesn't name is mailed, the agent above all.
    await asyncio.sleep(0.5)
    assert mailbox.to(mail_of(w, w.other_human)) == []

    async with httpx.AsyncClient() as http:
        # Opening a choice (as a mail scanner would) answers nothing.
        shown = await http.get(found[0])
        assert shown.status_code == 200
        # The page opens with that choice picked (its script draws it so).
        assert '"choose":"y"' in shown.text, shown.text
        _, ask = await w.store.get_ask(w.human, ask_id)
        assert ask.is_open
        done = await http.post(
            plain,
            json={
                "askId": ask_id,
                "action": "answer",
                "answers": [{"questionId": "go", "chosenOptionIds": ["y"]}],
            },
        )
        assert done.status_code == 200, done.text
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.ANSWERED

    [_, ended] = await mailbox.wait_for(mail_of(w, w.human), 2)
    assert ended["Subject"] == "Re: scout asks: Release"
    assert ended["In-Reply-To"] == first["Message-ID"]
    assert ended["References"] == first["Message-ID"]
    assert ended["Message-ID"] != first["Message-ID"]
    text, html = parts(ended)
    assert "This ask was answered by ada." in text and "Yes" in text
    assert "/a/" not in text + html

    # Both mails are deliveries of the endpoint, each with its attempt (its
    # result recorded a moment after the relay took it).
    for _ in range(300):
        page = await rpc.call(
            "ListWebhookDeliveries",
            ad.ListWebhookDeliveriesRequest(webhook_id=hook.webhook_id, page_size=10),
            tok(w),
        )
        if all(d.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED for d in page.deliveries):
            break
        await asyncio.sleep(0.1)
    assert sorted(d.event_type for d in page.deliveries) == ["ask.answered", "ask.posted"]
    assert all(d.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED for d in page.deliveries)
    assert all(d.attempts == 1 for d in page.deliveries)


async def test_an_ask_for_the_channel_mails_only_those_who_asked_for_every_ask(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    await email_endpoint(rpc, w)
    # The operator's command, as a person would have it set.
    said = await asyncio.to_thread(
        admin_cli,
        mailing.database_url,
        "set-mail-preference",
        "--account",
        str(w.other_human.account_id),
        "--mail",
        "all",
    )
    assert said == {"account_id": str(w.other_human.account_id), "mail": "all"}
    await post(w, two_question_ask())
    [got] = await mailbox.wait_for(mail_of(w, w.other_human))
    text, _ = parts(got)
    # Two questions: no one-click choices, the options listed, one link.
    assert "?choose=" not in text and "PostgreSQL" in text and len(links(text)) == 1
    # ada left mail at its default: only asks that name her.
    await asyncio.sleep(0.5)
    assert mailbox.to(mail_of(w, w.human)) == []

    # Mail off: not even an ask that names her.
    await mailing.webhooks.set_email_preference(w.human, w.human.account_id, "off")
    await post(w, ship_it(w.human, w.other_human))
    await mailbox.wait_for(mail_of(w, w.other_human), 2)
    await asyncio.sleep(0.5)
    assert mailbox.to(mail_of(w, w.human)) == []

    # A person sets only their own; another's is an admin's to set.
    from compass_server.store.errors import PermissionDenied

    with pytest.raises(PermissionDenied):
        await mailing.webhooks.set_email_preference(w.other_human, w.human.account_id, "all")


async def test_a_mail_to_an_ask_that_ended_before_it_went_is_not_sent(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    hook = await email_endpoint(rpc, w)
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        await conn.execute(
            "UPDATE webhook_endpoints SET enabled = false WHERE id = %s", (hook.webhook_id,)
        )
    ask_id = await post(w, ship_it(w.human))
    await w.store.cancel_ask(w.agent, ask_id)
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        await conn.execute(
            "UPDATE webhook_endpoints SET enabled = true WHERE id = %s", (hook.webhook_id,)
        )
    # The ending's mail goes; the posting's found the ask ended and sent nothing.
    [only] = await mailbox.wait_for(mail_of(w, w.human))
    assert only["Subject"].startswith("Re: ")
    # Deliveries of one endpoint needn't go in order: the posting's may be
    # attempted (and its failure recorded) after the ending's mail went.
    async with asyncio.timeout(10):
        while True:
            page = await rpc.call(
                "ListWebhookDeliveries",
                ad.ListWebhookDeliveriesRequest(
                    webhook_id=hook.webhook_id, states=[ad.WEBHOOK_DELIVERY_STATE_FAILED]
                ),
                tok(w),
            )
            if page.deliveries:
                break
            await asyncio.sleep(0.1)
    [failed] = page.deliveries
    assert failed.event_type == "ask.posted" and failed.attempts == 1
    assert "not sent" in failed.last_error and "ended" in failed.last_error


async def test_quiet_hours_hold_mail_that_isnt_urgent_until_they_end(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    import datetime

    from compass.v1 import preferences_pb2 as pb

    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    hook = await email_endpoint(rpc, w)
    now = datetime.datetime.now(datetime.UTC)
    await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(
            preferences=pb.NotificationPreferences(
                page=True,
                push=True,
                email=pb.MAIL_PREFERENCE_NAMED,
                quiet_start=(now - datetime.timedelta(hours=1)).strftime("%H:%M"),
                quiet_end=(now + datetime.timedelta(hours=1)).strftime("%H:%M"),
                time_zone="UTC",
            )
        ),
        tok(w),
    )
    ask_id = await post(w, ship_it(w.human, w.other_human))
    # grace has no quiet hours: her mail goes; ada's waits for hers to end.
    await mailbox.wait_for(mail_of(w, w.other_human))
    end = (now + datetime.timedelta(hours=1)).strftime("%H:%M")
    for _ in range(100):
        page = await rpc.call(
            "ListWebhookDeliveries",
            ad.ListWebhookDeliveriesRequest(
                webhook_id=hook.webhook_id, states=[ad.WEBHOOK_DELIVERY_STATE_PENDING]
            ),
            tok(w),
        )
        if page.deliveries and page.deliveries[0].last_error:
            break
        await asyncio.sleep(0.1)
    [held] = page.deliveries
    assert held.subject == ask_id and held.attempts == 1
    assert held.last_error == f"held: the person's quiet hours, until {end} UTC"
    assert mailbox.to(mail_of(w, w.human)) == []
    # Once they are over (the person ends them; time brings the mail due), it goes.
    await rpc.call(
        "SetNotificationPreferences",
        pb.SetNotificationPreferencesRequest(
            preferences=pb.NotificationPreferences(
                page=True, push=True, email=pb.MAIL_PREFERENCE_NAMED, time_zone="UTC"
            )
        ),
        tok(w),
    )
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        await conn.execute(
            "UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = %s",
            (held.delivery_id,),
        )
    [got] = await mailbox.wait_for(mail_of(w, w.human))
    assert got["Subject"] == "scout asks: Release"


async def test_the_sender_must_be_a_mailto_address(rpc: GrpcClient, w: World) -> None:
    for url in (
        "https://example.test/x",
        "mailto:",
        "mailto:a@b?subject=x",
        "mailto:a@b,c@d.e",
        "mailto:nobody",
    ):
        with pytest.raises(CallError) as e:
            await rpc.call(
                "CreateWebhook",
                ad.CreateWebhookRequest(url=url, kind=ad.WEBHOOK_KIND_EMAIL),
                tok(w),
            )
        assert e.value.code == "invalid_argument", url
        assert "mailto:compass@example.com" in e.value.message


async def test_a_relay_outage_is_retried_with_the_same_message_id_and_every_attempt_listed(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    hook = await email_endpoint(rpc, w)
    to = mail_of(w, w.human)

    async def delivery() -> Any:
        page = await rpc.call(
            "ListWebhookDeliveries",
            ad.ListWebhookDeliveriesRequest(webhook_id=hook.webhook_id),
            tok(w),
        )
        return page.deliveries[0] if page.deliveries else None

    mailbox.stop()
    try:
        await post(w, ship_it(w.human))
        # The relay is down: attempts fail, are recorded, and the delivery waits.
        for _ in range(300):
            d = await delivery()
            # (The newest attempt's error: empty while it is under way.)
            if d is not None and d.attempts >= 2 and d.last_error:
                break
            await asyncio.sleep(0.1)
        assert d.state == ad.WEBHOOK_DELIVERY_STATE_PENDING
        assert "couldn't connect to the mail relay 127.0.0.1" in d.last_error
        # Back, but refusing for now (4xx): still retried.
        mailbox.refuse = 451
        mailbox.start()
        for _ in range(300):
            d = await delivery()
            if "answered 451" in d.last_error:
                break
            await asyncio.sleep(0.1)
        assert d.state == ad.WEBHOOK_DELIVERY_STATE_PENDING, d.last_error
    finally:
        mailbox.refuse = None
        if not mailbox.running:
            mailbox.start()
    [got] = await mailbox.wait_for(to)
    await asyncio.sleep(0.5)
    assert len(mailbox.to(to)) == 1
    for _ in range(300):
        detail = await rpc.call(
            "GetWebhookDelivery", ad.GetWebhookDeliveryRequest(delivery_id=d.delivery_id), tok(w)
        )
        if detail.delivery.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED:
            break
        await asyncio.sleep(0.1)
    assert detail.delivery.state == ad.WEBHOOK_DELIVERY_STATE_DELIVERED
    errors = [a.error for a in detail.attempts]
    assert errors[-1] == "" and len(errors) >= 3
    assert any("couldn't connect" in e for e in errors), errors
    assert any("answered 451" in e for e in errors), errors
    assert got["Message-ID"].startswith(f"<ask.{detail.delivery.subject}.")


@pytest.mark.browser
async def test_a_choice_in_the_mail_opens_the_ask_in_chromium_with_it_chosen(
    browser: Any, mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    await email_endpoint(rpc, w)
    ask_id = await post(w, ship_it(w.human))
    [got] = await mailbox.wait_for(mail_of(w, w.human))
    text, _ = parts(got)
    no = next(u for u in links(text) if u.endswith("?choose=n"))
    async with new_tab(browser, mailing) as tab:
        await tab.goto(no)
        assert await tab.get_by_label("No").is_checked()
        assert not await tab.get_by_label("Yes").is_checked()
        _, ask = await w.store.get_ask(w.human, ask_id)
        assert ask.is_open
        await tab.get_by_role("button", name="Submit").click()
        await tab.get_by_text("Your answer was recorded.").wait_for()
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.questions[0].chosen_option_ids == ("n",)


async def test_an_agents_line_breaks_never_reach_a_header(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    await email_endpoint(rpc, w)
    sneaky = Ask(
        questions=(
            AskQuestion(
                question_id="q",
                question="Deploy?\r\nBcc: everyone@example.test\r\n\r\nforged body " + "x" * 200,
                options=(AskOption("y", "Yes <b>now</b>"),),
            ),
        ),
        answerer_ids=(w.human.account_id,),
    )
    await post(w, sneaky)
    [got] = await mailbox.wait_for(mail_of(w, w.human))
    assert got["Bcc"] is None
    # (A long subject is folded on the wire; read back, a fold is a space.)
    subject = " ".join(got["Subject"].split())
    assert subject.startswith("scout asks: Deploy? Bcc: everyone@example.test forged body")
    assert len(subject) == len("scout asks: ") + 80 and subject.endswith("…")
    assert [r for _, rcpts in mailbox.envelopes for r in rcpts if "everyone" in r] == []
    _, html = parts(got)
    assert "<b>now</b>" not in html and "Yes &lt;b&gt;now&lt;/b&gt;" in html
