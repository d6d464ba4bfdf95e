"""Quorum asks and standing answers on the web page, in a real Chromium
against the real server: a quorum ask says how many it needs and shows each
vote as it lands; a person who voted sees their vote as final; the ending
lists every answer. An answer made standing answers the agent's next such
ask at its post, which the page shows answered by the rule; the person's
Standing answers list shows it, and revoking it leaves the next ask open."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Answer, Ask, EndingKind, Surface
from tests.browser import ask_block, open_ended, question, sign_in
from tests.test_web_page import design_ask, stage_picks
from tests.world import World

pytestmark = pytest.mark.browser

MY = [Answer("db", ("my",)), Answer("langs", ("ts",))]


async def post(world: World, ask: Ask) -> str:
    message = await world.store.append_message(world.agent, world.channel.channel_id, [ask])
    posted = message.blocks[0]
    assert isinstance(posted, Ask)
    return posted.ask_id


async def test_a_quorum_ask_shows_each_vote_and_ends_with_every_answer(
    page: Any, api_world: World, shots: Path
) -> None:
    world = api_world
    grace = world.other_human
    cy = await world.add_account("cy")
    for person in (grace, cy):
        await world.store.add_channel_member(
            world.human, world.channel.channel_id, person.account_id
        )
    ask_id = await post(
        world,
        dataclasses.replace(
            design_ask(),
            answerer_ids=(world.human.account_id, grace.account_id, cy.account_id),
            quorum=2,
        ),
    )
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    progress = form.locator(".ask-quorum-progress")
    await expect(progress).to_have_text(
        "Needs 2 answers of ada, grace, cy: 0 so far; a decline by any of them ends it."
    )
    # grace votes elsewhere: the page shows it as it lands.
    await world.store.answer_ask(grace, ask_id, MY)
    await expect(progress).to_contain_text("1 so far")
    votes = form.get_by_role("list", name="Votes")
    await expect(votes.locator("> li")).to_have_count(1)
    await expect(votes.locator("> li").first).to_contain_text("grace answered")
    await expect(votes.locator("> li").first).to_contain_text("MySQL")

    await stage_picks(form)
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("status")).to_have_text("Answered by grace, ada (2 of 2).")
    answers = form.get_by_role("list", name="Answers")
    await expect(answers.locator("> li")).to_have_count(2)
    await expect(answers.locator("> li").nth(1)).to_contain_text("ada answered")
    await expect(answers.locator("> li").nth(1)).to_contain_text("PostgreSQL")
    await open_ended(form)
    history = form.get_by_role("list", name="History")
    await expect(history.locator("li").nth(1)).to_contain_text(
        re.compile(r"^Answered by grace, toward the quorum · ")
    )
    await expect(page.get_by_role("alert")).to_have_count(0)
    await page.screenshot(path=str(shots / "web-quorum-answered.png"), full_page=True)


async def test_a_vote_is_final_for_the_person_who_made_it(
    page: Any, api_world: World, shots: Path
) -> None:
    world = api_world
    grace = world.other_human
    await world.store.add_channel_member(world.human, world.channel.channel_id, grace.account_id)
    ask_id = await post(
        world,
        dataclasses.replace(
            design_ask(), answerer_ids=(world.human.account_id, grace.account_id), quorum=2
        ),
    )
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await stage_picks(form)
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.locator(".ask-your-vote")).to_have_text(
        "You answered; it waits for 1 more answer."
    )
    await expect(form.get_by_role("button", name="Submit answers")).to_have_count(0)
    await expect(question(form, "db").get_by_label("PostgreSQL")).to_be_disabled()
    await page.screenshot(path=str(shots / "web-quorum-voted.png"), full_page=True)
    await world.store.answer_ask(grace, ask_id, MY)
    await expect(form.get_by_role("status")).to_have_text("Answered by ada, grace (2 of 2).")


async def test_a_standing_answer_made_on_the_page_answers_the_next_ask_until_revoked(
    page: Any, api_world: World, shots: Path
) -> None:
    world = api_world
    first = await post(world, design_ask())
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, first)
    await stage_picks(form)
    await form.get_by_label("Answer scout's asks like this the same way from now on").check()
    await form.get_by_label("for", exact=True).select_option(label="7 days")
    await page.screenshot(path=str(shots / "web-standing-option.png"), full_page=True)
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(form.locator(".ask-standing-made")).to_contain_text("Your answer stands until")

    second = await post(world, design_ask())
    later = ask_block(page, second)
    await expect(later.get_by_role("status")).to_have_text("Answered by ada's standing answer.")
    await open_ended(later)
    await expect(later.get_by_role("list", name="History").locator("li").nth(1)).to_contain_text(
        re.compile(r"^Answered by ada through a standing answer")
    )
    stored = (await world.store.get_ask(world.human, second))[1]
    assert stored.ending is not None and stored.ending.kind is EndingKind.ANSWERED
    assert stored.ending.surface is Surface.STANDING_ANSWER

    await page.get_by_role("link", name="Standing answers").click()
    rule = page.locator(".standing-answer")
    await expect(rule).to_have_count(1)
    await expect(rule.get_by_role("heading")).to_have_text("For scout")
    await expect(rule.locator(".standing-state")).to_contain_text("answered 1 ask")
    await expect(rule).to_contain_text("PostgreSQL")
    await page.screenshot(path=str(shots / "web-standing-list.png"), full_page=True)
    await rule.get_by_role("button", name="Revoke").click()
    await expect(page.get_by_text("You have no standing answers.")).to_be_visible()
    await page.get_by_label("Show revoked and expired ones").check()
    await expect(rule.locator(".standing-state")).to_contain_text("Revoked")

    third = await post(world, design_ask())
    await page.goto(f"/#/channel/{world.channel.channel_id}")
    await expect(
        ask_block(page, third).get_by_role("button", name="Submit answers")
    ).to_be_visible()


async def test_an_agents_ask_drawn_before_presence_came_offers_a_standing_answer(
    page: Any, api_world: World
) -> None:
    """The page draws the messages it has as they come: an ask drawn before
    the workspace's presence said its author is an agent gains the option
    when it does."""
    world = api_world
    ask_id = await post(world, design_ask())

    async def late(route: Any) -> None:
        await asyncio.sleep(1.5)
        await route.continue_()

    await page.route("**/compass.v1.CommsService/GetPresence", late)
    await sign_in(page, world.tokens[world.human.account_id])
    form = ask_block(page, ask_id)
    await expect(form).to_be_visible()
    option = form.get_by_label("Answer scout's asks like this the same way from now on")
    await expect(option).to_be_visible()
    await option.check()
    await expect(form.get_by_label("for", exact=True)).to_be_visible()
