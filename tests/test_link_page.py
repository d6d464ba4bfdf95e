"""The page a one-ask link opens, in Debian's Chromium at a phone's size and
a desktop's, light and dark: who asks and why at the top, the ask drawn by
the app's own component (header, descriptions, previews, the recommended
mark, free text, decline with a reason, quorum progress, the countdown, the
ending and who ended it), used with the keyboard, checked by axe-core, and
screenshots saved. Also the race of a notification's tap and the page."""

from __future__ import annotations

import asyncio
import datetime
import re
from typing import Any

import httpx
import pytest

from compass_server.store.links import MintedLink
from compass_server.store.types import (
    Answer,
    Ask,
    AskAnswerBlock,
    AskOption,
    AskQuestion,
    EndingKind,
    TextBlock,
)
from tests.browser import DESKTOP, PHONE, accessibility_problems, ask_block, new_tab, question
from tests.world import World

pytestmark = pytest.mark.timeout(120)

INTRO = (
    "I'm splitting billing out of the monolith. Two choices block me before I write the migration."
)
PREVIEW = "CREATE TABLE invoices (\n  id bigint PRIMARY KEY,\n  total numeric NOT NULL\n);"
SIZES = [("390", PHONE), ("1280", DESKTOP)]


def billing_ask(*people: Any, **more: Any) -> Ask:
    return Ask(
        questions=(
            AskQuestion(
                question_id="db",
                question="Which database should the billing service use?",
                header="Storage",
                options=(
                    AskOption("pg", "PostgreSQL", "Transactions, and the team knows it", PREVIEW),
                    AskOption("my", "MySQL", "What the old service ran"),
                ),
                recommended=0,
            ),
            AskQuestion(
                question_id="langs",
                question="Which languages may the workers be written in?",
                header="Languages",
                options=(AskOption("py", "Python"), AskOption("go", "Go"), AskOption("ts", "TS")),
                allow_multiple=True,
            ),
            AskQuestion(
                question_id="notes",
                question="Anything I should know before I start?",
                header="Notes",
            ),
        ),
        answerer_ids=tuple(p.account_id for p in people),
        **more,
    )


async def posted(w: World, ask: Ask, intro: str = INTRO) -> str:
    message = await w.store.append_message(w.agent, w.channel.channel_id, [TextBlock(intro), ask])
    return next(b.ask_id for b in message.blocks if isinstance(b, Ask))


async def mint(w: World, ask_id: str, who: Any) -> MintedLink:
    return await w.store.mint_ask_link(w.workspace_id, ask_id, who.account_id)


async def no_problems(tab: Any, what: str) -> None:
    problems = await accessibility_problems(tab)
    assert not problems, f"{what}: " + "\n".join(problems)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "size"), SIZES)
async def test_the_link_page_shows_the_whole_ask_and_passes_axe(
    api_world: World, browser: Any, server: Any, shots: Any, width: str, size: Any, scheme: str
) -> None:
    from playwright.async_api import expect

    w = api_world
    ask_id = await posted(w, billing_ask(w.human, timeout=datetime.timedelta(hours=2, minutes=5)))
    link = await mint(w, ask_id, w.human)
    async with new_tab(browser, server, size, color_scheme=scheme) as tab:
        await tab.goto(f"/a/{link.secret}")
        # Who asks and why, first; whose answer it records.
        await expect(tab.get_by_role("heading", level=1)).to_have_text("scout asks")
        await expect(tab.get_by_text(INTRO)).to_be_visible()
        await expect(tab.get_by_text("Your answer is recorded as ada.")).to_be_visible()
        form = ask_block(tab, ask_id)
        db = question(form, "db")
        await expect(db.locator("legend")).to_contain_text("Storage")
        await expect(db.locator("legend")).to_contain_text(
            "Which database should the billing service use?"
        )
        pg = db.locator(".ask-option").filter(has_text="PostgreSQL")
        await expect(pg.locator(".recommended-tag")).to_have_text("Recommended")
        await expect(pg.get_by_text("Transactions, and the team knows it")).to_be_visible()
        await expect(pg.locator(".option-preview")).to_contain_text("CREATE TABLE invoices")
        await expect(db.get_by_label("PostgreSQL")).to_have_accessible_description(
            re.compile("Transactions, and the team knows it")
        )
        await expect(question(form, "langs").get_by_text("Choose any")).to_be_visible()
        await expect(question(form, "notes").get_by_label("Your answer")).to_be_visible()
        await expect(form.locator(".ask-deadline")).to_have_text(
            re.compile(r"Expires in 2h 0[45]m")
        )
        await expect(form.locator(".ask-answerers")).to_have_text("Asked of ada")
        await expect(form.get_by_role("button", name="Decline…")).to_be_visible()
        submit = form.get_by_role("button", name="Submit answers")
        await expect(submit).to_be_visible()
        # The top of the page, who asks, is where it opens.
        assert await tab.evaluate("window.scrollY") == 0
        if size is PHONE:
            # Submit is in reach without scrolling to the ask's end.
            box = await submit.bounding_box()
            assert box is not None and box["y"] + box["height"] <= size["height"], box
        await no_problems(tab, f"the open ask at {width} ({scheme})")
        await tab.screenshot(path=str(shots / f"link-open-{width}-{scheme}.png"))

        await db.get_by_label("PostgreSQL").check()
        await question(form, "langs").get_by_label("Go").check()
        await question(form, "notes").get_by_label("Your answer").fill("Keep the old ids.")
        await submit.click()
        await expect(
            tab.get_by_role("status").filter(has_text="Your answer was recorded.")
        ).to_be_visible()
        await expect(form.locator(".ask-ending-line")).to_have_text("Answered by ada.")
        await expect(form.locator(".ask-answers")).to_contain_text("PostgreSQL")
        await no_problems(tab, f"the answered ask at {width} ({scheme})")
        await tab.screenshot(
            path=str(shots / f"link-answered-{width}-{scheme}.png"), full_page=True
        )
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.ending.actor_id == w.human.account_id
    assert [q.chosen_option_ids for q in ask.questions] == [("pg",), ("go",), ()]
    assert ask.questions[2].custom_text == "Keep the old ids."


