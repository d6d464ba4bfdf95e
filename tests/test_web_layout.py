"""The page's frame in a real Chromium: the channel list scrolls in its own
pane, names resolve on every route, a phone-width layout, and the favicon."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from compass_server.store.types import AccountKind, TextBlock
from tests.browser import ask_block, presence_badge, question, sign_in, until
from tests.relay_client import relay, runner_for
from tests.test_inbox_store import yes_no
from tests.test_web_page import post_ask
from tests.world import World

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
# The smallest comfortable touch target, in CSS pixels.
THUMB = 44


def tok(w: World) -> str:
    return w.tokens[w.human.account_id]


async def scroll_state(page: Any) -> dict[str, float]:
    return await page.evaluate(  # type: ignore[no-any-return]
        """() => {
          const s = document.querySelector('.channel-view .scroller');
          return {top: s.scrollTop, max: s.scrollHeight - s.clientHeight,
                  page: document.scrollingElement.scrollHeight - innerHeight};
        }"""
    )


async def in_viewport(locator: Any) -> bool:
    box = await locator.bounding_box()
    height = await locator.page.evaluate("innerHeight")
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height + 1


async def test_the_message_list_scrolls_in_its_pane(page: Any, api_world: World) -> None:
    w = api_world
    for i in range(40):
        await w.post_text(w.agent if i % 2 else w.human, f"message {i}\nwith a second line")
    await sign_in(page, tok(w))
    newest = page.locator(".messages .message").last
    await expect(newest).to_contain_text("message 39")

    # It opens at the newest message; the page itself never scrolls.
    await until(lambda: in_viewport(newest), "the newest message in view")
    state = await scroll_state(page)
    assert state["page"] <= 0 and state["max"] > 0 and state["top"] >= state["max"] - 2
    composer = page.get_by_label("Message #general")
    sidebar = page.locator("nav.sidebar")
    assert await in_viewport(composer)
    before = await sidebar.bounding_box()

    # Scrolled up, a new message doesn't pull the person down.
    await page.locator(".channel-view .scroller").evaluate("s => s.scrollTop = 0")
    await w.store.append_message(w.agent, w.channel.channel_id, [TextBlock("while you read")])
    await expect(page.locator(".messages .message").last).to_contain_text("while you read")
    assert (await scroll_state(page))["top"] == 0
    assert await in_viewport(composer) and await sidebar.bounding_box() == before

    # At the bottom, a new message comes into view.
    await page.locator(".channel-view .scroller").evaluate("s => s.scrollTop = s.scrollHeight")
    await w.store.append_message(w.agent, w.channel.channel_id, [TextBlock("latest")])
    latest = page.locator(".messages .message").last
    await expect(latest).to_contain_text("latest")
    await until(lambda: in_viewport(latest), "the latest message in view")


async def test_showing_older_messages_keeps_the_place(page: Any, api_world: World) -> None:
    w = api_world
    for i in range(60):
        await w.post_text(w.human, f"message {i}")
    await sign_in(page, tok(w))
    await expect(page.locator(".messages .message")).to_have_count(50)
    await page.locator(".channel-view .scroller").evaluate("s => s.scrollTop = 0")
    first = page.locator(".messages .message", has_text="message 10")
    before = await first.bounding_box()
    await page.get_by_role("button", name="Show older messages").click()
    await expect(page.locator(".messages .message")).to_have_count(60)
    after = await first.bounding_box()
    assert before is not None and after is not None
    assert abs(after["y"] - before["y"]) < 2


async def test_names_resolve_on_every_route_even_before_anyone_posts(
    page: Any, api_world: World, server: Any
) -> None:
    w = api_world
    await w.store.open_dm(w.human, w.other_human.account_id)
    await sign_in(page, tok(w))
    await page.goto("/#/inbox")
    await page.reload()
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    agents = page.locator("#agent-list .agent-name")
    await expect(agents).to_have_text(["scout"])
    await expect(page.locator("#dm-list a")).to_have_text(
        [re.compile(r"^(ada, grace|grace, ada)$")]
    )
    await expect(page.locator("nav")).not_to_contain_text("account ")
    # An agent that shows up later (its runner binds it) resolves too.
    ranger = await w.add_account("ranger", AccountKind.AGENT)
    async with relay(server.grpc_port, await runner_for(w, ranger)) as r:
        await r.bound("s", ranger)
        await expect(agents).to_have_text(["ranger", "scout"])
        await expect(page.locator("nav")).not_to_contain_text("account ")


async def test_a_phone_width_layout(
    browser: Any, server: Any, api_world: World, shots: Path
) -> None:
    w = api_world
    message, ask_id = await post_ask(w)
    await w.store.append_message(
        w.agent, w.channel.channel_id, [TextBlock("a-very-long-unbroken-word-" * 12)]
    )
    context = await browser.new_context(
        base_url=f"http://127.0.0.1:{server.http_port}", viewport=PHONE, has_touch=True
    )
    context.set_default_timeout(10_000)
    page = await context.new_page()
    crashes: list[str] = []
    page.on("pageerror", lambda exc: crashes.append(str(exc)))
    try:
        await sign_in(page, tok(w))

        async def no_sideways_scroll() -> None:
            width = await page.evaluate("document.scrollingElement.scrollWidth")
            assert width <= PHONE["width"], width

        # The sidebar waits behind a button.
        menu = page.get_by_role("button", name="Menu")
        sidebar = page.locator("nav.sidebar")
        await expect(menu).to_be_visible()
        await expect(menu).to_have_attribute("aria-expanded", "false")
        await expect(sidebar).to_be_hidden()
        form = ask_block(page, ask_id)
        await expect(form).to_be_visible()
        await no_sideways_scroll()
        await page.screenshot(path=str(shots / "web-phone-ask.png"))

        # The ask form is usable with a thumb.
        for option in await form.locator(".ask-option").all():
            box = await option.bounding_box()
            assert box is not None and box["height"] >= THUMB and box["width"] <= PHONE["width"]
        submit = form.get_by_role("button", name="Submit answers")
        box = await submit.bounding_box()
        assert box is not None and box["height"] >= THUMB
        await question(form, "db").get_by_text("PostgreSQL").tap()
        await question(form, "langs").get_by_text("Go", exact=True).tap()
        await expect(question(form, "db").get_by_label("PostgreSQL")).to_be_checked()
        await submit.tap()
        await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
        stored = (await w.store.get_message(w.human, message.message_id)).ask(ask_id)
        assert stored is not None
        assert [q.chosen_option_ids for q in stored.questions] == [("pg",), ("go",)]
        await no_sideways_scroll()

        # The menu opens the sidebar over the view and closes when a place is picked.
        await menu.tap()
        await expect(menu).to_have_attribute("aria-expanded", "true")
        await expect(sidebar).to_be_visible()
        await expect(presence_badge(page, w.agent.account_id)).to_be_visible()
        await page.screenshot(path=str(shots / "web-phone-menu.png"))
        await sidebar.get_by_role("link", name="Inbox").tap()
        await expect(sidebar).to_be_hidden()
        await expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
        await no_sideways_scroll()

        # An inbox item reads on its own, with a way back to the list.
        item, _ = await server.inbox.post(w.agent, "k", "Ship it?", "", yes_no())
        await page.goto(f"/#/inbox/{item.item_id}")
        thread_form = ask_block(page, item.ask_id)
        await expect(thread_form).to_be_visible()
        await expect(page.locator(".inbox-list-pane")).to_be_hidden()
        await no_sideways_scroll()
        await thread_form.get_by_text("Yes").tap()
        await thread_form.get_by_role("button", name="Submit answers").tap()
        await expect(thread_form.get_by_role("status")).to_contain_text("Answered")
        await page.get_by_role("link", name="Back to the inbox").tap()
        await expect(page.locator(".inbox-list-pane")).to_be_visible()
        await no_sideways_scroll()
    finally:
        await context.close()
    assert not crashes, crashes


async def test_the_page_has_a_favicon(page: Any, server: Any) -> None:
    await page.goto("/")
    href = await page.locator('link[rel="icon"]').get_attribute("href")
    assert href
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"http://127.0.0.1:{server.http_port}{href}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/")


async def test_on_a_phone_an_ask_opened_from_its_address_shows_its_top_and_keeps_submit_in_reach(
    browser: Any, server: Any, api_world: World, shots: Path
) -> None:
    from compass_server.store.types import Answer, Ask, AskQuestion
    from tests.browser import new_tab
    from tests.test_link_page import INTRO, billing_ask

    w = api_world
    long_question = (
        "Which of the three regions should take the overflow traffic while the primary "
        "cluster is being rebuilt over the weekend?"
    )
    answered = await w.store.append_message(
        w.agent,
        w.channel.channel_id,
        [
            Ask(
                questions=(
                    AskQuestion(question_id="region", question=long_question, header="Overflow"),
                ),
                answerer_ids=(w.human.account_id,),
            )
        ],
    )
    answered_id = next(b.ask_id for b in answered.blocks if isinstance(b, Ask))
    await w.store.answer_ask(w.human, answered_id, [Answer("region", (), "eu-west")])
    tall = await w.store.append_message(
        w.agent, w.channel.channel_id, [TextBlock(INTRO), billing_ask(w.human)]
    )
    ask_id = next(b.ask_id for b in tall.blocks if isinstance(b, Ask))
    for i in range(30):
        await w.post_text(w.agent, f"filler {i}")
    async with new_tab(browser, server, PHONE) as page:
        await sign_in(page, tok(w))
        await page.goto(f"/#/ask/{ask_id}")
        message = page.locator(f'li.message[data-message-id="{tall.message_id}"]')
        await expect(message).to_have_class(re.compile("focused"))

        # The message's top (who asks, and why) is in view, not scrolled past.
        async def top_in_view() -> bool:
            box = await message.bounding_box()
            pane = await page.locator(".channel-view .scroller").bounding_box()
            return (
                box is not None
                and pane is not None
                and pane["y"] - 1 <= box["y"] <= pane["y"] + pane["height"] / 3
            )

        await until(top_in_view, "the ask's top in view")
        await expect(message.get_by_text(INTRO)).to_be_in_viewport()
        # Submit is in reach though the ask is taller than the screen.
        form = ask_block(page, ask_id)
        assert (await form.bounding_box() or {"height": 0})["height"] > PHONE["height"]
        submit = form.get_by_role("button", name="Submit answers")
        pane = await page.locator(".channel-view .scroller").bounding_box()
        box = await submit.bounding_box()
        assert pane is not None and box is not None
        assert pane["y"] <= box["y"] and box["y"] + box["height"] <= pane["y"] + pane["height"] + 1
        await page.screenshot(path=str(shots / "web-phone-ask-opened.png"))
        # And it sends: the questions scrolled by, the bar stayed.
        await question(form, "db").get_by_label("MySQL").check()
        await submit.click()
        await expect(form.locator(".ask-ending-line")).to_have_text("Answered by ada.")

        # An answered question is read whole: it wraps, it is never cut with "…".
        summary = ask_block(page, answered_id)
        await summary.scroll_into_view_if_needed()
        text = summary.locator(".ask-answers dt .question-text")
        await expect(text).to_have_text(long_question)
        cut = await text.evaluate(
            """(el) => ({ over: el.scrollWidth > el.clientWidth + 1,
                          style: getComputedStyle(el).textOverflow,
                          lines: Math.round(el.getBoundingClientRect().height /
                                 parseFloat(getComputedStyle(el).lineHeight || 20)) })"""
        )
        assert not cut["over"] and cut["style"] != "ellipsis", cut
        await page.screenshot(path=str(shots / "web-phone-answered-wraps.png"))
