"""The web page where people answer, in a real Chromium against the real server."""

from __future__ import annotations

import asyncio
import json
import re
import struct
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from compass_server.store.types import Answer, Ask, AskOption, AskQuestion, TextBlock
from tests.browser import (
    ask_block,
    open_ended,
    presence_badge,
    question,
    sign_in,
)
from tests.world import World

pytestmark = pytest.mark.browser

WITHDRAWN = "Withdrawn by the asker — no longer taking answers."
REFUSED = "Your answers weren't recorded: the ask had already ended."
RESPOND = "**/compass.v1.CommsService/RespondToAsk"
SUBSCRIBE = "**/compass.v1.CommsService/Subscribe"


def design_ask() -> Ask:
    """A single-select question with descriptions, a preview and a recommendation,
    and a multi-select one."""
    return Ask(
        questions=(
            AskQuestion(
                question_id="db",
                question="Which database should the service use?",
                header="Storage",
                options=(
                    AskOption(
                        "pg",
                        "PostgreSQL",
                        "Row locks and LISTEN/NOTIFY, already in production.",
                        "CREATE TABLE asks (id uuid PRIMARY KEY, blocks jsonb);",
                    ),
                    AskOption("my", "MySQL", "What the billing team runs."),
                ),
                recommended=0,
            ),
            AskQuestion(
                question_id="langs",
                question="Which languages should the SDK ship in?",
                header="SDK",
                options=(AskOption("py", "Python"), AskOption("go", "Go"), AskOption("ts", "TS")),
                allow_multiple=True,
            ),
        )
    )


async def post_ask(world: World) -> tuple[Any, str]:
    message = await world.store.append_message(
        world.agent, world.channel.channel_id, [design_ask()]
    )
    ask = message.blocks[0]
    assert isinstance(ask, Ask)
    return message, ask.ask_id


async def stage_picks(form: Any) -> None:
    await question(form, "db").get_by_label("PostgreSQL").check()
    langs = question(form, "langs")
    await langs.get_by_label("Python").check()
    await langs.get_by_label("Go").check()
    await langs.get_by_label("Other").fill("Rust, later")


async def expect_withdrawn_and_empty(page: Any, form: Any) -> None:
    await expect(form.get_by_role("status")).to_have_text(WITHDRAWN)
    await expect(form).to_have_class("block-ask ended cancelled")
    await expect(form.get_by_role("button", name="Submit answers")).to_have_count(0)
    await expect(page.get_by_role("alert")).to_have_count(0)
    # Opened, it shows the questions as they were left: nothing picked, nothing usable.
    toggle = form.get_by_role("button", name=re.compile(r"^(Show|Hide) the questions$"))
    if await toggle.get_attribute("aria-expanded") == "false":
        await toggle.click()
    choices = form.locator("input[type=radio], input[type=checkbox]")
    assert await choices.count() == 5
    for i in range(5):
        await expect(choices.nth(i)).to_be_disabled()
        await expect(choices.nth(i)).not_to_be_checked()
    for qid in ("db", "langs"):
        other = question(form, qid).locator("input[type=text]")
        await expect(other).to_be_disabled()
        await expect(other).to_have_value("")


async def messages_in(world: World) -> list[Any]:
    page_ = await world.store.list_messages(world.human, world.channel.channel_id, 50, "")
    return page_.items


async def test_answering_a_two_question_ask(page: Any, api_world: World, shots: Path) -> None:
    world = api_world
    message, ask_id = await post_ask(world)
    await sign_in(page, world.tokens[world.human.account_id])

    form = ask_block(page, ask_id)
    await expect(form).to_be_visible()
    await expect(presence_badge(page, world.agent.account_id)).to_have_text("WAITING")
    db = question(form, "db")
    await expect(db.locator("legend")).to_contain_text("Storage")
    await expect(db.locator("legend")).to_contain_text("Which database should the service use?")
    await expect(db.locator(".ask-option.recommended")).to_contain_text("PostgreSQL")
    await expect(db.locator(".ask-option.recommended")).to_contain_text("Recommended")
    await expect(db).to_contain_text("Row locks and LISTEN/NOTIFY, already in production.")
    await expect(db.locator("pre")).to_have_text(
        "CREATE TABLE asks (id uuid PRIMARY KEY, blocks jsonb);"
    )
    await expect(db.locator("input[type=radio]")).to_have_count(2)
    await expect(question(form, "langs").locator("input[type=checkbox]")).to_have_count(3)

    await stage_picks(form)
    await page.screenshot(path=str(shots / "web-ask-form.png"), full_page=True)
    # Enter in a field submits the whole form.
    await question(form, "langs").get_by_label("Other").press("Enter")

    # The ask sums itself up with the answers; the answer message points at it.
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(form.locator("dd")).to_have_text(["PostgreSQL", "Python, Go, “Rust, later”"])
    await expect(form.locator("input")).to_have_count(0)
    answer = page.locator(f'.block-ask-answer[data-ask-id="{ask_id}"]')
    await expect(answer).to_contain_text("ada answered scout's ask.")
    await expect(presence_badge(page, world.agent.account_id)).to_have_text("offline")
    await page.screenshot(path=str(shots / "web-ask-answered.png"), full_page=True)

    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.answered and not stored.cancelled
    assert [(q.chosen_option_ids, q.custom_text) for q in stored.questions] == [
        (("pg",), ""),
        (("py", "go"), "Rust, later"),
    ]
    assert len(await messages_in(world)) == 2


