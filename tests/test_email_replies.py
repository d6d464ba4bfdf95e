"""Answering by reply: a mail about an ask carries a reply address of its
own person and ask; a reply whose first line names an option (its number or
label; "decline: reason" declines) answers as that person, through the
server's own SMTP listener or a provider's inbound-parse webhook, and the
person gets a short mail back saying what was recorded, or why nothing was
(ended and how, unreadable, not theirs). Forwarded mail, a sender the relay
couldn't verify and automatic mail answer nothing. A reply racing an answer
on the page: exactly one ending, the other told why."""

from __future__ import annotations

import asyncio
import dataclasses
import email.message
import email.utils
import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiosmtplib
import httpx
import psycopg
import pytest

from compass.v1 import admin_pb2 as ad
from compass_server.mail.reading import first_line, read_choice, reply_token
from compass_server.store.types import Ask, AskOption, AskQuestion, EndingKind
from compass_server.store.vault import new_key
from tests.conftest import running_server
from tests.mailbox import Mailbox, parts
from tests.servers import CallError, GrpcClient
from tests.world import World, two_question_ask

pytestmark = pytest.mark.timeout(120)

KEY = new_key()
SENDER = "mailto:compass@example.test"
DOMAIN = "reply.example.test"
SECRET = "inbound-secret-1"


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox().start()
    yield box
    box.stop()


@pytest.fixture(scope="module")
async def mailing(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, mailbox: Mailbox
) -> AsyncIterator[Any]:
    """A server that mails through the loopback relay and takes replies by
    its own SMTP listener and by the inbound webhook."""
    async with running_server(
        database_url,
        tmp_path_factory.mktemp("replies"),
        webhook_key=KEY,
        webhook_retry_schedule="0.3s,0.3s,0.3s",
        webhook_timeout_seconds=5.0,
        webhook_poll_seconds=0.1,
        smtp_host="127.0.0.1",
        smtp_port=mailbox.port,
        smtp_security="none",
        mail_reply_domain=DOMAIN,
        mail_listen="127.0.0.1:0",
        mail_inbound_secret=SECRET,
        mail_inbound_bytes=64 * 1024,
    ) as srv:
        page = f"http://127.0.0.1:{srv.http_port}"
        srv.courier.mailer.public_url = page
        srv.replies.public_url = page
        yield srv


@pytest.fixture(scope="module")
async def rpc(mailing: Any) -> AsyncIterator[GrpcClient]:
    c = GrpcClient(mailing.grpc_port)
    yield c
    await c.close()


@pytest.fixture
async def w(mailing: Any, rpc: GrpcClient) -> AsyncIterator[World]:
    world = await World.create(mailing.store)
    tag = world.workspace_id.hex[:8]
    world.emails = {  # type: ignore[attr-defined]
        world.human.account_id: f"ada.{tag}@example.test",
        world.other_human.account_id: f"grace.{tag}@example.test",
    }
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        for account, address in world.emails.items():  # type: ignore[attr-defined]
            await conn.execute("UPDATE accounts SET email = %s WHERE id = %s", (address, account))
    await rpc.call(
        "CreateWebhook",
        ad.CreateWebhookRequest(url=SENDER, kind=ad.WEBHOOK_KIND_EMAIL),
        world.tokens[world.human.account_id],
    )
    yield world
    async with await psycopg.AsyncConnection.connect(mailing.database_url) as conn:
        await conn.execute(
            "DELETE FROM webhook_endpoints WHERE workspace_id = %s", (world.workspace_id,)
        )


def ada(w: World) -> str:
    return w.emails[w.human.account_id]  # type: ignore[attr-defined,no-any-return]


def grace(w: World) -> str:
    return w.emails[w.other_human.account_id]  # type: ignore[attr-defined,no-any-return]


def ship_it(*people: Any) -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id="go",
                question="Ship it?",
                header="Release",
                options=(AskOption("y", "Yes"), AskOption("n", "No, wait")),
            ),
        ),
        answerer_ids=tuple(p.account_id for p in people),
    )