async def test_the_link_page_is_answered_with_the_keyboard_alone(
    api_world: World, browser: Any, server: Any
) -> None:
    from playwright.async_api import expect

    w = api_world
    ask_id = await posted(w, billing_ask(w.human))
    link = await mint(w, ask_id, w.human)
    async with new_tab(browser, server, PHONE) as tab:
        await tab.goto(f"/a/{link.secret}")
        form = ask_block(tab, ask_id)
        await expect(form).to_be_visible()
        # Tab order follows the page: the first question's first choice comes first.
        order: list[str] = []
        for _ in range(12):
            await tab.keyboard.press("Tab")
            order.append(
                await tab.evaluate(
                    """() => {
                         const el = document.activeElement;
                         const label = el.labels?.[0]?.innerText.split("\\n")[0];
                         return label || el.innerText || el.id;
                       }"""
                )
            )
        assert order[0] == "PostgreSQL", order
        assert order.index("Other") < order.index("Python") < order.index("Your answer"), order
        assert order.index("Your answer") < order.index("Decline…") < order.index("Submit answers")
        # Space picks, typing fills in, Enter in a field sends the form.
        await tab.keyboard.press("Shift+Tab")
        await tab.reload()
        await expect(form).to_be_visible()
        await tab.keyboard.press("Tab")
        await tab.keyboard.press("ArrowDown")  # MySQL
        for _ in range(20):
            if await tab.evaluate("document.activeElement.labels?.[0]?.innerText") == "Your answer":
                break
            await tab.keyboard.press("Tab")
        await tab.keyboard.type("Keyboard only.")
        await tab.keyboard.press("Enter")
        await expect(form.locator(".ask-ending-line")).to_have_text("Answered by ada.")
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.questions[0].chosen_option_ids == ("my",)
    assert ask.questions[2].custom_text == "Keyboard only."


async def test_the_link_page_declines_with_a_reason(
    api_world: World, browser: Any, server: Any, shots: Any
) -> None:
    from playwright.async_api import expect

    w = api_world
    ask_id = await posted(w, billing_ask(w.human))
    link = await mint(w, ask_id, w.human)
    async with new_tab(browser, server, PHONE) as tab:
        await tab.goto(f"/a/{link.secret}")
        form = ask_block(tab, ask_id)
        await form.get_by_role("button", name="Decline…").click()
        reason = form.get_by_label("Reason (optional)")
        await expect(reason).to_be_focused()
        await tab.screenshot(path=str(shots / "link-declining-390.png"), full_page=True)
        await reason.fill("Not my service")
        await reason.press("Enter")
        await expect(form.locator(".ask-ending-line")).to_have_text(
            "Declined by ada: Not my service"
        )
        await expect(
            tab.get_by_role("status").filter(has_text="You declined this ask.")
        ).to_be_visible()
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.ending is not None and ask.ending.kind is EndingKind.DECLINED
    assert ask.ending.reason == "Not my service"