async def test_withdrawn_while_the_answer_is_in_flight(page: Any, api_world: World) -> None:
    """The cancel's push arrives while the submit is held, then the submit is refused."""
    world = api_world
    message, ask_id = await post_ask(world)
    held: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    await page.route(RESPOND, lambda route: held.set_result(route))
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await stage_picks(form)

    await form.get_by_role("button", name="Submit answers").click()
    respond = await asyncio.wait_for(held, 10)
    await expect(form).to_have_attribute("aria-busy", "true")
    await world.store.cancel_ask(world.agent, ask_id)
    await expect(form.get_by_role("status")).to_have_text(WITHDRAWN)
    await expect(presence_badge(page, world.agent.account_id)).to_have_text("offline")

    async with page.expect_response(RESPOND) as refused:
        await respond.continue_()
    assert (await refused.value).status == 409
    await expect_withdrawn_and_empty(page, form)
    await expect(form.locator(".ask-dropped")).to_have_text(REFUSED)

    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.cancelled and not stored.answered
    assert len(await messages_in(world)) == 1


async def ready_frame(port: int, token: str) -> bytes:
    """The server's first Subscribe envelope (the ready frame with the cursor)."""
    body = b'{"afterEventId": "0"}'
    async with (
        httpx.AsyncClient() as http,
        http.stream(
            "POST",
            f"http://127.0.0.1:{port}/compass.v1.CommsService/Subscribe",
            headers={
                "content-type": "application/connect+json",
                "authorization": f"Bearer {token}",
            },
            content=b"\0" + struct.pack(">I", len(body)) + body,
        ) as response,
    ):
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            if len(buffer) >= 5 and len(buffer) >= 5 + struct.unpack(">I", buffer[1:5])[0]:
                return buffer[: 5 + struct.unpack(">I", buffer[1:5])[0]]
    raise AssertionError("the stream ended before its ready frame")


async def test_withdrawn_before_the_push_arrives(
    page: Any, api_world: World, server: Any, shots: Path
) -> None:
    """The submit is refused as cancelled first; the cancel's push arrives after."""
    world = api_world
    token = world.tokens[world.human.account_id]
    _, ask_id = await post_ask(world)
    # A proxy on the stream: the first passes the server's ready frame and then
    # drops; the page's resume is held until the refusal has been seen.
    ready = await ready_frame(server.http_port, token)
    cursor = json.loads(ready[5:])["eventId"]
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
    await page.goto("/")
    await page.get_by_label("Account token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    form = ask_block(page, ask_id)
    await expect(form).to_be_visible()
    resume = await asyncio.wait_for(resumed, 10)
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "reconnecting")
    envelope = resume.request.post_data_buffer
    assert json.loads(envelope[5:]) == {"afterEventId": cursor}

    await stage_picks(form)
    await world.store.cancel_ask(world.agent, ask_id)
    async with page.expect_response(RESPOND) as refused:
        await form.get_by_role("button", name="Submit answers").click()
    response = await refused.value
    assert response.status == 409
    assert (await response.json())["message"] == f"ask {ask_id!r} is already withdrawn"
    await expect_withdrawn_and_empty(page, form)
    await expect(form.locator(".ask-dropped")).to_have_text(REFUSED)
    # Nothing pushed yet: the presence change comes with the resumed stream.
    await expect(presence_badge(page, world.agent.account_id)).to_have_text("WAITING")

    await resume.continue_()
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    await expect(presence_badge(page, world.agent.account_id)).to_have_text("offline")
    await expect_withdrawn_and_empty(page, form)
    await page.screenshot(path=str(shots / "web-ask-withdrawn.png"), full_page=True)
    assert len(await messages_in(world)) == 1


