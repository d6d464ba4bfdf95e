"""Every ending on the web page, in a real Chromium against the real server:
the Decline button and its reason, the deadline's countdown and the expiry,
an ask that names its answerers (read-only for anyone else), the owner's
Withdraw, the history under the ask, and an ending that lands while the form
is open."""

from __future__ import annotations

import dataclasses
import datetime
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Ask, EndingKind, Surface
from tests.browser import ask_block, open_ended, question, sign_in
from tests.test_web_page import design_ask, messages_in, stage_picks
from tests.world import World

pytestmark = pytest.mark.browser

EXPIRED = "Expired — no answer was given in time"
DROPPED = "Your unsent answers were cleared."


async def post(world: World, **fields: Any) -> tuple[Any, str]:
    ask = dataclasses.replace(design_ask(), **fields)
    message = await world.store.append_message(world.agent, world.channel.channel_id, [ask])
    posted = message.blocks[0]
    assert isinstance(posted, Ask)
    return message, posted.ask_id


async def stored(world: World, message: Any, ask_id: str) -> Ask:
    ask = (await world.store.get_message(world.human, message.message_id)).ask(ask_id)
    assert ask is not None
    return ask


async def expect_read_only(form: Any) -> None:
    """An open ask the reader may not answer: every field shown, none usable."""
    choices = form.locator("input[type=radio], input[type=checkbox], input[type=text]")
    assert await choices.count() > 0
    for i in range(await choices.count()):
        await expect(choices.nth(i)).to_be_disabled()
    await expect(form.get_by_role("button", name="Submit answers")).to_have_count(0)
    await expect(form.get_by_role("button", name="Decline…")).to_have_count(0)