async def post(w: World, ask: Ask) -> str:
    m = await w.post_ask(w.agent, ask)
    block = m.blocks[0]
    assert isinstance(block, Ask)
    return block.ask_id


async def notice(mailbox: Mailbox, to: str, n: int = 1) -> email.message.EmailMessage:
    """The n-th mail about an ask (not an answer to a reply), once it came."""
    for _ in range(400):
        got = [
            m
            for m in mailbox.to(to)
            if m["Auto-Submitted"] == "auto-generated" and not m["Subject"].startswith("Re:")
        ]
        if len(got) >= n:
            return got[n - 1]  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no mail about an ask came to {to}")


async def answer_to(mailbox: Mailbox, to: str, n: int) -> email.message.EmailMessage:
    """The n-th (1-based) mail back to a reply."""
    for _ in range(400):
        got = [m for m in mailbox.to(to) if str(m["Auto-Submitted"]) == "auto-replied"]
        if len(got) >= n:
            return got[n - 1]  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{to} got no answer to its reply")


def text_of(msg: email.message.EmailMessage) -> str:
    body = msg.get_body(("plain",))
    assert body is not None
    return str(body.get_content())


async def history(srv: Any, ask_id: str) -> list[tuple[str, str | None]]:
    async with await psycopg.AsyncConnection.connect(srv.database_url) as conn:
        cur = await conn.execute(
            "SELECT kind, surface FROM ask_history WHERE ask_id = %s AND kind <> 'posted' "
            "ORDER BY id",
            (ask_id,),
        )
        return [(r[0], r[1]) for r in await cur.fetchall()]


def reply(
    to: str, sender: str, first: str, original: email.message.EmailMessage, **headers: str
) -> email.message.EmailMessage:
    """A reply as a mail client writes one: the choice, a signature, the quoted mail."""
    msg = email.message.EmailMessage()
    msg["From"] = f"Ada <{sender}>"
    msg["To"] = to
    msg["Subject"] = f"Re: {original['Subject']}"
    msg["Message-ID"] = email.utils.make_msgid(domain="example.test")
    msg["In-Reply-To"] = str(original["Message-ID"])
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    quoted = "\n".join(f"> {line}" for line in text_of(original).splitlines())
    msg.set_content(
        f"{first}\n\nThanks!\n-- \nAda, release team\n\n"
        f"On Sun, 6 Dec 2026 at 07:02, Compass <{to}>\nwrote:\n{quoted}\n"
    )
    return msg


async def by_smtp(srv: Any, msg: email.message.EmailMessage, envelope_from: str) -> None:
    await aiosmtplib.send(
        msg,
        sender=envelope_from,
        recipients=[str(msg["To"])],
        hostname="127.0.0.1",
        port=srv.mail_port,
        timeout=30,
    )


async def by_webhook(
    srv: Any,
    msg: email.message.EmailMessage,
    envelope_from: str | None = None,
    *,
    spf: str | None = "pass",
    dkim: str | None = None,
    key: str = SECRET,
) -> httpx.Response:
    """The mail as SendGrid's Inbound Parse posts it (multipart/form-data)."""
    fields = {
        "from": str(msg["From"]),
        "to": str(msg["To"]),
        "subject": str(msg["Subject"]),
        "text": text_of(msg),
        "headers": "".join(f"{k}: {v}\n" for k, v in msg.items()),
        "envelope": json.dumps({"to": [str(msg["To"])], "from": envelope_from or ""}),
    }
    if envelope_from is None:
        del fields["envelope"]
    if spf is not None:
        fields["SPF"] = spf
    if dkim is not None:
        fields["dkim"] = dkim
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(
            f"http://127.0.0.1:{srv.http_port}/mail/inbound?key={key}",
            files={k: (None, v) for k, v in fields.items()},
        )