async def test_a_quorum_ask_shows_its_progress_and_who_ended_it(
    api_world: World, browser: Any, server: Any, shots: Any
) -> None:
    from playwright.async_api import expect

    w = api_world
    await w.store.add_channel_member(w.human, w.channel.channel_id, w.other_human.account_id)
    ask = Ask(
        questions=billing_ask().questions[:1],
        answerer_ids=(w.human.account_id, w.other_human.account_id),
        quorum=2,
    )
    ask_id = await posted(w, ask, "Two of you must agree on this one.")
    link = await mint(w, ask_id, w.human)
    async with new_tab(browser, server, PHONE) as tab:
        await tab.goto(f"/a/{link.secret}")
        form = ask_block(tab, ask_id)
        await expect(form.locator(".ask-quorum-progress")).to_have_text(
            "Needs 2 answers of ada, grace: 0 so far; a decline by any of them ends it."
        )
        await question(form, "db").get_by_label("PostgreSQL").check()
        await form.get_by_role("button", name="Submit answers").click()
        await expect(form.locator(".ask-your-vote")).to_have_text(
            "You answered; it waits for 1 more answer."
        )
        await expect(form.locator(".ask-votes")).to_contain_text("ada answered")
        await w.store.answer_ask(w.other_human, ask_id, [Answer("db", ("pg",), "")])
        await tab.reload()
        await expect(form.locator(".ask-ending-line")).to_have_text(
            "Answered by ada, grace (2 of 2)."
        )
        await no_problems(tab, "the quorum ask, ended")
        await tab.screenshot(path=str(shots / "link-quorum-ended-390.png"), full_page=True)


@pytest.mark.parametrize(("width", "size"), SIZES)
async def test_a_link_opened_by_its_person_and_by_another_signed_in_person(
    api_world: World, browser: Any, server: Any, shots: Any, width: str, size: Any
) -> None:
    from playwright.async_api import expect

    from tests.test_people_sessions import session_for

    w = api_world
    ask_id = await posted(w, billing_ask(w.human))
    link = await mint(w, ask_id, w.human)
    app = f"http://127.0.0.1:{server.http_port}"
    for who, person in (("ada", w.human), ("grace", w.other_human)):
        session = await session_for(w.store, w, person)
        async with new_tab(browser, server, size) as tab:
            await tab.context.add_cookies(
                [{"name": "compass_session", "value": session, "url": app, "httpOnly": True}]
            )
            await tab.goto(f"/a/{link.secret}")
            if who == "ada":
                await expect(tab.get_by_text("Your answer is recorded as ada.")).to_be_visible()
                await expect(tab.get_by_role("button", name="Submit answers")).to_be_visible()
            else:
                await expect(tab.get_by_role("heading", level=1)).to_have_text("This link is ada's")
                await expect(tab.get_by_text("This link answers as ada.")).to_be_visible()
                await expect(tab.get_by_role("button", name="Submit answers")).to_have_count(0)
                # What the browser would send is refused, and says why.
                sent = await tab.request.post(
                    f"/a/{link.secret}",
                    data={"askId": ask_id, "action": "decline"},
                    headers={"content-type": "application/json"},
                )
                assert sent.status == 403
                assert "signed in to Compass as grace" in (await sent.json())["message"]
            await no_problems(tab, f"the link in {who}'s browser at {width}")
            await tab.screenshot(path=str(shots / f"link-as-{who}-{width}.png"), full_page=True)
    _, ask = await w.store.get_ask(w.human, ask_id)
    assert ask.is_open


@pytest.mark.parametrize(("width", "size"), SIZES)
async def test_the_server_s_other_pages_share_the_look_and_pass_axe(
    api_world: World, browser: Any, server: Any, shots: Any, width: str, size: Any
) -> None:
    from playwright.async_api import expect

    for name, path, title in [
        ("closed-link", "/a/cpl_nothing-here", "This link opens nothing"),
        ("signin-error", "/auth/login/nope", "Can't sign in"),
        ("slack-link", "/slack/link/csl_nothing", None),
    ]:
        async with new_tab(browser, server, size) as tab:
            await tab.goto(path)
            if title:
                await expect(tab.get_by_role("heading", level=1)).to_have_text(title)
            # One stylesheet, the app's.
            sheets = await tab.evaluate(
                "[...document.styleSheets].map((s) => new URL(s.href).pathname)"
            )
            assert sheets == ["/app.css"], (path, sheets)
            await no_problems(tab, f"{path} at {width}")
            await tab.screenshot(path=str(shots / f"page-{name}-{width}.png"), full_page=True)


