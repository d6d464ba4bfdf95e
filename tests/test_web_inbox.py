"""The inbox on the web page, in a real Chromium against the real server: agents
post through the inbox store, the person answers, replies and closes on the page."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.inbox.pictures import Picture
from compass_server.store.types import AskAnswerBlock, AskStatus, InboxStatus, TextBlock
from tests.browser import ask_block, open_ended, question, sign_in
from tests.test_inbox_store import yes_no
from tests.test_web_page import ready_frame
from tests.world import World, two_question_ask

pytestmark = pytest.mark.browser

ANSWER = "**/compass.v1.InboxService/AnswerInboxAsk"
SUBSCRIBE = "**/compass.v1.CommsService/Subscribe"


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour, so the page has something to decode."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def tok(w: World) -> str:
    return w.tokens[w.human.account_id]


def inbox_link(page: Any, name: str) -> Any:
    return page.locator("nav").get_by_role("link", name=name, exact=True)


async def test_answering_an_item_with_a_picture(
    page: Any, api_world: World, server: Any, shots: Path
) -> None:
    w, inbox = api_world, server.inbox
    item, _ = await inbox.post(
        w.agent,
        "schema",
        "Which schema should ship?",
        "The migration is ready; attachment:lock-times.png shows the lock times.",
        two_question_ask(),
        [Picture("lock-times.png", png(40, 24, (47, 91, 211)))],
    )
    sent: list[Any] = []

    def on_request(request: Any) -> None:
        if request.url.endswith("/compass.v1.InboxService/AnswerInboxAsk"):
            sent.append(request.post_data_json)

    page.on("request", on_request)
    await sign_in(page, tok(w))

    await inbox_link(page, "Inbox 1 open").click()
    rows = page.locator(".inbox-row")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("Which schema should ship?")
    await expect(rows.first).to_contain_text("scout")
    await expect(rows.first).to_contain_text("Open")
    # A new item arrives live, newest first, and the count follows.
    await inbox.post(w.agent, "release", "Cut the release today?", "", yes_no())
    await expect(rows.locator(".inbox-row-title")).to_have_text(
        ["Cut the release today?", "Which schema should ship?"]
    )
    await expect(inbox_link(page, "Inbox 2 open")).to_be_visible()

    await rows.filter(has_text="Which schema should ship?").click()
    await expect(page.get_by_role("heading", name="Which schema should ship?")).to_be_visible()
    thread = page.get_by_role("list", name="Thread")
    # The picture's address in the words reads as its name; the picture shows below.
    await expect(thread).to_contain_text(
        "The migration is ready; lock-times.png shows the lock times."
    )
    await expect(thread).not_to_contain_text("/inbox/")
    picture = thread.get_by_role("img", name="lock-times.png")
    await expect(picture).to_have_js_property("naturalWidth", 40)
    await expect(picture).to_have_attribute("src", re.compile(r"^blob:"))

    # A refused answer says why and keeps the picks.
    form = ask_block(page, item.ask_id)
    await question(form, "db").get_by_label("MySQL").check()
    await question(form, "langs").get_by_label("Other").fill("x" * 10_001)
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("alert")).to_have_text(
        "Your answers weren't sent: question 'langs' answer text is 10001 characters;"
        " the limit is 10000."
    )
    await expect(question(form, "db").get_by_label("MySQL")).to_be_checked()

    await question(form, "langs").get_by_label("Python").check()
    await question(form, "langs").get_by_label("Other").fill("and Rust")
    await question(form, "langs").get_by_label("Other").press("Enter")
    answer = thread.locator(f'.block-ask-answer[data-ask-id="{item.ask_id}"]')
    await expect(answer).to_contain_text("ada answered scout's ask.")
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(form.locator("dd")).to_have_text(["MySQL", "Python, “and Rust”"])
    await open_ended(form)
    await expect(question(form, "db").get_by_label("MySQL")).to_be_checked()
    await expect(form.get_by_role("button", name="Close without answering")).to_have_count(0)
    await expect(inbox_link(page, "Inbox 1 open")).to_be_visible()
    await page.screenshot(path=str(shots / "web-inbox-answered.png"))

    # Each submit went out with a key of its own, naming the ask shown.
    assert [(s["itemId"], s["askId"]) for s in sent] == [(str(item.item_id), item.ask_id)] * 2
    assert sent[0]["clientKey"] != sent[1]["clientKey"]
    stored = await inbox.read_thread(w.human, item.item_id)
    assert stored.item.status is InboxStatus.ANSWERED
    assert stored.item.answered_by == w.human.account_id
    asked, answered = stored.messages
    assert asked.ask_status is AskStatus.ANSWERED
    (snapshot,) = answered.blocks
    assert isinstance(snapshot, AskAnswerBlock)
    assert [(q.chosen_option_ids, q.custom_text) for q in snapshot.questions] == [
        (("my",), ""),
        (("py",), "and Rust"),
    ]


async def test_a_repost_while_the_page_shows_the_old_ask_is_not_open(
    page: Any, api_world: World, server: Any, shots: Path
) -> None:
    """The page hears nothing of the re-post: only the answer's outcome tells it."""
    w, inbox = api_world, server.inbox
    item, _ = await inbox.post(
        w.agent, "schema", "Which schema?", "First take.", two_question_ask()
    )
    # The first stream passes the ready frame and drops; the resume is held.
    ready = await ready_frame(server.http_port, tok(w))
    resumed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    streams: list[Any] = []

    async def on_subscribe(route: Any) -> None:
        streams.append(route)
        if len(streams) == 1:
            await route.fulfill(
                status=200, headers={"content-type": "application/connect+json"}, body=ready
            )
        elif not resumed.done():
            resumed.set_result(route)
        else:
            await route.continue_()

    await page.route(SUBSCRIBE, on_subscribe)
    await page.goto(f"/#/inbox/{item.item_id}")
    await page.get_by_label("Account token").fill(tok(w))
    await page.get_by_label("Account token").press("Enter")
    old = ask_block(page, item.ask_id)
    await expect(old).to_be_visible()
    resume = await asyncio.wait_for(resumed, 10)
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "reconnecting")

    reposted, _ = await inbox.post(w.agent, "schema", "Which schema?", "Second take.", yes_no())
    await question(old, "db").get_by_label("PostgreSQL").check()
    async with page.expect_response(ANSWER) as answered:
        await old.get_by_role("button", name="Submit answers").click()
    assert json.loads(await (await answered.value).body())["outcome"] == (
        "INBOX_ANSWER_OUTCOME_NOT_OPEN"
    )
    await expect(old.get_by_role("status")).to_have_text(
        "Your answers weren't recorded — scout replaced this ask with a newer one."
    )
    await expect(old.locator("input")).to_have_count(0)
    await expect(old.get_by_role("button", name="Submit answers")).to_have_count(0)
    new = ask_block(page, reposted.ask_id)
    await expect(new.get_by_role("button", name="Submit answers")).to_be_enabled()
    await expect(new).to_contain_text("Ship it?")
    thread = page.get_by_role("list", name="Thread")
    await expect(thread.locator(".block-text")).to_have_text(["First take.", "Second take."])
    await page.screenshot(path=str(shots / "web-inbox-not-open.png"))

    await resume.continue_()
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    await expect(old.get_by_role("status")).to_have_text(
        "Your answers weren't recorded — scout replaced this ask with a newer one."
    )
    stored = await inbox.read_thread(w.human, item.item_id)
    assert [m.ask_status for m in stored.messages] == [AskStatus.REPLACED, AskStatus.OPEN]
    assert stored.item.status is InboxStatus.OPEN and stored.item.ask_id == reposted.ask_id


