"""Playwright driving Debian's Chromium: one browser per test session, a fresh
context (own sessionStorage) per test, and helpers to use the page."""

from __future__ import annotations

import asyncio
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
ARTIFACTS = pathlib.Path(__file__).resolve().parents[1] / "test-artifacts"


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


@pytest.fixture(name="page")
async def page_fixture(browser: Any, server: Any) -> AsyncIterator[Any]:
    """A page on the test server's HTTP port; fails the test on an uncaught page error."""
    context = await browser.new_context(
        base_url=f"http://127.0.0.1:{server.http_port}", viewport={"width": 1200, "height": 900}
    )
    context.set_default_timeout(10_000)
    tab = await context.new_page()
    crashes: list[str] = []
    tab.on("pageerror", lambda exc: crashes.append(str(exc)))
    yield tab
    await context.close()
    assert not crashes, f"uncaught errors on the page: {crashes}"


async def sign_in(page: Any, token: str) -> None:
    """Signs in through the form (Enter submits) and waits for the live stream."""
    from playwright.async_api import expect

    await page.goto("/")
    field = page.get_by_label("Account token")
    await field.fill(token)
    await field.press("Enter")
    await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")


def ask_form(page: Any, ask_id: str) -> Any:
    return page.locator(f'form[data-ask-id="{ask_id}"]')


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