async def test_the_mail_carries_a_reply_address_of_its_person_and_ask_and_says_how(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    reply_to = str(first["Reply-To"])
    token = reply_token(reply_to, DOMAIN)
    assert token is not None and re.fullmatch(r"ask\+[a-z2-7]{24}@reply\.example\.test", reply_to)
    # No id of the ask or the person is in it.
    assert str(w.human.account_id) not in reply_to and "ask_" not in reply_to
    text, html = parts(first)
    assert re.search(r"^  1\. Yes: http", text, re.M) and re.search(r"^  2\. No, wait", text, re.M)
    assert "reply to this mail with the number or label" in text
    assert "<ol>" in html
    # Another ask, another address; the same ask mailed again, the same one.
    await post(w, ship_it(w.human))
    second = await notice(mailbox, ada(w), 2)
    assert second["Reply-To"] != first["Reply-To"]


async def test_a_reply_through_the_smtp_listener_answers_as_its_person(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    await by_smtp(mailing, reply(str(first["Reply-To"]), ada(w), "2", first), ada(w))
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.ANSWERED
    assert ask.ending.actor_handle == "ada"
    assert ask.questions[0].chosen_option_ids == ("n",)
    assert await history(mailing, ask_id) == [("answered", "email")]
    said = await answer_to(mailbox, ada(w), 1)
    assert "Recorded: your answer to “Release” is “No, wait”, as ada." in text_of(said)
    assert said["In-Reply-To"] is not None and said["Subject"].startswith("Re: ")
    assert said["Auto-Submitted"] == "auto-replied"


async def test_a_reply_through_the_webhook_declines_with_its_reason(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    msg = reply(str(first["Reply-To"]), ada(w), "Decline: the tests are red", first)
    answered = await by_webhook(mailing, msg, ada(w), dkim="{@example.test : pass}")
    assert answered.status_code == 200 and answered.json() == {"outcome": "declined"}
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.DECLINED
    assert ask.ending.reason == "the tests are red"
    assert await history(mailing, ask_id) == [("declined", "email")]
    said = await answer_to(mailbox, ada(w), 1)
    assert "you declined this ask (the tests are red), as ada" in text_of(said)


async def test_a_label_on_the_first_line_answers_and_the_quoted_mail_is_not_read(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    # The quoted notice lists "1. Yes": only the reply's own first line counts.
    msg = reply(str(first["Reply-To"]), ada(w), "no, wait", first)
    got = await by_webhook(mailing, msg, ada(w))
    assert got.json() == {"outcome": "answered"}
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.questions[0].chosen_option_ids == ("n",)


async def test_a_forwarded_notice_answers_nothing_and_its_sender_is_told(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    # Grace got the notice forwarded and replies to ada's address from her own.
    msg = reply(str(first["Reply-To"]), grace(w), "1", first)
    await by_smtp(mailing, msg, grace(w))
    said = await answer_to(mailbox, grace(w), 1)
    assert "Nothing was recorded" in text_of(said) and "forwarded" in text_of(said)
    # A From of ada's with another envelope sender is no better.
    msg = reply(str(first["Reply-To"]), ada(w), "1", first)
    got = await by_webhook(mailing, msg, grace(w))
    assert got.json() == {"outcome": "not_yours"}
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.is_open and await history(mailing, ask_id) == []


async def test_a_sender_the_relay_could_not_verify_and_automatic_mail_answer_nothing(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    msg = reply(str(first["Reply-To"]), ada(w), "1", first)
    got = await by_webhook(mailing, msg, ada(w), spf="fail", dkim="{@example.test : fail}")
    assert got.json() == {"outcome": "unverified"}
    # Over SMTP, the relay's Authentication-Results says so.
    failed = reply(
        str(first["Reply-To"]),
        ada(w),
        "1",
        first,
        Authentication_Results="mx.example.test; spf=softfail smtp.mailfrom=x; dkim=fail",
    )
    await by_smtp(mailing, failed, ada(w))
    away = reply(str(first["Reply-To"]), ada(w), "1", first, Auto_Submitted="auto-replied")
    got = await by_webhook(mailing, away, ada(w))
    assert got.json() == {"outcome": "automatic"}
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.is_open and await history(mailing, ask_id) == []
    # Nothing was mailed back to any of them.
    assert [m for m in mailbox.to(ada(w)) if m["Auto-Submitted"] == "auto-replied"] == []


async def test_an_unreadable_reply_and_an_ask_that_needs_more_get_the_options_and_the_link(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    got = await by_webhook(mailing, reply(str(first["Reply-To"]), ada(w), "maybe?", first), ada(w))
    assert got.json() == {"outcome": "unreadable"}
    said = text_of(await answer_to(mailbox, ada(w), 1))
    assert "names none of the options" in said
    assert "1. Yes" in said and "2. No, wait" in said and "decline: your reason" in said
    assert re.search(r"/a/[A-Za-z0-9_-]+", said)
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.is_open

    two = await post(w, dataclasses.replace(two_question_ask(), answerer_ids=(w.human.account_id,)))
    mailed = await notice(mailbox, ada(w), 2)
    assert "reply to this mail" not in text_of(mailed)
    got = await by_webhook(mailing, reply(str(mailed["Reply-To"]), ada(w), "1", mailed), ada(w))
    assert got.json() == {"outcome": "needs_page"}
    said = text_of(await answer_to(mailbox, ada(w), 2))
    assert "needs more than a reply's first line" in said and "/a/" in said
    _, ask = await w.store.get_ask(w.human, two)
    assert ask.is_open


async def test_a_reply_to_an_ended_ask_says_how_it_ended(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    ask_id = await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    await w.store.cancel_ask(w.agent, ask_id)
    got = await by_webhook(mailing, reply(str(first["Reply-To"]), ada(w), "1", first), ada(w))
    assert got.json() == {"outcome": "ended"}
    said = text_of(await answer_to(mailbox, ada(w), 1))
    assert "this ask has ended: withdrawn by scout." in said


async def test_a_reply_racing_an_answer_on_the_page_ends_the_ask_once_and_the_other_is_told(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    for n in range(1, 5):
        ask_id = await post(w, ship_it(w.human))
        first = await notice(mailbox, ada(w), n)
        link = re.search(r"http://\S+/a/[A-Za-z0-9_-]+", parts(first)[0])
        assert link is not None
        msg = reply(str(first["Reply-To"]), ada(w), "2", first)
        async with httpx.AsyncClient(timeout=60) as http:
            page, mail = await asyncio.gather(
                http.post(
                    link.group(),
                    json={
                        "askId": ask_id,
                        "action": "answer",
                        "answers": [{"questionId": "go", "chosenOptionIds": ["y"]}],
                    },
                ),
                by_webhook(mailing, msg, ada(w)),
            )
        endings = await history(mailing, ask_id)
        assert len(endings) == 1, endings
        _, ask = await w.store.get_ask(w.human, ask_id)
        said = text_of(await answer_to(mailbox, ada(w), n))
        if endings == [("answered", "web")]:
            assert ask.questions[0].chosen_option_ids == ("y",)
            assert page.status_code == 200 and mail.json() == {"outcome": "ended"}
            assert "this ask has ended: answered by ada" in said
        else:
            assert endings == [("answered", "email")]
            assert ask.questions[0].chosen_option_ids == ("n",)
            assert mail.json() == {"outcome": "answered"} and "Recorded" in said
            assert page.status_code == 409 and "already answered" in page.json()["message"]
            # With the ask as it stands, for the page to say who ended it.
            assert page.json()["askMessage"]["blocks"][0]["ask"]["ending"]["actorHandle"] == "ada"


async def test_the_listener_refuses_addresses_it_never_sent_and_mail_past_its_limit(
    mailing: Any, mailbox: Mailbox, w: World
) -> None:
    await post(w, ship_it(w.human))
    first = await notice(mailbox, ada(w))
    for to in (f"ask+{'a' * 24}@{DOMAIN}", "someone@example.test", f"ask+x@{DOMAIN}"):
        with pytest.raises(aiosmtplib.SMTPRecipientsRefused) as refused:
            await by_smtp(mailing, reply(to, ada(w), "1", first), ada(w))
        assert refused.value.recipients[0].code == 550
    big = reply(str(first["Reply-To"]), ada(w), "1\n" + "x" * (70 * 1024), first)
    with pytest.raises(aiosmtplib.SMTPResponseException) as large:
        await by_smtp(mailing, big, ada(w))
    assert large.value.code == 552


async def test_without_a_certificate_the_listener_offers_no_starttls(mailing: Any) -> None:
    smtp = aiosmtplib.SMTP(
        hostname="127.0.0.1", port=mailing.mail_port, start_tls=False, timeout=30
    )
    await smtp.connect()
    await smtp.ehlo()
    assert not smtp.supports_extension("starttls")
    await smtp.quit()


@pytest.mark.parametrize(
    ("how", "status"),
    [
        ("no secret", 401),
        ("a wrong secret", 401),
        ("GET", 405),
        ("JSON", 400),
        ("no sender", 400),
        ("an envelope not JSON", 400),
        ("too large", 413),
        ("bearer", 200),
        ("basic", 200),
        ("another path", 404),
    ],
)
async def test_the_webhook_answers_bad_input_with_a_clear_4xx(
    mailing: Any, how: str, status: int
) -> None:
    url = f"http://127.0.0.1:{mailing.http_port}/mail/inbound"
    form = {"from": "ada@example.test", "to": f"ask+{'a' * 24}@{DOMAIN}", "text": "1"}
    files: Any = {k: (None, v) for k, v in form.items()}
    async with httpx.AsyncClient(timeout=60) as http:
        if how == "no secret":
            r = await http.post(url, files=files)
        elif how == "a wrong secret":
            r = await http.post(url + "?key=nope", files=files)
        elif how == "GET":
            r = await http.get(url + f"?key={SECRET}")
        elif how == "JSON":
            r = await http.post(url + f"?key={SECRET}", json=form)
        elif how == "no sender":
            r = await http.post(url + f"?key={SECRET}", files={"to": (None, form["to"])})
        elif how == "an envelope not JSON":
            r = await http.post(url + f"?key={SECRET}", files={**files, "envelope": (None, "{")})
        elif how == "too large":
            r = await http.post(
                url + f"?key={SECRET}", files={**files, "text": (None, "x" * (65 * 1024))}
            )
        elif how == "bearer":
            r = await http.post(url, files=files, headers={"authorization": f"Bearer {SECRET}"})
        elif how == "basic":
            r = await http.post(url, files=files, auth=("sendgrid", SECRET))
        else:
            r = await http.post(url.replace("inbound", "elsewhere") + f"?key={SECRET}")
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json() == {"outcome": "unknown_address"}


def test_a_reply_is_read_from_its_own_first_line() -> None:
    q = AskQuestion(
        question_id="go",
        question="Ship it?",
        options=(AskOption("y", "Yes"), AskOption("n", "No, wait"), AskOption("l", "2 weeks")),
    )
    assert first_line("\n\n  2  \nOn Sun, Ada wrote:\n> 1\n") == "2"
    assert first_line("> 1. Yes\n\nYes please\n") == "Yes please"
    assert first_line("-- \nAda\n") == ""
    assert first_line("On Sun, 6 Dec 2026, Compass <ask+x@y>\nwrote:\n> Yes\n") == ""
    assert first_line("\n-----Original Message-----\nFrom: x\n1\n") == ""
    read = {line: read_choice(line, q) for line in ("2", "2.", "2) No, wait", "yes", "YES.", "y")}
    assert {k: v.option_id if v else None for k, v in read.items()} == {
        "2": "n",
        "2.": "n",
        "2) No, wait": "n",
        "yes": "y",
        "YES.": "y",
        "y": "y",
    }
    assert read_choice("2 weeks", q) is not None and read_choice("2 weeks", q).option_id == "l"  # type: ignore[union-attr]
    assert read_choice("1. No, wait", q) is None
    assert read_choice("4", q) is None and read_choice("maybe", q) is None
    declined = read_choice("decline: not now", q)
    assert declined is not None and declined.declined and declined.reason == "not now"
    assert reply_token(f"Compass <ASK+{'A' * 24}@Reply.Example.Test>", DOMAIN) == "a" * 24
    assert reply_token(f"ask+{'a' * 24}@elsewhere.test", DOMAIN) is None


async def test_two_replies_and_an_rpc_racing_end_the_ask_once_and_the_others_are_told(
    mailing: Any, rpc: GrpcClient, mailbox: Mailbox, w: World
) -> None:
    from compass.v1 import comms_pb2 as pb

    for n in range(1, 4):
        ask_id = await post(w, ship_it(w.human))
        first = await notice(mailbox, ada(w), n)
        to = str(first["Reply-To"])

        async def answer_by_rpc(ask_id: str) -> str:
            try:
                await rpc.call(
                    "RespondToAsk",
                    pb.RespondToAskRequest(
                        ask_id=ask_id,
                        answers=[pb.AskQuestionAnswer(question_id="go", chosen_option_ids=["y"])],
                    ),
                    w.tokens[w.human.account_id],
                )
            except CallError as exc:
                return exc.code
            return "ok"

        _, by_hook, by_rpc = await asyncio.gather(
            by_smtp(mailing, reply(to, ada(w), "2", first), ada(w)),
            by_webhook(mailing, reply(to, ada(w), "decline: too soon", first), ada(w)),
            answer_by_rpc(ask_id),
        )
        endings = await history(mailing, ask_id)
        assert len(endings) == 1, endings
        said = [text_of(await answer_to(mailbox, ada(w), 2 * n - i)) for i in (1, 0)]
        recorded = [s for s in said if s.startswith("Recorded")]
        told = [s for s in said if "this ask has ended" in s]
        if endings == [("answered", "grpc")]:
            assert by_rpc == "ok" and recorded == [] and len(told) == 2
        else:
            assert by_rpc == "already_exists" and len(recorded) == 1 and len(told) == 1
            hook = by_hook.json()["outcome"]
            assert hook == ("declined" if endings == [("declined", "email")] else "ended")


@pytest.mark.browser
async def test_an_ask_answered_by_reply_shows_how_it_ended_on_the_page(
    mailing: Any, mailbox: Mailbox, browser: Any, w: World, shots: Any
) -> None:
    from playwright.async_api import expect

    from tests.browser import DESKTOP, PHONE, ask_block, new_tab, sign_in

    for n, (door, size) in enumerate((("smtp", PHONE), ("webhook", DESKTOP)), 1):
        ask_id = await post(w, ship_it(w.human))
        first = await notice(mailbox, ada(w), n)
        msg = reply(str(first["Reply-To"]), ada(w), "1. Yes", first)
        if door == "smtp":
            await by_smtp(mailing, msg, ada(w))
        else:
            assert (await by_webhook(mailing, msg, ada(w))).json() == {"outcome": "answered"}
        async with new_tab(browser, mailing, viewport=size) as page:
            await sign_in(page, w.tokens[w.human.account_id])
            await page.goto(f"/#/ask/{ask_id}")
            await expect(ask_block(page, ask_id).get_by_text("Answered by ada")).to_be_visible()
            await page.screenshot(
                path=str(shots / f"reply-{door}-{size['width']}.png"), full_page=True
            )


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"COMPASS_MAIL_LISTEN": "127.0.0.1:2525"}, "set mail.reply_domain too"),
        (
            {
                "COMPASS_MAIL_LISTEN": "127.0.0.1:2525",
                "COMPASS_MAIL_REPLY_DOMAIN": DOMAIN,
                "COMPASS_WORKERS": "2",
            },
            "needs workers = 1",
        ),
        ({"COMPASS_MAIL_LISTEN": "not an address"}, "COMPASS_MAIL_LISTEN must be [HOST:]PORT"),
    ],
)
def test_the_listener_is_refused_at_start_without_what_it_needs(
    env: dict[str, str], why: str
) -> None:
    from compass_server import config

    with pytest.raises(config.ConfigError) as refused:
        config.load(env=env)
    assert why in str(refused.value)