async def test_reply_then_close_without_answering(
    page: Any, api_world: World, server: Any, shots: Path
) -> None:
    w, inbox = api_world, server.inbox
    item, _ = await inbox.post(w.agent, "deploy", "Deploy now?", "Staging is green.", yes_no())
    gone, _ = await inbox.post(w.agent, "disk", "Clean the disk?", "", yes_no())
    await inbox.close_as_agent(w.agent, "disk", "The disk freed itself")
    await sign_in(page, tok(w))

    await inbox_link(page, "Inbox 1 open").click()
    # Handles come with the inbox too, before any message of the agent is seen.
    await expect(page.locator("#agent-list .agent-name")).to_have_text("scout")
    await page.locator(".inbox-row", has_text="Deploy now?").click()
    reply = page.get_by_label("Reply to scout")
    await reply.fill("Looking at the dashboards first.")
    await reply.press("Enter")
    thread = page.get_by_role("list", name="Thread")
    mine = thread.locator(".message").last
    await expect(mine.locator(".author")).to_have_text("ada")
    await expect(mine.locator(".block-text")).to_have_text("Looking at the dashboards first.")

    await page.get_by_role("button", name="Close without answering").click()
    form = ask_block(page, item.ask_id)
    await expect(form.get_by_role("status")).to_have_text("Closed without answering by ada.")
    await open_ended(form)
    await expect(page.get_by_role("button", name="Close without answering")).to_have_count(0)
    await expect(inbox_link(page, "Inbox")).to_be_visible()
    await expect(page.locator(".inbox-row")).to_have_count(0)

    # The agent's own close keeps its reason.
    await page.get_by_role("group", name="Show").get_by_role("button", name="Closed").click()
    await expect(page.locator(".inbox-row-title")).to_have_text(["Deploy now?", "Clean the disk?"])
    await page.locator(".inbox-row", has_text="Clean the disk?").click()
    await expect(ask_block(page, gone.ask_id).get_by_role("status")).to_have_text(
        "Withdrawn by scout: The disk freed itself."
    )
    await page.screenshot(path=str(shots / "web-inbox-withdrawn.png"))

    stored = await inbox.read_thread(w.human, item.item_id)
    assert stored.item.status is InboxStatus.CLOSED
    assert stored.item.closed_by == w.human.account_id and stored.item.close_reason == ""
    asked, replied = stored.messages
    assert asked.ask_status is AskStatus.WITHDRAWN and asked.withdrawn_reason == ""
    assert replied.author_id == w.human.account_id
    assert replied.blocks == (TextBlock("Looking at the dashboards first."),)