async def test_declining_with_a_reason(page: Any, api_world: World, shots: Path) -> None:
    world = api_world
    message, ask_id = await post(world)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    history = form.get_by_role("list", name="History")
    # An open ask's record holds only its posting, which the message itself says.
    await expect(form.get_by_role("button", name="Decline…")).to_be_visible()
    await expect(history).to_have_count(0)

    await form.get_by_role("button", name="Decline…").click()
    reason = form.get_by_label("Reason (optional)")
    await expect(reason).to_be_focused()
    await reason.fill("not before the audit")
    await form.get_by_role("button", name="Decline", exact=True).click()

    await expect(form.get_by_role("status")).to_have_text("Declined by ada: not before the audit")
    await open_ended(form)
    await expect(history.locator("li")).to_have_count(2)
    await expect(history.locator("li").first).to_contain_text("Posted by scout")
    await expect(history.locator("li").nth(1)).to_contain_text(
        re.compile(r"^Declined by ada through the web page · .+: not before the audit$")
    )
    await expect(page.get_by_role("alert")).to_have_count(0)
    await page.screenshot(path=str(shots / "web-ask-declined.png"), full_page=True)

    ask = await stored(world, message, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.DECLINED
    assert (ask.ending.reason, ask.ending.surface) == ("not before the audit", Surface.WEB)
    assert not ask.answered and not ask.cancelled
    assert len(await messages_in(world)) == 1


async def test_the_countdown_runs_and_an_expiry_lands_on_an_open_form(
    page: Any, api_world: World
) -> None:
    world = api_world
    # Long enough to sign in and stage picks on a busy machine before it expires.
    message, ask_id = await post(world, timeout=datetime.timedelta(seconds=8))
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    countdown = form.locator(".ask-deadline")
    await expect(countdown).to_have_text(re.compile(r"^Expires in [1-8]s$"))
    first = await countdown.text_content()
    await expect(countdown).not_to_have_text(first or "")  # it ticks
    await stage_picks(form)

    await expect(form.get_by_role("status")).to_have_text(EXPIRED, timeout=15_000)
    await expect(countdown).to_have_count(0)
    await expect(form.locator(".ask-dropped")).to_have_text(DROPPED)
    await open_ended(form)
    for qid in ("db", "langs"):
        await expect(question(form, qid).locator("input[type=text]")).to_have_value("")
    await expect(form.locator("input:checked")).to_have_count(0)
    await expect(form.get_by_role("list", name="History").locator("li").nth(1)).to_contain_text(
        "Expired through the server"
    )
    await expect(page.get_by_role("alert")).to_have_count(0)
    ask = await stored(world, message, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.EXPIRED


async def test_an_ask_for_named_people_is_read_only_for_others_and_the_owner_withdraws_it(
    page: Any, api_world: World, browser: Any, server: Any, shots: Path
) -> None:
    world = api_world
    grace = world.other_human
    await world.store.add_channel_member(world.human, world.channel.channel_id, grace.account_id)
    message, ask_id = await post(world, answerer_ids=(grace.account_id,))

    # grace is named: she may answer or decline.
    other = await browser.new_context(base_url=f"http://127.0.0.1:{server.http_port}")
    try:
        graces = await other.new_page()
        await sign_in(graces, world.tokens[grace.account_id])
        theirs = ask_block(graces, ask_id)
        await expect(theirs.locator(".ask-answerers")).to_have_text("Asked of grace")
        await expect(theirs.get_by_role("button", name="Decline…")).to_be_visible()
        await expect(theirs.get_by_role("button", name="Submit answers")).to_be_enabled()
        await expect(theirs.get_by_role("button", name="Withdraw ask")).to_have_count(0)

        # ada isn't: read-only, but she owns the agent and may withdraw its ask.
        await sign_in(page, world.tokens[world.human.account_id])
        form = ask_block(page, ask_id)
        await expect(form.locator(".ask-answerers")).to_have_text("Asked of grace")
        await expect(form.get_by_role("button", name="Withdraw ask")).to_be_visible()
        await expect_read_only(form)
        await page.screenshot(path=str(shots / "web-ask-named.png"), full_page=True)

        await stage_nothing_possible(form)
        await form.get_by_role("button", name="Withdraw ask").click()
        await (
            form.get_by_role("group", name="Confirm withdrawing")
            .get_by_role("button", name="Withdraw", exact=True)
            .click()
        )
        await expect(form.get_by_role("status")).to_have_text("Withdrawn by ada (owner)")
        await expect(form.get_by_role("button", name="Withdraw ask")).to_have_count(0)
        # grace's open form hears it live.
        await expect(theirs.get_by_role("status")).to_have_text("Withdrawn by ada (owner)")
        await open_ended(theirs)
        await expect(
            theirs.get_by_role("list", name="History").locator("li").nth(1)
        ).to_contain_text("Withdrawn by ada (owner) through the web page")
    finally:
        await other.close()
    ask = await stored(world, message, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.WITHDRAWN_BY_OWNER
    assert ask.cancelled and ask.ending.surface is Surface.WEB


async def stage_nothing_possible(form: Any) -> None:
    """A read-only form takes no picks."""
    radio = question(form, "db").get_by_label("PostgreSQL")
    await expect(radio).to_be_disabled()


async def test_a_decline_elsewhere_lands_on_an_open_form_with_staged_input(
    page: Any, api_world: World
) -> None:
    world = api_world
    grace = world.other_human
    await world.store.add_channel_member(world.human, world.channel.channel_id, grace.account_id)
    _, ask_id = await post(world)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await stage_picks(form)
    await form.get_by_role("button", name="Decline…").click()
    await form.get_by_label("Reason (optional)").fill("half typed")

    await world.store.decline_ask(grace, ask_id, "we shipped it already", surface=Surface.GRPC)
    await expect(form.get_by_role("status")).to_have_text(
        "Declined by grace: we shipped it already"
    )
    await expect(form.locator(".ask-dropped")).to_have_text(DROPPED)
    await open_ended(form)
    await expect(form.get_by_label("Reason (optional)")).to_have_count(0)
    await expect(form.locator("input:checked")).to_have_count(0)
    await expect(form.get_by_role("list", name="History").locator("li").nth(1)).to_contain_text(
        "Declined by grace through gRPC"
    )
    await expect(page.get_by_role("alert")).to_have_count(0)


async def test_declining_an_inbox_ask(page: Any, api_world: World, server: Any) -> None:
    world, inbox = api_world, server.inbox
    item, _ = await inbox.post(
        world.agent, "deploy", "Deploy now?", "Staging is green.", design_ask()
    )
    await sign_in(page, world.tokens[world.human.account_id])
    await page.goto(f"/#/inbox/{item.item_id}")
    form = ask_block(page, item.ask_id)
    await stage_picks(form)
    await form.get_by_role("button", name="Decline…").click()
    await form.get_by_label("Reason (optional)").fill("not this week")
    await form.get_by_role("button", name="Decline", exact=True).click()

    await expect(form.get_by_role("status")).to_have_text("Declined by ada: not this week")
    await open_ended(form)
    await expect(page.locator(".inbox-item-header .inbox-status")).to_have_text("Closed")
    await expect(page.get_by_role("button", name="Close without answering")).to_have_count(0)
    await expect(page.get_by_role("alert")).to_have_count(0)
    stored_item = await inbox.read_thread(world.human, item.item_id)
    (asked,) = stored_item.messages
    assert asked.ask is not None and asked.ask.ending is not None
    assert (asked.ask.ending.kind, asked.ask.ending.reason) == (
        EndingKind.DECLINED,
        "not this week",
    )
    assert asked.ask.ending.surface is Surface.INBOX
