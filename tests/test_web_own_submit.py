"""A person's own submit reads as their answer (or their decline) every time,
also when the live update of it lands before the call's reply does. The
browser holds the reply back until the page shows the update, so that order
happens on every run. A real Chromium against the real server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import EndingKind, InboxStatus
from tests.browser import ask_block, question, sign_in
from tests.test_web_page import post_ask, stage_picks
from tests.world import World, two_question_ask

pytestmark = pytest.mark.browser

DROPPED = "Your unsent answers were cleared."
RESPOND = "**/compass.v1.CommsService/RespondToAsk"
DECLINE = "**/compass.v1.CommsService/DeclineAsk"
ANSWER_INBOX = "**/compass.v1.InboxService/AnswerInboxAsk"


async def ends_first(
    page: Any, form: Any, pattern: str, status: str, act: Callable[[], Awaitable[None]]
) -> None:
    """Does `act` (a submit, a decline) with the call's reply held until the page
    shows its live update (`status`), then checks that it still reads as the
    person's own: no word of input lost, no error."""
    handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def hold(route: Any) -> None:
        try:
            response = await route.fetch()
            await expect(form.get_by_role("status")).to_have_text(status)
            await route.fulfill(response=response)
            handed.set_result(None)
        except Exception as exc:  # the test's own failure, reported by awaiting the future
            handed.set_exception(exc)
            await route.abort()

    await page.route(pattern, hold)
    await act()
    await asyncio.wait_for(handed, 15)
    await expect(form.get_by_role("status")).to_have_text(status)
    await expect(page.get_by_text(DROPPED)).to_have_count(0)
    await expect(page.get_by_role("alert")).to_have_count(0)


async def test_an_answer_whose_update_lands_first_reads_as_the_answer(
    page: Any, api_world: World
) -> None:
    world = api_world
    message, ask_id = await post_ask(world)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)

    async def submit() -> None:
        await stage_picks(form)
        await form.get_by_role("button", name="Submit answers").click()

    await ends_first(page, form, RESPOND, "Answered by ada.", submit)
    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.answered
    assert [q.chosen_option_ids for q in stored.questions] == [("pg",), ("py", "go")]


async def test_a_decline_whose_update_lands_first_reads_as_the_decline(
    page: Any, api_world: World
) -> None:
    world = api_world
    message, ask_id = await post_ask(world)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)

    async def decline() -> None:
        await stage_picks(form)
        await form.get_by_role("button", name="Decline…").click()
        await form.get_by_label("Reason (optional)").fill("later")
        await form.get_by_role("button", name="Decline", exact=True).click()

    await ends_first(page, form, DECLINE, "Declined by ada: later", decline)
    stored = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.ending is not None
    assert (stored.ending.kind, stored.ending.reason) == (EndingKind.DECLINED, "later")


async def test_an_inbox_answer_whose_update_lands_first_reads_as_the_answer(
    page: Any, api_world: World, server: Any
) -> None:
    world = api_world
    item, _ = await server.inbox.post(
        world.agent, "schema", "Which schema?", "", two_question_ask()
    )
    await sign_in(page, world.tokens[world.human.account_id])
    await page.goto(f"/#/inbox/{item.item_id}")
    form = ask_block(page, item.ask_id)

    async def submit() -> None:
        await question(form, "db").get_by_label("PostgreSQL").check()
        await form.get_by_role("button", name="Submit answers").click()

    await ends_first(page, form, ANSWER_INBOX, "Answered by ada.", submit)
    stored = await server.inbox.read_thread(world.human, item.item_id)
    assert stored.item.status is InboxStatus.ANSWERED