async def test_a_long_thread_shows_its_older_pages_on_asking(
    page: Any, api_world: World, server: Any, shots: Path
) -> None:
    w, inbox = api_world, server.inbox
    await inbox.post(w.agent, "long", "A long story", "m0 once upon a time")
    for i in range(1, 170):
        if i == 30:
            await inbox.post(w.agent, "long", "A long story", f"m{i} which way?", yes_no())
        else:
            await inbox.reply_as_agent(w.agent, "long", f"m{i}")
    await sign_in(page, tok(w))
    await inbox_link(page, "Inbox 1 open").click()
    await page.locator(".inbox-row", has_text="A long story").click()
    thread = page.get_by_role("list", name="Thread")
    texts = thread.locator(".message .block-text")
    note = page.locator(".inbox-cut")
    older = page.get_by_role("button", name="Show older messages")

    # The first page: the first message and the open ask, then the latest 50.
    await expect(texts).to_have_count(52)
    await expect(texts.nth(0)).to_have_text("m0 once upon a time")
    await expect(texts.nth(1)).to_have_text("m30 which way?")
    await expect(texts.nth(2)).to_have_text("m120")
    await expect(note).to_contain_text(
        "Showing 52 of 170 messages: the first, the open ask and the latest."
    )
    await older.click()
    await expect(texts).to_have_count(102)
    await expect(texts.nth(2)).to_have_text("m70")
    await older.click()
    # This page brings the open ask in its place; the first stays on top.
    await expect(texts).to_have_count(151)
    await expect(texts.nth(1)).to_have_text("m20")
    await expect(texts.nth(11)).to_have_text("m30 which way?")
    await expect(note).to_contain_text("Showing 151 of 170 messages: the first and the latest.")
    await note.scroll_into_view_if_needed()
    await page.screenshot(path=str(shots / "web-inbox-long-thread.png"))
    # An agent's reply refreshes the thread, read back at least as far as it
    # was shown: the pages' bounds moved by one, so here to the first message.
    await inbox.reply_as_agent(w.agent, "long", "m170")
    await expect(texts).to_have_count(171)
    await expect(note).to_be_hidden()
    await expect(texts).to_have_text(
        ["m0 once upon a time"]
        + [f"m{i} which way?" if i == 30 else f"m{i}" for i in range(1, 171)]
    )
