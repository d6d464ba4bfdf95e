"""The page names a sub-agent through the agents above it ("scout › planner")
wherever it names an author or an agent, in a real Chromium."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Ask, TextBlock
from tests.browser import ask_block, question, sign_in
from tests.test_web_page import design_ask, stage_picks
from tests.world import World

pytestmark = pytest.mark.browser

GET_ACCOUNTS = "**/compass.v1.CommsService/GetAccounts"


async def test_the_page_names_a_subagent_through_its_chain(page: Any, api_world: World) -> None:
    w = api_world
    general = w.channel.channel_id
    planner = await w.add_subagent("planner", w.agent)
    message = await w.store.append_message(planner, general, [design_ask()])
    (ask,) = message.blocks
    assert isinstance(ask, Ask)
    # The accounts are read only once the messages are drawn: the names go in place then.
    held: list[Any] = []
    released = asyncio.Event()

    async def hold(route: Any) -> None:
        if released.is_set():
            await route.continue_()
        else:
            held.append(route)

    await page.route(GET_ACCOUNTS, hold)
    await sign_in(page, w.tokens[w.human.account_id])
    form = ask_block(page, ask.ask_id)
    await expect(form).to_have_attribute("aria-label", "Ask from planner")
    released.set()
    for route in held:
        await route.continue_()

    mine = page.locator(f'[data-message-id="{message.message_id}"]')
    await expect(mine.locator(".message-meta .author")).to_have_text("scout › planner")
    await expect(form).to_have_attribute("aria-label", "Ask from scout › planner")
    agents = page.locator("#agent-list .agent-name")
    await expect(agents).to_have_text(["scout", "scout › planner"])

    # One more level, posting live while the page is open.
    worker = await w.add_subagent("worker", planner)
    live = await w.store.append_message(worker, general, [TextBlock("from below")])
    said = page.locator(f'[data-message-id="{live.message_id}"] .message-meta .author')
    await expect(said).to_have_text("scout › planner › worker")
    # An ask drawn before its author's chain was read is named once it is.
    checker = await w.add_subagent("checker", planner)
    late = await w.store.append_message(checker, general, [design_ask()])
    (late_ask,) = late.blocks
    assert isinstance(late_ask, Ask)
    await expect(ask_block(page, late_ask.ask_id)).to_have_attribute(
        "aria-label", "Ask from scout › planner › checker"
    )

    # The person answers the sub-agent's own question; the answer names whose it was.
    await stage_picks(form)
    await question(form, "langs").get_by_label("Other").press("Enter")
    answer = page.locator(f'.block-ask-answer[data-ask-id="{ask.ask_id}"]')
    await expect(answer).to_contain_text("ada answered scout › planner's ask")
