"""The page in Chromium signing in through a real OpenID provider's own login
page (oidc-provider-mock), then signing out."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from compass_server.store import Store
from compass_server.store.types import Operator
from tests.browser import new_tab
from tests.oidc import MockProcess
from tests.signin_flow import signin_server
from tests.world import World

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def mock_idp() -> Iterator[MockProcess]:
    idp = MockProcess().start()
    try:
        yield idp
    finally:
        idp.stop()


@pytest.fixture
async def site(
    database_url: str, tmp_path: pathlib.Path, mock_idp: MockProcess, store: Store
) -> AsyncIterator[tuple[Any, World]]:
    world = await World.create(store)
    provider = {
        "name": "mock",
        "label": "Mock ID",
        "issuer": mock_idp.issuer,
        "client_id": "compass-page",
        "client_secret": "anything",
        "workspace": str(world.workspace_id),
        "domains": ["acme.test"],
    }
    async with signin_server(database_url, tmp_path, [provider]) as srv:
        yield srv, world


async def test_a_person_signs_in_through_the_providers_page_and_out_again(
    browser: Any, site: tuple[Any, World], mock_idp: MockProcess, shots: pathlib.Path
) -> None:
    from playwright.async_api import expect

    srv, world = site
    mock_idp.user("lin-sub", email="lin@acme.test", email_verified=True, preferred_username="lin")
    async with new_tab(browser, srv) as page:
        await page.goto("/")
        button = page.get_by_role("link", name="Sign in with Mock ID")
        await expect(button).to_be_visible()
        # The token is the secondary way: folded away.
        await expect(page.get_by_label("Account token")).to_be_hidden()
        await page.screenshot(path=shots / "signin-providers.png")
        await button.click()

        # The provider's own login page.
        await page.wait_for_url(f"{mock_idp.issuer}/oauth2/authorize*")
        await page.locator('input[name="sub"]').fill("lin-sub")
        await page.get_by_role("button", name="Authorize").click()

        await page.wait_for_url(f"http://127.0.0.1:{srv.http_port}/*")
        await expect(page.locator("#signed-in")).to_contain_text("lin")
        await expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
        await page.screenshot(path=shots / "signin-signed-in.png")
        # The session's secret is out of the page's reach.
        assert "compass_session" not in await page.evaluate("document.cookie")

        # A reload keeps the person signed in (the cookie, not the tab's storage).
        await page.reload()
        await expect(page.locator("#signed-in")).to_contain_text("lin")

        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("link", name="Sign in with Mock ID")).to_be_visible()
        await page.reload()
        await expect(page.get_by_role("link", name="Sign in with Mock ID")).to_be_visible()
        await expect(page.locator("#account")).to_be_hidden()

    accounts = await srv.store.admin.list_accounts(Operator(world.workspace_id), 200, "")
    assert "lin" in [a.handle for a in accounts.items]