async def test_an_answered_ask_is_read_only(page: Any, api_world: World) -> None:
    world = api_world
    _, ask_id = await post_ask(world)
    await world.store.answer_ask(
        world.human,
        ask_id,
        [Answer("db", ("my",), "only if ops agrees"), Answer("langs", ("ts",))],
    )
    await sign_in(page, world.tokens[world.human.account_id])

    form = ask_block(page, ask_id)
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(form).to_have_class("block-ask ended answered")
    await expect(form.locator("dd")).to_have_text(["MySQL, “only if ops agrees”", "TS"])
    await open_ended(form)
    await expect(question(form, "db").get_by_label("MySQL")).to_be_checked()
    await expect(question(form, "db").get_by_label("PostgreSQL")).not_to_be_checked()
    await expect(question(form, "db").get_by_label("Other")).to_have_value("only if ops agrees")
    await expect(question(form, "langs").get_by_label("TS")).to_be_checked()
    await expect(question(form, "langs").get_by_label("Python")).not_to_be_checked()
    answer = page.locator(f'.block-ask-answer[data-ask-id="{ask_id}"]')
    await expect(answer).to_have_text("ada answered scout's ask. Go to the ask")
    await expect(presence_badge(page, world.agent.account_id)).to_have_text("offline")


async def test_the_focus_stays_where_it_was_when_an_ask_is_drawn_again(
    page: Any, api_world: World
) -> None:
    """An ask's history arrives after the person went to the ask: drawing
    it again keeps the focus on the same control."""
    world = api_world
    _, ask_id = await post_ask(world)
    await world.post_text(world.agent, "meanwhile")
    await world.store.answer_ask(world.human, ask_id, [Answer("db", ("pg",)), Answer("langs")])
    held: list[Any] = []
    released = asyncio.Event()

    async def late(route: Any) -> None:
        held.append(route)
        await released.wait()
        await route.continue_()

    await page.route("**/compass.v1.CommsService/GetAskHistory", late)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    answer = page.locator(f'.block-ask-answer[data-ask-id="{ask_id}"]')
    await answer.get_by_role("button", name="Go to the ask").click()
    toggle = form.get_by_role("button", name="Show the questions")
    await expect(toggle).to_be_focused()
    assert held, "the page asked for the ask's history"
    drawn = page.locator(".message", has=form)
    await drawn.evaluate("el => { el.dataset.before = 'yes'; }")
    released.set()
    # Drawn again with its history: a new element, the focus on its toggle.
    await expect(drawn).not_to_have_attribute("data-before", "yes")
    await expect(toggle).to_be_focused()


async def test_an_answer_far_from_its_ask_carries_the_answers(page: Any, api_world: World) -> None:
    world = api_world
    _, ask_id = await post_ask(world)
    for i in range(50):
        await world.post_text(world.agent, f"meanwhile {i}")
    await world.store.answer_ask(world.human, ask_id, [Answer("db", ("pg",)), Answer("langs")])
    await sign_in(page, world.tokens[world.human.account_id])

    # The ask is older than the page shows: the answer says what was answered.
    answer = page.locator(f'.block-ask-answer[data-ask-id="{ask_id}"]')
    await expect(answer).to_contain_text("ada answered an ask:")
    await expect(answer.locator("dd")).to_have_text(["PostgreSQL", "(skipped)"])
    await expect(ask_block(page, ask_id)).to_have_count(0)

    # Once the ask is shown, the answer leads to it.
    await page.get_by_role("button", name="Show older messages").click()
    form = ask_block(page, ask_id)
    await expect(form.locator("dd")).to_have_text(["PostgreSQL", "(skipped)"])
    await expect(answer).to_have_text("ada answered scout's ask. Go to the ask")
    await answer.get_by_role("button", name="Go to the ask").click()
    await expect(form.get_by_role("button", name="Show the questions")).to_be_focused()
    await expect(form).to_be_in_viewport()


async def test_server_errors_are_shown_readable(page: Any, api_world: World) -> None:
    world = api_world
    await page.goto("/")
    await page.get_by_label("Account token").fill("not-a-token")
    await page.get_by_label("Account token").press("Enter")
    await expect(page.get_by_role("alert")).to_have_text("Sign-in failed: the token is not valid.")

    _, ask_id = await post_ask(world)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await question(form, "db").get_by_label("MySQL").check()
    await question(form, "langs").get_by_label("Other").fill("x" * 10_001)
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("alert")).to_have_text(
        "Your answers weren't sent: question 'langs' answer text is 10001 characters;"
        " the limit is 10000."
    )
    # The picks stay staged so the answer can be fixed and sent again.
    await expect(question(form, "db").get_by_label("MySQL")).to_be_checked()
    await question(form, "langs").get_by_label("Other").fill("short")
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(page.get_by_role("alert")).to_have_count(0)


