"""The page knows who is signed in (WhoAmI): it says so, and offers "take
back" and "reopen" on an inbox item only to the person who answered or closed
it. A real Chromium against the real server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Answer, AskStatus, InboxStatus
from tests.browser import ask_block, sign_in
from tests.test_inbox_store import yes_no
from tests.world import World

pytestmark = pytest.mark.browser


async def test_the_answerer_takes_back_and_the_closer_reopens(
    page: Any, browser: Any, api_world: World, server: Any, shots: Path
) -> None:
    w, inbox = api_world, server.inbox
    # grace sees scout's inbox too, but answered nothing.
    await inbox.grant(w.human, w.agent.account_id, w.other_human.account_id)
    answered, _ = await inbox.post(w.agent, "deploy", "Deploy now?", "", yes_no())
    result = await inbox.answer(w.human, answered.item_id, [Answer("go", ("y",))], "k1")
    assert result.item.status is InboxStatus.ANSWERED
    closed, _ = await inbox.post(w.agent, "disk", "Clean the disk?", "", yes_no())
    await inbox.close(w.human, closed.item_id)

    await sign_in(page, w.tokens[w.human.account_id])
    await expect(page.locator("#signed-in")).to_have_text("Signed in as ada (admin)")

    # The answerer takes the answer back: the ask waits again.
    await page.goto(f"/#/inbox/{answered.item_id}")
    take_back = page.get_by_role("button", name="Take back my answer")
    await expect(take_back).to_be_visible()
    await expect(page.get_by_role("button", name="Reopen")).to_have_count(0)
    await take_back.click()
    form = ask_block(page, answered.ask_id)
    await expect(form.get_by_role("button", name="Submit answers")).to_be_enabled()
    await expect(page.get_by_role("button", name="Close without answering")).to_be_visible()
    await expect(take_back).to_have_count(0)
    thread = await inbox.read_thread(w.human, answered.item_id)
    assert thread.item.status is InboxStatus.OPEN and thread.item.answered_by is None
    assert [m.ask_status for m in thread.messages] == [AskStatus.OPEN]

    # The closer reopens.
    await page.goto(f"/#/inbox/{closed.item_id}")
    reopen = page.get_by_role("button", name="Reopen")
    await expect(reopen).to_be_visible()
    await page.screenshot(path=str(shots / "web-inbox-reopen.png"))
    await reopen.click()
    await expect(
        ask_block(page, closed.ask_id).get_by_role("button", name="Submit answers")
    ).to_be_enabled()
    await expect(reopen).to_have_count(0)
    thread = await inbox.read_thread(w.human, closed.item_id)
    assert thread.item.status is InboxStatus.OPEN and thread.item.closed_by is None

    # grace, who neither answered nor closed, is offered neither.
    await inbox.answer(w.human, answered.item_id, [Answer("go", ("n",))], "k2")
    await inbox.close(w.human, closed.item_id)
    context = await browser.new_context(base_url=f"http://127.0.0.1:{server.http_port}")
    context.set_default_timeout(10_000)
    other = await context.new_page()
    try:
        await sign_in(other, w.tokens[w.other_human.account_id])
        await expect(other.locator("#signed-in")).to_have_text("Signed in as grace")
        for item in (answered, closed):
            await other.goto(f"/#/inbox/{item.item_id}")
            await expect(other.get_by_role("heading", name=item.title)).to_be_visible()
            await expect(other.locator(".inbox-item-header button")).to_have_count(0)
    finally:
        await context.close()
    # ada still is, on the answer she gave again.
    await page.goto(f"/#/inbox/{answered.item_id}")
    await expect(page.get_by_role("button", name="Take back my answer")).to_be_visible()
