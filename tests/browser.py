"""Playwright driving Debian's Chromium: one browser per test session, a fresh
context (own sessionStorage) per test, and helpers to use the page."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

CHROMIUM = pathlib.Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)"
    if os.environ.get("COMPASS_REQUIRE_BROWSER") == "1":
        pytest.fail(f"COMPASS_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


# conftest imports these under their function names; tests ask for `browser` and `page`.
@pytest.fixture(scope="session", name="browser")
async def browser_fixture() -> AsyncIterator[Any]:
    _require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        yield launched
        await launched.close()


@contextlib.asynccontextmanager
async def new_tab(
    browser: Any, server: Any, viewport: dict[str, int] = DESKTOP, **options: Any
) -> AsyncIterator[Any]:
    """A tab of a fresh context on the test server's HTTP port; fails the test
    on an uncaught page error."""
    context = await browser.new_context(
        base_url=f"http://127.0.0.1:{server.http_port}", viewport=viewport, **options
    )
    context.set_default_timeout(10_000)
    tab = await context.new_page()
    crashes: list[str] = []
    tab.on("pageerror", lambda exc: crashes.append(str(exc)))
    try:
        yield tab
    finally:
        await context.close()
    assert not crashes, f"uncaught errors on the page: {crashes}"


@pytest.fixture(name="page")
async def page_fixture(browser: Any, server: Any) -> AsyncIterator[Any]:
    async with new_tab(browser, server) as tab:
        yield tab


@pytest.fixture(scope="session", name="shots")
def shots_fixture(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Where the tests save screenshots: the run's temporary folder, not the repository."""
    return tmp_path_factory.mktemp("screenshots")


async def sign_in(page: Any, token: str) -> None:
    """Signs in through the form (Enter submits) and waits for the live stream."""
    from playwright.async_api import expect

    await page.goto("/")
    field = page.get_by_label("Account token")
    await field.fill(token)
    await field.press("Enter")
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")


def ask_block(page: Any, ask_id: str) -> Any:
    """An ask as the page shows it: its form while open, its summary once ended."""
    return page.locator(f'.block-ask[data-ask-id="{ask_id}"]')


async def open_ended(block: Any) -> None:
    """Checks that an ended ask is a summary with nothing to answer, then opens
    it: its questions show as they were left, none of them can be changed."""
    from playwright.async_api import expect

    await expect(block.locator("input, fieldset")).to_have_count(0)
    for name in ("Submit answers", "Decline…", "Withdraw ask"):
        await expect(block.get_by_role("button", name=name)).to_have_count(0)
    await block.get_by_role("button", name="Show the questions").click()
    await expect(block.get_by_role("button", name="Hide the questions")).to_have_attribute(
        "aria-expanded", "true"
    )
    choices = block.locator("input")
    assert await choices.count() > 0
    for i in range(await choices.count()):
        await expect(choices.nth(i)).to_be_disabled()


def question(form: Any, question_id: str) -> Any:
    return form.locator(f'fieldset[data-question-id="{question_id}"]')


def presence_badge(page: Any, account_id: object) -> Any:
    return page.locator(f'#agent-list [data-presence-of="{account_id}"]')


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Waits (up to 5 s) for a condition the page reaches on its own, such as a
    scroll made on the next frame."""
    for _ in range(100):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


AXE = pathlib.Path(__file__).parent / "vendor" / "axe" / "axe.min.js"
# What axe checks: WCAG 2.x A and AA (labels, names, roles, contrast) and its
# best practices (one main landmark, headings in order, content in landmarks).
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]


async def accessibility_problems(page: Any) -> list[str]:
    """axe-core's violations on the page as it stands, one line each (empty
    when none). Loaded by the test's own evaluate, which the page's
    Content-Security-Policy doesn't govern: the page itself runs no new script."""
    if not await page.evaluate("typeof window.axe === 'object'"):
        await page.evaluate(AXE.read_text())
    found: list[dict[str, Any]] = await page.evaluate(
        """async (tags) => {
             const result = await axe.run(document, { runOnly: { type: "tag", values: tags } });
             return result.violations.map((v) => ({
               id: v.id, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5),
             }));
           }""",
        AXE_TAGS,
    )
    return [f"{v['id']}: {v['help']} ({', '.join(v['nodes'])})" for v in found]