async def test_channels_and_messages_stay_live(page: Any, api_world: World) -> None:
    world = api_world
    await world.post_text(world.human, "first")
    await world.post_text(world.agent, "second")
    await sign_in(page, world.tokens[world.human.account_id])
    texts = page.locator(".messages .block-text")
    await expect(texts).to_have_text(["first", "second"])
    await expect(page.locator(".view-header h2")).to_have_text("# general")

    composer = page.get_by_label("Message #general")
    await composer.fill("third, from the page")
    await composer.press("Enter")
    await expect(texts).to_have_text(["first", "second", "third, from the page"])
    await world.store.append_message(world.agent, world.channel.channel_id, [TextBlock("fourth")])
    await expect(texts).to_have_text(["first", "second", "third, from the page", "fourth"])
    assert [
        b.text
        for m in reversed(await messages_in(world))
        for b in m.blocks
        if isinstance(b, TextBlock)
    ] == ["first", "second", "third, from the page", "fourth"]

    await world.store.create_channel(world.agent, "ops", "deploys", [world.human.account_id])
    ops = page.locator("#channel-list a", has_text="# ops")
    await expect(ops).to_be_visible()
    await ops.click()
    await expect(page.get_by_role("heading", level=2, name="# ops")).to_be_visible()
    await expect(page.locator(".view-header .topic")).to_have_text("deploys")


async def test_submitting_with_every_question_skipped_asks_to_confirm(
    page: Any, api_world: World
) -> None:
    world = api_world
    message, ask_id = await post_ask(world)
    sent: list[Any] = []
    page.on("request", lambda r: sent.append(r) if r.url.endswith("/RespondToAsk") else None)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)

    await form.get_by_role("button", name="Submit answers").click()
    confirm = form.get_by_role("group", name="Confirm skipping")
    await expect(confirm).to_contain_text("Submit with every question skipped?")
    await confirm.get_by_role("button", name="Go back").click()
    await expect(confirm).to_have_count(0)
    await expect(form.get_by_role("button", name="Submit answers")).to_be_focused()
    assert sent == []
    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and not stored.answered

    # Enter in a field submits too, and asks the same.
    await question(form, "db").get_by_label("Other").press("Enter")
    await form.get_by_role("button", name="Skip every question").click()
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.answered
    assert [(q.chosen_option_ids, q.custom_text) for q in stored.questions] == [((), ""), ((), "")]
    assert len(sent) == 1


async def test_one_answer_is_enough_to_submit_without_confirming(
    page: Any, api_world: World
) -> None:
    world = api_world
    message, ask_id = await post_ask(world)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await question(form, "langs").get_by_label("Other").fill("whatever ships")
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.questions[1].custom_text == "whatever ships"


async def option_look(option: Any) -> list[str]:
    # An element redrawn between finding and reading it has no style (it left
    # the document): read the one drawn now.
    for _ in range(20):
        look: list[str] = await option.evaluate(
            """o => { if (!o.isConnected) return null; const s = getComputedStyle(o);
                      return [s.borderTopColor, s.borderTopStyle, s.backgroundColor]; }"""
        )
        if look is not None:
            return look
        await asyncio.sleep(0.1)
    raise AssertionError("the option never stayed in the page long enough to be read")


async def test_an_unchosen_recommendation_does_not_look_chosen_once_answered(
    page: Any, api_world: World
) -> None:
    world = api_world
    _, ask_id = await post_ask(world)  # db recommends PostgreSQL
    await world.store.answer_ask(world.human, ask_id, [Answer("db", ("my",)), Answer("langs")])
    await sign_in(page, world.tokens[world.human.account_id])
    await open_ended(ask_block(page, ask_id))
    db = question(ask_block(page, ask_id), "db")
    recommended = db.locator(".ask-option", has_text="PostgreSQL")
    chosen = db.locator(".ask-option", has_text="MySQL")
    plain = question(ask_block(page, ask_id), "langs").locator(".ask-option").first
    await expect(chosen.locator("input")).to_be_checked()
    assert await option_look(recommended) == await option_look(plain)
    assert await option_look(recommended) != await option_look(chosen)


async def test_an_out_of_range_recommendation_shows_as_none(page: Any, api_world: World) -> None:
    world = api_world
    ask = Ask(
        questions=(
            AskQuestion("db", "Which?", options=(AskOption("pg", "PostgreSQL"),), recommended=3),
            AskQuestion("why", "Why?", recommended=-1),
        )
    )
    message = await world.store.append_message(world.agent, world.channel.channel_id, [ask])
    ask_id = message.blocks[0].ask_id  # type: ignore[union-attr]
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await expect(form).to_be_visible()
    await expect(form.locator(".recommended")).to_have_count(0)
    await expect(form).not_to_contain_text("Recommended")
