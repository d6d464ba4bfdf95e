"""What a person sees, in a real Chromium at a desktop size (1280×800) and a
phone size (390×844): a header that keeps to one line, an ended ask as a
compact summary that opens, presence beside the agent it describes, the
desktop's width put to use, a Withdraw that asks to confirm, and the phone's
drawer over a dimmed page. Each test saves screenshots at both sizes in the
run's temporary folder (the `shots` fixture)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from compass_server.store.types import Answer, EndingKind, Surface
from tests.browser import DESKTOP, PHONE, ask_block, new_tab, question, sign_in
from tests.test_web_page import post_ask
from tests.world import World, two_question_ask

pytestmark = pytest.mark.browser

WITHDRAW = "**/compass.v1.CommsService/WithdrawAsk"
# Counts the lines an element's text takes: its line boxes, told apart by their tops.
LINES = """el => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = [...range.getClientRects()]
    .filter((r) => r.width > 1 && r.height > 1)
    .map((r) => r.top)
    .sort((a, b) => a - b);
  return tops.filter((top, i) => i === 0 || top - tops[i - 1] > 6).length;
}"""


@pytest.fixture(params=[DESKTOP, PHONE], ids=["desktop", "phone"])
def size(request: pytest.FixtureRequest) -> dict[str, int]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def tab(browser: Any, server: Any, size: dict[str, int]) -> Any:
    async with new_tab(browser, server, size) as page:
        yield page


def tok(w: World) -> str:
    return w.tokens[w.human.account_id]


def name_of(size: dict[str, int]) -> str:
    return "phone" if size is PHONE else "desktop"


async def lines(locator: Any) -> int:
    return await locator.evaluate(LINES)  # type: ignore[no-any-return]


async def no_sideways_scroll(page: Any, size: dict[str, int]) -> None:
    width = await page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= size["width"], width


async def scene(w: World) -> dict[str, str]:
    """A channel with talk, an answered, a withdrawn, a declined and an open ask."""
    await w.post_text(w.human, "Morning! Can you look at the schema migration before lunch?")
    await w.post_text(w.agent, "On it. I'll ask when I need a decision.")
    _, answered = await post_ask(w)
    await w.store.answer_ask(
        w.human,
        answered,
        [Answer("db", ("pg",), "we know it"), Answer("langs", ("py", "go"))],
        surface=Surface.WEB,
    )
    _, withdrawn = await post_ask(w)
    await w.store.withdraw_ask(w.human, withdrawn, surface=Surface.WEB)
    _, declined = await post_ask(w)
    await w.store.decline_ask(w.human, declined, "not before the audit", surface=Surface.WEB)
    await w.post_text(w.agent, "Thanks — one more question, then I'm done.")
    _, open_ = await post_ask(w)
    return {"answered": answered, "withdrawn": withdrawn, "declined": declined, "open": open_}


async def test_the_header_keeps_to_one_line(
    tab: Any, api_world: World, size: dict[str, int], shots: Path
) -> None:
    await sign_in(tab, tok(api_world))
    bar = tab.locator("header.topbar")
    await expect(tab.locator("#signed-in")).to_have_text("Signed in as ada (admin)")
    await expect(tab.locator("#live-status")).to_have_text("Live")
    box = await bar.bounding_box()
    assert box is not None and box["height"] <= 64, box
    parts = ["h1", "#live-status", "#signed-in", "#sign-out"]
    if size is PHONE:
        parts.append("#menu-toggle")
    for part in parts:
        el = bar.locator(part)
        await expect(el).to_be_visible()
        assert await lines(el) == 1, f"{part} wraps"
        inner = await el.bounding_box()
        assert inner is not None
        assert inner["x"] >= 0 and inner["x"] + inner["width"] <= size["width"], part
        assert inner["y"] >= box["y"] and inner["y"] + inner["height"] <= box["y"] + box["height"]
    assert await bar.evaluate("b => b.scrollWidth <= b.clientWidth")
    await no_sideways_scroll(tab, size)
    await tab.screenshot(path=str(shots / f"header-{name_of(size)}.png"))


async def test_an_ended_ask_is_a_compact_summary_that_opens(
    tab: Any, api_world: World, size: dict[str, int], shots: Path
) -> None:
    w = api_world
    asks = await scene(w)
    await sign_in(tab, tok(w))
    answered = ask_block(tab, asks["answered"])

    # Who ended it, how, and the answers; no form.
    await expect(answered.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(answered.locator("dd")).to_have_text(["PostgreSQL, “we know it”", "Python, Go"])
    await expect(answered.locator("dt").first).to_contain_text(
        "Which database should the service use?"
    )
    await expect(answered.locator("input, fieldset, button[type=submit]")).to_have_count(0)
    # The answer message beside it points at the ask instead of repeating it.
    note = tab.locator(f'.block-ask-answer[data-ask-id="{asks["answered"]}"]')
    await expect(note).to_have_text(re.compile(r"^ada answered scout's ask\."))
    await expect(note.locator("dd")).to_have_count(0)
    withdrawn = ask_block(tab, asks["withdrawn"])
    await expect(withdrawn.get_by_role("status")).to_have_text("Withdrawn by ada (owner)")
    await expect(withdrawn.locator(".ask-asked")).to_contain_text(
        "Which database should the service use?"
    )
    declined = ask_block(tab, asks["declined"])
    await expect(declined.get_by_role("status")).to_have_text(
        "Declined by ada: not before the audit"
    )
    await expect(
        ask_block(tab, asks["open"]).get_by_role("button", name="Submit answers")
    ).to_be_visible()
    await tab.locator(".channel-view .scroller").evaluate("s => s.scrollTop = 0")
    await tab.screenshot(path=str(shots / f"ended-{name_of(size)}.png"))
    collapsed = await answered.bounding_box()

    # Opened: the questions as they were answered, and the record.
    show = answered.get_by_role("button", name="Show the questions")
    await expect(show).to_have_attribute("aria-expanded", "false")
    await show.click()
    hide = answered.get_by_role("button", name="Hide the questions")
    await expect(hide).to_have_attribute("aria-expanded", "true")
    db = question(answered, "db")
    await expect(db.get_by_label("PostgreSQL")).to_be_checked()
    await expect(db.get_by_label("PostgreSQL")).to_be_disabled()
    await expect(db.get_by_label("Other")).to_have_value("we know it")
    record = answered.get_by_role("list", name="History").locator("li")
    await expect(record).to_have_text(
        [
            re.compile(r"^Posted by scout · .+$"),
            re.compile(r"^Answered by ada through the web page · .+$"),
        ]
    )
    opened = await answered.bounding_box()
    assert collapsed is not None and opened is not None
    assert collapsed["height"] * 2 < opened["height"], (collapsed, opened)
    await answered.scroll_into_view_if_needed()
    await tab.screenshot(path=str(shots / f"ended-opened-{name_of(size)}.png"))
    await hide.click()
    await expect(answered.locator("fieldset")).to_have_count(0)

    # The owner's withdraw reads as one, once.
    await withdrawn.get_by_role("button", name="Show the questions").click()
    lines_ = withdrawn.get_by_role("list", name="History").locator("li")
    await expect(lines_.nth(1)).to_have_text(
        re.compile(r"^Withdrawn by ada \(owner\) through the web page · .+$")
    )
    await expect(withdrawn).not_to_contain_text("by the owner by")
    await no_sideways_scroll(tab, size)


async def test_presence_describes_the_agent_not_each_message(
    tab: Any, api_world: World, size: dict[str, int], shots: Path
) -> None:
    w = api_world
    asks = await scene(w)
    await sign_in(tab, tok(w))
    await expect(ask_block(tab, asks["open"])).to_be_visible()
    await expect(tab.locator(".messages .presence-badge")).to_have_count(0)
    here = tab.get_by_role("list", name="Agents here")
    await expect(here.locator("li")).to_have_count(1)
    await expect(here.locator(".agent-name")).to_have_text("scout")
    await expect(here.locator(".presence-badge")).to_have_text("WAITING")
    await no_sideways_scroll(tab, size)
    await tab.screenshot(path=str(shots / f"presence-{name_of(size)}.png"))

    # It follows the agent: answered, scout no longer waits.
    await w.store.answer_ask(w.human, asks["open"], [Answer("db", ("my",)), Answer("langs")])
    await expect(here.locator(".presence-badge")).to_have_text("offline")
    await expect(tab.locator(".messages .presence-badge")).to_have_count(0)


async def test_the_width_is_put_to_use(
    tab: Any, api_world: World, size: dict[str, int], shots: Path
) -> None:
    w = api_world
    asks = await scene(w)
    await sign_in(tab, tok(w))
    form = ask_block(tab, asks["open"])
    await expect(form).to_be_visible()
    pane = await tab.locator(".channel-view .messages").bounding_box()
    box = await form.bounding_box()
    assert pane is not None and box is not None
    assert box["width"] >= 0.85 * pane["width"], (box, pane)
    tops = {
        round((await question(form, "langs").get_by_text(name, exact=True).bounding_box())["y"])
        for name in ("Python", "Go", "TS")
    }
    # Short choices sit side by side where there is room, one under another on a phone.
    assert len(tops) == (1 if size is DESKTOP else 3), tops
    answers = ask_block(tab, asks["answered"]).locator("dd")
    for i in range(await answers.count()):
        assert await lines(answers.nth(i)) == 1
    await no_sideways_scroll(tab, size)
    await tab.screenshot(path=str(shots / f"width-{name_of(size)}.png"))


async def test_withdraw_asks_to_confirm(
    tab: Any, api_world: World, size: dict[str, int], shots: Path
) -> None:
    w = api_world
    message, ask_id = await post_ask(w)
    sent: list[Any] = []
    tab.on("request", lambda r: sent.append(r) if r.url.endswith("/WithdrawAsk") else None)
    await sign_in(tab, tok(w))
    form = ask_block(tab, ask_id)
    withdraw = form.get_by_role("button", name="Withdraw ask")
    for button in ("Withdraw ask", "Decline…", "Submit answers"):
        assert await lines(form.get_by_role("button", name=button)) == 1, button

    await withdraw.click()
    confirm = form.get_by_role("group", name="Confirm withdrawing")
    await expect(confirm).to_contain_text("Withdraw this ask? scout stops waiting for an answer.")
    await expect(confirm.get_by_role("button", name="Keep it")).to_be_focused()
    await tab.screenshot(path=str(shots / f"withdraw-confirm-{name_of(size)}.png"))
    await confirm.get_by_role("button", name="Keep it").click()
    await expect(confirm).to_have_count(0)
    await expect(withdraw).to_be_focused()
    assert sent == []
    stored = (await w.store.get_message(w.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.ending is None

    await withdraw.click()
    await confirm.get_by_role("button", name="Withdraw", exact=True).click()
    await expect(form.get_by_role("status")).to_have_text("Withdrawn by ada (owner)")
    assert len(sent) == 1
    stored = (await w.store.get_message(w.human, message.message_id)).ask(ask_id)
    assert stored is not None and stored.ending is not None
    assert stored.ending.kind is EndingKind.WITHDRAWN_BY_OWNER


async def test_the_phone_drawer_dims_what_is_behind_it(
    tab: Any, api_world: World, size: dict[str, int], shots: Path
) -> None:
    w = api_world
    await scene(w)
    await sign_in(tab, tok(w))
    menu = tab.get_by_role("button", name="Menu")
    sidebar = tab.locator("nav.sidebar")
    scrim = tab.locator(".scrim")
    if size is DESKTOP:
        # Wide enough for both: the sidebar stays, nothing is dimmed.
        await expect(menu).to_be_hidden()
        await expect(sidebar).to_be_visible()
        await expect(scrim).to_be_hidden()
        await tab.screenshot(path=str(shots / "drawer-desktop.png"))
        return

    await menu.click()
    await expect(sidebar).to_be_visible()
    await expect(scrim).to_be_visible()
    behind = await tab.evaluate(
        """() => {
          const el = document.elementFromPoint(innerWidth - 20, innerHeight / 2);
          const alpha = getComputedStyle(el).backgroundColor.match(/[\\d.]+/g).map(Number)[3] ?? 1;
          return { scrim: el.classList.contains("scrim"), alpha,
                   inert: document.getElementById("view").inert };
        }"""
    )
    assert behind["scrim"] and behind["alpha"] >= 0.3 and behind["inert"], behind
    await tab.screenshot(path=str(shots / "drawer-phone.png"))

    # A tap on the dimmed page closes the drawer.
    await scrim.click(position={"x": size["width"] - 30, "y": 300})
    await expect(sidebar).to_be_hidden()
    await expect(scrim).to_be_hidden()
    await expect(menu).to_have_attribute("aria-expanded", "false")
    assert not await tab.evaluate('document.getElementById("view").inert')


async def test_an_inbox_item_reads_at_both_sizes(
    tab: Any, api_world: World, size: dict[str, int], server: Any, shots: Path
) -> None:
    w = api_world
    item, _ = await server.inbox.post(
        w.agent, "deploy", "Deploy now?", "Staging is green.", two_question_ask()
    )
    await sign_in(tab, tok(w))
    await tab.goto(f"/#/inbox/{item.item_id}")
    header = tab.locator(".inbox-item-header")
    await expect(header.get_by_role("heading", name="Deploy now?")).to_be_visible()
    # Whether the agent waits is said beside it.
    await expect(header.locator(".presence-badge")).to_have_text("WAITING")
    title = await header.get_by_role("heading", name="Deploy now?").bounding_box()
    assert title is not None and title["x"] < size["width"] / 2, title
    if size is PHONE:
        back = await header.get_by_role("link", name="Back to the inbox").bounding_box()
        assert back is not None and back["y"] + back["height"] <= title["y"], (back, title)
    form = ask_block(tab, item.ask_id)
    for button in ("Decline…", "Submit answers"):
        assert await lines(form.get_by_role("button", name=button)) == 1, button
    await no_sideways_scroll(tab, size)
    await tab.screenshot(path=str(shots / f"inbox-open-{name_of(size)}.png"))

    await question(form, "db").get_by_label("PostgreSQL").check()
    await form.get_by_role("button", name="Submit answers").click()
    await expect(form.get_by_role("status")).to_have_text("Answered by ada.")
    await expect(form.locator("dd")).to_have_text(["PostgreSQL", "(skipped)"])
    await expect(header.locator(".presence-badge")).to_have_text("offline")
    await no_sideways_scroll(tab, size)
    await tab.screenshot(path=str(shots / f"inbox-answered-{name_of(size)}.png"))
