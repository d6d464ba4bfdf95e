"""Follow-ups on the web page, in a real Chromium against the real server:
an ask's reminder and escalation show as they happen, and a person the
escalation added, who saw the ask read-only, may now answer it."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Ask, EndingKind, FollowUp
from tests.browser import ask_block, sign_in
from tests.test_web_page import design_ask, stage_picks
from tests.world import World

pytestmark = pytest.mark.browser

S = datetime.timedelta(seconds=1)


async def test_the_page_shows_the_steps_and_lets_the_person_added_answer(
    page: Any, api_world: World, shots: Path
) -> None:
    world = api_world
    grace = world.other_human
    await world.store.add_channel_member(world.human, world.channel.channel_id, grace.account_id)
    message = await world.store.append_message(
        world.agent,
        world.channel.channel_id,
        [
            dataclasses.replace(
                design_ask(),
                answerer_ids=(world.human.account_id,),
                follow_up=FollowUp(
                    remind_after=1.5 * S,
                    remind_times=1,
                    # Room for a loaded machine to sign grace in and show the
                    # ask before the escalation makes it hers.
                    escalate_after=10 * S,
                    escalate_to=(grace.account_id,),
                ),
            )
        ],
    )
    posted = message.blocks[0]
    assert isinstance(posted, Ask)
    await sign_in(page, world.tokens[grace.account_id])
    form = ask_block(page, posted.ask_id)
    # Named ada only: grace reads it.
    await expect(form).to_have_class("block-ask read-only")
    steps = form.get_by_role("list", name="Follow-ups")
    await expect(steps.locator("> li")).to_have_count(1, timeout=15_000)
    await expect(steps.locator("> li").first).to_contain_text("Reminded ada")
    await expect(steps.locator("> li")).to_have_count(2, timeout=30_000)
    await expect(steps.locator("> li").nth(1)).to_contain_text("Escalated to grace (urgent)")
    await expect(form).to_have_class("block-ask", timeout=15_000)
    await page.screenshot(path=str(shots / "web-follow-ups-escalated.png"), full_page=True)
    await stage_picks(form)
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("status")).to_contain_text("Answered by grace")
    _, ask = await world.store.get_ask(world.human, posted.ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.ANSWERED
    await expect(page.get_by_role("alert")).to_have_count(0)