async def test_a_tap_and_the_page_race_and_exactly_one_ends_the_ask(
    api_world: World, server: Any
) -> None:
    """A notification's tap and the page's Submit at once, over and over:
    exactly one answer is recorded, and the other is told the ask already
    ended, with the ending it lost to."""
    w = api_world
    one_tap = Ask(
        questions=(
            AskQuestion("go", "Ship it?", "Release", (AskOption("y", "Yes"), AskOption("n", "No"))),
        ),
        answerer_ids=(w.human.account_id,),
    )
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        for _ in range(12):
            ask_id = await posted(w, one_tap, "Ready to release.")
            link = await mint(w, ask_id, w.human)

            def body(choice: str, tap: bool, ask_id: str = ask_id) -> dict[str, Any]:
                return {
                    "askId": ask_id,
                    "action": "answer",
                    "tap": tap,
                    "answers": [{"questionId": "go", "chosenOptionIds": [choice]}],
                }

            tap, page = await asyncio.gather(
                http.post(f"/a/{link.secret}", json=body("y", True)),
                http.post(f"/a/{link.secret}", json=body("n", False)),
            )
            assert sorted([tap.status_code, page.status_code]) == [200, 409], (tap.text, page.text)
            won, lost = (tap, page) if tap.status_code == 200 else (page, tap)
            assert lost.json()["code"] == "already_exists"
            assert "already answered" in lost.json()["message"]
            [block] = [b["ask"] for b in lost.json()["askMessage"]["blocks"] if "ask" in b]
            assert block["ending"]["actorHandle"] == "ada"
            _, ask = await w.store.get_ask(w.human, ask_id)
            winner = "y" if won is tap else "n"
            assert ask.questions[0].chosen_option_ids == (winner,)
        page_of = await w.store.list_messages(w.human, w.channel.channel_id, 200, "")
        answers = [b for m in page_of.items for b in m.blocks if isinstance(b, AskAnswerBlock)]
        # One answer message per ask, never a second.
        assert len(answers) == len({a.ask_id for a in answers}) == 12


async def test_the_link_page_and_its_files_come_gzipped_and_light(
    api_world: World, server: Any
) -> None:
    """What a phone downloads to answer: the page, the stylesheet and the
    modules it names, gzipped where the browser takes it."""
    from compass_server.transport.people_http import LINK_MODULES

    w = api_world
    ask_id = await posted(w, billing_ask(w.human))
    link = await mint(w, ask_id, w.human)
    total = 0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        for path in [f"/a/{link.secret}", "/app.css", *(f"/{m}" for m in LINK_MODULES)]:
            async with http.stream("GET", path, headers={"accept-encoding": "gzip"}) as res:
                raw = b"".join([part async for part in res.aiter_raw()])
            assert res.status_code == 200, path
            assert res.headers["content-encoding"] == "gzip", path
            total += len(raw)
            plain = await http.get(path, headers={"accept-encoding": "identity"})
            assert "content-encoding" not in plain.headers and plain.status_code == 200
        assert total < 40 * 1024, total
        # The link's page still says what it is, gzipped or not.
        page = await http.get(f"/a/{link.secret}")
        assert "scout asks" in page.text and page.headers["content-encoding"] == "gzip"


async def test_an_ending_that_came_another_way_shows_on_the_open_page(
    api_world: World, browser: Any, server: Any
) -> None:
    from playwright.async_api import expect

    w = api_world
    ask_id = await posted(w, billing_ask(w.human))
    link = await mint(w, ask_id, w.human)
    async with new_tab(browser, server, PHONE) as tab:
        await tab.goto(f"/a/{link.secret}")
        form = ask_block(tab, ask_id)
        await question(form, "db").get_by_label("MySQL").check()
        await w.store.cancel_ask(w.agent, ask_id)
        # The person comes back to the page (or its next read comes round).
        await tab.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
        await expect(form.locator(".ask-ending-line")).to_have_text(
            "Withdrawn by the asker — no longer taking answers."
        )
        await expect(form.locator(".ask-dropped")).to_have_text("Your unsent answers were cleared.")
        await expect(form.get_by_role("button", name="Submit answers")).to_have_count(0)
    # The page reads the ask as JSON from the link; that changes nothing either.
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.http_port}") as http:
        read = await http.get(f"/a/{link.secret}", headers={"accept": "application/json"})
        assert read.status_code == 200
        [block] = [b["ask"] for b in read.json()["askMessage"]["blocks"] if "ask" in b]
        assert block["cancelled"] is True
        unknown = await http.get("/a/cpl_nothing", headers={"accept": "application/json"})
        assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
