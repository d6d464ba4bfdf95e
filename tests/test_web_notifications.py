"""The page reaches the signed-in person while its tab is in the background:
an ask for them counts in the tab's title and shows a browser notification
(once they turned notifications on, by a click, never on load); clicking the
notification opens the ask. And a link to an ask (`#/ask/<id>`, as webhooks
carry) opens its channel with the ask in view.

Headless Chromium keeps every tab visible, so the tests say when the tab is
hidden through `document.visibilityState` (the API the page reads), and
record the notifications the page makes with the browser's own Notification
(a subclass that keeps each one, so a test can click it)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Ask
from tests.browser import ask_block, sign_in, until
from tests.world import World, two_question_ask

pytestmark = pytest.mark.browser

WATCH = """
(() => {
  let hidden = false;
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true, get() { return hidden ? "hidden" : "visible"; } });
  Object.defineProperty(Document.prototype, "hidden", {
    configurable: true, get() { return hidden; } });
  window.__setHidden = (value) => {
    hidden = value;
    document.dispatchEvent(new Event("visibilitychange"));
  };
  window.__asked = 0;
  window.__notes = [];
  const Real = window.Notification;
  const request = Real.requestPermission.bind(Real);
  Real.requestPermission = (...args) => { window.__asked += 1; return request(...args); };
  window.Notification = class extends Real {
    constructor(title, options) { super(title, options); window.__notes.push(this); }
  };
})();
"""


@pytest.fixture
async def tab(browser: Any, server: Any) -> Any:
    """A page whose origin may show notifications."""
    context = await browser.new_context(
        base_url=f"http://127.0.0.1:{server.http_port}",
        viewport={"width": 1200, "height": 900},
        permissions=["notifications"],
    )
    context.set_default_timeout(10_000)
    await context.add_init_script(WATCH)
    page = await context.new_page()
    crashes: list[str] = []
    page.on("pageerror", lambda exc: crashes.append(str(exc)))
    yield page
    await context.close()
    assert not crashes, crashes


async def notes(page: Any) -> list[dict[str, str]]:
    return await page.evaluate(  # type: ignore[no-any-return]
        "window.__notes.map(n => ({title: n.title, body: n.body, tag: n.tag}))"
    )


async def post_ask(w: World, ask: Ask | None = None) -> str:
    m = await w.post_ask(w.agent, ask or two_question_ask())
    return next(b.ask_id for b in m.blocks if isinstance(b, Ask))


async def test_permission_is_asked_for_on_a_click_never_on_load(
    browser: Any, server: Any, api_world: World
) -> None:
    context = await browser.new_context(base_url=f"http://127.0.0.1:{server.http_port}")
    await context.add_init_script(WATCH)
    page = await context.new_page()
    try:
        await sign_in(page, api_world.tokens[api_world.human.account_id])
        prompt = page.get_by_role("button", name="Turn on notifications")
        await expect(prompt).to_be_visible()
        assert await page.evaluate("Notification.permission") == "default"
        assert await page.evaluate("window.__asked") == 0
        await prompt.click()
        await until(lambda: _asked(page), "the permission request")
        await expect(prompt).to_be_disabled()
    finally:
        await context.close()


async def _asked(page: Any) -> bool:
    return bool(await page.evaluate("window.__asked") == 1)


async def test_an_ask_in_the_background_counts_in_the_title_and_notifies(
    tab: Any, server: Any, api_world: World
) -> None:
    w = api_world
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    await sign_in(tab, w.tokens[w.human.account_id])
    await expect(tab.get_by_role("button", name="Turn on notifications")).to_be_hidden()
    await expect(tab).to_have_title("Compass")
    # Seen in the open tab, an ask counts nothing.
    await post_ask(w)
    await tab.wait_for_timeout(300)
    assert await notes(tab) == []

    await tab.evaluate("window.__setHidden(true)")
    first = await post_ask(w)
    await expect(tab).to_have_title("(1) Compass")
    (note,) = await notes(tab)
    assert note == {"title": "scout asks in #general", "body": "Which database?", "tag": first}
    # An ask for someone else, or a plain message, is not for ada.
    grace_only = Ask(
        questions=two_question_ask().questions, answerer_ids=(w.other_human.account_id,)
    )
    await post_ask(w, grace_only)
    await w.post_text(w.agent, "just saying")
    item, _ = await server.inbox.post(w.agent, "deploy", "Deploy?", "Shall I?", two_question_ask())
    await expect(tab).to_have_title("(2) Compass")
    inbox_note = (await notes(tab))[1]
    assert inbox_note["title"] == "scout asks in its inbox"
    assert inbox_note["tag"] == f"inbox:{item.item_id}"

    # Clicking the notification opens the ask: its channel, the ask in view.
    await tab.evaluate("window.__notes[0].dispatchEvent(new Event('click'))")
    form = ask_block(tab, first)
    await expect(form).to_be_visible()
    await expect(tab.locator("li.message.focused")).to_have_count(1)
    await expect(tab.locator("li.message.focused form")).to_have_attribute("data-ask-id", first)
    assert f"#/channel/{w.channel.channel_id}" in tab.url
    await tab.evaluate("window.__setHidden(false)")
    await expect(tab).to_have_title("Compass")


async def test_a_link_to_an_ask_opens_its_channel_with_the_ask_in_view(
    tab: Any, api_world: World
) -> None:
    w = api_world
    first = await post_ask(w)
    for i in range(40):
        await w.post_text(w.agent, f"filler {i}")
    await sign_in(tab, w.tokens[w.human.account_id])
    await tab.evaluate(f"location.hash = '#/ask/{first}'")
    form = ask_block(tab, first)
    await expect(form).to_be_in_viewport()
    await expect(tab.locator("li.message.focused")).to_have_count(1)
    await tab.evaluate("location.hash = '#/ask/ask_nope'")
    await expect(tab.get_by_text("That ask isn't here, or you can't see it.")).to_be_visible()


async def test_a_person_who_turned_the_page_off_gets_the_count_but_no_notification(
    tab: Any, server: Any, api_world: World
) -> None:
    from compass_server.notify.preferences import Preferences

    w = api_world
    await server.push.set_preferences(w.human, Preferences(False, True, "named", None, None, "UTC"))
    await sign_in(tab, w.tokens[w.human.account_id])
    # The page reads the person's choice as it starts.
    await tab.wait_for_timeout(300)
    await tab.evaluate("window.__setHidden(true)")
    await post_ask(w)
    await expect(tab).to_have_title("(1) Compass")
    await tab.wait_for_timeout(300)
    assert await notes(tab) == []
